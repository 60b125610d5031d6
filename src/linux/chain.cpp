#include "chain.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bwrap_plan.hpp"
#include "bwrap_runner.hpp"
#include "landlock_runner.hpp"
#include "probe_cache.hpp"

extern char** environ;

namespace dsh::chain {

namespace {

Outcome unavailable(const Policy& p) {
    return fail(Err::SandboxUnavailable, sandbox_unavailable_text(to_string(p.mode)));
}

long ms_since(std::chrono::steady_clock::time_point t0) {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
}

// The first "bwrap: " line of the probe's stderr, else its first line.
std::string first_line(const std::string& err) {
    std::string first;
    size_t i = 0;
    while (i < err.size()) {
        size_t j = err.find('\n', i);
        if (j == std::string::npos) j = err.size();
        std::string line = err.substr(i, j - i);
        if (line.rfind("bwrap: ", 0) == 0) return line;
        if (first.empty() && !line.empty()) first = line;
        i = j + 1;
    }
    return first;
}

Outcome prepare_custom(const Options& opts, Launch& l) {
    Confinement& c = l.c;
    if (opts.runner_command.empty())
        return fail(Err::Usage, "--runner custom needs runnerCommand (and runnerFailureSignatures) in the config file");
    std::string resolved;
    // The seed: a runner that cannot be spawned is SANDBOX_UNAVAILABLE, its
    // exact text, then " Runner failure: <detail>".
    if (auto o = resolve_command(opts.runner_command.front(), std::getenv("PATH"), resolved); !o)
        return fail(Err::SandboxUnavailable, sandbox_unavailable_text(to_string(c.policy.mode)) +
                                                 " Runner failure: cannot start the runner " + o.message);
    auto argv = bwrap::custom_argv(opts.runner_command, c.policy, c.argv);
    Layer layer;
    layer.name = "custom";
    layer.enforcement = Enforcement::Full;  // asserted by the operator (seed: runnerCommand)
    layer.details["asserted"] = true;
    c.runner = RunnerKind::Custom;
    c.layers = {layer};
    c.denial_signatures = {"read-only file system", "permission denied"};
    c.runner_failure_rules = nlohmann::json::array({{{"fatalSignatures", opts.runner_failure_signatures}}});
    c.hardening.clear();
    c.exec_argv = argv;
    l.landlock.reset();
    l.exec_path = resolved;
    l.exec_argv = std::move(argv);
    l.exec_is_runner = true;
    return Outcome::success();
}

}  // namespace

RunResult run_bounded(const std::string& path, const std::vector<std::string>& argv, int timeout_ms,
                      int pass_fd, bool capture_stdout) {
    const auto t0 = std::chrono::steady_clock::now();
    RunResult r;
    // Everything the child needs is built before fork: after it, only
    // async-signal-safe calls.
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // No loader variable (LD_PRELOAD, ...) reaches a program we start on our
    // own account before anything is confined.
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    env = bwrap::stash_loader_env(env);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    int errp[2] = {-1, -1}, outp[2] = {-1, -1};
    if (devnull < 0 || ::pipe2(errp, O_CLOEXEC) != 0 || (capture_stdout && ::pipe2(outp, O_CLOEXEC) != 0)) {
        r.error = fmt::format("cannot set up {}: {}", path, std::strerror(errno));
        for (int fd : {devnull, errp[0], errp[1], outp[0], outp[1]})
            if (fd >= 0) ::close(fd);
        return r;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
        // Own process group, so that a hung child is killed with everything
        // it started (a fake bwrap that is a shell script, say).
        ::setpgid(0, 0);
        ::dup2(devnull, 0);
        ::dup2(capture_stdout ? outp[1] : devnull, 1);
        ::dup2(errp[1], 2);
        if (pass_fd == 3) ::fcntl(3, F_SETFD, 0);
        else if (pass_fd >= 0) ::dup2(pass_fd, 3);  // dup2 clears close-on-exec on the copy
        ::syscall(SYS_close_range, pass_fd >= 0 ? 4U : 3U, ~0U, 0U);
        ::execve(path.c_str(), args.data(), envp.data());
        ::_exit(127);
    }
    ::close(devnull);
    ::close(errp[1]);
    if (outp[1] >= 0) ::close(outp[1]);
    if (pid < 0) {
        r.error = fmt::format("cannot start {}: {}", path, std::strerror(errno));
        ::close(errp[0]);
        if (outp[0] >= 0) ::close(outp[0]);
        return r;
    }
    r.started = true;
    ::setpgid(pid, pid);  // also from here: no race with the child's own call

    bool done = false;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0U));
    int pfd[2] = {errp[0], outp[0]};
    std::string* sink[2] = {&r.err, &r.out};
    auto drain = [&](int k) {
        char buf[1024];
        ssize_t n = ::read(pfd[k], buf, sizeof buf);
        if (n > 0 && sink[k]->size() < 65536) sink[k]->append(buf, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
            ::close(pfd[k]);
            pfd[k] = -1;
        }
    };
    while (!done) {
        const long left = timeout_ms - ms_since(t0);
        if (left <= 0) break;
        pollfd fds[3] = {{pfd[0], POLLIN, 0}, {pfd[1], POLLIN, 0}, {pidfd, POLLIN, 0}};
        // Without pidfd_open (kernel < 5.3), poll in short steps.
        const int wait = pidfd >= 0 ? static_cast<int>(left) : static_cast<int>(left < 10 ? left : 10);
        int n = ::poll(fds, 3, wait);
        if (n < 0 && errno != EINTR) break;
        for (int k = 0; k < 2; ++k)
            if (pfd[k] >= 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR))) drain(k);
        if (::waitpid(pid, &r.status, WNOHANG) == pid) done = true;
    }
    if (!done) {
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &r.status, 0);
        r.timed_out = true;
    }
    ::kill(-pid, SIGKILL);  // nothing it started outlives it
    if (pidfd >= 0) ::close(pidfd);
    for (int k = 0; k < 2; ++k) {
        if (pfd[k] < 0) continue;
        ::fcntl(pfd[k], F_SETFL, O_NONBLOCK);
        while (pfd[k] >= 0) drain(k);
    }
    return r;
}

ProbeResult probe_bwrap(const std::string& bwrap_path, int timeout_ms, bool use_cache) {
    const auto t0 = std::chrono::steady_clock::now();
    ProbeResult r;
    if (auto o = bwrap::check_binary(bwrap_path); !o) {
        r.reason = o.message;
        return r;
    }
    const std::string key = use_cache ? probe_cache::key_for(bwrap_path) : std::string();
    if (use_cache && probe_cache::lookup(key)) {
        r.usable = r.cached = true;
        r.elapsed_ms = ms_since(t0);
        return r;
    }

    Policy ro;
    ro.mode = Mode::ReadOnly;
    ro.writable_files = {"/dev/null"};
    bwrap::ProfileOptions popts;
    popts.stage_keeps_setpcap = ::geteuid() == 0;
    const auto argv = bwrap::wrap(bwrap_path, bwrap::profile_args(ro, popts), {"/proc/self/fd/3", bwrap::kProbeArg});
    int self = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (self < 0) {
        r.reason = fmt::format("cannot open our own binary for the bwrap probe: {}", std::strerror(errno));
        return r;
    }
    RunResult run = run_bounded(bwrap_path, argv, timeout_ms, self, false);
    ::close(self);
    r.elapsed_ms = ms_since(t0);
    r.timed_out = run.timed_out;
    const int status = run.status;
    const std::string& err = run.err;
    if (!run.started) {
        r.reason = run.error;
        return r;
    }
    if (r.timed_out) {
        r.reason = fmt::format("the bwrap probe did not finish within {} ms (--probe-timeout)", timeout_ms);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        r.usable = true;
    } else {
        const std::string line = first_line(err);
        const std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                                  : fmt::format("signal {}", WTERMSIG(status));
        r.reason = line.empty() ? fmt::format("the bwrap probe failed ({})", how)
                                : fmt::format("the bwrap probe failed ({}): {}", how, line);
    }
    if (use_cache) {
        if (r.usable) probe_cache::store(key);
        else probe_cache::forget();
    }
    return r;
}

namespace {

// Landlock alone (forced, or the chain's fallback); its failure is the last
// skipped runner and nothing runs.
Outcome prepare_landlock(Launch& l) {
    landlock::Plan plan;
    if (auto o = landlock::prepare(l.c.policy, l.c, plan); !o) {
        l.c.skipped.push_back({"landlock", o.message});
        return unavailable(l.c.policy);
    }
    l.landlock = std::move(plan);
    return Outcome::success();
}

}  // namespace

Outcome prepare(const Options& opts, Launch& l) {
    Confinement& c = l.c;
    const Policy& policy = c.policy;
    switch (opts.runner) {
        case RunnerKind::Custom:
            return prepare_custom(opts, l);
        case RunnerKind::Bwrap:
            // Forced: no probe; bwrap itself refuses (and the command never
            // starts) if it cannot build the sandbox.
            if (auto o = bwrap::prepare(opts.bwrap_path, opts.report_fd, l); !o) {
                c.skipped.push_back({"bwrap", o.message});
                return unavailable(policy);
            }
            c.layers.front().details["probe"] = "forced";
            return Outcome::success();
        case RunnerKind::Landlock:
            return prepare_landlock(l);
        case RunnerKind::Auto: {
            ProbeResult pr = probe_bwrap(opts.bwrap_path, opts.probe_timeout_ms, true);
            if (pr.usable) {
                Outcome o = bwrap::prepare(opts.bwrap_path, opts.report_fd, l);
                if (o) {
                    c.layers.front().details["probe"] = pr.cached ? "cached" : "ran";
                    return o;
                }
                pr.reason = o.message;
            }
            c.skipped.push_back({"bwrap", pr.reason});
            return prepare_landlock(l);
        }
        case RunnerKind::Seatbelt:
        case RunnerKind::WindowsAcl:
        case RunnerKind::None:
            c.skipped.push_back({std::string(to_string(opts.runner)), "not available on this platform"});
            return unavailable(policy);
    }
    return unavailable(policy);
}

}  // namespace dsh::chain
