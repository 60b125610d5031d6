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
//
// Under bwrap the command is not our child: our child is bwrap, whose child
// (reported on --json-status-fd as "child-pid") is its PID-namespace init,
// whose child is our stage, which execs the command (same pid). bwrap does
// not forward signals (a SIGTERM kills bwrap, and --die-with-parent then
// SIGKILLs the command) and reports a death by signal n as exit 128+n. So the
// parent finds the command (/proc/<init>/task/<init>/children), holds a pidfd
// to it, signals it with pidfd_send_signal (5.1; no pid-reuse race) and reads
// its exact wait status with PIDFD_GET_INFO / PIDFD_INFO_EXIT (6.15) once it
// is gone. Where either is missing, bwrap's own status stands.
#include "supervise.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <string>

#include "classify.hpp"
#if defined(__linux__)
#include "linux/probe_cache.hpp"
#endif

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_kcmp
#define SYS_kcmp 312
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef F_GETPIPE_SZ
#define F_GETPIPE_SZ 1032
#endif

namespace dsh {

namespace {

constexpr size_t kTail = 64 * 1024;  // stderr kept for classification
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_same_group = 1;  // the command is in our process group
volatile sig_atomic_t g_target = -1;     // pidfd of the command when it is not our child (bwrap)
volatile sig_atomic_t g_defer = 0;       // the command is not our child and not found yet
volatile sig_atomic_t g_pending = 0;     // bit n: signal n waits for the command to be found
volatile sig_atomic_t g_forwarded = 0;   // bit n: signal n was forwarded

int send_to_target(int pidfd, int sig) {
#if defined(__linux__)
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
    (void)pidfd, (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}

// pipe2(O_CLOEXEC); where there is none (macOS), pipe and fcntl: no other
// thread can exec in between (one fork, no threads).
int cloexec_pipe(int p[2]) {
#if defined(__linux__)
    return ::pipe2(p, O_CLOEXEC);
#else
    if (::pipe(p) != 0) return -1;
    if (::fcntl(p[0], F_SETFD, FD_CLOEXEC) == 0 && ::fcntl(p[1], F_SETFD, FD_CLOEXEC) == 0) return 0;
    const int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    errno = e;
    return -1;
#endif
}

// A pollable "this process exited" (Linux pidfd_open), or -1.
int pidfd_of(pid_t pid) {
#if defined(__linux__)
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

void forward(int sig, siginfo_t* si, void*) {
    // A terminal sends Ctrl-C, Ctrl-\, hang-up and resize to its whole
    // foreground process group (si_code SI_KERNEL). When the command is in
    // ours it has the signal already: forwarding would deliver it twice.
#if defined(SI_KERNEL)
    if (g_same_group && si != nullptr && si->si_code == SI_KERNEL) return;
#else
    (void)si;
#endif
    const int saved = errno;
    const int target = g_target;
    const pid_t child = g_child;
    if (target >= 0) {
        if (send_to_target(target, sig) == 0) g_forwarded = g_forwarded | (1 << sig);
    } else if (g_defer) {
        g_pending = g_pending | (1 << sig);
    } else if (child > 0 && ::kill(child, sig) == 0) {
        g_forwarded = g_forwarded | (1 << sig);
    }
    errno = saved;
}

// The raw wait status of a process that is not our child, once it is gone
// (PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15). The struct is the
// uapi's first version (64 bytes); the kernel takes the size from the ioctl.
struct PidfdInfo {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
static_assert(sizeof(PidfdInfo) == 64, "PIDFD_INFO_SIZE_VER0");
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);
constexpr uint64_t kPidfdInfoExit = 1ULL << 3;

std::optional<int> exit_status_of(int pidfd) {
    PidfdInfo info{};
    info.mask = kPidfdInfoExit;
    if (::ioctl(pidfd, kPidfdGetInfo, &info) != 0 || !(info.mask & kPidfdInfoExit)) return std::nullopt;
    return info.exit_code;
}

// The first child of `pid` (its main thread's), or 0.
pid_t first_child(pid_t pid) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[64] = {};
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    return n > 0 ? static_cast<pid_t>(std::atoi(buf)) : 0;
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
#if defined(__linux__)
    long r = ::syscall(SYS_kcmp, ::getpid(), ::getpid(), 0 /* KCMP_FILE */, a, b);
    if (r == 0) return true;
    if (r > 0) return false;
#endif
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

#if !defined(__linux__)  // clone(2) is Linux's
#define DSH_SHARED_VM_CHILD 0
#elif defined(__SANITIZE_ADDRESS__)
#define DSH_SHARED_VM_CHILD 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DSH_SHARED_VM_CHILD 0
#endif
#endif
#ifndef DSH_SHARED_VM_CHILD
#define DSH_SHARED_VM_CHILD 1
#endif

int run_child(void* fn) {
    (*static_cast<std::function<void()>*>(fn))();
    ::_exit(125);  // not reached: the child execs or _exits
}

// Starts `fn` in a child process; returns its pid (or -1, errno set).
// clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: no page tables to copy
// and no copy-on-write faults afterwards, which is most of what fork costs
// here; we are suspended until the child execs or exits. The child has its
// own stack but our heap: it runs single-threaded while we wait, and keeps
// every signal blocked except across execve (exec_command), so it can never
// die halfway through malloc. Landlock, seccomp, no_new_privs, capabilities
// and PDEATHSIG are per-task state, and without CLONE_FILES/CLONE_SIGHAND it
// has its own fd table and signal dispositions, so what it applies stays
// with it. AddressSanitizer builds fork instead (ASan does not follow a
// foreign stack).
pid_t spawn_child(std::function<void()>& fn) {
#if DSH_SHARED_VM_CHILD
    constexpr size_t kStack = 1 << 20;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* mem = ::mmap(nullptr, kStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mem == MAP_FAILED) return -1;
    (void)::mprotect(mem, page, PROT_NONE);  // guard page below the stack
    char* top = static_cast<char*>(mem) + page + kStack;
    const pid_t pid = ::clone(run_child, top, CLONE_VM | CLONE_VFORK | SIGCHLD, &fn);
    const int e = errno;
    ::munmap(mem, kStack + page);
    errno = e;
    return pid;
#else
    const pid_t pid = ::fork();
    if (pid == 0) run_child(&fn);
    return pid;
#endif
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
    const bool bwrap = l.c.runner == RunnerKind::Bwrap;
    const bool own_landlock = l.landlock.has_value() && l.c.runner == RunnerKind::Landlock;
    // stderr: a terminal stays a terminal (the command may ask isatty, set
    // modes, draw), so it is inherited and only out-of-band evidence is
    // used. Anything else is replaced by a pipe that the parent relays byte
    // for byte while keeping the tail. When stdout is the same stream
    // (`2>&1`), both go through the one pipe so that their order is kept.
    const bool capture = confined && !::isatty(STDERR_FILENO);
    const bool combined = capture && same_stream(STDOUT_FILENO, STDERR_FILENO);

    auto internal = [&](const char* what) {
        Outcome o = failf(Err::Internal, "{}: {}", what, std::strerror(errno));
        say("dsh-confine: " + one_line(o.message));
        (void)report.write(error_record(o));
        return o.exit_status();
    };
    int exec_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    int json_pipe[2] = {-1, -1};
    if (cloexec_pipe(exec_pipe) != 0 || (capture && cloexec_pipe(err_pipe) != 0) ||
        (bwrap && cloexec_pipe(json_pipe) != 0))
        return internal("pipe2");
    if (bwrap) {
        // bwrap's status: {"child-pid":..} once the sandbox is up, {"exit-code":..}
        // only if it exec'd its child. The write end is made inheritable in the
        // child, just before exec; the stage closes it. bwrap reads its options
        // up to "--", so right after argv[0] is always among them.
        const std::vector<std::string> opt = {"--json-status-fd", std::to_string(json_pipe[1])};
        l.exec_argv.insert(l.exec_argv.begin() + (l.exec_argv.empty() ? 0 : 1), opt.begin(), opt.end());
        l.c.exec_argv = l.exec_argv;
    }

    // Signals to forward are blocked across fork: one that arrives before the
    // child's pid is known stays pending and is forwarded right after. A
    // signal the caller ignores stays ignored (the command inherits that, as
    // nohup expects) and is not forwarded.
    constexpr size_t kN = sizeof kForwarded / sizeof kForwarded[0];
    sigset_t block, old_mask;
    sigemptyset(&block);
    for (int s : kForwarded) sigaddset(&block, s);
    ::sigprocmask(SIG_BLOCK, &block, &old_mask);
    struct sigaction old_act[kN];
    bool installed[kN] = {};
    g_same_group = bwrap ? 0 : 1;
    g_defer = bwrap ? 1 : 0;
    for (size_t i = 0; i < kN; ++i) {
        ::sigaction(kForwarded[i], nullptr, &old_act[i]);
        if (old_act[i].sa_handler == SIG_IGN) continue;
        struct sigaction sa {};
        sa.sa_sigaction = forward;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sa.sa_mask = block;
        ::sigaction(kForwarded[i], &sa, nullptr);
        installed[i] = true;
    }
    auto restore_signals = [&]() {
        for (size_t i = 0; i < kN; ++i)
            if (installed[i]) ::sigaction(kForwarded[i], &old_act[i], nullptr);
    };

    const pid_t parent = ::getpid();
    const double start = now_ms();
    // The child shares our memory until it execs (see spawn_child): every
    // signal stays blocked in it except across execve itself, so that none
    // can end it halfway through malloc, and the caller's mask is what the
    // command starts with.
    sigset_t all, mask_before_all;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &mask_before_all);
    l.exec_mask = &old_mask;
    std::function<void()> child = [&]() {
        // Back to the caller's dispositions (the mask comes back at execve).
        restore_signals();
#if defined(__linux__)
        if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
            child_failed(exec_pipe[1], failf(Err::Internal, "prctl(PR_SET_PDEATHSIG): {}", std::strerror(errno)));
#endif
        // dsh-confine died before the line above took effect: nobody is
        // left to report to, and the command must not outlive its launcher.
        if (::getppid() != parent) ::_exit(125);
        // bwrap in its own process group: the terminal's Ctrl-C would
        // otherwise kill bwrap, and with it the command by SIGKILL, before
        // the command (in bwrap's new session) could see the signal, which
        // dsh-confine forwards to it instead.
        if (bwrap) {
            (void)::setpgid(0, 0);
            const int fl = ::fcntl(json_pipe[1], F_GETFD);
            if (fl < 0 || ::fcntl(json_pipe[1], F_SETFD, fl & ~FD_CLOEXEC) < 0)
                child_failed(exec_pipe[1], failf(Err::Internal, "json status fd: {}", std::strerror(errno)));
        }
        if (capture) {
            if (::dup2(err_pipe[1], STDERR_FILENO) < 0 || (combined && ::dup2(err_pipe[1], STDOUT_FILENO) < 0))
                child_failed(exec_pipe[1], failf(Err::Internal, "dup2: {}", std::strerror(errno)));
        }
        l.status_fd = exec_pipe[1];
        child_failed(exec_pipe[1], enter_and_exec(l, report, true));
    };
    const pid_t pid = spawn_child(child);
    if (pid < 0) {
        const int e = errno;
        restore_signals();
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        errno = e;
        return internal("clone");
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
    if (bwrap) {
        ::close(json_pipe[1]);
        ::fcntl(json_pipe[0], F_SETFL, ::fcntl(json_pipe[0], F_GETFL) | O_NONBLOCK);
    }
    int exec_fd = exec_pipe[0];
    int json_fd = json_pipe[0];
    ::fcntl(exec_fd, F_SETFL, ::fcntl(exec_fd, F_GETFL) | O_NONBLOCK);
    std::string exec_msg, json_text;
    const int pidfd = pidfd_of(pid);

    // Reads what is there; false at EOF (the fd is then closed).
    auto slurp = [](int& fd, std::string& into) {
        char buf[4096];
        while (fd >= 0) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return;
            if (n <= 0) {
                ::close(fd);
                fd = -1;
                return;
            }
            into.append(buf, static_cast<size_t>(n));
        }
    };
    pid_t sandbox_init = 0;  // bwrap: its child, the PID-namespace init
    bool looking = bwrap;    // bwrap: the command is not found yet
    auto find_command = [&]() {
        if (!sandbox_init) {
            const size_t at = json_text.find("\"child-pid\"");
            if (at == std::string::npos) return;
            const size_t colon = json_text.find(':', at);
            if (colon == std::string::npos) return;
            sandbox_init = static_cast<pid_t>(std::atoi(json_text.c_str() + colon + 1));
            if (sandbox_init <= 0) return;
        }
        const pid_t cmd = first_child(sandbox_init);
        if (cmd <= 0) return;
        const int fd = pidfd_of(cmd);
        looking = false;
        if (fd < 0) {
            g_defer = 0;  // fall back to signalling bwrap
            return;
        }
        // Publish the target with signals blocked, then send what waited.
        ::sigprocmask(SIG_BLOCK, &block, nullptr);
        g_target = fd;
        g_defer = 0;
        const int pending = g_pending;
        g_pending = 0;
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        for (int s = 1; s < 32; ++s)
            if ((pending & (1 << s)) && send_to_target(fd, s) == 0) g_forwarded = g_forwarded | (1 << s);
    };

    int status = 0;
    bool reaped = false;
    while (!reaped) {
        if (looking) find_command();
        // The exec pipe is not watched: its EOF at exec would cost a wake-up
        // (issue 8), and a child that fails writes its message and exits, so
        // the message is read once the child is reaped.
        pollfd fds[3];
        int n = 0, i_err = -1, i_json = -1, i_pid = -1;
        if (err.fd >= 0) fds[i_err = n++] = {err.fd, POLLIN, 0};
        if (json_fd >= 0) fds[i_json = n++] = {json_fd, POLLIN, 0};
        if (pidfd >= 0) fds[i_pid = n++] = {pidfd, POLLIN, 0};
        if (n == 0) {
            // Nothing left to watch but the child itself (no pidfd: kernel < 5.3).
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            reaped = true;
            break;
        }
        // Without a pidfd the exit is noticed by polling waitpid; while the
        // command is being looked for under bwrap, the loop comes round fast.
        int timeout = -1;
        if (looking && sandbox_init) timeout = 1;
        else if (looking) timeout = 5;
        if (pidfd < 0) timeout = timeout < 0 ? 10 : timeout;
        int r = ::poll(fds, static_cast<nfds_t>(n), timeout);
        if (r < 0 && errno != EINTR) break;
        if (r > 0) {
            if (i_json >= 0 && fds[i_json].revents) slurp(json_fd, json_text);
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
    const double duration = now_ms() - start;
    if (pidfd >= 0) ::close(pidfd);
    // The child is gone: what it (and under bwrap, the sandbox) wrote is in
    // the pipes. Take what is there without waiting for an EOF that a
    // lingering holder could delay; stderr up to one pipe's capacity
    // (anything beyond was written after the exit, by a grandchild).
    slurp(exec_fd, exec_msg);
    slurp(json_fd, json_text);
    if (exec_fd >= 0) ::close(exec_fd);
    if (json_fd >= 0) ::close(json_fd);
    if (err.fd >= 0) {
        int cap = ::fcntl(err.fd, F_GETPIPE_SZ);
        err.pump(cap > 0 ? static_cast<size_t>(cap) : kTail);
        err.close();
    }
    ::sigprocmask(SIG_BLOCK, &block, nullptr);
    restore_signals();
    const int target = g_target;
    g_target = -1;
    g_child = 0;
    g_defer = 0;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    const int forwarded = g_forwarded;

    // Under bwrap, the command's own status where the kernel can tell it.
    if (target >= 0) {
        if (auto st = exit_status_of(target)) status = *st;
        ::close(target);
    }
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
        std::vector<FailureRule> rules;
        if (own_landlock) {
            // Landlock is applied by this program itself, so the exec pipe is
            // the whole truth about runner failure.
            evidence = "exec-pipe";
        } else if (bwrap) {
            evidence = "json-status-fd";
            if (json_text.find("\"exit-code\"") == std::string::npos && exit_code && *exit_code != 0) {
                // bwrap never exec'd its child: its setup (or exec) failed.
                // The detail is bwrap's own line where stderr shows one, else
                // our stage's refusal (a "bwrap" that writes no status but
                // ran the stage, which found no sandbox around it).
                FailureRule own, stage;
                own.fatal_signatures = {"bwrap: "};
                stage.allowed_exit_codes = std::vector<int>{125};
                stage.fatal_signatures = {"dsh-confine: "};
                c.runner_failed = true;
                c.runner_failure = match_runner_failure({own, stage}, exit_code, tail);
                if (!c.runner_failure)
                    c.runner_failure = fmt::format("bwrap exited with status {} before starting the command",
                                                   *exit_code);
            } else {
                // bwrap started our stage; a `bwrap: ` line now is the
                // command's, not bwrap's. The stage's own failure (exit 125,
                // `dsh-confine: `) is still read from stderr.
                FailureRule stage;
                stage.allowed_exit_codes = std::vector<int>{125};
                stage.fatal_signatures = {"dsh-confine: "};
                rules.push_back(stage);
            }
        } else {
            evidence = "stderr";
            rules = rules_from_json(l.c.runner_failure_rules);
        }
        if (!c.runner_failed) c = classify(rules, l.c.denial_signatures, exit_code, tail);
        // The stage's own line carries the fail-closed text already: its
        // detail, not the line, goes after " Runner failure: ".
        if (bwrap && c.runner_failure) c.runner_failure = runner_failure_detail(*c.runner_failure);
    }

    (void)report.write(result_record(l, exit_code, signal, c, duration, forwarded, capture, evidence));
#if defined(__linux__)
    // bwrap failed on a verdict taken from the probe cache: the entry is
    // stale (or forged), so the next run probes again instead of failing the same way.
    if (bwrap && c.runner_failed && !l.c.layers.empty() && l.c.layers.front().details.value("probe", "") == "cached")
        probe_cache::forget();
#endif

    int rc = exit_code ? *exit_code : (signal ? 128 + *signal : 125);
    if (setup || c.runner_failed) {
        Outcome o = setup && !c.runner_failed
                        ? *setup
                        : fail(Err::SandboxUnavailable, sandbox_unavailable_text(to_string(l.c.policy.mode)) +
                                                            " Runner failure: " + *c.runner_failure);
        say("dsh-confine: " + one_line(o.message));
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
