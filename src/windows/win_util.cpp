#include "win_util.hpp"

#include <fmt/format.h>

namespace dsh::win {

std::wstring widen(std::string_view s) {
    if (s.empty()) return {};
    int n = ::MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
    std::wstring out(static_cast<size_t>(n), L'\0');
    ::MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), out.data(), n);
    return out;
}

std::string narrow(std::wstring_view s) {
    if (s.empty()) return {};
    int n = ::WideCharToMultiByte(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0, nullptr, nullptr);
    std::string out(static_cast<size_t>(n), '\0');
    ::WideCharToMultiByte(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), out.data(), n, nullptr, nullptr);
    return out;
}

std::vector<std::string> narrow_argv(int argc, wchar_t** argv) {
    std::vector<std::string> out;
    for (int i = 0; i < argc; ++i) out.push_back(narrow(argv[i]));
    return out;
}

std::string api_error(std::string_view api, DWORD code, std::string_view detail) {
    std::string s = fmt::format("{} failed (Win32 {})", api, code);
    if (!detail.empty()) {
        s += ": ";
        s += detail;
    }
    return s;
}

HANDLE kill_on_close_job(std::string& error) {
    HANDLE job = ::CreateJobObjectW(nullptr, nullptr);
    if (!job) {
        error = api_error("CreateJobObjectW", ::GetLastError());
        return nullptr;
    }
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION info{};
    info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if (!::SetInformationJobObject(job, JobObjectExtendedLimitInformation, &info, sizeof info)) {
        error = api_error("SetInformationJobObject", ::GetLastError());
        ::CloseHandle(job);
        return nullptr;
    }
    return job;
}

bool spawn_in_job(HANDLE token, const std::wstring& command_line, const wchar_t* environment, HANDLE job,
                  PROCESS_INFORMATION& pi, std::string& error) {
    // Only stdio crosses into the child: every other inheritable handle this
    // process holds (the report, a caller's pipes) stays behind.
    HANDLE std_handles[3] = {::GetStdHandle(STD_INPUT_HANDLE), ::GetStdHandle(STD_OUTPUT_HANDLE),
                             ::GetStdHandle(STD_ERROR_HANDLE)};
    HANDLE inherit[3];
    DWORD n_inherit = 0;
    for (HANDLE h : std_handles) {
        if (!h || h == INVALID_HANDLE_VALUE) continue;
        bool dup = false;
        for (DWORD i = 0; i < n_inherit; ++i) dup = dup || inherit[i] == h;
        DWORD flags = 0;
        // A console pseudo-handle on old systems cannot be listed; skip what
        // is not a real inheritable-capable handle.
        if (dup || !::GetHandleInformation(h, &flags)) continue;
        ::SetHandleInformation(h, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
        inherit[n_inherit++] = h;
    }
    SIZE_T size = 0;
    ::InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
    std::vector<unsigned char> buf(size);
    auto* attrs = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(buf.data());
    if (!::InitializeProcThreadAttributeList(attrs, 1, 0, &size)) {
        error = api_error("InitializeProcThreadAttributeList", ::GetLastError());
        return false;
    }
    if (n_inherit > 0 && !::UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherit,
                                                      n_inherit * sizeof(HANDLE), nullptr, nullptr)) {
        error = api_error("UpdateProcThreadAttribute", ::GetLastError());
        ::DeleteProcThreadAttributeList(attrs);
        return false;
    }
    STARTUPINFOEXW si{};
    si.StartupInfo.cb = sizeof si;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = std_handles[0];
    si.StartupInfo.hStdOutput = std_handles[1];
    si.StartupInfo.hStdError = std_handles[2];
    si.lpAttributeList = attrs;
    std::wstring cmd = command_line;  // CreateProcess may write into it
    // Suspended until it is in the job, so not even its first instruction
    // runs outside it (and no grandchild can escape before assignment).
    const DWORD flags = CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT;
    BOOL ok = token ? ::CreateProcessAsUserW(token, nullptr, cmd.data(), nullptr, nullptr, n_inherit > 0, flags,
                                             const_cast<wchar_t*>(environment), nullptr, &si.StartupInfo, &pi)
                    : ::CreateProcessW(nullptr, cmd.data(), nullptr, nullptr, n_inherit > 0, flags,
                                       const_cast<wchar_t*>(environment), nullptr, &si.StartupInfo, &pi);
    DWORD create_error = ::GetLastError();
    ::DeleteProcThreadAttributeList(attrs);
    if (!ok) {
        error = api_error(token ? "CreateProcessAsUserW" : "CreateProcessW", create_error);
        return false;
    }
    if (job && !::AssignProcessToJobObject(job, pi.hProcess)) {
        error = api_error("AssignProcessToJobObject", ::GetLastError());
        ::TerminateProcess(pi.hProcess, 1);
        ::CloseHandle(pi.hThread);
        ::CloseHandle(pi.hProcess);
        return false;
    }
    if (::ResumeThread(pi.hThread) == static_cast<DWORD>(-1)) {
        error = api_error("ResumeThread", ::GetLastError());
        ::TerminateProcess(pi.hProcess, 1);
        ::CloseHandle(pi.hThread);
        ::CloseHandle(pi.hProcess);
        return false;
    }
    return true;
}

}  // namespace dsh::win
