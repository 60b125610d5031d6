// Supervise mode. One fork, no threads. The child runs the same path as exec
// mode (enter_and_exec: in-process layers, confinement record, exec); the
// parent relays stderr while keeping a bounded tail, forwards signals, reaps
// the child and writes the `result` record.
//
// Kernel behaviour relied on:
// - a pipe created O_CLOEXEC is closed by a successful execve, so EOF on the
//   exec pipe with no bytes in it means the exec happened (the child writes
//   its failure into the pipe otherwise);
// - PR_SET_PDEATHSIG(SIGKILL) kills the child when dsh-confine dies, even by
//   SIGKILL; it survives execve (no set-id exec is possible under
//   no_new_privs) and landlock_restrict_self (uids do not change);
// - pidfd_open (5.3) gives a pollable "the child exited" event, so the relay
//   loop needs no SIGCHLD handler and never waits for a stderr EOF that a
//   grandchild holding the pipe could delay forever.
#include "supervise.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "classify.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_kcmp
#define SYS_kcmp 312
#endif
#ifndef F_GETPIPE_SZ
#define F_GETPIPE_SZ 1032
#endif

namespace dsh {

namespace {

constexpr size_t kTail = 64 * 1024;  // stderr kept for classification
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_forwarded = 0;  // bit n: signal n was forwarded

void forward(int sig, siginfo_t* si, void*) {
    // A terminal sends Ctrl-C, Ctrl-\, hang-up and resize to its whole
    // foreground process group (si_code SI_KERNEL), and the command is in
    // ours: it has the signal already. Forwarding it would deliver it twice.
    if (si != nullptr && si->si_code == SI_KERNEL) return;
    const int saved = errno;
    const pid_t child = g_child;
    if (child > 0 && ::kill(child, sig) == 0) g_forwarded = g_forwarded | (1 << sig);
    errno = saved;
}

double now_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                // The caller's stderr may be non-blocking (a shared open file
                // description): wait until it takes more.
                pollfd pfd{fd, POLLOUT, 0};
                ::poll(&pfd, 1, -1);
                continue;
            }
            return false;
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// Same open file description on fd 1 and fd 2 (`2>&1`)? kcmp says exactly;
// where it is not available, the same inode is taken as the same stream.
bool same_stream(int a, int b) {
    long r = ::syscall(SYS_kcmp, ::getpid(), ::getpid(), 0 /* KCMP_FILE */, a, b);
    if (r == 0) return true;
    if (r > 0) return false;
    struct stat sa {}, sb {};
    if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// The child's message to the parent when it did not reach exec: the error
// enum and the message, in one write (< PIPE_BUF, so it arrives whole).
[[noreturn]] void child_failed(int fd, const Outcome& o) {
    std::string msg(sizeof(int), '\0');
    const int e = static_cast<int>(o.err);
    std::memcpy(msg.data(), &e, sizeof e);
    msg += o.message.substr(0, 3000);
    (void)!::write(fd, msg.data(), msg.size());
    ::_exit(o.exit_status());
}

struct Stderr {
    int fd = -1;     // read end of the child's stderr pipe, -1 when not captured
    int out = 2;     // where relayed bytes go
    std::string tail;
    bool truncated = false;

    // Reads what is there (non-blocking) and relays it; up to `limit` bytes.
    // Returns false at EOF or when relaying stopped.
    bool pump(size_t limit = SIZE_MAX) {
        char buf[65536];
        while (fd >= 0 && limit > 0) {
            ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return true;
            if (n <= 0) {
                close();
                return false;
            }
            limit -= static_cast<size_t>(n);
            keep(buf, static_cast<size_t>(n));
            if (!write_all(out, buf, static_cast<size_t>(n))) {
                // The caller's stderr went away: close our end so that the
                // command's next write fails (EPIPE/SIGPIPE) as it would have
                // without us, instead of being swallowed.
                close();
                return false;
            }
        }
        return fd >= 0;
    }
    void keep(const char* p, size_t n) {
        if (tail.capacity() == 0) tail.reserve(std::min<size_t>(2 * kTail, 4096));
        tail.append(p, n);
        if (tail.size() > 2 * kTail) {
            tail.erase(0, tail.size() - kTail);
            truncated = true;
        }
    }
    std::string final_tail() {
        if (tail.size() > kTail) {
            tail.erase(0, tail.size() - kTail);
            truncated = true;
        }
        // A line cut in half by the bound is dropped, not matched.
        if (truncated) {
            size_t nl = tail.find('\n');
            tail.erase(0, nl == std::string::npos ? tail.size() : nl + 1);
        }
        return tail;
    }
    void close() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

void say(const std::string& line) {
    std::string l = line + "\n";
    (void)write_all(STDERR_FILENO, l.data(), l.size());
}

ordered_json result_record(const Launch& l, std::optional<int> exit_code, std::optional<int> signal,
                           const Classification& c, double duration_ms, int forwarded, bool captured,
                           const char* evidence) {
    ordered_json j;
    j["type"] = "result";
    j["version"] = 1;
    j["mode"] = to_string(l.c.policy.mode);
    j["runner"] = to_string(l.c.runner);
    j["exitCode"] = exit_code ? ordered_json(*exit_code) : ordered_json(nullptr);
    j["signal"] = signal ? ordered_json(*signal) : ordered_json(nullptr);
    j["denied"] = c.denied;
    j["runnerFailed"] = c.runner_failed;
    j["runnerFailure"] = c.runner_failure ? ordered_json(*c.runner_failure) : ordered_json(nullptr);
    j["durationMs"] = static_cast<double>(static_cast<long long>(duration_ms * 1000.0)) / 1000.0;
    ordered_json fw = ordered_json::array();
    for (int s = 1; s < 32; ++s)
        if (forwarded & (1 << s)) fw.push_back(s);
    j["forwardedSignals"] = std::move(fw);
    j["stderrCaptured"] = captured;
    j["evidence"] = evidence;
    return j;
}

}  // namespace

int supervise(Launch& l, const Report& report, const SuperviseOptions& opts) {
    const bool confined = l.c.policy.mode != Mode::DangerFullAccess;
    // stderr: a terminal stays a terminal (the command may ask isatty, set
    // modes, draw), so it is inherited and only out-of-band evidence is
    // used. Anything else is replaced by a pipe that the parent relays byte
    // for byte while keeping the tail. When stdout is the same stream
    // (`2>&1`), both go through the one pipe so that their order is kept.
    const bool capture = confined && !::isatty(STDERR_FILENO);
    const bool combined = capture && same_stream(STDOUT_FILENO, STDERR_FILENO);

    int exec_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0 || (capture && ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
        Outcome o = failf(Err::Internal, "pipe2: {}", std::strerror(errno));
        say("dsh-confine: " + o.message);
        (void)report.write(error_record(o));
        return o.exit_status();
    }

    // Signals to forward are blocked across fork: one that arrives before the
    // child's pid is known stays pending and is forwarded right after. A
    // signal the caller ignores stays ignored (the command inherits that, as
    // nohup expects) and is not forwarded.
    sigset_t block, old_mask;
    sigemptyset(&block);
    for (int s : kForwarded) sigaddset(&block, s);
    ::sigprocmask(SIG_BLOCK, &block, &old_mask);
    struct sigaction old_act[sizeof kForwarded / sizeof kForwarded[0]];
    bool installed[sizeof kForwarded / sizeof kForwarded[0]] = {};
    for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i) {
        ::sigaction(kForwarded[i], nullptr, &old_act[i]);
        if (old_act[i].sa_handler == SIG_IGN) continue;
        struct sigaction sa {};
        sa.sa_sigaction = forward;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sa.sa_mask = block;
        ::sigaction(kForwarded[i], &sa, nullptr);
        installed[i] = true;
    }

    const pid_t parent = ::getpid();
    const double start = now_ms();
    const pid_t pid = ::fork();
    if (pid == 0) {
        // The child: back to the caller's dispositions and mask, so a signal
        // during setup acts as it would on the command.
        for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i)
            if (installed[i]) ::sigaction(kForwarded[i], &old_act[i], nullptr);
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
            child_failed(exec_pipe[1], failf(Err::Internal, "prctl(PR_SET_PDEATHSIG): {}", std::strerror(errno)));
        // dsh-confine died before the line above took effect: nobody is
        // left to report to, and the command must not outlive its launcher.
        if (::getppid() != parent) ::_exit(125);
        if (capture) {
            if (::dup2(err_pipe[1], STDERR_FILENO) < 0 || (combined && ::dup2(err_pipe[1], STDOUT_FILENO) < 0))
                child_failed(exec_pipe[1], failf(Err::Internal, "dup2: {}", std::strerror(errno)));
        }
        l.status_fd = exec_pipe[1];
        child_failed(exec_pipe[1], enter_and_exec(l, report, true));
    }
    if (pid < 0) {
        const int e = errno;
        for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i)
            if (installed[i]) ::sigaction(kForwarded[i], &old_act[i], nullptr);
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        Outcome o = failf(Err::Internal, "fork: {}", std::strerror(e));
        say("dsh-confine: " + o.message);
        (void)report.write(error_record(o));
        return o.exit_status();
    }
    g_child = pid;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    // A stderr reader that went away must not kill the supervisor (and with
    // it, by PDEATHSIG, the command).
    ::signal(SIGPIPE, SIG_IGN);

    ::close(exec_pipe[1]);
    Stderr err;
    if (capture) {
        ::close(err_pipe[1]);
        err.fd = err_pipe[0];
        err.out = combined ? STDOUT_FILENO : STDERR_FILENO;
        ::fcntl(err.fd, F_SETFL, ::fcntl(err.fd, F_GETFL) | O_NONBLOCK);
    }
    int exec_fd = exec_pipe[0];
    std::string exec_msg;
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));

    auto read_exec = [&]() {
        char buf[4096];
        ssize_t n = ::read(exec_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) return;
        if (n <= 0) {
            ::close(exec_fd);
            exec_fd = -1;
            return;
        }
        exec_msg.append(buf, static_cast<size_t>(n));
    };

    int status = 0;
    bool reaped = false;
    while (!reaped) {
        pollfd fds[3];
        int n = 0, i_exec = -1, i_err = -1, i_pid = -1;
        if (exec_fd >= 0) fds[i_exec = n++] = {exec_fd, POLLIN, 0};
        if (err.fd >= 0) fds[i_err = n++] = {err.fd, POLLIN, 0};
        if (pidfd >= 0) fds[i_pid = n++] = {pidfd, POLLIN, 0};
        // Without a pidfd (kernel < 5.3) exit is noticed by polling waitpid.
        const int timeout = pidfd >= 0 ? -1 : (n == 0 ? -1 : 10);
        if (n == 0) {
            // Nothing left to watch but the child itself.
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            reaped = true;
            break;
        }
        int r = ::poll(fds, static_cast<nfds_t>(n), timeout);
        if (r < 0 && errno != EINTR) break;
        if (r > 0) {
            if (i_exec >= 0 && fds[i_exec].revents) read_exec();
            if (i_err >= 0 && fds[i_err].revents) err.pump();
        }
        const bool exited = (i_pid >= 0 && r > 0 && fds[i_pid].revents) || pidfd < 0;
        if (exited) {
            pid_t w = ::waitpid(pid, &status, pidfd >= 0 ? 0 : WNOHANG);
            if (w == pid) reaped = true;
        }
    }
    if (!reaped)
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    g_child = 0;
    const double duration = now_ms() - start;
    if (pidfd >= 0) ::close(pidfd);
    // The child is gone: what it wrote is in the pipes. Read the exec pipe to
    // its end, and stderr up to one pipe's capacity (anything beyond was
    // written after the exit, by a grandchild that kept the pipe).
    while (exec_fd >= 0) read_exec();
    if (err.fd >= 0) {
        int cap = ::fcntl(err.fd, F_GETPIPE_SZ);
        err.pump(cap > 0 ? static_cast<size_t>(cap) : kTail);
        err.close();
    }
    for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i)
        if (installed[i]) ::sigaction(kForwarded[i], &old_act[i], nullptr);
    const int forwarded = g_forwarded;

    std::optional<int> exit_code, signal;
    if (WIFEXITED(status)) exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) signal = WTERMSIG(status);
    const std::string tail = err.final_tail();

    // The child never reached exec: its own report of why.
    std::optional<Outcome> setup;
    if (exec_msg.size() >= sizeof(int)) {
        int e = 0;
        std::memcpy(&e, exec_msg.data(), sizeof e);
        setup = fail(static_cast<Err>(e), exec_msg.substr(sizeof e));
    }

    Classification c;
    const char* evidence = "none";
    if (setup) {
        evidence = "exec-pipe";
        if (setup->err == Err::SandboxUnavailable) {
            c.runner_failed = true;
            const std::string marker = " Runner failure: ";
            const size_t at = setup->message.find(marker);
            c.runner_failure = at == std::string::npos ? setup->message : setup->message.substr(at + marker.size());
        }
    } else if (confined) {
        // Landlock is applied by this program itself, so the exec pipe is the
        // whole truth about runner failure; rules matter for other runners.
        evidence = l.landlock && l.c.runner == RunnerKind::Landlock ? "exec-pipe" : "stderr";
        std::vector<FailureRule> rules;
        if (!(l.landlock && l.c.runner == RunnerKind::Landlock)) rules = rules_from_json(l.c.runner_failure_rules);
        c = classify(rules, l.c.denial_signatures, exit_code, tail);
    }

    (void)report.write(result_record(l, exit_code, signal, c, duration, forwarded, capture, evidence));

    int rc = exit_code ? *exit_code : (signal ? 128 + *signal : 125);
    if (setup || c.runner_failed) {
        Outcome o = setup && !c.runner_failed
                        ? *setup
                        : fail(Err::SandboxUnavailable, sandbox_unavailable_text(to_string(l.c.policy.mode)) +
                                                            " Runner failure: " + *c.runner_failure);
        say("dsh-confine: " + o.message);
        (void)report.write(error_record(o));
        rc = o.exit_status();
    }
    if (opts.markers && confined) {
        const std::string mode(to_string(l.c.policy.mode));
        if (c.runner_failed) {
            say(runner_failure_marker(mode));
        } else if (c.denied) {
            say(denial_marker(mode));
            if (opts.escalation_advertised) say(escalation_hint("command"));
        }
    }
    return rc;
}

}  // namespace dsh
