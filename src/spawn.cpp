#include "spawn.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

#include <fmt/format.h>

#if defined(__linux__)
#include "linux/netns.hpp"
#endif

namespace dsh::spawn {

namespace {

// Closes every fd from `first` up; close_range where the kernel has it.
void close_from(int first) noexcept {
#if defined(__linux__) && defined(SYS_close_range)
    if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0U) == 0) return;
#endif
    const long max = ::sysconf(_SC_OPEN_MAX);
    for (long fd = first; fd < (max > 0 ? max : 1024); ++fd) ::close(static_cast<int>(fd));
}

[[noreturn]] void child_fails(const Child& c, Fault f) noexcept {
    if (c.fault_fd >= 0) (void)!::write(c.fault_fd, &f, sizeof f);
    ::_exit(f.step == Step::Exec && c.exec_is_runner ? info(Err::SandboxUnavailable).exit_status
                                                     : info(fault_code(f)).exit_status);
}

// Closes every fd but `a` and `b`.
void close_all_but(int a, int b) noexcept {
    const int lo = a < b ? a : b, hi = a < b ? b : a;
    for (int fd = 0; fd < hi; ++fd)
        if (fd != lo) ::close(fd);
    close_from(hi + 1);
}

// The pty's agent (Child::agent_fd): a process of the pty's session, the only
// kind that may move the pty's foreground group; dsh-confine's child, with
// every signal blocked, holding nothing but the pty and its socket. It ends
// when the socket does (or with dsh-confine).
[[noreturn]] void pty_agent(int ctl, int tty, int sync_w, bool behind, pid_t parent) noexcept {
#if defined(__linux__)
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(0);
#else
    (void)parent;
#endif
    (void)::setpgid(0, 0);
    if (behind) (void)::tcsetpgrp(tty, ::getpid());
    const AgentMsg hello{'p', static_cast<int>(::getpid())};
    (void)!::write(ctl, &hello, sizeof hello);
    ::close(sync_w);
    close_all_but(ctl, tty);
    for (;;) {
        AgentMsg m{};
        const ssize_t n = ::read(ctl, &m, sizeof m);
        if (n < 0 && errno == EINTR) continue;
        if (n != static_cast<ssize_t>(sizeof m)) ::_exit(0);
        AgentMsg r{m.op, 0};
        if (m.op == 'b') {
            r.pg = static_cast<int>(::tcgetpgrp(tty));
            (void)::tcsetpgrp(tty, ::getpid());
        } else if (m.op == 'f') {
            r.pg = ::tcsetpgrp(tty, m.pg) == 0 ? m.pg : -errno;
        }
        if (::write(ctl, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) ::_exit(0);
    }
}

// Makes the agent, in our session (the pty's), as our parent's child, and
// waits until it is in its place (in front of the pty, when behind).
void start_agent(const Child& c, pid_t parent) noexcept {
    int sync[2];
    if (::pipe(sync) != 0) child_fails(c, Fault{Step::Ctty, errno, 0});
#if defined(__linux__)
    // A raw clone: nothing of libc's fork bookkeeping (we may share our parent's memory).
    const pid_t a = static_cast<pid_t>(::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0));
#else
    const pid_t a = ::fork();
#endif
    if (a < 0) child_fails(c, Fault{Step::Ctty, errno, 0});
    if (a == 0) {
        ::close(sync[0]);
        pty_agent(c.agent_fd, c.terminal_fd, sync[1], c.start_behind, parent);
    }
    ::close(sync[1]);
    char b;
    while (::read(sync[0], &b, 1) < 0 && errno == EINTR) {
    }
    ::close(sync[0]);
    ::close(c.agent_fd);
}

// The pty session's leader (Child::monitor): with every signal blocked, it
// relays what it is sent to the command, reaps it, and ends as it ended.
[[noreturn]] void monitor(pid_t command) noexcept {
    close_from(3);
    sigset_t all;
    sigfillset(&all);
    ::signal(SIGCHLD, SIG_DFL);  // a caller's SIG_IGN would reap the command for us
    for (;;) {
        int sig = 0;
        if (::sigwait(&all, &sig) != 0) continue;  // sigwait: macOS has no sigwaitinfo
        if (sig != SIGCHLD) {
            (void)::kill(command, sig);
            continue;
        }
        int st = 0;
        const pid_t r = ::waitpid(command, &st, WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR)) continue;  // stopped or continued: the relay follows that
        if (r < 0 || WIFEXITED(st)) ::_exit(r < 0 ? 125 : WEXITSTATUS(st));
        // Killed by a signal: die of the same one (no core file of ours).
        const int s = WTERMSIG(st);
        const rlimit none{0, 0};
        (void)::setrlimit(RLIMIT_CORE, &none);
        ::signal(s, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, s);
        (void)::kill(::getpid(), s);
        ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
        ::_exit(128 + s);
    }
}

#if defined(__linux__)
// The init of the command's PID namespace (Child::pid_ns), holding nothing
// but status_fd. Every signal is blocked (start) and taken here: one sent
// from outside the namespace (dsh-confine forwarding; si_pid reads 0 here)
// goes on to the command, one sent from inside is dropped (no process of the
// run can make this one do anything). It is in a process group of its own,
// so the caller's terminal and group signals reach the command alone.
[[noreturn]] void pid_ns_init(int status_fd, pid_t command) noexcept {
    close_all_but(status_fd, status_fd);
    (void)::setpgid(0, 0);
    ::signal(SIGCHLD, SIG_DFL);  // a caller's SIG_IGN would reap for us
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    for (;;) {
        // Reaped on every wake, and at least once a second: a SIGCHLD that
        // came while it was not blocked (the sanitizers' fork unblocks for a
        // moment) is discarded, and its child would wait as a zombie forever.
        siginfo_t si{};
        const timespec second{1, 0};
        if (::sigtimedwait(&all, &si, &second) > 0 && si.si_signo != SIGCHLD) {
            if (si.si_pid == 0 && si.si_code <= 0) (void)::kill(command, si.si_signo);
            continue;
        }
        for (;;) {
            int st = 0;
            const pid_t r = ::waitpid(-1, &st, WNOHANG);
            if (r <= 0) break;
            if (r != command) continue;  // an orphan of the run, reaped
            // A namespace's init cannot die of the command's signal (its
            // own kill is dropped): the status goes to dsh-confine instead.
            (void)!::write(status_fd, &st, sizeof st);
            ::_exit(0);
        }
    }
}

// In the child, first: the namespaces' setup, then the fork. Returns in the
// command; the init never returns.
void enter_pid_ns(const Child& c) noexcept {
    // Its end is the namespace's: it goes with dsh-confine, whatever the caller asked.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != 0)
        child_fails(c, Fault{Step::PdeathSig, errno, -1});
    if (Fault f; c.ns_user && !netns::write_id_maps(c.uid_map, c.gid_map, f)) child_fails(c, f);
    // A /proc that shows the run's processes by the pids they have here (ps,
    // pkill and kill agree, as under bwrap): mounted only where our mounts
    // are made private first, so that nothing reaches the host's.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0)
        (void)::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    const pid_t init = ::getpid();
    const pid_t command = ::fork();
    if (command < 0) child_fails(c, Fault{Step::PidNamespace, errno, -1});
    if (command > 0) pid_ns_init(c.status_fd, command);
    ::close(c.status_fd);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != init)
        child_fails(c, Fault{Step::PdeathSig, errno, -1});
}

int ns_flags(bool user) noexcept { return CLONE_NEWPID | CLONE_NEWNS | (user ? CLONE_NEWUSER : 0); }

// A fork into the new namespaces (raw: glibc's fork takes no flags): 0 in
// the child, its pid here, -1 with errno.
pid_t clone_into_pid_ns(const Child& c) noexcept {
    return static_cast<pid_t>(::syscall(SYS_clone, ns_flags(c.ns_user) | SIGCHLD, 0, 0, 0, 0));
}
#endif

[[noreturn]] void run_child(const Child& c, pid_t parent) noexcept {
    for (int i = 0; i < c.n_reset; ++i) ::sigaction(c.reset_signals[i], &c.reset_actions[i], nullptr);
#if defined(__linux__)
    if (c.pdeathsig) {
        if (::prctl(PR_SET_PDEATHSIG, c.pdeathsig, 0, 0, 0) != 0) child_fails(c, Fault{Step::PdeathSig, errno, -1});
        // The parent died before that took effect: nobody is left to
        // report to, and nothing must outlive it. (A namespace's init sees
        // its parent, outside, as pid 0.)
        if (::getppid() != (c.pid_ns && !c.monitor ? 0 : parent)) ::_exit(125);
    }
    if (c.pid_ns && !c.monitor) enter_pid_ns(c);
#else
    (void)parent;
#endif
    if (c.terminal) {
        const int tty = ::setsid() < 0 ? -1 : ::open(c.terminal, O_RDWR);
        if (tty < 0 || ::ioctl(tty, TIOCSCTTY, 0) != 0) child_fails(c, Fault{Step::Stdio, errno, 0});
        for (int i = 0; i < 3; ++i)
            if (::dup2(tty, i) < 0) child_fails(c, Fault{Step::Stdio, errno, i});
        if (tty > 2) ::close(tty);
    }
    if (c.terminal_fd >= 0) {
        if (::setsid() < 0 || ::ioctl(c.terminal_fd, TIOCSCTTY, 0) != 0) child_fails(c, Fault{Step::Ctty, errno, 0});
        if (c.agent_fd >= 0) start_agent(c, parent);
        for (int i = 0; i < 3; ++i)
            if ((c.terminal_on & (1u << i)) && ::dup2(c.terminal_fd, i) < 0) child_fails(c, Fault{Step::Stdio, errno, i});
        if (c.monitor && c.pid_ns) {
#if defined(__linux__)
            // The namespaces' init is the monitor's child, in the pty's
            // session (the agent, made above, stays out here with us: a
            // namespace's init cannot CLONE_PARENT); it forks the command.
            const pid_t init = clone_into_pid_ns(c);
            if (init < 0) child_fails(c, Fault{Step::PidNamespace, errno, -1});
            if (init > 0) monitor(init);
            enter_pid_ns(c);
            // The command, in a group of its own, in front of the pty unless
            // the agent is (dsh-confine started behind). Seen from here both
            // the leader's group and the agent's are 0 (outside).
            (void)::setpgid(0, 0);
            if (!c.start_behind && ::tcgetpgrp(c.terminal_fd) == 0) (void)::tcsetpgrp(c.terminal_fd, ::getpid());
#endif
        } else if (c.monitor) {
            const pid_t leader = ::getpid();
            const pid_t command = ::fork();  // every signal is still blocked (start)
            if (command < 0) child_fails(c, Fault{Step::Ctty, errno, 0});
            if (command > 0) {
                (void)::setpgid(command, command);
                // In front unless the agent is (dsh-confine started behind).
                if (::tcgetpgrp(c.terminal_fd) == leader) (void)::tcsetpgrp(c.terminal_fd, command);
                monitor(command);
            }
            // The command: in front of the pty, in a group of its own. Both
            // sides set both, so neither waits for the other.
            (void)::setpgid(0, 0);
            if (::tcgetpgrp(c.terminal_fd) == leader) (void)::tcsetpgrp(c.terminal_fd, ::getpid());
#if defined(__linux__)
            if (c.pdeathsig && ::prctl(PR_SET_PDEATHSIG, c.pdeathsig, 0, 0, 0) != 0)
                child_fails(c, Fault{Step::PdeathSig, errno, -1});
            if (::getppid() != leader) ::_exit(125);
#else
            (void)leader;
#endif
        }
    }
    if (c.new_group) (void)::setpgid(0, 0);
    const int std_fds[3] = {c.stdin_fd, c.stdout_fd, c.stderr_fd};
    for (int i = 0; i < 3; ++i)
        if (std_fds[i] >= 0 && ::dup2(std_fds[i], i) < 0) child_fails(c, Fault{Step::Stdio, errno, i});
    for (int i = 0; i < c.n_pass; ++i) {
        const int slot = 3 + i;
        if (c.pass_fds[i] == slot) ::fcntl(slot, F_SETFD, 0);
        else if (::dup2(c.pass_fds[i], slot) < 0) child_fails(c, Fault{Step::InheritFd, errno, slot});
    }
    if (c.close_others) close_from(3 + c.n_pass);
    if (c.cwd && ::chdir(c.cwd) != 0) child_fails(c, Fault{Step::Exec, errno, -1});
    Fault f{Step::Exec, 0, -1};
    if (c.enter) {
        c.enter(c.enter_data, f);
    } else {
        if (c.mask) ::sigprocmask(SIG_SETMASK, c.mask, nullptr);
        ::execve(c.path, c.argv, c.envp);
        f.err = errno;
    }
    child_fails(c, f);
}

long ms_since(double t0) { return static_cast<long>(now_ms() - t0); }

pid_t fork_child(const Child& c, pid_t parent) {
    const pid_t pid = ::fork();
    if (pid == 0) run_child(c, parent);
    return pid;
}

// gcc names its sanitizers with macros, clang with __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DSH_SPAWN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DSH_SPAWN_SANITIZED 1
#endif
#if defined(__linux__) && !defined(DSH_SPAWN_SANITIZED)
#define DSH_SPAWN_SHARES_MEMORY 1
// fork copies our page tables, about 1.2 ms of CPU on a VM guest, for a child
// that only sets up descriptors and execs: the child runs in our memory
// instead, on a stack of its own, while we wait (CLONE_VFORK) until it has
// exec'd or exited, as posix_spawn does. Everything run_child calls is a
// system call on what the parent prepared; nothing of ours runs beside it
// (we are single-threaded here: the proxy's resolver threads start later).
// Not with a monitor (its child forks again) nor under the sanitizers, whose
// bookkeeping does not expect a second process in the same memory.
struct CloneStart {
    const Child* child;
    pid_t parent;
};

int clone_entry(void* arg) {
    const auto* a = static_cast<const CloneStart*>(arg);
    run_child(*a->child, a->parent);
}

pid_t start_in_shared_memory(const Child& c, pid_t parent) {
    constexpr size_t kStack = 256 * 1024;
    void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return fork_child(c, parent);
    CloneStart a{&c, parent};
    const pid_t pid = ::clone(clone_entry, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    const int e = errno;
    ::munmap(stack, kStack);  // the child has exec'd or exited: the stack is ours again
    errno = e;
    return pid;
}
#endif

}  // namespace

int cloexec_pipe(int p[2]) noexcept {
#if defined(__linux__)
    return ::pipe2(p, O_CLOEXEC);
#else
    // No pipe2 (macOS): pipe, then close-on-exec, before any child exists.
    if (::pipe(p) != 0) return -1;
    if (::fcntl(p[0], F_SETFD, FD_CLOEXEC) == 0 && ::fcntl(p[1], F_SETFD, FD_CLOEXEC) == 0) return 0;
    const int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    errno = e;
    return -1;
#endif
}

bool pid_ns_allowed(bool user) noexcept {
#if defined(__linux__)
    // A child that only exits, in the namespaces a run would make.
    const pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, ns_flags(user) | SIGCHLD, 0, 0, 0, 0));
    if (pid == 0) ::_exit(0);
    if (pid < 0) return false;
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return true;
#else
    (void)user;
    return false;
#endif
}

int pidfd_open(pid_t pid) noexcept {
#if defined(__linux__)
    return static_cast<int>(::syscall(434 /* SYS_pidfd_open, the same on every architecture */, pid, 0U));
#else
    (void)pid;
    return -1;
#endif
}

double now_ms() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

[[gnu::hot]] std::vector<char*> c_array(const std::vector<std::string>& v) {
    std::vector<char*> a;
    a.reserve(v.size() + 1);
    for (const auto& s : v) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    return a;
}

pid_t start(const Child& c) {
    const pid_t parent = ::getpid();
    sigset_t all, old;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &old);
#if defined(__linux__)
    pid_t pid;
    if (c.pid_ns && !c.monitor) {
        pid = clone_into_pid_ns(c);
        if (pid == 0) run_child(c, parent);
    } else {
#if defined(DSH_SPAWN_SHARES_MEMORY)
        pid = c.monitor ? fork_child(c, parent) : start_in_shared_memory(c, parent);
#else
        pid = fork_child(c, parent);
#endif
    }
#elif defined(DSH_SPAWN_SHARES_MEMORY)
    const pid_t pid = c.monitor ? fork_child(c, parent) : start_in_shared_memory(c, parent);
#else
    const pid_t pid = fork_child(c, parent);
#endif
    const int e = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    errno = e;
    return pid;
}

void become(const Child& c) noexcept {
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, nullptr);
    run_child(c, ::getppid());
}

Result run_bounded(const std::string& path, const std::vector<std::string>& argv,
                   const std::vector<std::string>& env, int timeout_ms, int pass_fd, bool capture_stdout) {
    const double t0 = now_ms();
    Result r;
    auto args = c_array(argv);
    auto envp = c_array(env);
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    int errp[2] = {-1, -1}, outp[2] = {-1, -1};
    if (devnull < 0 || cloexec_pipe(errp) != 0 || (capture_stdout && cloexec_pipe(outp) != 0)) {
        r.error = fmt::format("cannot set up {}: {}", path, std::strerror(errno));
        for (int fd : {devnull, errp[0], errp[1], outp[0], outp[1]})
            if (fd >= 0) ::close(fd);
        return r;
    }
    Child c;
    c.path = path.c_str();
    c.argv = args.data();
    c.envp = envp.data();
    c.stdin_fd = devnull;
    c.stdout_fd = capture_stdout ? outp[1] : devnull;
    c.stderr_fd = errp[1];
    if (pass_fd >= 0) {
        c.pass_fds = &pass_fd;
        c.n_pass = 1;
    }
    c.close_others = true;
    // Its own process group, so that a hung child is killed with everything
    // it started (a fake bwrap that is a shell script, say).
    c.new_group = true;
    const pid_t pid = start(c);
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
    const int pidfd = pidfd_open(pid);
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

}  // namespace dsh::spawn
