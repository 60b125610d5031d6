#include "bwrap_runner.hpp"
#include "../own_state.hpp"
#include "../bytes.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../chain.hpp"
#include "../spawn.hpp"
#include "../terminal.hpp"
#include "../version.hpp"
#include "bwrap_plan.hpp"
#include "landlock_runner.hpp"
#include "probe_cache.hpp"

extern char** environ;

namespace dsh::bwrap {

Outcome check_binary(const std::string& path, int* fd) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return failf(Err::SandboxUnavailable, "bwrap is not usable: {}: {}", path, std::strerror(errno));
    if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0)
        return failf(Err::SandboxUnavailable, "bwrap is not usable: {}: not an executable file", path);
    // It runs outside any sandbox (issue 37): the caller's or root's, and
    // nobody else may rewrite it or a directory above it.
    int opened = -1;
    if (auto o = open_trusted_program(path, Err::SandboxUnavailable, "bwrap", opened); !o)
        return fail(Err::SandboxUnavailable, "bwrap is not usable: " + o.message);
    if (fd) *fd = opened;
    else ::close(opened);
    return Outcome::success();
}

namespace {

using ojson = nlohmann::ordered_json;

std::string bwrap_path(const RunnerEnv& env) { return env.config.bwrap_path ? *env.config.bwrap_path : kBwrapPath; }

// This process's environment, with the loader's variables stashed (see
// stash_loader_env): bwrap is dynamic and nothing is confined yet.
std::vector<std::string> stashed_environ() {
    std::vector<std::string> e;
    for (char** p = environ; p && *p; ++p) e.emplace_back(*p);
    return stash_loader_env(e);
}

// The first "bwrap: " line of the probe's stderr, else its first line.
std::string first_line(const std::string& err) {
    std::string first, bwraps;
    for_each_line(err, [&](std::string_view line) {
        if (line.rfind("bwrap: ", 0) == 0) {
            bwraps = line;
            return false;
        }
        if (first.empty() && !line.empty()) first = line;
        return true;
    });
    return bwraps.empty() ? first : bwraps;
}

struct ProbeResult {
    bool usable = false;
    bool cached = false;
    std::string reason;  // why not, when not usable
    long elapsed_ms = 0;
};

// A real run of bwrap's read-only profile that execs our own binary inside
// (the path the runner uses), bounded by timeout_ms; a hang, a failure or a
// spawn error is "not usable". With use_cache, a cached "usable" verdict for
// this exact key is taken without a run, and a fresh "usable" is stored.
ProbeResult probe_bwrap(const std::string& path, int timeout_ms, bool use_cache) {
    const double t0 = spawn::now_ms();
    ProbeResult r;
    auto elapsed = [&] { return static_cast<long>(spawn::now_ms() - t0); };
    if (auto o = check_binary(path); !o) {
        r.reason = o.message;
        return r;
    }
    const std::string key = use_cache ? probe_cache::key_for(path) : std::string();
    if (use_cache && probe_cache::lookup(key)) {
        r.usable = r.cached = true;
        r.elapsed_ms = elapsed();
        return r;
    }
    Policy ro;
    ro.mode = Mode::ReadOnly;
    ro.writable_files = {"/dev/null"};
    ProfileOptions popts;
    popts.stage_keeps_setpcap = ::geteuid() == 0;
    const auto argv = wrap(path, profile_args(ro, popts), {"/proc/self/fd/3", kProbeArg});
    int self = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (self < 0) {
        r.reason = fmt::format("cannot open our own binary for the bwrap probe: {}", std::strerror(errno));
        return r;
    }
    spawn::Result run = spawn::run_bounded(path, argv, stashed_environ(), timeout_ms, self, false);
    ::close(self);
    r.elapsed_ms = elapsed();
    if (!run.started) {
        r.reason = run.error;
    } else if (run.timed_out) {
        r.reason = fmt::format("the bwrap probe did not finish within {} ms (--probe-timeout)", timeout_ms);
    } else if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) {
        r.usable = true;
    } else {
        const std::string line = first_line(run.err);
        const std::string how = WIFEXITED(run.status) ? fmt::format("exit status {}", WEXITSTATUS(run.status))
                                                      : fmt::format("signal {}", WTERMSIG(run.status));
        r.reason = line.empty() ? fmt::format("the bwrap probe failed ({})", how)
                                : fmt::format("the bwrap probe failed ({}): {}", how, line);
    }
    if (use_cache) {
        if (r.usable) probe_cache::store(key);
        else probe_cache::forget();
    }
    return r;
}

// Whether the stage can bind the carve-outs itself (bind_carve_outs): the
// kernel has openat2 (5.6) and the new mount API (mount_setattr: 5.12), and
// no seccomp filter around us (a container's) refuses them; the stage runs
// under the same filter. Each call is made with flags no kernel accepts, so
// EINVAL says it is there and nothing is touched; ENOSYS or EPERM says not.
bool new_mount_api() {
    static const bool have = [] {
        const auto there = [](long r) { return r < 0 && errno == EINVAL; };
        return there(::syscall(SYS_openat2, -1, nullptr, nullptr, 0)) &&
               there(::syscall(SYS_open_tree, -1, nullptr, ~0u)) &&
               there(::syscall(SYS_mount_setattr, -1, nullptr, ~0u, nullptr, 0)) &&
               there(::syscall(SYS_move_mount, -1, nullptr, -1, nullptr, ~0u));
    }();
    return have;
}

// Why user namespaces may be refused to this user: the sysctls that say so.
std::vector<std::string> userns_hints() {
    std::vector<std::string> h;
    if (::geteuid() == 0) return h;  // bwrap as real root needs no user namespace
    if (read_kernel_text("/proc/sys/kernel/unprivileged_userns_clone") == std::optional<std::string>("0"))
        h.push_back("user namespaces are disabled for unprivileged users (kernel.unprivileged_userns_clone=0)");
    if (read_kernel_text("/proc/sys/user/max_user_namespaces") == std::optional<std::string>("0"))
        h.push_back("user namespaces are disabled (user.max_user_namespaces=0)");
    if (read_kernel_text("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == std::optional<std::string>("1"))
        h.push_back("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): "
                    "load an AppArmor profile for bwrap (bwrap-userns-restrict) or set the sysctl to 0");
    return h;
}

std::string bwrap_version(const std::string& path) {
    auto r = spawn::run_bounded(path, {path, "--version"}, stashed_environ(), 2000, -1, true);
    if (!r.started || r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) return {};
    std::string v = r.out;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
    return v;
}

class Runner final : public dsh::Runner {
public:
    RunnerKind kind() const noexcept override { return RunnerKind::Bwrap; }
    bool private_tmp() const noexcept override { return true; }
    bool egress_proxy() const noexcept override { return true; }
    // bwrap's PID namespace ends with the command (its pid 1 is bwrap's).
    std::string_view ends_descendants() const noexcept override { return "pid-namespace"; }
    bool protects_paths() const noexcept override { return true; }

    Verdict probe(const RunnerEnv& env) const override {
        ProbeResult pr = probe_bwrap(bwrap_path(env), env.probe_timeout_ms, env.use_probe_cache);
        if (!pr.usable) return {Verdict::Unusable, pr.reason, {}};
        return {Verdict::Usable, {}, pr.cached ? "cached" : "ran"};
    }

    Outcome plan(const RunnerEnv& env, const Verdict& v, dsh::Plan& p) const override {
        Confinement& c = p.c;
        const std::string path = bwrap_path(env);
        int program = -1;
        if (auto o = check_binary(path, &program); !o) return o;
        p.owned.emplace_back(program);
        p.exec_fd = program;
        // The carve-outs' walk waits for the spawn (Plan::late_walk) where the
        // stage binds them (root, the new mount API): the stage then waits
        // for the list (Watch::go). Anywhere else it is made now.
        const bool late = p.late_walk && ::geteuid() == 0 && new_mount_api();
        if (!late)
            if (auto o = chain::walk_now(p); !o) return o;

        // The roots were opened when the policy was built (optional ones that
        // could not be are already in not_granted). Work on a copy: nothing of
        // the plan changes unless bwrap is taken.
        Policy pol = c.policy;
        // A private /dev/shm (issue 42): a fresh tmpfs of the sandbox's own
        // over bwrap's /dev, so shm_open and sem_open (Python multiprocessing)
        // work while the host's segments stay out of reach. Workspace-write
        // only: read-only writes nowhere. Size and mode are bwrap's --tmpfs
        // defaults, as for the private /tmp (DECISIONS, issue 42).
        if (pol.mode == Mode::WorkspaceWrite)
            pol.writable_roots.push_back(WritableRoot{"/dev/shm", Grant::Shm, false});
        std::vector<int> root_fds;
        for (auto& r : pol.writable_roots) {
            // A private /tmp (--private-tmp) is a fresh tmpfs, discarded when
            // the sandbox ends; roots under it are bound from the host. The
            // stage's Landlock rule for it is then on that tmpfs, by path.
            // The host's /tmp is bound like every other root.
            if (r.private_mount()) {
                r.fd = -1;
                continue;
            }
            // Bound by bwrap from the descriptor, and the stage's Landlock rule.
            if (r.fd < 0) return failf(Err::SandboxUnavailable, "the writable root {} was not opened", r.path);
            root_fds.push_back(r.fd);
        }

        // Landlock inside, where the kernel has it: it closes what a read-only
        // bind leaves open (FIFOs, reopening inherited files via /proc/self/fd).
        const int abi = landlock::query_abi();
        Layer bl = layer(pol, path);
        bl.details["probe"] = v.how;
        // Without a pty the command stays in the caller's process group (so
        // that the caller's group signals reach it, as the bare command's
        // would), which bwrap's PID namespace does not cover. Two attack
        // passes of session 25: kill(0) from inside reached the caller's
        // processes in that group where Landlock has no signal scope (ABI
        // < 6), and at any ABI a command that leaves a stopped process in
        // the group and then takes away the group's last parent in another
        // group (its own processes' doing) makes the kernel send the whole
        // group SIGHUP and SIGCONT, which no filter sees. Declared in both
        // layers (a gap is open where every layer has it).
        const bool shares_group = pol.mode != Mode::DangerFullAccess && !(terminal::relayed() && terminal::any_std_terminal());
        const Gap group_gap = process_group_gap();
        if (shares_group) bl.gaps.push_back(group_gap);
        std::vector<Layer> layers;
        if (abi > 0) {
            layers = {bl, landlock::plan(pol, abi, pol.mode == Mode::ReadOnly).layer};
            if (shares_group) layers.back().gaps.push_back(group_gap);
        } else {
            bl.details["landlockStage"] = landlock::describe_unavailable(abi);
            layers = {bl};
        }

        // The network axis: bwrap's namespace, then the stage's socket filter
        // and (off) Landlock's TCP rights.
        const landlock::NetworkPlan net = landlock::network_axis(pol.network, abi > 0 ? abi : 0, true);
        if (!net.failure.empty()) return fail(Err::SandboxUnavailable, net.failure);

        // The stage is our own binary, handed to bwrap as an inherited fd and
        // exec'd as /proc/self/fd/N inside: the path we were started from may
        // be hidden (under /tmp, behind a private tmpfs) or replaced by the time
        // bwrap execs it. Close-on-exec until the entry passes it on.
        int self = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        if (self < 0)
            return failf(Err::SandboxUnavailable, "cannot open our own binary for the bwrap stage: {}",
                         std::strerror(errno));
        // The record travels to the stage in a memfd (Plan::record_fd),
        // always: it is also what tells the stage that we started it
        // (kStageFdName), and the mailbox its failure comes back in.
        int record = ::memfd_create(kStageFdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (record < 0) {
            const int e = errno;
            ::close(self);
            return failf(Err::SandboxUnavailable, "memfd_create: {}", std::strerror(e));
        }

        StageSpec spec;
        spec.self = "/proc/self/fd/" + std::to_string(self);
        spec.record_fd = record;
        spec.landlock_abi = abi > 0 ? abi : 0;
        spec.report_fd = env.report_fd;
        spec.command_path = c.command_path;
        spec.argv = c.argv;
        // The limits' rlimits are the stage's to set, just before the command.
        spec.rlimits = std::move(p.rlimits);
        p.rlimits.clear();
        // --net allow= (issue 19): the stage hands its namespace's listener
        // back over this socketpair; supervise runs the proxy on it.
        int relay[2] = {-1, -1};
        if (pol.net_allow && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, relay) != 0) {
            const int e = errno;
            ::close(self);
            ::close(record);
            return failf(Err::SandboxUnavailable, "socketpair for the allow-list's relay: {}", std::strerror(e));
        }
        spec.relay_fd = relay[1];
        if (pol.net_allow) spec.no_proxy = net::direct_loopback(*pol.net_allow);
        ProfileOptions opts;
        opts.stage_keeps_setpcap = ::geteuid() == 0;
        // bwrap's --dev binds the terminal on fd 1 (ttyname(1)) at
        // /dev/console: the caller's own pty on the host. An unprivileged
        // stage cannot remount it; bwrap does (a third attack pass of session
        // 25 chmodded the host's node to 0666, and another user wrote to the
        // caller's terminal). Root's stage seals every device node itself.
        opts.console_read_only = !opts.stage_keeps_setpcap && pol.mode == Mode::WorkspaceWrite && ::isatty(1) == 1 &&
                                 ::ttyname(1) != nullptr;
        const bool carving = !carve_binds(pol).empty();
        opts.stage_binds =
            late || (carving && opts.stage_keeps_setpcap && stage_may_bind(pol) && new_mount_api());
        spec.stage_binds = opts.stage_binds;
        spec.carve_late = late;
        spec.behind = terminal::relayed() && terminal::std_terminal_behind();
        auto argv = wrap(path, profile_args(pol, opts), stage_args(pol, spec));

        c.policy = std::move(pol);
        c.runner = RunnerKind::Bwrap;
        c.layers = std::move(layers);
        // The carve-outs' statuses and the layers' word on them; late, once
        // they are walked (BwrapWatch::go).
        const std::vector<int> carve_fds = late ? std::vector<int>{} : settle_carve_outs(c, opts.stage_binds, false);
        c.network = net.axis;
        if (c.policy.net_allow) {
            c.network.enforced.push_back("egress-proxy");
            p.relay_fd = relay[0];
            p.relay_child_fd = relay[1];
        }
        // Both dialects: EROFS from the mount view (and, in read-only, from the
        // stage's seccomp layer refusing metadata calls), EACCES from Landlock.
        // No "operation not permitted": a refused signal or keyring is not a
        // file denial (issue 38).
        c.denial_signatures = {"read-only file system", "permission denied"};
        c.runner_failure_rules = nlohmann::json::array(
            {{{"fatalSignatures", {"bwrap: "}}},
             {{"allowedExitCodes", {125}}, {"fatalSignatures", {"dsh-confine: "}}}});
        c.hardening = {"die-with-parent",          "pid-namespace",
                       "proc-sys-read-only", "inherited-fds-closed",    "ipc-namespace",
                       "no-new-privs",      "capabilities-dropped",     "seccomp-tiocsti-tioclinux",
                       "seccomp-io-uring",  "seccomp-keyrings",         "seccomp-unknown-syscalls"};
        if (c.policy.mode == Mode::ReadOnly)
            c.hardening.insert(c.hardening.end(), {"seccomp-metadata", "seccomp-inode-ioctls"});
        if (opts.stage_keeps_setpcap) c.hardening.push_back("device-nodes-read-only");  // root's stage remounts them
        if (c.policy.network != Network::Host) c.hardening.push_back("net-namespace");
        if (!c.policy.allow_userns) c.hardening.push_back("seccomp-userns");
        c.user_namespaces = c.policy.allow_userns ? "allowed" : "refused";
        c.exec_argv = argv;
        p.in_process.reset();
        p.exec_path = path;
        p.exec_argv = std::move(argv);
        p.exec_is_runner = true;
        p.inherit_fds = {self, record};
        p.inherit_fds.insert(p.inherit_fds.end(), root_fds.begin(), root_fds.end());
        p.inherit_fds.insert(p.inherit_fds.end(), carve_fds.begin(), carve_fds.end());
        if (env.report_fd >= 0) p.inherit_fds.push_back(env.report_fd);
        if (relay[1] >= 0) p.inherit_fds.push_back(relay[1]);
        p.record_fd = record;
        p.record_carries_argv = c.argv.size() > kArgvInline;
        p.owned.emplace_back(self);
        p.owned.emplace_back(record);
        std::vector<std::string> current;
        if (p.env) current = *p.env;
        else
            for (char** e = environ; e && *e; ++e) current.emplace_back(*e);
        if (auto stashed = stash_loader_env(current); stashed != current) p.env = std::move(stashed);
        p.watch = make_watch(record, v.how == "cached");
        return Outcome::success();
    }

    std::vector<std::pair<std::string, std::string>> state_files() const override {
        if (auto p = probe_cache::state_path(); !p.empty()) return {{std::move(p), "probe cache"}};
        return {};
    }

    ojson describe(const RunnerEnv& env) const override {
        const std::string path = bwrap_path(env);
        const int abi = landlock::query_abi();
        ojson bw;
        bw["runner"] = "bwrap";
        bw["path"] = path;
        ProbeResult pr = probe_bwrap(path, env.probe_timeout_ms, false);
        if (pr.usable) probe_cache::store(probe_cache::key_for(path));
        else probe_cache::forget();
        bw["usable"] = pr.usable;
        const std::string version = check_binary(path) ? bwrap_version(path) : "";
        bw["bwrapVersion"] = version.empty() ? ojson(nullptr) : ojson(version);
        bw["probeMs"] = pr.elapsed_ms;
        bw["probeTimeoutMs"] = env.probe_timeout_ms;
        bw["stackedWith"] = abi > 0 ? ojson::array({"landlock"}) : ojson::array();
        bw["modes"] = per_mode([&](const Policy& p) {
            std::vector<Layer> ls{layer(p, path)};
            if (abi > 0) ls.push_back(landlock::plan(p, abi, p.mode == Mode::ReadOnly).layer);
            return ls;
        });
        if (pr.usable) {
            bw["reason"] = nullptr;
        } else {
            std::string reason = pr.reason;
            for (const auto& h : userns_hints()) reason += "; " + h;
            bw["reason"] = reason;
        }
        // The probe's text: where, which, and stacked with what; the modes
        // are shown even when unusable (installing bwrap would give them).
        bw["summary"] = path + (version.empty() ? "" : " (" + version + ")") + (abi > 0 ? ", stacked with landlock" : "");
        bw["showModes"] = true;
        bw["cacheFile"] = probe_cache::file_path(false);
        bw["cacheKey"] = probe_cache::key_for(path);
        // The network modes: every one holds wherever bwrap runs (its own namespace).
        bw["network"] = landlock::describe_network(abi > 0 ? abi : 0, pr.usable ? std::string() : "bwrap is not usable here (see why)",
                                                   true, {});
        return bw;
    }
};

}  // namespace

const dsh::Runner& runner() {
    static const Runner r;
    return r;
}

}  // namespace dsh::bwrap
