// dsh-confine.exe's Windows-only parts: canonical paths, the report fd, command
// resolution, the windows-acl runner's launch, and the process that stays as
// parent (Windows has no exec: dsh-confine waits and exits with the status).
// Cross-compiled in CI with mingw-w64; not executed there (no Windows host).
#include "win_util.hpp"

#include <fcntl.h>
#include <io.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "../launch.hpp"
#include "../policy.hpp"
#include "../report.hpp"
#include "../supervise.hpp"
#include "acl_plan.hpp"
#include "acl_runner.hpp"

namespace dsh {

namespace {

bool exists(const std::wstring& p, bool& is_dir) {
    const DWORD a = ::GetFileAttributesW(p.c_str());
    if (a == INVALID_FILE_ATTRIBUTES) return false;
    is_dir = a & FILE_ATTRIBUTE_DIRECTORY;
    return true;
}

// GetFinalPathNameByHandle spells the path as \\?\C:\... or \\?\UNC\...; the
// helper and the user both expect the ordinary spelling.
std::wstring strip_verbatim(std::wstring p) {
    if (p.rfind(L"\\\\?\\UNC\\", 0) == 0) return L"\\\\" + p.substr(8);
    if (p.rfind(L"\\\\?\\", 0) == 0) return p.substr(4);
    return p;
}

// The real path of an existing file or directory (symlinks and junctions
// followed), or nothing.
std::optional<std::wstring> final_path(const std::wstring& p) {
    win::Handle h(::CreateFileW(p.c_str(), 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr));
    if (!h) return std::nullopt;
    std::wstring buf(1024, L'\0');
    DWORD n = ::GetFinalPathNameByHandleW(h.get(), buf.data(), static_cast<DWORD>(buf.size()), FILE_NAME_NORMALIZED);
    if (n >= buf.size()) {
        buf.resize(n + 1);
        n = ::GetFinalPathNameByHandleW(h.get(), buf.data(), static_cast<DWORD>(buf.size()), FILE_NAME_NORMALIZED);
    }
    if (n == 0 || n >= buf.size()) return std::nullopt;
    buf.resize(n);
    return strip_verbatim(buf);
}

BOOL WINAPI ignore_console_break(DWORD type) { return type == CTRL_C_EVENT || type == CTRL_BREAK_EVENT; }

std::wstring environment_block(const std::vector<std::string>& env) {
    std::wstring block;
    for (const auto& e : env) {
        block += win::widen(e);
        block += L'\0';
    }
    block += L'\0';
    return block;
}

}  // namespace

// realpath's role on Windows: the full path (GetFullPathNameW, which also
// resolves "." and ".."), then the final path of the longest existing prefix.
std::string canonical_path(std::string_view path, std::string_view cwd) {
    std::wstring w = win::widen(path);
    const bool absolute = w.size() >= 3 && w[1] == L':' && (w[2] == L'\\' || w[2] == L'/');
    const bool unc = w.size() >= 2 && (w[0] == L'\\' || w[0] == L'/') && (w[1] == L'\\' || w[1] == L'/');
    if (!absolute && !unc && !cwd.empty()) w = win::widen(cwd) + L"\\" + w;
    std::wstring full(MAX_PATH, L'\0');
    DWORD n = ::GetFullPathNameW(w.c_str(), static_cast<DWORD>(full.size()), full.data(), nullptr);
    if (n >= full.size()) {
        full.resize(n + 1);
        n = ::GetFullPathNameW(w.c_str(), static_cast<DWORD>(full.size()), full.data(), nullptr);
    }
    if (n == 0) return std::string(path);
    full.resize(n);
    std::wstring head = full, tail;
    while (true) {
        if (auto r = final_path(head)) return win::narrow(*r + tail);
        const auto slash = head.find_last_of(L"\\/");
        if (slash == std::wstring::npos || slash + 1 >= head.size() || slash < 3) break;
        tail = head.substr(slash) + tail;
        head = head.substr(0, slash);
    }
    return win::narrow(full);
}

// The report on Windows: a C runtime fd (1 and 2 always; others when the
// caller's runtime passed them down). Written in binary mode, one line whole.
Outcome Report::open(int fd) {
    if (fd < 0) return Outcome::success();
    if (fd == 0) return fail(Err::ReportFd, "--report-fd 0: the report needs an fd open for writing, not stdin");
    if (::_get_osfhandle(fd) == -1) return failf(Err::ReportFd, "--report-fd {}: not an open file descriptor", fd);
    ::_setmode(fd, _O_BINARY);
    fd_ = fd;
    named_ = fd;
    return Outcome::success();
}

Outcome Report::write(const ordered_json& record) const {
    if (fd_ < 0) return Outcome::success();
    std::string line = report_line(record);
    line += '\n';
    size_t off = 0;
    while (off < line.size()) {
        const int n = ::_write(fd_, line.data() + off, static_cast<unsigned>(line.size() - off));
        if (n <= 0) return failf(Err::ReportWrite, "cannot write the report to fd {}: {}", fd_, std::strerror(errno));
        off += static_cast<size_t>(n);
    }
    return Outcome::success();
}

// A name with a separator or a drive is taken as is; otherwise SearchPathW
// over PATH (the final environment's PATH when one was built), ".exe" added
// when the name has no extension. Not found: 127; a directory: 126.
Outcome resolve_command(const std::string& name, const char* path_env, std::string& resolved) {
    if (name.empty()) return fail(Err::CommandNotFound, "the command name is empty");
    const std::wstring w = win::widen(name);
    bool dir = false;
    if (name.find_first_of("\\/:") != std::string::npos) {
        resolved = name;
        if (!exists(w, dir)) {
            if (exists(w + L".exe", dir) && !dir) return Outcome::success();
            return failf(Err::CommandNotFound, "{}: command not found", name);
        }
        if (dir) return failf(Err::CommandNotExecutable, "{}: is a directory", name);
        return Outcome::success();
    }
    const std::wstring path = path_env ? win::widen(path_env) : std::wstring();
    std::wstring buf(32768, L'\0');
    const DWORD n = ::SearchPathW(path_env ? path.c_str() : nullptr, w.c_str(), L".exe",
                                  static_cast<DWORD>(buf.size()), buf.data(), nullptr);
    if (n == 0 || n >= buf.size()) return failf(Err::CommandNotFound, "{}: command not found", name);
    buf.resize(n);
    if (exists(buf, dir) && dir) return failf(Err::CommandNotExecutable, "{}: is a directory", name);
    resolved = win::narrow(buf);
    return Outcome::success();
}

// Windows has no exec: start the program in a kill-on-close job, wait, and
// leave with its exit code. Returns only when it could not be started.
static Outcome spawn_wait_exit(const std::string& resolved, const std::vector<std::string>& argv,
                               const std::optional<std::vector<std::string>>& env) {
    std::string error;
    win::Handle job(win::kill_on_close_job(error));
    if (!job) return fail(Err::Internal, error);
    std::vector<std::string> args = argv;
    if (!args.empty()) args[0] = resolved;  // no second search in the child
    std::wstring block;
    if (env) block = environment_block(*env);
    PROCESS_INFORMATION pi{};
    ::SetConsoleCtrlHandler(ignore_console_break, TRUE);
    if (!win::spawn_in_job(nullptr, win::widen(acl::windows_command_line(args)), env ? block.c_str() : nullptr,
                           job.get(), pi, error))
        return failf(Err::CommandNotExecutable, "{}: cannot execute: {}", resolved, error);
    win::Handle process(pi.hProcess), thread(pi.hThread);
    DWORD code = 0;
    if (::WaitForSingleObject(process.get(), INFINITE) != WAIT_OBJECT_0 || !::GetExitCodeProcess(process.get(), &code))
        return fail(Err::Internal, win::api_error("WaitForSingleObject", ::GetLastError()));
    std::fflush(nullptr);
    ::ExitProcess(code);
    return Outcome::success();  // not reached: ExitProcess does not return
}

Outcome exec_command(const std::string& resolved, const std::vector<std::string>& argv, char* const* envp) {
    std::optional<std::vector<std::string>> env;
    if (envp) {
        env.emplace();
        for (char* const* e = envp; *e; ++e) env->emplace_back(*e);
    }
    return spawn_wait_exit(resolved, argv, env);
}

Outcome enter_and_exec(Plan& l, const Report& report) {
    if (auto o = report.write(confinement_record(l.c)); !o) return o;
    if (auto o = spawn_wait_exit(l.exec_path, l.exec_argv, l.env); !o) {
        if (l.c.runner == RunnerKind::WindowsAcl) {
            return unavailable(to_string(l.c.policy.mode), o.message);
        }
        return o;
    }
    return Outcome::success();  // unreachable: exec_command leaves the process
}

// No forwarding parent and no pseudo-terminal on Windows yet: exec mode
// starts the ACL helper as it did.
bool needs_parent(const Plan&, bool) { return false; }

// --supervise on Windows is not built yet: refuse rather than run differently
// from what was asked.
int supervise(Plan&, const Report& report, const SuperviseOptions&) {
    Outcome o = fail(Err::Usage, "--supervise is not built for Windows yet");
    std::fprintf(stderr, "dsh-confine: %s\n", o.text().c_str());
    (void)report.write(error_record(o));
    return o.exit_status();
}

namespace acl {

namespace {

// Fills the plan for the helper, or says why it cannot be used.
Outcome plan_helper(Plan& l) {
    Confinement& c = l.c;
    // The network axis is not governed here (docs/PLATFORMS.md): refused, never ignored.
    if (c.policy.network != Network::Host)
        return failf(Err::SandboxUnavailable, "windows-acl does not govern the network: --net {} cannot hold; "
                     "use --net host", to_string(c.policy.network));
    for (const auto& r : c.policy.writable_roots)
        if (r.source == Grant::Flag || r.source == Grant::Config)
            return failf(Err::SandboxUnavailable,
                         "windows-acl grants only the workspace and a private temp dir; cannot grant {}", r.path);
    const std::string& root = c.policy.workspace_root;
    if (c.policy.mode == Mode::WorkspaceWrite && root.size() <= 3 && root.size() >= 2 && root[1] == ':')
        return failf(Err::SandboxUnavailable, "workspace root {} is a drive root", root);

    std::wstring self(32768, L'\0');
    const DWORD n = ::GetModuleFileNameW(nullptr, self.data(), static_cast<DWORD>(self.size()));
    if (n == 0 || n >= self.size()) return fail(Err::SandboxUnavailable, win::api_error("GetModuleFileNameW", ::GetLastError()));
    self.resize(n);
    const std::wstring helper = self.substr(0, self.find_last_of(L"\\/") + 1) + win::widen(HELPER_NAME);
    bool dir = false;
    if (!exists(helper, dir) || dir)
        return failf(Err::SandboxUnavailable, "the ACL runner {} is missing (it ships next to dsh-confine.exe)",
                     win::narrow(helper));

    std::wstring temp(MAX_PATH + 1, L'\0');
    const DWORD t = ::GetTempPathW(static_cast<DWORD>(temp.size()), temp.data());
    if (t == 0 || t >= temp.size()) return fail(Err::SandboxUnavailable, win::api_error("GetTempPathW", ::GetLastError()));
    temp.resize(t);
    while (temp.size() > 3 && (temp.back() == L'\\' || temp.back() == L'/')) temp.pop_back();
    const std::string temp_dir = canonical_path(win::narrow(temp), "");

    // Agentless shape (no SIDs): every dsh-confine run is its own provider
    // lifetime, so the helper's per-run private temp dir is the session's.
    l.exec_path = win::narrow(helper);
    l.exec_argv = helper_argv(l.exec_path, c.policy.mode, root, temp_dir, std::nullopt, c.argv);
    c.exec_argv = l.exec_argv;
    c.runner = RunnerKind::WindowsAcl;
    c.layers = {layer()};
    c.denial_signatures = denial_signatures();
    c.runner_failure_rules = runner_failure_rules();
    c.hardening = {"write-restricted-token", "lua-token", "job-kill-on-close", "stdio-only-inherited"};
    c.policy.writable_roots.clear();
    if (c.policy.mode == Mode::WorkspaceWrite) {
        c.policy.writable_roots.push_back({root, Grant::Workspace, true});
        // The helper writes under a dsh-XXXXXX dir it creates here and removes.
        c.policy.writable_roots.push_back({temp_dir, Grant::Tmpdir, false});
    }
    c.policy.writable_files.clear();
    return Outcome::success();
}

class Runner final : public dsh::Runner {
public:
    RunnerKind kind() const noexcept override { return RunnerKind::WindowsAcl; }
    // The helper's job object is KILL_ON_JOB_CLOSE.
    std::string_view ends_descendants() const noexcept override { return "job-object"; }
    // A chain of one, taken without a probe: whether the helper can start is
    // only known by starting it.
    Verdict probe(const RunnerEnv&) const override { return {Verdict::Usable, {}, {}}; }
    Outcome plan(const RunnerEnv&, const Verdict&, Plan& p) const override { return plan_helper(p); }
    nlohmann::ordered_json describe(const RunnerEnv&) const override {
        return {{"runner", "windows-acl"}, {"usable", true}, {"reason", nullptr},
                {"note", "not probed: the helper's start is the test"}};
    }
};

}  // namespace

const dsh::Runner& runner() {
    static const Runner r;
    return r;
}

}  // namespace acl

const std::vector<const Runner*>& registry() {
    static const std::vector<const Runner*> runners = {&acl::runner()};
    return runners;
}

std::string_view host_platform() noexcept { return "windows"; }

std::optional<int> run_internal_entry(int, const char* const*) { return std::nullopt; }

}  // namespace dsh
