// dsh-confine-acl-run: the Windows ACL restricted-token runner (the seed's
// runner.js as a native executable with the same command line).
//
//   dsh-confine-acl-run --workspace W --temp T --mode read-only|workspace-write
//                       [--write-sid S --temp-write-sid S'] -- command [args...]
//
// Exit status: 127 with one "windows-acl-run: <detail>" line on stderr for its
// own failures (the command never ran); otherwise the child's full 32-bit exit
// code. A cleanup failure prints "windows-acl-run: cleanup: ..." and keeps
// the child's code.
//
// How writes are confined: the child runs with a WRITE_RESTRICTED token. For
// any write access Windows performs the ordinary access check AND a second
// check against the restricting SIDs only (logon SID, Everyone, and in
// workspace-write the workspace SID and the temp SID). The workspace and the
// temp dir carry an inheritable allow ACE for their SID, so only they (and
// objects that already grant Everyone or the logon SID write access: the
// named gap) pass the second check. Reads are not restricted.
//
// Built for Windows only (mingw-w64 or MSVC). It has not been executed by
// this project's CI, which runs on Linux: it is cross-compiled there.
#include "win_util.hpp"

#include <aclapi.h>
#include <bcrypt.h>
#include <sddl.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acl_plan.hpp"

namespace dsh::acl {
namespace {

void say(const std::string& detail) {
    std::string line = "windows-acl-run: " + detail + "\n";
    DWORD written = 0;
    ::WriteFile(::GetStdHandle(STD_ERROR_HANDLE), line.data(), static_cast<DWORD>(line.size()), &written, nullptr);
}

bool is_dir(const std::string& p) {
    const DWORD a = ::GetFileAttributesW(win::widen(p).c_str());
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}

struct LocalFreeDeleter {
    void operator()(void* p) const { ::LocalFree(p); }
};
using LocalPtr = std::unique_ptr<void, LocalFreeDeleter>;

bool sid_from_string(const std::string& s, LocalPtr& out, std::string& error) {
    PSID sid = nullptr;
    if (!::ConvertStringSidToSidW(win::widen(s).c_str(), &sid)) {
        error = win::api_error("ConvertStringSidToSidW", ::GetLastError(), s);
        return false;
    }
    out.reset(sid);
    return true;
}

// Whether `path`'s DACL already holds our explicit grant for `sid` (so the
// standing workspace ACE is not rewritten, which would make Windows
// re-propagate inheritance through the whole tree on every run).
bool has_grant(PACL dacl, PSID sid) {
    if (!dacl) return false;
    for (DWORD i = 0; i < dacl->AceCount; ++i) {
        void* ace = nullptr;
        if (!::GetAce(dacl, i, &ace)) continue;
        auto* header = static_cast<ACE_HEADER*>(ace);
        if (header->AceType != ACCESS_ALLOWED_ACE_TYPE || (header->AceFlags & INHERITED_ACE)) continue;
        const BYTE inherit = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;
        if ((header->AceFlags & inherit) != inherit) continue;
        auto* allowed = static_cast<ACCESS_ALLOWED_ACE*>(ace);
        if ((allowed->Mask & GRANT_MASK) == GRANT_MASK && ::EqualSid(&allowed->SidStart, sid)) return true;
    }
    return false;
}

// Adds (GRANT_ACCESS) or removes (REVOKE_ACCESS) the allow ACE for `sid` on
// the directory `path`: OBJECT_INHERIT|CONTAINER_INHERIT, mask GRANT_MASK.
bool set_grant(const std::string& path, PSID sid, bool grant, std::string& error) {
    const std::wstring wpath = win::widen(path);
    PACL old_dacl = nullptr;
    PSECURITY_DESCRIPTOR sd = nullptr;
    DWORD rc = ::GetNamedSecurityInfoW(wpath.c_str(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, nullptr, nullptr,
                                       &old_dacl, nullptr, &sd);
    if (rc != ERROR_SUCCESS) {
        error = win::api_error("GetNamedSecurityInfoW", rc, path);
        return false;
    }
    LocalPtr sd_owner(sd);
    if (grant && has_grant(old_dacl, sid)) return true;
    EXPLICIT_ACCESS_W ea{};
    ea.grfAccessPermissions = GRANT_MASK;
    ea.grfAccessMode = grant ? GRANT_ACCESS : REVOKE_ACCESS;
    ea.grfInheritance = grant ? (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE) : NO_INHERITANCE;
    ea.Trustee.TrusteeForm = TRUSTEE_IS_SID;
    ea.Trustee.TrusteeType = TRUSTEE_IS_UNKNOWN;
    ea.Trustee.ptstrName = static_cast<LPWSTR>(sid);
    PACL new_dacl = nullptr;
    rc = ::SetEntriesInAclW(1, &ea, old_dacl, &new_dacl);
    if (rc != ERROR_SUCCESS) {
        error = win::api_error("SetEntriesInAclW", rc, path);
        return false;
    }
    LocalPtr dacl_owner(new_dacl);
    rc = ::SetNamedSecurityInfoW(const_cast<wchar_t*>(wpath.c_str()), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION,
                                 nullptr, nullptr, new_dacl, nullptr);
    if (rc != ERROR_SUCCESS) {
        error = win::api_error("SetNamedSecurityInfoW", rc, path);
        return false;
    }
    return true;
}

// mkdtemp("<parent>\dsh-XXXXXX"): CreateDirectoryW fails on an existing
// name, so a name taken by someone else is retried, never reused.
bool make_private_temp(const std::string& parent, std::string& out, std::string& error) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 100; ++attempt) {
        unsigned char bytes[6];
        NTSTATUS st = ::BCryptGenRandom(nullptr, bytes, sizeof bytes, BCRYPT_USE_SYSTEM_PREFERRED_RNG);
        if (st < 0) {
            error = win::api_error("BCryptGenRandom", static_cast<DWORD>(st));
            return false;
        }
        std::string name = parent;
        if (!name.empty() && name.back() != '\\' && name.back() != '/') name += '\\';
        name += "dsh-";
        for (unsigned char b : bytes) name += alphabet[b % 36];
        if (::CreateDirectoryW(win::widen(name).c_str(), nullptr)) {
            out = name;
            return true;
        }
        const DWORD e = ::GetLastError();
        if (e != ERROR_ALREADY_EXISTS) {
            error = win::api_error("CreateDirectoryW", e, name);
            return false;
        }
    }
    error = "CreateDirectoryW failed (Win32 183): no free dsh- name under " + parent;
    return false;
}

// Removes a directory tree without following reparse points (a junction in
// the temp dir must not lead the cleanup into someone else's files).
bool remove_tree(const std::wstring& dir, std::string& error) {
    WIN32_FIND_DATAW fd;
    HANDLE find = ::FindFirstFileW((dir + L"\\*").c_str(), &fd);
    if (find != INVALID_HANDLE_VALUE) {
        do {
            const std::wstring name = fd.cFileName;
            if (name == L"." || name == L"..") continue;
            const std::wstring path = dir + L"\\" + name;
            const bool directory = fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY;
            const bool reparse = fd.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT;
            if (fd.dwFileAttributes & FILE_ATTRIBUTE_READONLY)
                ::SetFileAttributesW(path.c_str(), fd.dwFileAttributes & ~static_cast<DWORD>(FILE_ATTRIBUTE_READONLY));
            if (directory && !reparse) {
                if (!remove_tree(path, error)) {
                    ::FindClose(find);
                    return false;
                }
            } else if (directory ? !::RemoveDirectoryW(path.c_str()) : !::DeleteFileW(path.c_str())) {
                error = win::api_error(directory ? "RemoveDirectoryW" : "DeleteFileW", ::GetLastError(),
                                       win::narrow(path));
                ::FindClose(find);
                return false;
            }
        } while (::FindNextFileW(find, &fd));
        ::FindClose(find);
    }
    if (!::RemoveDirectoryW(dir.c_str())) {
        error = win::api_error("RemoveDirectoryW", ::GetLastError(), win::narrow(dir));
        return false;
    }
    return true;
}

// The logon SID of this process's token (SE_GROUP_LOGON_ID), copied out.
bool logon_sid(HANDLE token, std::vector<unsigned char>& out, std::string& error) {
    DWORD size = 0;
    ::GetTokenInformation(token, TokenGroups, nullptr, 0, &size);
    std::vector<unsigned char> buf(size);
    if (!::GetTokenInformation(token, TokenGroups, buf.data(), size, &size)) {
        error = win::api_error("GetTokenInformation", ::GetLastError(), "TokenGroups");
        return false;
    }
    const auto* groups = reinterpret_cast<const TOKEN_GROUPS*>(buf.data());
    for (DWORD i = 0; i < groups->GroupCount; ++i) {
        if ((groups->Groups[i].Attributes & SE_GROUP_LOGON_ID) == SE_GROUP_LOGON_ID) {
            PSID sid = groups->Groups[i].Sid;
            const DWORD len = ::GetLengthSid(sid);
            out.assign(static_cast<unsigned char*>(sid), static_cast<unsigned char*>(sid) + len);
            return true;
        }
    }
    error = "GetTokenInformation failed (Win32 1168): the process token has no logon SID";
    return false;
}

// The child's default DACL (objects it creates without an inheritable ACL):
// the user, SYSTEM and the logon SID. The logon SID is a restricting SID, so
// the child can still write to what it creates itself.
bool set_default_dacl(HANDLE restricted, HANDLE original, PSID logon, std::string& error) {
    DWORD size = 0;
    ::GetTokenInformation(original, TokenUser, nullptr, 0, &size);
    std::vector<unsigned char> user_buf(size);
    if (!::GetTokenInformation(original, TokenUser, user_buf.data(), size, &size)) {
        error = win::api_error("GetTokenInformation", ::GetLastError(), "TokenUser");
        return false;
    }
    PSID user = reinterpret_cast<TOKEN_USER*>(user_buf.data())->User.Sid;
    unsigned char system_buf[SECURITY_MAX_SID_SIZE];
    DWORD system_size = sizeof system_buf;
    if (!::CreateWellKnownSid(WinLocalSystemSid, nullptr, system_buf, &system_size)) {
        error = win::api_error("CreateWellKnownSid", ::GetLastError(), "SYSTEM");
        return false;
    }
    EXPLICIT_ACCESS_W ea[3]{};
    PSID sids[3] = {user, system_buf, logon};
    for (int i = 0; i < 3; ++i) {
        ea[i].grfAccessPermissions = GENERIC_ALL;
        ea[i].grfAccessMode = SET_ACCESS;
        ea[i].grfInheritance = NO_INHERITANCE;
        ea[i].Trustee.TrusteeForm = TRUSTEE_IS_SID;
        ea[i].Trustee.TrusteeType = TRUSTEE_IS_UNKNOWN;
        ea[i].Trustee.ptstrName = static_cast<LPWSTR>(sids[i]);
    }
    PACL dacl = nullptr;
    DWORD rc = ::SetEntriesInAclW(3, ea, nullptr, &dacl);
    if (rc != ERROR_SUCCESS) {
        error = win::api_error("SetEntriesInAclW", rc, "default DACL");
        return false;
    }
    LocalPtr owner(dacl);
    TOKEN_DEFAULT_DACL tdd{dacl};
    if (!::SetTokenInformation(restricted, TokenDefaultDacl, &tdd, sizeof tdd)) {
        error = win::api_error("SetTokenInformation", ::GetLastError(), "TokenDefaultDacl");
        return false;
    }
    return true;
}

// Ctrl-C and Ctrl-Break reach every process on the console, the child
// included: the helper stays to wait for it and report its status. A
// handler routine (unlike SetConsoleCtrlHandler(NULL, TRUE)) is not
// inherited, so the child still gets the default behaviour.
BOOL WINAPI on_console_event(DWORD type) { return type == CTRL_C_EVENT || type == CTRL_BREAK_EVENT; }

class Run {
public:
    explicit Run(HelperArgs a) : a_(std::move(a)) {}
    ~Run() { (void)dispose(); }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    int execute() {
        std::string error;
        if (!setup(error)) {
            say(error);
            (void)dispose();
            return HELPER_FAILURE_EXIT;
        }
        PROCESS_INFORMATION pi{};
        const std::wstring cmd = win::widen(windows_command_line(a_.command));
        if (!win::spawn_in_job(restricted_.get(), cmd, nullptr, job_.get(), pi, error)) {
            say(error);
            (void)dispose();
            return HELPER_FAILURE_EXIT;
        }
        win::Handle process(pi.hProcess), thread(pi.hThread);
        DWORD code = 0;
        if (::WaitForSingleObject(process.get(), INFINITE) != WAIT_OBJECT_0 ||
            !::GetExitCodeProcess(process.get(), &code)) {
            say(win::api_error("WaitForSingleObject", ::GetLastError()));
            (void)dispose();
            return HELPER_FAILURE_EXIT;
        }
        (void)dispose();
        // The child's full 32-bit status (an NTSTATUS such as 0xC0000005 too).
        return static_cast<int>(code);
    }

private:
    bool setup(std::string& error) {
        ::SetConsoleCtrlHandler(on_console_event, TRUE);
        win::Handle token;
        HANDLE t = nullptr;
        if (!::OpenProcessToken(::GetCurrentProcess(),
                                TOKEN_DUPLICATE | TOKEN_QUERY | TOKEN_ASSIGN_PRIMARY | TOKEN_ADJUST_DEFAULT, &t)) {
            error = win::api_error("OpenProcessToken", ::GetLastError());
            return false;
        }
        token.reset(t);
        std::vector<unsigned char> logon;
        if (!logon_sid(token.get(), logon, error)) return false;
        LocalPtr everyone;
        if (!sid_from_string("S-1-1-0", everyone, error)) return false;

        std::vector<SID_AND_ATTRIBUTES> restricting = {{logon.data(), 0}, {everyone.get(), 0}};
        if (a_.mode == Mode::WorkspaceWrite) {
            std::string temp_dir = a_.temp;
            if (!a_.sids) {
                // Agentless: a private temp dir for this run only, TMP and
                // TEMP pointed at it, removed on exit.
                if (!make_private_temp(a_.temp, created_temp_, error)) return false;
                temp_dir = created_temp_;
                ::SetEnvironmentVariableW(L"TMP", win::widen(temp_dir).c_str());
                ::SetEnvironmentVariableW(L"TEMP", win::widen(temp_dir).c_str());
                a_.sids = Sids{workspace_sid(a_.workspace), temp_sid(temp_dir)};
            }
            if (!sid_from_string(a_.sids->write_sid, ws_sid_, error)) return false;
            if (!sid_from_string(a_.sids->temp_write_sid, temp_sid_, error)) return false;
            // The workspace ACE stands: the SID is deterministic per
            // workspace, so every session on it shares the same authority.
            if (!set_grant(a_.workspace, ws_sid_.get(), true, error)) return false;
            if (!set_grant(temp_dir, temp_sid_.get(), true, error)) return false;
            granted_temp_ = temp_dir;
            restricting.push_back({ws_sid_.get(), 0});
            restricting.push_back({temp_sid_.get(), 0});
        }

        HANDLE r = nullptr;
        if (!::CreateRestrictedToken(token.get(), WRITE_RESTRICTED | DISABLE_MAX_PRIVILEGE | LUA_TOKEN, 0, nullptr, 0,
                                     nullptr, static_cast<DWORD>(restricting.size()), restricting.data(), &r)) {
            error = win::api_error("CreateRestrictedToken", ::GetLastError());
            return false;
        }
        restricted_.reset(r);
        if (!set_default_dacl(restricted_.get(), token.get(), logon.data(), error)) return false;
        HANDLE job = win::kill_on_close_job(error);
        if (!job) return false;
        job_.reset(job);
        return true;
    }

    // Idempotent. Order: the job first (killing every descendant still
    // holding files), then the temp ACE, then the temp dir this run created.
    bool dispose() {
        bool ok = true;
        job_.reset();
        std::string error;
        if (!granted_temp_.empty() && temp_sid_) {
            if (!set_grant(granted_temp_, temp_sid_.get(), false, error)) {
                say("cleanup: " + error);
                ok = false;
            }
            granted_temp_.clear();
        }
        if (!created_temp_.empty()) {
            if (!remove_tree(win::widen(created_temp_), error)) {
                say("cleanup: " + error);
                ok = false;
            }
            created_temp_.clear();
        }
        return ok;
    }

    HelperArgs a_;
    win::Handle restricted_;
    win::Handle job_;
    LocalPtr ws_sid_, temp_sid_;
    std::string created_temp_;
    std::string granted_temp_;
};

}  // namespace
}  // namespace dsh::acl

int wmain(int argc, wchar_t** argv) {
    std::vector<std::string> args = dsh::win::narrow_argv(argc, argv);
    if (!args.empty()) args.erase(args.begin());
    auto parsed = dsh::acl::parse_helper_args(args, dsh::acl::is_dir);
    if (!parsed.args) {
        std::string line = parsed.error + "\n";
        std::fwrite(line.data(), 1, line.size(), stderr);
        return dsh::acl::HELPER_FAILURE_EXIT;
    }
    dsh::acl::Run run(std::move(*parsed.args));
    return run.execute();
}
