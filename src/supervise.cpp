// Supervise mode. One child, no threads. The child runs the same entry as
// exec mode (launch.hpp: in-process layers, confinement record, exec), made
// before the spawn so that the child only makes system calls (spawn.hpp); the
// parent relays stderr while keeping a bounded tail, forwards signals, reaps
// the child and writes the `result` record.
//
// Kernel behaviour relied on:
// - a pipe created O_CLOEXEC is closed by a successful execve, so EOF on the
//   exec pipe with no bytes in it means the exec happened (the child writes
//   its Fault into the pipe otherwise);
// - PR_SET_PDEATHSIG(SIGKILL) kills the child when dsh-confine dies, even by
//   SIGKILL; it survives execve (no set-id exec is possible under
//   no_new_privs) and landlock_restrict_self (uids do not change);
// - pidfd_open (5.3) gives a pollable "the child exited" event, so the relay
//   loop needs no SIGCHLD handler and never waits for a stderr EOF that a
//   grandchild holding the pipe could delay forever.
//
// Where the command is not our child (bwrap's sandbox), the runner's Watch
// finds it, and its evidence classifies the run; this file knows no runner.
#include "supervise.hpp"
#if defined(__linux__)
#include "linux/net_relay.hpp"
#include "linux/netns.hpp"
#include "net_proxy_loop.hpp"
#endif

#include "carveouts.hpp"
#include "chain.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <memory>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "classify.hpp"
#include "errors.hpp"
#include "proctree.hpp"
#include "roots.hpp"
#include "spawn.hpp"
#include "terminal.hpp"
#include <sys/resource.h>

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
volatile sig_atomic_t g_target_pid = 0;  // ...or its pid alone, where no pidfd could be had
volatile sig_atomic_t g_defer = 0;       // the command is not our child and not found yet
volatile sig_atomic_t g_pending = 0;     // bit n: signal n waits for the command to be found
volatile sig_atomic_t g_forwarded = 0;   // bit n: signal n was forwarded
volatile sig_atomic_t g_winch_from = -1; // with a pty: SIGWINCH copies this terminal's size...
volatile sig_atomic_t g_winch_to = -1;   // ...to the pty's master (which signals its foreground job)
volatile sig_atomic_t g_wake = -1;       // with a pty: SIGCONT writes here (the loop re-checks the foreground)
volatile sig_atomic_t g_sentinel = -1;   // the sentinel's socket (see start_sentinel), -1: none
volatile sig_atomic_t g_pgrp = 0;        // our process group, the command's too (with a sentinel)

// The sentinel (issue 15). Without a pty the command stays in our process
// group, so a signal sent to the group (kill(-pgrp), kill(0) from inside,
// Ctrl-C with --no-pty, a service manager's) reaches it from the kernel: it
// must not be forwarded once more. The kernel's siginfo for kill(pid) and
// kill(-pgrp) is the same (SI_USER, the sender's pid), so the group's view
// is asked of a process of ours that is in the group too and is signalled by
// nothing else: forked here, no exec, every signal blocked, it only answers,
// for a signal number, whether that signal is pending for it (and takes it).
// The kernel queues a group signal to the group's members newest first
// (attach_pid adds at the head of the group's list; __kill_pgrp_info walks
// it under tasklist_lock), and the sentinel is younger than we are, so it
// holds the signal before our handler can run; the handler still asks once
// more after a short pause rather than trust that order blindly.
#if defined(__linux__)
[[maybe_unused]] void sentinel_main(int fd) {
    for (;;) {
        unsigned char s = 0;
        const ssize_t n = ::read(fd, &s, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n != 1) ::_exit(0);
        sigset_t one;
        sigemptyset(&one);
        if (s > 0 && s < 32 && s != SIGKILL && s != SIGSTOP) sigaddset(&one, s);
        const timespec zero{0, 0};
        const unsigned char held = ::sigtimedwait(&one, nullptr, &zero) == s ? 1 : 0;
        if (::write(fd, &held, 1) != 1) ::_exit(0);
    }
}

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
// A fork costs about 1.2 ms of CPU here (the page tables of a VM guest), more
// than issue 15's budget for the whole forwarder: the sentinel shares our
// memory instead (CLONE_VM, its own small stack, its own descriptor table and
// signal state). Sharing our memory and our thread pointer, it must not touch
// errno or anything else of libc's: raw system calls only.
long raw_syscall(long n, long a, long b, long c, long d) {
#if defined(__x86_64__)
    long r;
    register long r10 asm("r10") = d;
    asm volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return r;
#else
    register long x8 asm("x8") = n;
    register long x0 asm("x0") = a;
    register long x1 asm("x1") = b;
    register long x2 asm("x2") = c;
    register long x3 asm("x3") = d;
    asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#endif
}

struct SentinelArgs {
    int fd;
    pid_t parent;
};
alignas(64) unsigned char g_sentinel_stack[16384];
SentinelArgs g_sentinel_args;

[[gnu::noinline, gnu::no_stack_protector]] int sentinel_thread(void* arg) {
    const SentinelArgs a = *static_cast<SentinelArgs*>(arg);
    (void)raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0);
    if (raw_syscall(SYS_getppid, 0, 0, 0, 0) != a.parent) raw_syscall(SYS_exit, 0, 0, 0, 0);
    // Nothing of ours held open (a pipe's reader waits for its EOF).
    if (a.fd > 0) (void)raw_syscall(436 /* close_range */, 0, static_cast<long>(a.fd) - 1, 0, 0);
    (void)raw_syscall(436 /* close_range */, static_cast<long>(a.fd) + 1, ~0U, 0, 0);
    for (;;) {
        unsigned char s = 0;
        const long n = raw_syscall(SYS_read, a.fd, reinterpret_cast<long>(&s), 1, 0);
        if (n == -EINTR) continue;
        if (n != 1) break;
        unsigned long one = (s > 0 && s < 32 && s != SIGKILL && s != SIGSTOP) ? 1UL << (s - 1) : 0;
        struct {
            long sec, nsec;
        } zero{0, 0};
        const long got = one ? raw_syscall(SYS_rt_sigtimedwait, reinterpret_cast<long>(&one), 0,
                                           reinterpret_cast<long>(&zero), 8)
                             : -1;
        unsigned char held = got == s ? 1 : 0;
        if (raw_syscall(SYS_write, a.fd, reinterpret_cast<long>(&held), 1, 0) != 1) break;
    }
    raw_syscall(SYS_exit, 0, 0, 0, 0);
    return 0;
}
#endif

// Starts the sentinel; returns its pid (-1: none) and our end of its socket.
pid_t start_sentinel(int& fd) {
    fd = -1;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
    const pid_t parent = ::getpid();
    sigset_t all, old;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &old);
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
    g_sentinel_args = {sv[1], parent};
    const pid_t pid = ::clone(sentinel_thread, g_sentinel_stack + sizeof g_sentinel_stack, CLONE_VM | SIGCHLD,
                              &g_sentinel_args);
#else
    const pid_t pid = ::fork();
    if (pid == 0) {
#if defined(__linux__)
        (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
#endif
        if (::getppid() != parent || ::dup2(sv[1], 0) != 0) ::_exit(0);
        for (int f = 1; f < 1024; ++f) ::close(f);
        sentinel_main(0);
    }
#endif
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::close(sv[1]);
    if (pid < 0) {
        ::close(sv[0]);
        return -1;
    }
    fd = sv[0];
    return pid;
}

// Whether `sig` is pending in the sentinel (taken if so).
bool sentinel_holds(int fd, int sig) {
    unsigned char s = static_cast<unsigned char>(sig), held = 0;
    if (::send(fd, &s, 1, MSG_NOSIGNAL) != 1) return false;
    ssize_t n;
    while ((n = ::recv(fd, &held, 1, 0)) < 0 && errno == EINTR) {
    }
    return n == 1 && held == 1;
}

// Was this delivery of `sig` sent to our process group? (Called in the
// handler, with the forwarded signals blocked.)
bool sent_to_group(int sig, const siginfo_t* si) {
    const int fd = g_sentinel;
    if (fd < 0) return false;
    if (sentinel_holds(fd, sig)) return true;
    // A sender in our own group (timeout(1) sends kill(child) and then
    // kill(0)) is given up to 50 ms for the group's copy: the command gets
    // that one from the kernel, and this one is not forwarded on top (sudo
    // relays nothing from the command's group; a script's `cmd & kill $!`
    // needs it relayed, so only the pause). 10 ms was too short on a loaded
    // machine: the command got both and ran its trap twice. Anyone else: one
    // more look.
    bool in_group = false;
    if (si != nullptr && si->si_code == SI_USER && si->si_pid > 0) in_group = ::getpgid(si->si_pid) == g_pgrp;
    const int rounds = in_group ? 100 : 1;
    for (int i = 0; i < rounds; ++i) {
        const timespec pause{0, in_group ? 500000L : 200000L};
        ::nanosleep(&pause, nullptr);
        if (sentinel_holds(fd, sig)) {
            // This delivery was the direct one; the group's copy for us is
            // queued (or about to be, in the same kill): take it too, so it
            // is not judged on its own once the sentinel no longer holds it.
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, sig);
            const timespec bound{0, 50000000L};
            (void)::sigtimedwait(&one, nullptr, &bound);
            return true;
        }
    }
    return false;
}

#else
// Elsewhere (macOS) no sentinel: sigtimedwait is Linux's. A signal sent to
// the whole group reaches the command from the kernel and once more
// forwarded there (docs/PLATFORMS.md).
pid_t start_sentinel(int& fd) {
    fd = -1;
    return -1;
}
bool sent_to_group(int, const siginfo_t*) { return false; }
#endif

int send_to_target(int pidfd, int sig) {
#if defined(__linux__)
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
    (void)pidfd, (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}

// Sends `sig` where the command is: its pidfd, else its pid alone (no
// pidfd_open here), else our child; counted when sent. Async-signal-safe.
void deliver(int sig) {
    const int target = g_target;
    const pid_t by_pid = g_target_pid;
    const pid_t child = g_child;
    const int r = target >= 0   ? send_to_target(target, sig)
                  : by_pid > 0  ? ::kill(by_pid, sig)
                  : child > 0   ? ::kill(child, sig)
                                : -1;
    if (r == 0) g_forwarded = g_forwarded | (1 << sig);
}

void forward(int sig, siginfo_t* si, void*) {
    const int saved = errno;
    // Sent to our process group, which the command shares (a terminal's
    // Ctrl-C, Ctrl-\, hang-up and resize, si_code SI_KERNEL, always is): it
    // has the signal already, forwarding would deliver it twice. Not found
    // yet (bwrap starting, the forwarded signals still ignored there): sent
    // once it is.
    if (g_same_group) {
        const bool group = sent_to_group(sig, si)
#if defined(SI_KERNEL)
                           || (si != nullptr && si->si_code == SI_KERNEL)
#endif
            ;
        if (group) {
            if (g_defer && g_target < 0) g_pending = g_pending | (1 << sig);
            errno = saved;
            return;
        }
    }
    if (sig == SIGWINCH && g_winch_to >= 0) {
        struct winsize ws {};
        if (::ioctl(g_winch_from, TIOCGWINSZ, &ws) == 0) (void)::ioctl(g_winch_to, TIOCSWINSZ, &ws);
        errno = saved;
        return;
    }
    // Until the command is found (its target published, g_defer cleared, all
    // with signals blocked) a signal waits.
    if (g_defer) g_pending = g_pending | (1 << sig);
    else deliver(sig);
    errno = saved;
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
            if (write_whole(out, std::string_view(buf, static_cast<size_t>(n))) != 0) {
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

// The marker lines: the seed's own texts, as they are (errors go through
// report_failure, like every other error of the program).
void say(const std::string& line) {
    std::string l = line + "\n";
    (void)write_whole(STDERR_FILENO, l);
}

// A signal's name beside its number (issue 42): "SIGKILL", as kill -l
// spells it with the prefix; a number with no name here (a real-time
// signal) is "SIG" and the number, e.g. "SIG34".
std::string signal_name(int sig) {
    static constexpr std::pair<int, const char*> kNames[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},     {SIGQUIT, "SIGQUIT"},   {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},   {SIGBUS, "SIGBUS"},     {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},   {SIGSEGV, "SIGSEGV"},   {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},   {SIGTERM, "SIGTERM"},   {SIGCHLD, "SIGCHLD"},
        {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},   {SIGTSTP, "SIGTSTP"},   {SIGTTIN, "SIGTTIN"},
        {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},     {SIGXCPU, "SIGXCPU"},   {SIGXFSZ, "SIGXFSZ"},
        {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
        {SIGSYS, "SIGSYS"},
#ifdef SIGSTKFLT
        {SIGSTKFLT, "SIGSTKFLT"},
#endif
#ifdef SIGPWR
        {SIGPWR, "SIGPWR"},
#endif
    };
    for (const auto& [n, name] : kNames)
        if (n == sig) return name;
    return "SIG" + std::to_string(sig);
}

ordered_json result_record(const Plan& l, std::optional<int> exit_code, std::optional<int> signal,
                           const Classification& c, double duration_ms, int forwarded, bool captured,
                           const char* evidence, std::optional<int> descendants_killed, const char* limit) {
    ordered_json j;
    j["type"] = "result";
    j["version"] = 1;
    j["mode"] = to_string(l.c.policy.mode);
    j["runner"] = to_string(l.c.runner);
    j["exitCode"] = exit_code ? ordered_json(*exit_code) : ordered_json(nullptr);
    j["signal"] = signal ? ordered_json(*signal) : ordered_json(nullptr);
    j["signalName"] = signal ? ordered_json(signal_name(*signal)) : ordered_json(nullptr);
    // Which limit ended the command (issue 21), where it can be known.
    j["limit"] = limit ? ordered_json(limit) : ordered_json(nullptr);
    j["denied"] = c.denied;
    j["networkDenied"] = c.network_denied;
    j["runnerFailed"] = c.runner_failed;
    j["runnerFailure"] = c.runner_failure ? ordered_json(*c.runner_failure) : ordered_json(nullptr);
    j["durationMs"] = static_cast<double>(static_cast<long long>(duration_ms * 1000.0)) / 1000.0;
    ordered_json fw = ordered_json::array(), names = ordered_json::array();
    for (int s = 1; s < 32; ++s)
        if (forwarded & (1 << s)) {
            fw.push_back(s);
            names.push_back(signal_name(s));
        }
    j["forwardedSignals"] = std::move(fw);
    j["forwardedSignalNames"] = std::move(names);
    j["stderrCaptured"] = captured;
    j["evidence"] = evidence;
    // How many processes the command left running were killed at its exit
    // (null: not counted here, e.g. a runner's PID namespace ended them).
    j["descendantsKilled"] = descendants_killed ? ordered_json(*descendants_killed) : ordered_json(nullptr);
    return j;
}

void wake(int) {
    const int saved = errno;
    const char b = 0;
    if (g_wake >= 0) (void)!::write(g_wake, &b, 1);
    errno = saved;
}

// Dies by `sig` as the command did, so that the caller (a shell) sees what
// it would have seen for the command itself; no core file of ours.
void die_by(int sig) {
    struct rlimit none {0, 0};
    ::setrlimit(RLIMIT_CORE, &none);
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
}

}  // namespace

bool needs_parent(const Plan& p, bool pty) {
    // A timeout or a cgroup leaf needs someone to keep the clock and clean up.
    if (p.watch || p.c.limits.needs_parent()) return true;
    if (p.relay_fd >= 0) return true;  // --net allow=: the proxy lives in the parent
    return pty && p.c.policy.mode != Mode::DangerFullAccess && terminal::any_std_terminal();
}

int supervise(Plan& p, const Report& report, const SuperviseOptions& opts) {
    const bool confined = p.c.policy.mode != Mode::DangerFullAccess;
    // The carve-outs' integrity check (issue 18): the protected set before
    // the command starts and after it ends; a change is a violation.
    carveouts::Fingerprint carve_before =
        opts.forwarder || p.late_walk ? carveouts::Fingerprint{} : carveouts::fingerprint(p.c.policy);
    Watch* watch = p.watch.get();
    // stderr: a terminal stays a terminal (the command may ask isatty, set
    // modes, draw), so it is inherited and only out-of-band evidence is
    // used. Anything else is replaced by a pipe that the parent relays byte
    // for byte while keeping the tail. When stdout is the same stream
    // (`2>&1`), both go through the one pipe so that their order is kept.
    // The forwarder captures nothing.
    const bool capture = confined && !opts.forwarder && !::isatty(STDERR_FILENO);
    const bool combined = capture && same_stream(STDOUT_FILENO, STDERR_FILENO);

    auto failed = [&](const Outcome& o) { return report_failure(report, o); };
    // A walk left for later (Plan::late_walk) is made after the spawn, for a stage that waits for it.
    if (p.late_walk && !watch) return failed(fail(Err::Internal, "the carve-outs were left for a stage that is not there"));
    auto internal = [&](const char* what) { return failed(failf(Err::Internal, "{}: {}", what, std::strerror(errno))); };
    int exec_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    if (spawn::cloexec_pipe(exec_pipe) != 0 || (capture && spawn::cloexec_pipe(err_pipe) != 0)) return internal("pipe");
    if (watch)
        if (auto o = watch->arm(p); !o) return failed(o);
    // A terminal on fds 0-2: the command gets a pty of its own instead.
    terminal::Relay tty;
    if (opts.pty && confined) {
        if (auto o = tty.open(); !o) return failed(o);
        if (tty.active() && p.in_process) p.in_process->allow_terminal(tty.slave_path());
        // A runner's sandbox with a devpts of its own (bwrap): the command's
        // pty is made there, and its master comes to the relay (issue 42).
        if (tty.active() && watch)
            if (const int channel = watch->own_pty(p); channel >= 0) tty.inside(channel);
    }
    int wake_pipe[2] = {-1, -1};
    if (tty.active() && spawn::cloexec_pipe(wake_pipe) != 0) return internal("pipe");
    // The limits' cgroup leaf (the child joins it first), or, for a timeout
    // without one, this process as the subreaper of the command's tree.
    const limits::Plan& lim = p.c.limits;
    limits::Leaf leaf;
    if (lim.leaf) {
        std::string why;
        if (!leaf.make(lim, why)) return failed(fail(Err::LimitUnavailable, limit_text(LimitText::LeafFailed, why)));
        for (size_t i = 0; i < limits::kMaxLeaves; ++i) p.cgroup_procs_fds[i] = leaf.procs_fds()[i];
    }
    // The caller's dispositions of the forwarded signals, read once: for the
    // shield below, the handlers, and to put back when the run is over.
    constexpr size_t kN = sizeof kForwarded / sizeof kForwarded[0];
    struct sigaction old_act[kN];
    for (size_t i = 0; i < kN; ++i) {
        old_act[i] = {};
        ::sigaction(kForwarded[i], nullptr, &old_act[i]);
    }
    // A runner's program in our group (no pty) that must not die of a group
    // signal starts with those ignored; its stage learns which the caller
    // ignored itself. Before the entry: it changes the runner's argv.
    bool shielded = false;
    if (!tty.active() && watch) {
        unsigned caller_ignored = 0;
        for (size_t i = 0; i < kN; ++i)
            if (old_act[i].sa_handler == SIG_IGN) caller_ignored |= 1u << kForwarded[i];
        shielded = watch->shield(p, caller_ignored);
    }
    // A runner that becomes the command (Landlock), under this parent: the
    // command in PID and mount namespaces of its own, whose init is our child
    // (with a pty, our child's: the pty session's leader stays out here with
    // the pty's agent; spawn.hpp, Child::pid_ns), so that its end ends every
    // process of the run at once, however fast they fork (issue 38); a
    // subreaper's kill loop can be outrun. chain::settle_descendants chose
    // it; where the kernel refuses the namespaces the subreaper does it, and
    // the record (made below) says so.
#if defined(__linux__)
    bool pid_ns = !watch && p.in_process && p.c.descendants.by == "pid-namespace";
    // Not root: a user namespace too, with the caller's ids mapped to
    // themselves (netns's maps: the same for its network namespace).
    const netns::Plan ids = pid_ns ? netns::make_plan() : netns::Plan{};
    // With a pty the namespaces are made by our child, past the point where
    // a refusal could still be taken back: asked of the kernel first.
    if (pid_ns && tty.active() && !spawn::pid_ns_allowed(ids.user)) pid_ns = false;
#else
    const bool pid_ns = false;
#endif
    if (!pid_ns && !watch && p.in_process && p.c.descendants.by == "pid-namespace") p.c.descendants.by = "subreaper";
    int status_pipe[2] = {-1, -1};
    if (pid_ns && spawn::cloexec_pipe(status_pipe) != 0) return internal("pipe");
    // Everything the child does is made here, before it exists.
    Entry entry;
    if (auto o = prepare_entry(p, report, nullptr, {exec_pipe[1]}, entry); !o)
        return failed(o);
    // Late, the record is written once the carve-outs are in it (Watch::go), not by the child.
    if (p.late_walk) entry.record.clear();

    // Signals to forward are blocked across the spawn: one that arrives
    // before the child's pid is known stays pending and is forwarded right
    // after. A signal the caller ignores stays ignored (the command inherits
    // that, as nohup expects) and is not forwarded.
    sigset_t block, old_mask;
    sigemptyset(&block);
    for (int s : kForwarded) sigaddset(&block, s);
    ::sigprocmask(SIG_BLOCK, &block, &old_mask);
    int reset[kN + 1];
    struct sigaction reset_act[kN + 1];
    int n_reset = 0;
    bool installed[kN] = {};
    // With a pty the command has the pty's session; without, it stays in
    // ours, and the sentinel tells a signal sent to the group from one sent
    // to us alone. Forked before the child, with the forwarded signals
    // already blocked: a group signal from here on is pending in it too.
    const bool own_group = tty.active();
    g_same_group = own_group ? 0 : 1;
    int sentinel_fd = -1;
    pid_t sentinel = -1;
    if (!own_group) {
        sentinel = start_sentinel(sentinel_fd);
        g_pgrp = ::getpgrp();
        g_sentinel = sentinel_fd;
    }
    // Killed and reaped: it shares our memory (and so our command line), and
    // nothing of the run may outlive us.
    auto end_sentinel = [&]() {
        if (sentinel <= 0) return;
        sigset_t all, before;
        sigfillset(&all);
        ::sigprocmask(SIG_BLOCK, &all, &before);
        g_sentinel = -1;
        ::sigprocmask(SIG_SETMASK, &before, nullptr);
        ::close(sentinel_fd);
        ::kill(sentinel, SIGKILL);
        while (::waitpid(sentinel, nullptr, 0) < 0 && errno == EINTR) {
        }
        sentinel = -1;
    };
    if (tty.active()) {
        g_winch_from = tty.user();
        g_winch_to = tty.master();
        g_wake = wake_pipe[1];
        ::fcntl(wake_pipe[0], F_SETFL, ::fcntl(wake_pipe[0], F_GETFL) | O_NONBLOCK);
        ::fcntl(wake_pipe[1], F_SETFL, ::fcntl(wake_pipe[1], F_GETFL) | O_NONBLOCK);
    }
    struct sigaction old_cont {};
    if (tty.active()) {
        struct sigaction sa {};
        sa.sa_handler = wake;
        sa.sa_flags = SA_RESTART;
        ::sigaction(SIGCONT, &sa, &old_cont);
    }
    g_defer = watch ? 1 : 0;
    for (size_t i = 0; i < kN; ++i) {
        if (old_act[i].sa_handler == SIG_IGN) continue;
        struct sigaction sa {};
        sa.sa_sigaction = forward;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sa.sa_mask = block;
        ::sigaction(kForwarded[i], &sa, nullptr);
        installed[i] = true;
        reset[n_reset] = kForwarded[i];
        reset_act[n_reset++] = old_act[i];
    }
    auto restore_signals = [&]() {
        for (size_t i = 0; i < kN; ++i)
            if (installed[i]) ::sigaction(kForwarded[i], &old_act[i], nullptr);
        if (tty.active()) ::sigaction(SIGCONT, &old_cont, nullptr);
        g_winch_to = -1;
        g_wake = -1;
        end_sentinel();
    };
    if (shielded)
        for (int k = 0; k < n_reset; ++k)
            if (reset[k] != SIGWINCH) {
                reset_act[k] = {};
                reset_act[k].sa_handler = SIG_IGN;
            }

    // The command starts with the caller's mask and dispositions.
    entry.exec_mask = &old_mask;
    spawn::Child child;
    child.enter = &enter;
    child.enter_data = &entry;
    child.fault_fd = exec_pipe[1];
    child.pdeathsig = SIGKILL;
    child.exec_is_runner = p.exec_is_runner;
    // A pty: the command's session, its controlling terminal on the std fds
    // that were the user's terminal. Otherwise the child stays in our process
    // group (a runner's program shielded above, the sentinel beside it).
    if (tty.active()) {
        child.terminal_fd = tty.slave();
        child.terminal_on = tty.slave_on();
        // A runner that becomes the command (Landlock, seatbelt) gets a
        // monitor leading the pty's session, so Ctrl-Z stops the command;
        // bwrap's init is that process under bwrap.
        child.monitor = watch == nullptr;
        // The pty's agent, which moves the pty's foreground as the user's
        // terminal's moves (terminal.hpp).
        child.agent_fd = tty.agent_end();
    }
    if (capture) {
        child.stderr_fd = err_pipe[1];
        if (combined) child.stdout_fd = err_pipe[1];
    }
    // SIGCONT is ours only with a pty; the child gets the caller's.
    if (tty.active()) {
        reset[n_reset] = SIGCONT;
        reset_act[n_reset++] = old_cont;
    }
    child.reset_signals = reset;
    child.reset_actions = reset_act;
    child.n_reset = n_reset;
    // Processes the command leaves running come to us when their parent
    // ends, and are ended with the command (chain::settle_descendants).
    // A timeout without a leaf ends the tree the same way, so it needs the
    // orphans too.
    bool subreaper = p.c.descendants.by == "subreaper";
    bool reaper = subreaper || lim.timeout_by_tree;
    if (reaper && !proctree::become_subreaper()) {
        restore_signals();
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        return internal("prctl(PR_SET_CHILD_SUBREAPER)");
    }
    tty.go_raw();
    child.start_behind = tty.start_behind();
#if defined(__linux__)
    if (pid_ns) {
        child.pid_ns = true;
        child.ns_user = ids.user;
        child.uid_map = ids.uid_map;
        child.gid_map = ids.gid_map;
        child.status_fd = status_pipe[1];
    }
#endif
    const double start = spawn::now_ms();
    pid_t pid = spawn::start(child);
    if (pid < 0 && pid_ns) {
        // The kernel refuses the namespaces here: the subreaper instead,
        // and the record (made before the spawn) says so.
        p.c.descendants.by = "subreaper";
        subreaper = reaper = true;
        child.pid_ns = false;
        ::close(status_pipe[0]);
        ::close(status_pipe[1]);
        status_pipe[0] = status_pipe[1] = -1;
        entry = Entry{};
        Outcome o = proctree::become_subreaper() ? prepare_entry(p, report, nullptr, {exec_pipe[1]}, entry)
                                                 : failf(Err::Internal, "prctl(PR_SET_CHILD_SUBREAPER): {}", std::strerror(errno));
        if (!o) {
            restore_signals();
            ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
            return failed(o);
        }
        entry.exec_mask = &old_mask;
        pid = spawn::start(child);
    }
    if (pid < 0) {
        const int e = errno;
        restore_signals();
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        errno = e;
        return internal("fork");
    }
    g_child = pid;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    // A stderr reader that went away must not kill the supervisor (and with
    // it, by PDEATHSIG, the command).
    ::signal(SIGPIPE, SIG_IGN);

    ::close(exec_pipe[1]);
    if (status_pipe[1] >= 0) ::close(status_pipe[1]);
    Stderr err;
    if (capture) {
        ::close(err_pipe[1]);
        err.fd = err_pipe[0];
        err.out = combined ? STDOUT_FILENO : STDERR_FILENO;
        ::fcntl(err.fd, F_SETFL, ::fcntl(err.fd, F_GETFL) | O_NONBLOCK);
    }
    if (watch) watch->spawned();
    tty.spawned(pid);
    if (!watch) tty.command_known();
    // --net allow= (issue 19): the stage's end of the relay is its alone now,
    // so that a stage that fails before handing the listener out is an EOF here.
    if (p.relay_child_fd >= 0) {
        ::close(p.relay_child_fd);
        p.relay_child_fd = -1;
    }
    // The carve-outs walked while bwrap builds the sandbox (about 4 ms; the
    // walk a few hundred microseconds), with the stage waiting for them
    // before anything of the command runs: fingerprinted for the integrity
    // check before the stage may go on. A walk that fails (a link planted
    // in a protected place) halts the waiting stage, which ends, and bwrap
    // with it; the run fails as it would have before the spawn.
    std::optional<Outcome> late_failure;
    if (p.late_walk) {
        Outcome o = chain::walk_now(p);
        if (o && !opts.forwarder) carve_before = carveouts::fingerprint(p.c.policy);
        if (o) o = watch->go(p, report.fd() >= 0);
        if (!o) {
            late_failure = o;
            watch->halt();
        }
    }
#if defined(__linux__)
    std::unique_ptr<net::ProxyLoop> proxy;
    auto start_proxy = [&]() {
        int listener = -1;
        uint16_t port = 0;
        const bool got = net::receive_listener(p.relay_fd, 0, listener, port);
        ::close(p.relay_fd);
        p.relay_fd = -1;
        if (!got || !p.c.policy.net_allow) {
            if (listener >= 0) ::close(listener);
            return;  // the stage failed: it says why itself, and the command never ran
        }
        net::ProxyOptions o;
        o.rules = *p.c.policy.net_allow;
        o.own = net::own_addresses();
        if (const char* h = ::getenv("DSH_CONFINE_NET_HOSTS")) o.hosts_file = h;
        o.record = [&report](const ordered_json& j) { (void)report.write(j); };
        proxy = std::make_unique<net::ProxyLoop>(listener, std::move(o));
    };
#endif
    int exec_fd = exec_pipe[0];
    ::fcntl(exec_fd, F_SETFL, ::fcntl(exec_fd, F_GETFL) | O_NONBLOCK);
    const int pidfd = spawn::pidfd_open(pid);

    bool looking = watch != nullptr;  // the command is not our child and not found yet
    pid_t command_pid = 0;            // ...and once found, its pid
    auto find_command = [&]() {
        const int fd = watch->find_command(command_pid);
        if (fd == -1) return;
        looking = false;
        tty.command_known();
        // Publish where signals go, with signals blocked: the command's
        // pidfd; without one (a kernel or seccomp profile refusing
        // pidfd_open) its pid where it is known, else our child (deliver).
        // Then send what waited.
        ::sigprocmask(SIG_BLOCK, &block, nullptr);
        if (fd >= 0) g_target = fd;
        else if (command_pid > 0) g_target_pid = command_pid;
        g_defer = 0;
        const int pending = g_pending;
        g_pending = 0;
        ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
        for (int s = 1; s < 32; ++s)
            if (pending & (1 << s)) deliver(s);
    };

    int status = 0;
    bool reaped = false;
    // The timeout: SIGTERM to the command's processes at the deadline, then
    // SIGKILL to everything it started after --kill-after.
    int phase = 0;  // 0: running; 1: SIGTERM sent; 2: SIGKILL sent
    bool timed_out = false;
    double next_at = lim.timeout_ms ? start + static_cast<double>(*lim.timeout_ms) : 0;
    // Every process of the run ended, or named in `left` (issue 38).
    std::set<long> killed_pids, left_pids;
    auto kill_all = [&]() {
        if (leaf.active()) (void)leaf.kill();
        proctree::End e = proctree::end_all(pid);
        killed_pids.insert(e.killed.begin(), e.killed.end());
        left_pids = std::set<long>(e.left.begin(), e.left.end());
    };
    // The pty's job: the command, whose group is in front of its pty.
    // With a PID namespace the command's parent is its init, the monitor's
    // only child; the command is the init's first child, seen alone.
    pid_t ns_init = 0, ns_command = 0;
    auto only_child = [](pid_t of) -> pid_t {
        const std::vector<long> kids = proctree::children(of);
        return kids.size() == 1 ? static_cast<pid_t>(kids[0]) : 0;
    };
    auto pty_job = [&]() -> pid_t {
        // The monitor: our child, or the stage that leads the pty it made (bwrap).
        const pid_t mon = child.monitor ? pid : tty.inside_leader();
        if (mon <= 0) return watch ? command_pid : pid;
        if (child.pid_ns && !ns_init && !(ns_init = only_child(pid))) return 0;
        const pid_t parent = child.pid_ns ? ns_init : mon;
        // The command is that parent's child, in front of the pty (else, the
        // pty's agent in front, its first child: the command).
        const pid_t fg = ::tcgetpgrp(tty.master());
        if (fg > 0 && proctree::stat_of(fg).ppid == parent) return fg;
        if (fg <= 0 || fg == mon || fg == tty.agent_pid()) {
            if (!child.pid_ns) return only_child(mon);
            if (!ns_command) ns_command = only_child(ns_init);
            return ns_command;
        }
        return 0;
    };
    while (!reaped) {
        int timeout = -1;
        if (looking) find_command();
        if (lim.timeout_ms && phase < 2) {
            double now = spawn::now_ms();
            if (now >= next_at) {
                timed_out = true;
                // The timeout signals every process below us: not the sentinel.
                end_sentinel();
                // Not the runner's own processes, nor the monitor of a pty a
                // runner's stage made (it relays to the command).
                const int spared = watch ? watch->runner_depth() + (tty.inside_leader() ? 1 : 0)
                                   : child.pid_ns ? (child.monitor ? 2 : 1)
                                                  : 0;
                if (phase == 0 && proctree::signal_all(SIGTERM, spared) > 0) {
                    phase = 1;
                    next_at = now + static_cast<double>(lim.kill_after_ms);
                } else {
                    kill_all();
                    phase = 2;
                }
            }
            if (phase < 2) {
                const double left = next_at - spawn::now_ms();
                const int ms = left <= 0 ? 0 : static_cast<int>(left) + 1;
                timeout = timeout < 0 || ms < timeout ? ms : timeout;
            }
        }
        // The exec pipe is not watched: its EOF at exec would cost a wake-up
        // (issue 8), and a child that fails writes its Fault and exits, so
        // it is read once the child is reaped.
        // relay, proxy, stderr, pty input, master, terminal output, wake, pty channel, first master, watch, child
        pollfd fds[11];
        int n = 0, i_err = -1, i_watch = -1, i_pid = -1, i_in = -1, i_master = -1, i_out = -1, i_wake = -1;
        int i_chan = -1, i_first = -1;
#if defined(__linux__)
        int i_relay = -1, i_proxy = -1;  // the allow-list's relay and proxy (Linux only)
        if (p.relay_fd >= 0) fds[i_relay = n++] = {p.relay_fd, POLLIN, 0};
        if (proxy) fds[i_proxy = n++] = {proxy->fd(), POLLIN, 0};
#endif
        if (err.fd >= 0) fds[i_err = n++] = {err.fd, POLLIN, 0};
        if (tty.active()) {
            if (tty.input_fd() >= 0) fds[i_in = n++] = {tty.input_fd(), POLLIN, 0};
            if (tty.master_events()) fds[i_master = n++] = {tty.master(), tty.master_events(), 0};
            if (tty.output_fd() >= 0) fds[i_out = n++] = {tty.output_fd(), POLLOUT, 0};
            fds[i_wake = n++] = {wake_pipe[0], POLLIN, 0};
            if (tty.channel() >= 0) fds[i_chan = n++] = {tty.channel(), POLLIN, 0};
            if (tty.first_master() >= 0) fds[i_first = n++] = {tty.first_master(), POLLIN, 0};
        }
        if (watch && watch->fd() >= 0) fds[i_watch = n++] = {watch->fd(), POLLIN, 0};
        if (pidfd >= 0) fds[i_pid = n++] = {pidfd, POLLIN, 0};
        if (n == 0) {
            // Nothing left to watch but the child itself (no pidfd: kernel < 5.3).
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            reaped = true;
            break;
        }
        // Without a pidfd the exit is noticed by polling waitpid.
        if (pidfd < 0) timeout = timeout < 0 ? 10 : timeout;
        // Orphans that ended are reaped at least once a second.
        if (reaper) timeout = timeout < 0 || timeout > 1000 ? 1000 : timeout;
        // Is the pty's job stopping (Ctrl-Z just typed, or a stop from elsewhere)?
        if (tty.active())
            if (const int w = tty.watch_ms(); w >= 0) timeout = timeout < 0 || timeout > w ? w : timeout;
        int r = ::poll(fds, static_cast<nfds_t>(n), timeout);
        // Taken now: what follows (/proc reads, tcgetpgrp) may change errno,
        // and a poll interrupted by a signal (SIGWINCH) must not read as failed.
        const bool poll_failed = r < 0 && errno != EINTR;
        if (reaper) proctree::reap_orphans(pid);
        // The pty follows the user's terminal's foreground; a stop followed
        // with a deadline pending ends by then at the latest, and at the
        // command's end.
        if (tty.active() && tty.tick()) {
            const pid_t command = pty_job();
            tty.follow_front(command);
            if (const pid_t job = tty.stopped_job(command))
                tty.follow_stop(job, command, lim.timeout_ms && phase < 2 ? next_at : 0, pidfd);
        }
        if (poll_failed) break;
        if (r > 0) {
            if (i_watch >= 0 && fds[i_watch].revents) watch->readable();
#if defined(__linux__)
            if (i_relay >= 0 && fds[i_relay].revents) start_proxy();
            if (i_proxy >= 0 && fds[i_proxy].revents) proxy->step();
#endif
            if (i_err >= 0 && fds[i_err].revents) err.pump();
            if (i_out >= 0 && fds[i_out].revents) tty.output_ready();
            if (i_first >= 0 && fds[i_first].revents) tty.first_master_ready();
            if (i_master >= 0 && fds[i_master].revents) tty.master_ready(fds[i_master].revents);
            // The stage's pty: from now on the relay's (the window size too).
            if (i_chan >= 0 && fds[i_chan].revents && tty.adopt()) g_winch_to = tty.master();
            if (i_in >= 0 && fds[i_in].revents) tty.input_readable();
            if (i_wake >= 0 && fds[i_wake].revents) {
                char b[16];
                while (::read(wake_pipe[0], b, sizeof b) > 0) {
                }
                const pid_t command = pty_job();
                tty.follow_front(command);
                // A SIGCONT to our job continues a stopped command too, as it
                // would the bare command in that job: one stopped while we
                // were not in front (kill -STOP from elsewhere) did not stop
                // us, and the caller's shell continues its job as it ends.
                if (const pid_t job = tty.stopped_job(command)) (void)::kill(-job, SIGCONT);
            }
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
    // The namespace's init ended as it does (0), having written how the
    // command ended; an init ended otherwise (killed, or failed before the
    // command existed) is the status itself.
    if (status_pipe[0] >= 0) {
        int st = 0;
        if (::read(status_pipe[0], &st, sizeof st) == static_cast<ssize_t>(sizeof st) && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            status = st;
        ::close(status_pipe[0]);
    }
    const double duration = spawn::now_ms() - start;
    // The pty's agent is ours, not the command's: neither killed with its
    // processes nor counted.
    tty.end_agent();
    if (pidfd >= 0) ::close(pidfd);
#if defined(__linux__)
    proxy.reset();  // every connection of the command's closed with it
#endif
    if (p.relay_fd >= 0) {
        ::close(p.relay_fd);
        p.relay_fd = -1;
    }
    // What the command left running ends with it (chain::settle_descendants);
    // with a timeout or a leaf, always (issue 21; also what a subreaper does
    // not reach: bwrap's namespace).
    std::optional<int> descendants_killed;
    std::optional<std::vector<long>> descendants_left;
    // Ours, not the command's: neither killed with them nor counted (so
    // reaped first where the command's orphans are reaped and counted).
    end_sentinel();
    if (subreaper || lim.timeout_ms || leaf.active()) {
        killed_pids.clear();  // counted: what the command left running at its exit
        kill_all();
        if (subreaper) descendants_killed = static_cast<int>(killed_pids.size());
        descendants_left = std::vector<long>(left_pids.begin(), left_pids.end());
        // Never claimed as ended: named, in the report and on stderr.
        if (!left_pids.empty()) {
            std::string line = "dsh-confine: " + std::to_string(left_pids.size()) +
                               " process(es) of the command could not be ended within " +
                               std::to_string(static_cast<int>(proctree::kEndBudgetMs / 1000)) + " s:";
            for (long l : left_pids) line += " " + std::to_string(l);
            say(line);
            (void)report.write(ordered_json{{"type", "gap"},
                                            {"version", 1},
                                            {"gap", "descendants-left"},
                                            {"pids", *descendants_left},
                                            {"why", "still running when the end-of-run kill gave up"}});
        }
    }
    // The user's terminal back as it was, the pty hung up.
    tty.finish();
    // The child is gone: what it (and a runner's sandbox) wrote is in the
    // pipes. Take what is there without waiting for an EOF that a lingering
    // holder could delay; stderr up to one pipe's capacity (anything beyond
    // was written after the exit, by a grandchild).
    Fault fault;
    const ssize_t got = ::read(exec_fd, &fault, sizeof fault);
    ::close(exec_fd);
    // The command started (its child did not fail before the exec): the
    // --writable directories made for it stay.
    if (got != static_cast<ssize_t>(sizeof fault)) roots::keep_made();
    if (err.fd >= 0) {
        int cap = ::fcntl(err.fd, F_GETPIPE_SZ);
        err.pump(cap > 0 ? static_cast<size_t>(cap) : kTail);
        err.close();
    }
    ::sigprocmask(SIG_BLOCK, &block, nullptr);
    restore_signals();
    const int target = g_target;
    g_target = -1;
    g_target_pid = 0;
    g_child = 0;
    g_defer = 0;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    const int forwarded = g_forwarded;
    if (wake_pipe[0] >= 0) ::close(wake_pipe[0]), ::close(wake_pipe[1]);

    // The command's own status where the runner's watch can tell it.
    if (watch) watch->ended(target, status);
    if (target >= 0) ::close(target);
    std::optional<int> exit_code, signal;
    if (WIFEXITED(status)) exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) signal = WTERMSIG(status);
    const std::string tail = err.final_tail();
    const char* limit = nullptr;
    {
        const auto planned = [&](const char* name) {
            for (const auto& l : lim.limits)
                if (l.name == name) return true;
            return false;
        };
        const bool failed_run = (exit_code && *exit_code != 0) || signal;
        if (timed_out) limit = "timeout";
        else if (leaf.active() && leaf.oom_killed()) limit = "memory";
        else if (signal && *signal == SIGXCPU && planned("cpu")) limit = "cpu";
        else if (signal && *signal == SIGXFSZ && planned("file-size")) limit = "file-size";
        else if (failed_run && leaf.active() && leaf.pids_refused()) limit = "pids";
    }
    // The leaf is empty now (killed above): removed.
    (void)leaf.remove();
    // Nothing of the command ran: the walk's failure is the run's, as said before a spawn.
    if (late_failure) return failed(*late_failure);

    // The child never reached exec: its own record of why.
    std::optional<Outcome> setup;
    if (got == static_cast<ssize_t>(sizeof fault)) setup = entry_failure(p, fault);

    Classification c;
    const char* evidence = "none";
    if (setup) {
        evidence = "exec-pipe";
        if (setup->err == Err::SandboxUnavailable) {
            c.runner_failed = true;
            c.runner_failure = setup->runner_failure;
        }
    } else if (confined && watch) {
        c = watch->classify(p, exit_code, tail, evidence);
    } else if (confined && p.in_process) {
        // The layers are applied by this program itself, so the exec pipe is
        // the whole truth about runner failure.
        evidence = "exec-pipe";
        c = classify({}, p.c.denial_signatures, exit_code, tail);
    } else if (confined) {
        evidence = "stderr";
        c = classify(rules_from_json(p.c.runner_failure_rules), p.c.denial_signatures, exit_code, tail);
    }
    // A network refusal is its own fact: never the file denial, never when
    // the runner failed (issue 38).
    if (confined && !setup && !c.runner_failed)
        c.network_denied = is_denial(exit_code, tail, p.c.network.denial_signatures);

    // Protected names absent at the start that the run made (bwrap, which
    // could mount nothing there without a file on the host): moved aside
    // now that nothing of the run is alive, in both modes.
    const ordered_json violations =
        opts.forwarder ? ordered_json::array() : carveouts::violations(carve_before, carveouts::fingerprint(p.c.policy));
    const ordered_json quarantined = carveouts::quarantine_created(p.c.policy, run_id());
    {
        size_t moved = 0;
        std::vector<std::string> stuck;
        for (const auto& q : quarantined) {
            if (q["movedTo"].is_null()) stuck.push_back(q["path"].get<std::string>());
            else ++moved;
        }
        if (moved) say(protected_quarantined_text(moved));
        if (!stuck.empty()) say(protected_stuck_text(stuck));
    }
    // A write refused by a protected path (issue 42: `git remote add` and
    // .git/config's EBUSY) names the path and the flag that lifts it. Only a
    // path the policy binds read-only, only where the command's stderr passed
    // through here (not a terminal's, not exec mode's).
    if (capture && !c.runner_failed && p.c.policy.mode == Mode::WorkspaceWrite) {
        std::vector<std::string> bound;
        for (const auto& pp : p.c.policy.protected_paths)
            if (pp.enforced == "read-only-bind") bound.push_back(pp.path);
        char here[4096];
        const std::string cwd = ::getcwd(here, sizeof here) ? std::string(here) : std::string();
        if (auto refused = protected_refusal(bound, cwd, tail)) say(protected_refused_text(*refused));
    }
    if (!opts.forwarder) {
        ordered_json rr = result_record(p, exit_code, signal, c, duration, forwarded, capture, evidence,
                                        descendants_killed, limit);
        rr["descendantsLeft"] = descendants_left ? ordered_json(*descendants_left) : ordered_json(nullptr);
        rr["violations"] = violations;
        if (!violations.empty()) say(protected_changed_text(violations.size()));
        rr["quarantined"] = quarantined;
        (void)report.write(rr);
    }

    // What the next unconfined program would read was changed: a record of
    // its own and a status of its own, in both modes (issue 37), whatever the
    // command's status or a timeout (a failed set-up's 125 below still wins).
    const bool tampered = !quarantined.empty() || (!opts.forwarder && !violations.empty());
    if (tampered)
        (void)report.write(ordered_json{{"type", "integrity"}, {"version", 1}, {"quarantined", quarantined},
                                        {"violations", violations}});

    int rc = exit_code ? *exit_code : (signal ? 128 + *signal : 125);
    // A timeout's status is timeout(1)'s, in both modes.
    if (timed_out) rc = kTimeoutStatus;
    if (tampered) rc = carveouts::kIntegrityStatus;
    if (setup || c.runner_failed) {
        Outcome o = setup ? *setup : unavailable(to_string(p.c.policy.mode), c.runner_failure.value_or(""));
        // In exec mode a failure the runner's own process reported (bwrap's
        // stage) is not said twice, as before there was a parent.
        if (!(opts.forwarder && !setup && c.reported)) (void)report_failure(report, o);
        rc = o.exit_status();
    } else if (opts.forwarder && signal && !timed_out && !tampered) {
        die_by(*signal);
    }
    if (opts.markers && confined) {
        const std::string mode(to_string(p.c.policy.mode));
        if (c.runner_failed) {
            say(runner_failure_marker(mode));
        } else {
            if (c.denied) {
                say(denial_marker(mode));
                if (opts.escalation_advertised) say(escalation_hint("command"));
            }
            if (c.network_denied) {
                const std::string net(p.c.policy.net_allow ? std::string_view("allow") : to_string(p.c.policy.network));
                say(network_denial_marker(net));
                say(network_hint(net, opts.escalation_advertised));
            }
        }
    }
    return rc;
}

}  // namespace dsh
