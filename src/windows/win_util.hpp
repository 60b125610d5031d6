// Small Windows helpers shared by dsh-confine.exe and dsh-confine-acl-run.exe:
// UTF-8 <-> UTF-16 (paths are UTF-8 inside, UTF-16 at every Win32 call) and
// the seed's error spelling "<Api> failed (Win32 <code>)[: detail]".
#pragma once

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

#include <string>
#include <string_view>
#include <vector>

namespace dsh::win {

std::wstring widen(std::string_view utf8);
std::string narrow(std::wstring_view utf16);
std::vector<std::string> narrow_argv(int argc, wchar_t** argv);

// "<api> failed (Win32 <code>)" plus ": <detail>" when detail is not empty.
std::string api_error(std::string_view api, DWORD code, std::string_view detail = {});

// Closes a HANDLE on scope exit (NULL and INVALID_HANDLE_VALUE are both "none").
class Handle {
public:
    Handle() = default;
    explicit Handle(HANDLE h) : h_(h) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& o) noexcept : h_(o.release()) {}
    Handle& operator=(Handle&& o) noexcept {
        reset(o.release());
        return *this;
    }
    ~Handle() { reset(); }
    HANDLE get() const { return h_; }
    HANDLE release() {
        HANDLE h = h_;
        h_ = nullptr;
        return h;
    }
    void reset(HANDLE h = nullptr) {
        if (h_ && h_ != INVALID_HANDLE_VALUE) ::CloseHandle(h_);
        h_ = h;
    }
    explicit operator bool() const { return h_ && h_ != INVALID_HANDLE_VALUE; }

private:
    HANDLE h_ = nullptr;
};

// Starts `command_line` with only the three standard handles inherited
// (PROC_THREAD_ATTRIBUTE_HANDLE_LIST), suspended, inside `job` (may be NULL),
// then resumes it. `token` NULL means the caller's own token. On failure,
// `error` holds the api_error text.
bool spawn_in_job(HANDLE token, const std::wstring& command_line, const wchar_t* environment, HANDLE job,
                  PROCESS_INFORMATION& pi, std::string& error);

// A job whose last handle closing kills every process in it: descendants die
// with the process that holds it.
HANDLE kill_on_close_job(std::string& error);

}  // namespace dsh::win
