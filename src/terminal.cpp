#include "terminal.hpp"

#include "errors.hpp"

#include <algorithm>
#include <optional>
#include <vector>
#include <cerrno>
#include <iterator>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ctime>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "spawn.hpp"
#if defined(__linux__)
#include "linux/fd_pass.hpp"
#endif

namespace dsh::terminal {

namespace {

// How often a stop of the command is looked for when nothing was typed.
constexpr double kLookMs = 200;
// The pty's output held for a terminal that does not take it: beyond, the
// relay stops reading the pty and the command's writes wait, as they would
// on the bare terminal.
constexpr size_t kOutCap = 64 * 1024;
// At the end: how long a terminal that takes nothing is waited for before
// the rest of the output is dropped, and how long answers to the command's
// last queries are waited for.
constexpr double kStallMs = 500;
constexpr double kAnswerMs = 1000;

// The same terminal device?
bool same_tty(int a, int b) {
    struct stat sa {}, sb {};
    return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && S_ISCHR(sa.st_mode) && sa.st_rdev == sb.st_rdev;
}

// Terminal calls that would stop a background process (SIGTTOU) are made with
// SIGTTOU blocked: the kernel then lets them through.
struct HoldTtou {
    sigset_t old;
    explicit HoldTtou(int sig = SIGTTOU) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        ::sigprocmask(SIG_BLOCK, &s, &old);
    }
    ~HoldTtou() { ::sigprocmask(SIG_SETMASK, &old, nullptr); }
};

// A process outside our process group that sends us SIGCONT at `at`
// (spawn::now_ms()'s clock, 0: never) or when `pidfd` (the command's
// process, -1: none) says it ended: a stop of our group (ours, mirroring the
// command's) then never outlasts the deadline nor holds the end-of-run kill.
// It runs only async-signal-safe calls, with every signal blocked, and dies
// with us (PDEATHSIG on Linux; elsewhere it checks that we are still its
// parent). -1: not started.
pid_t wake_at(double at, int pidfd) {
    if (at <= 0 && pidfd < 0) return -1;
    const pid_t parent = ::getpid();
    sigset_t all, old;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &old);
    const pid_t w = ::fork();
    if (w == 0) {
#if defined(__linux__)
        (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (::getppid() != parent) ::_exit(0);
        (void)::setpgid(0, 0);
        for (;;) {
            timespec now {};
            ::clock_gettime(CLOCK_MONOTONIC, &now);
            const double left =
                at > 0 ? at - (static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6) : 1000;
            if (left <= 0) break;
            pollfd pfd{pidfd, POLLIN, 0};
            if (::poll(&pfd, pidfd >= 0 ? 1 : 0, static_cast<int>(left > 1000 ? 1000 : left) + 1) > 0) break;
            if (::getppid() != parent) ::_exit(0);
        }
        // Again until we are continued (and end it): one that came just
        // before our own stop took effect would have been undone by it.
        for (;;) {
            (void)::kill(parent, SIGCONT);
            timespec d {0, 20 * 1000 * 1000};
            (void)::nanosleep(&d, nullptr);
            if (::getppid() != parent) ::_exit(0);
        }
    }
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    // Out of our group before we stop it (set on both sides, as shells do).
    if (w > 0) (void)::setpgid(w, w);
    return w;
}

bool same_termios(const struct termios& a, const struct termios& b) {
    return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag && a.c_lflag == b.c_lflag &&
           std::equal(std::begin(a.c_cc), std::end(a.c_cc), std::begin(b.c_cc)) &&
           ::cfgetispeed(&a) == ::cfgetispeed(&b) && ::cfgetospeed(&a) == ::cfgetospeed(&b);
}

}  // namespace

bool any_std_terminal() noexcept { return ::isatty(0) || ::isatty(1) || ::isatty(2); }

namespace {
bool g_relayed = true;
}  // namespace

void set_relayed(bool on) noexcept { g_relayed = on; }
bool relayed() noexcept { return g_relayed; }

bool std_terminal_behind() noexcept {
    for (int fd = 0; fd < 3; ++fd) {
        const pid_t fg = ::tcgetpgrp(fd);
        if (fg > 0) return fg != ::getpgrp();
    }
    return false;
}

Relay::~Relay() {
    if (raw_) restore();  // a failure between going raw and the child's start
    shared_nonblock(false);
    if (own_out_ && out_nb_ >= 0) ::close(out_nb_);
    if (slave_ >= 0) ::close(slave_);
    if (master_ >= 0) ::close(master_);
    if (own_in_ && in_ >= 0) ::close(in_);
    if (agent_child_ >= 0) ::close(agent_child_);
    end_agent();
    if (channel_ >= 0) ::close(channel_);
    if (first_master_ >= 0) ::close(first_master_);
}

Outcome Relay::open() {
    bool tty[3];
    for (int i = 0; i < 3; ++i) {
        tty[i] = ::isatty(i);
        if (tty[i] && user_ < 0) user_ = i;
    }
    if (user_ < 0) return Outcome::success();
    // The std fds on that same terminal get the slave; one on another
    // terminal (rare) is passed through as it is.
    for (int i = 0; i < 3; ++i)
        if (tty[i] && same_tty(i, user_)) on_ |= 1u << i;
    auto failed = [](int e) { return fault_outcome(Fault{Step::Pty, e, -1}); };
    const int m = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0) return failed(errno);
    master_ = m;
    if (::grantpt(m) != 0 || ::unlockpt(m) != 0) return failed(errno);
    char name[128];
    if (::ptsname_r(m, name, sizeof name) != 0) return failed(errno);
    slave_ = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave_ < 0) return failed(errno);
    slave_path_ = name;
    // The command starts with the user's modes and window size.
    if (::tcgetattr(user_, &orig_) == 0) {
        saved_ = true;
        (void)::tcsetattr(slave_, TCSANOW, &orig_);
    }
    if (::ioctl(user_, TIOCGETD, &ldisc_) != 0) ldisc_ = -1;
    struct winsize ws {};
    if (::ioctl(user_, TIOCGWINSZ, &ws) == 0) (void)::ioctl(slave_, TIOCSWINSZ, &ws);
    // Typed input: fd 0 when it is this terminal; otherwise (input from a
    // pipe, output to the terminal: `x | less`) the controlling terminal when
    // it is this one, as the command's /dev/tty would have been.
    if (on_ & 1u) {
        in_ = 0;
    } else {
        const int t = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (t >= 0 && same_tty(t, user_)) {
            in_ = t;
            own_in_ = true;
        } else if (t >= 0) {
            ::close(t);
        }
    }
    out_ = (on_ & 2u) ? 1 : (on_ & 4u) ? 2 : (in_ >= 0 ? in_ : user_);
    ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
    // The pty's agent's socket (none: the pty does not follow the user's
    // terminal's foreground, as before issue 42).
    int sv[2];
    // socketpair, then close-on-exec (macOS has no SOCK_CLOEXEC; no other
    // thread of ours can exec in between).
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
        (void)::fcntl(sv[0], F_SETFD, FD_CLOEXEC);
        (void)::fcntl(sv[1], F_SETFD, FD_CLOEXEC);
        agent_ = sv[0];
        agent_child_ = sv[1];
        // An agent that does not answer (stopped from elsewhere) never holds
        // the loop that keeps the deadline: after 3 s it is ended.
        const timeval bound{3, 0};
        (void)::setsockopt(agent_, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
        (void)::setsockopt(agent_, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
    }
    // The output is written without blocking, on an open of the terminal of
    // our own: O_NONBLOCK on out_'s description would be the caller's
    // shell's too. Where the terminal cannot be opened again, out_'s own
    // description is non-blocking while the relay runs (not while stopped).
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", out_);
    int o = ::open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (o < 0 && ::ttyname_r(out_, name, sizeof name) == 0) o = ::open(name, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (o >= 0 && same_tty(o, out_)) {
        out_nb_ = o;
        own_out_ = true;
    } else {
        if (o >= 0) ::close(o);
        out_nb_ = out_;
        out_flags_ = ::fcntl(out_, F_GETFL);
        shared_nonblock(true);
    }
    return Outcome::success();
}

bool Relay::foreground() const noexcept {
    const pid_t fg = ::tcgetpgrp(user_);
    return fg > 0 && fg == ::getpgrp();
}

void Relay::go_raw() {
    if (raw_ || !saved_ || !foreground()) return;
    struct termios raw = orig_;
    ::cfmakeraw(&raw);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    HoldTtou hold;
    if (::tcsetattr(user_, TCSADRAIN, &raw) == 0) raw_ = true;
}

void Relay::shared_nonblock(bool on) {
    if (own_out_ || out_flags_ < 0 || (out_flags_ & O_NONBLOCK)) return;
    (void)::fcntl(out_, F_SETFL, on ? out_flags_ | O_NONBLOCK : out_flags_);
}

bool Relay::start_behind() noexcept {
    behind_ = agent_child_ >= 0 && !foreground();
    return behind_;
}

void Relay::spawned(pid_t leader) {
    if (slave_ >= 0) ::close(slave_);
    slave_ = -1;
    if (agent_child_ >= 0) {
        ::close(agent_child_);
        agent_child_ = -1;
        // Its first word, its pid (EOF: the child failed before making it).
        spawn::AgentMsg hello{};
        ssize_t n;
        int waits = 0;  // the child may take a while on a loaded machine: 30 s at most
        while ((n = ::recv(agent_, &hello, sizeof hello, MSG_WAITALL)) < 0 &&
               (errno == EINTR || (errno == EAGAIN && ++waits < 10))) {
        }
        if (n == static_cast<ssize_t>(sizeof hello) && hello.op == 'p' && hello.pg > 0) {
            agent_pid_ = hello.pg;
        } else {
            ::close(agent_);
            agent_ = -1;
            behind_ = false;
        }
    }
    leader_ = leader;
    next_look_ = spawn::now_ms() + kLookMs;
}

void Relay::inside(int channel) {
    for (int* fd : {&agent_, &agent_child_}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
    }
    channel_ = channel;
}

namespace {

// /proc/PID/NAME read once into buf (size bytes with the NUL that ends
// it); false: gone or unreadable.
bool read_proc(pid_t pid, const char* name, char* buf, size_t size) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), name);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = ::read(fd, buf, size - 1);
    ::close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    return true;
}

// The pids process `pid` has in each pid namespace from ours down to its own
// (/proc/PID/status's NSpid); empty: unknown.
std::vector<pid_t> ns_pids(pid_t pid) {
    std::vector<pid_t> out;
    char buf[4096];
    if (!read_proc(pid, "status", buf, sizeof buf)) return out;
    const char* at = std::strstr(buf, "\nNSpid:");
    if (!at) return out;
    at += 7;
    while (*at && *at != '\n') {
        char* end = nullptr;
        const long v = std::strtol(at, &end, 10);
        if (end == at) break;
        out.push_back(static_cast<pid_t>(v));
        at = end;
    }
    return out;
}

}  // namespace

bool Relay::adopt() {
    const int ch = channel_;
    channel_ = -1;
    if (ch < 0) return false;
    spawn::AgentMsg m{};
    int fd = -1;
    pid_t leader = 0;
#if defined(__linux__)
    const ssize_t n = fdpass::receive(ch, &m, sizeof m, fd, &leader);
#else
    const ssize_t n = -1;
#endif
    if (n != static_cast<ssize_t>(sizeof m) || m.op != 'm' || fd < 0 || leader <= 0) {
        if (fd >= 0) ::close(fd);
        ::close(ch);  // the stage ended, or runs the command on this pty
        return false;
    }
    // What the first pty holds (the stage's messages before it) goes first.
    master_ready(POLLIN);
    first_master_ = master_;
    master_ = fd;
    ::fcntl(master_, F_SETFL, ::fcntl(master_, F_GETFL) | O_NONBLOCK);
    master_done_ = false;
    adopted_ = true;
    leader_ = leader;
    in_front_ = false;
    // The window as it is now (the stage copied the first pty's).
    struct winsize ws {};
    if (::ioctl(user_, TIOCGWINSZ, &ws) == 0) (void)::ioctl(master_, TIOCSWINSZ, &ws);
    // The agent's hello follows at once (the stage makes it next).
    const timeval bound{3, 0};
    (void)::setsockopt(ch, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    (void)::setsockopt(ch, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
    spawn::AgentMsg hello{};
    pid_t agent = 0;
    int none = -1;
#if defined(__linux__)
    const ssize_t h = fdpass::receive(ch, &hello, sizeof hello, none, &agent);
#else
    const ssize_t h = -1;
#endif
    if (none >= 0) ::close(none);
    const std::vector<pid_t> ids = h == static_cast<ssize_t>(sizeof hello) && hello.op == 'p' && agent > 0
                                       ? ns_pids(agent) : std::vector<pid_t>{};
    if (ids.empty()) {
        ::close(ch);
        return true;
    }
    agent_ = ch;
    agent_pid_ = agent;
    own_agent_ = false;
    agent_level_ = static_cast<int>(ids.size()) - 1;
    // Started behind (the stage was told so), the agent is in front of it.
    behind_ = ::tcgetpgrp(master_) == agent_pid_;
    return true;
}

void Relay::first_master_ready() {
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(first_master_, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) break;  // EIO: bwrap and its init are gone
        relay_out(buf, static_cast<size_t>(n));
    }
    ::close(first_master_);
    first_master_ = -1;
}

bool Relay::command_in_front() {
    if (!in_front_ && known_) {
        // 0: no session on the pty yet (the child has not taken it).
        const pid_t fg = ::tcgetpgrp(master_);
        in_front_ = leader_ > 0 && fg > 0 && fg != leader_;
    }
    return in_front_;
}

bool Relay::tick() {
    if (master_ < 0) return false;
    if (held_ && command_in_front()) held_ = false;
    const double now = spawn::now_ms();
    if (now < watch_until_) return true;
    if (now < next_look_) return false;
    next_look_ = now + kLookMs;
    return true;
}


int Relay::input_fd() const noexcept {
    // In the background the terminal is not ours to read (SIGTTIN); and
    // input waits while the pty has not taken what came before.
    if (in_ < 0 || input_done_ || !raw_ || held_ || !to_master_.empty()) return -1;
    return in_;
}

short Relay::master_events() const noexcept {
    if (master_ < 0 || master_done_) return 0;
    // Not read while the user's terminal has not taken what came before.
    return static_cast<short>((to_user_.size() < kOutCap ? POLLIN : 0) | (to_master_.empty() ? 0 : POLLOUT));
}

void Relay::input_readable() {
    // Read only while the terminal is ours to read. A stop followed in the
    // same wakeup (follow_stop) can leave us continued in the background by
    // the deadline's waker: a read there would stop us with SIGTTIN, with no
    // one left to wake us, and the deadline would never come (attack pass).
    if (input_fd() < 0 || !foreground()) return;
    if (!command_in_front()) {
        held_ = true;
        return;
    }
    char buf[4096];
    ssize_t n;
    {
        // Should the terminal change hands between the check and the read,
        // the read fails (EIO) instead of stopping us.
        HoldTtou hold(SIGTTIN);
        n = ::read(in_, buf, sizeof buf);
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EIO)) return;
    if (n <= 0) {
        input_done_ = true;  // hung up
        return;
    }
    to_master_.append(buf, static_cast<size_t>(n));
    flush_to_master();
    // Input came: the terminal answered what was asked before, or the user typed.
    query_ = false;
    da_ = 0;
    watch_until_ = spawn::now_ms() + 500;
}

int Relay::watch_ms() const noexcept {
    if (master_ < 0) return -1;
    if (held_) return 2;
    const double now = spawn::now_ms();
    if (now < watch_until_) return 25;
    return now >= next_look_ ? 0 : static_cast<int>(next_look_ - now) + 1;
}

namespace {

// The state of process `pid` (/proc/PID/stat's third field), 0: gone.
char state_of(pid_t pid) {
    if (pid <= 0) return 0;
    char buf[512];
    if (!read_proc(pid, "stat", buf, sizeof buf)) return 0;
    // "pid (comm) state ...": the state follows the last ')'.
    const char* close = std::strrchr(buf, ')');
    return close && close[1] == ' ' ? close[2] : 0;
}

}  // namespace

pid_t Relay::stopped_job(pid_t command) const noexcept {
    if (master_ < 0) return 0;
    const pid_t job = behind_ ? (job_ > 0 ? job_ : command) : ::tcgetpgrp(master_);
    if (job <= 0 || (!behind_ && job != command)) return 0;
    return state_of(job) == 'T' ? job : 0;
}

bool Relay::ask_agent(int op, pid_t pg, pid_t& answer) {
    if (agent_ < 0) return false;
    // A group is named to the agent by its pid in the agent's namespace.
    pid_t sent = pg;
    if (op == 'f' && agent_level_ > 0) {
        const std::vector<pid_t> ids = ns_pids(pg);
        if (static_cast<int>(ids.size()) <= agent_level_) return false;  // gone, or not of the sandbox
        sent = ids[static_cast<size_t>(agent_level_)];
    }
    const spawn::AgentMsg m{op, static_cast<int>(sent)};
    spawn::AgentMsg r{};
    ssize_t n;
    while ((n = ::send(agent_, &m, sizeof m, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    if (n == static_cast<ssize_t>(sizeof m))
        while ((n = ::recv(agent_, &r, sizeof r, MSG_WAITALL)) < 0 && errno == EINTR) {
        }
    if (n != static_cast<ssize_t>(sizeof r) || r.op != op) {
        end_agent();  // gone (killed with the run at a timeout): the pty no longer follows
        return false;
    }
    answer = op == 'f' && r.pg == sent ? pg : r.pg;
    return true;
}

void Relay::go_behind() {
    pid_t had = 0;
    // Again when something took the pty meanwhile (a shell run as the
    // command takes it back when its job stops; a stage told to start in
    // front a moment before we were found behind).
    if (behind_ && ::tcgetpgrp(master_) == agent_pid_) return;
    // Read here, in our namespace (the agent's answer is in its own).
    had = ::tcgetpgrp(master_);
    if (pid_t ignored = 0; !ask_agent('b', 0, ignored)) return;
    behind_ = true;
    // The job that was in front (not the agent, not the session's leader:
    // the command had not taken the pty yet).
    if (had > 0 && had != agent_pid_ && had != leader_) job_ = had;
    // A write behind stops the command as the user's terminal's `tostop`
    // would have stopped the bare command.
    struct termios u {}, m {};
    if (::tcgetattr(user_, &u) == 0 && ::tcgetattr(master_, &m) == 0 && (u.c_lflag & TOSTOP) != (m.c_lflag & TOSTOP)) {
        m.c_lflag = (m.c_lflag & ~static_cast<tcflag_t>(TOSTOP)) | (u.c_lflag & TOSTOP);
        (void)::tcsetattr(master_, TCSANOW, &m);
    }
}

bool Relay::come_front(pid_t command) {
    // Behind, or the command started behind (its stage was told so) and the
    // agent was not: the session's leader still in front of the pty.
    if (!behind_) {
        const pid_t fg = ::tcgetpgrp(master_);
        if (agent_ < 0 || command <= 0 || fg != leader_ || command == leader_) return true;
    }
    pid_t got = 0;
    bool ok = false;
    // The job that had the pty, else (gone, or none yet) the command's group.
    for (pid_t pg : {job_, command})
        if (pg > 0 && ask_agent('f', pg, got) && got == pg) {
            ok = true;
            break;
        }
    if (agent_ < 0) behind_ = false;  // no agent left: nothing holds the pty
    if (!ok) return false;            // the command is not there yet: at the next look
    // Back from behind: the modes the bare command would run with now are
    // the user's terminal's as its shell hands it over (found behind, they
    // were the shell's line editor's); they go to the pty, and are what the
    // end restores. A program that sets its own does so again on SIGCONT,
    // as it does on the bare terminal.
    if (behind_ && saved_) {
        struct termios now {};
        if (::tcgetattr(user_, &now) == 0) {
            orig_ = now;
            (void)::tcsetattr(master_, TCSANOW, &now);
        }
        struct winsize ws {};
        if (::ioctl(user_, TIOCGWINSZ, &ws) == 0) (void)::ioctl(master_, TIOCSWINSZ, &ws);
    }
    behind_ = false;
    job_ = 0;
    // Stopped on reading behind: continued now that its input is there, as
    // the shell's `fg` continues the bare command.
    if (state_of(got) == 'T') (void)::kill(-got, SIGCONT);
    return true;
}

void Relay::follow_front(pid_t command) {
    if (master_ < 0) return;
    if (!foreground()) {
        if (agent_ >= 0) go_behind();
        return;
    }
    if (come_front(command) || !behind_) go_raw();
}

void Relay::end_agent() {
    if (agent_ >= 0) ::close(agent_);
    agent_ = -1;
    // The stage's agent ends with its socket (or with the sandbox).
    if (agent_pid_ > 0 && own_agent_) {
        (void)::kill(agent_pid_, SIGKILL);
        while (::waitpid(agent_pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
    agent_pid_ = 0;
}

int Relay::stop_signal(pid_t job) const {
    // Behind, a job stops on reading (SIGTTIN), on setting its terminal's
    // modes (SIGTTOU), or on writing with tostop (SIGTTOU): the system call it
    // stopped in says which.
    char buf[64];
    if (!read_proc(job, "syscall", buf, sizeof buf)) return SIGTTIN;
    const long nr = std::strtol(buf, nullptr, 10);
#if defined(__x86_64__)
    const bool in_ioctl = nr == 16, writing = nr == 1 || nr == 18 || nr == 20;  // write, pwrite64, writev
#elif defined(__aarch64__)
    const bool in_ioctl = nr == 29, writing = nr == 64 || nr == 66 || nr == 68;  // write, writev, pwrite64
#else
    const bool in_ioctl = false, writing = false;
    (void)nr;
#endif
    struct termios m {};
    const bool tostop = ::tcgetattr(master_, &m) == 0 && (m.c_lflag & TOSTOP);
    return in_ioctl || (writing && tostop) ? SIGTTOU : SIGTTIN;
}

void Relay::follow_stop(pid_t job, pid_t command, double deadline, int pidfd) {
    watch_until_ = 0;
    const bool front = foreground();
    // Stopped in front of a pty that is behind (back in front a moment ago):
    // follow_front continues it. Not in front and no agent: not ours to stop,
    // the job waits for a SIGCONT from elsewhere.
    if (front == behind_) return;
    if (front) restore();
    const int sig = front ? SIGTSTP : stop_signal(job);
    shared_nonblock(false);
    // The deadline and the command's end are kept by a process that is not
    // stopped with us.
    const pid_t waker = wake_at(deadline, pidfd);
    // The terminal would have sent the signal to the bare command's process
    // group, which is ours: the caller's shell sees its job stopped.
    (void)::kill(0, sig);
    // Continued (fg, bg, the deadline or the command's end): the job goes on
    // too, in front of the pty if we are of the user's terminal.
    if (waker > 0) {
        (void)::kill(waker, SIGKILL);
        while (::waitpid(waker, nullptr, 0) < 0 && errno == EINTR) {
        }
    }
    shared_nonblock(true);
    follow_front(command);
    (void)::kill(-job, SIGCONT);
}

void Relay::flush_to_master() {
    while (!to_master_.empty()) {
        ssize_t w = ::write(master_, to_master_.data(), to_master_.size());
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w < 0 && errno != EAGAIN) to_master_.clear();
            return;
        }
        to_master_.erase(0, static_cast<size_t>(w));
    }
}

void Relay::master_ready(short revents) {
    if (revents & POLLOUT) flush_to_master();
    if (!(revents & (POLLIN | POLLHUP | POLLERR))) return;
    char buf[65536];
    while (to_user_.size() < kOutCap) {
        ssize_t n = ::read(master_, buf, std::min(sizeof buf, kOutCap - to_user_.size()));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            // EIO: no slave is open (the command closed its terminal): the
            // master is not polled again until the end.
            master_done_ = true;
            return;
        }
        relay_out(buf, static_cast<size_t>(n));
    }
}

void Relay::relay_out(const char* p, size_t n) {
    scan(p, n);
    to_user_.append(p, n);
    flush_to_user();
}

void Relay::flush_to_user() {
    if (to_user_.empty()) return;
    // In the background (not raw) a terminal with `tostop` would stop us on
    // a write (SIGTTOU): blocked, the kernel lets the write through.
    std::optional<HoldTtou> hold;
    if (!raw_) hold.emplace();
    size_t done = 0;
    while (done < to_user_.size()) {
        const ssize_t w = ::write(out_nb_, to_user_.data() + done, to_user_.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) break;
        if (w <= 0) {
            done = to_user_.size();  // the terminal is gone (EIO): nothing to wait for
            break;
        }
        done += static_cast<size_t>(w);
    }
    to_user_.erase(0, done);
}

void Relay::output_ready() { flush_to_user(); }

// Terminal queries: sequences a terminal answers with input. CSI ... n
// (status, cursor position), CSI ... c (device attributes), CSI 11-21 t
// (window reports), CSI ? ... $ p (modes), CSI > q (version), CSI ? u
// (keyboard flags), ESC Z, OSC ...?... (colours), DCS $q / +q (settings,
// capabilities), ENQ (answerback). Scanned across reads, byte by byte.
void Relay::scan(const char* p, size_t n) {
    enum : unsigned char { Ground, Escape, Csi, Osc, Dcs, StrEsc };
    auto asked = [&](bool da) {
        query_ = true;
        if (da) ++da_;
    };
    for (size_t i = 0; i < n; ++i) {
        const unsigned char c = static_cast<unsigned char>(p[i]);
        switch (esc_) {
        case Ground:
            if (c == 0x1b) esc_ = Escape;
            if (c == 0x05) asked(false);  // ENQ: the answerback string
            break;
        case Escape:
            esc_ = Ground;
            if (c == '[') {
                esc_ = Csi;
                csi_lead_ = csi_inter_ = 0;
                csi_num_ = 0;
                csi_first_ = true;
            } else if (c == ']' || c == 'P') {
                esc_ = c == ']' ? Osc : Dcs;
                str_query_ = false;
                str_len_ = 0;
                str_head_[0] = str_head_[1] = 0;
            } else if (c == 'Z') {
                asked(false);
            } else if (c == 0x1b) {
                esc_ = Escape;
            }
            break;
        case Csi:
            if (c >= 0x40 && c <= 0x7e) {
                esc_ = Ground;
                const bool lead_q = csi_lead_ == '?', lead_gt = csi_lead_ == '>';
                if (c == 'n' || (c == 'c' && !csi_inter_) || (c == 't' && csi_num_ >= 11 && csi_num_ <= 21) ||
                    (c == 'p' && csi_inter_ == '$') || (c == 'q' && lead_gt) || (c == 'u' && lead_q))
                    asked(c == 'c' && !csi_lead_);
            } else if (c >= 0x3c && c <= 0x3f && csi_first_ && !csi_lead_) {
                csi_lead_ = c;
            } else if (c >= 0x20 && c <= 0x2f) {
                csi_inter_ = c;
            } else if (c >= '0' && c <= '9') {
                if (csi_first_ && csi_num_ < 1000) csi_num_ = csi_num_ * 10 + (c - '0');
            } else if (c == ';' || c == ':') {
                csi_first_ = false;
            } else if (c == 0x1b) {
                esc_ = Escape;
            } else if (c == 0x18 || c == 0x1a) {
                esc_ = Ground;
            }
            break;
        case Osc:
        case Dcs:
            if (c == 0x07 || c == 0x1b || c == 0x18 || c == 0x1a) {
                if (str_query_) asked(false);
                esc_ = c == 0x1b ? StrEsc : Ground;
                break;
            }
            if (esc_ == Osc && c == '?') str_query_ = true;
            if (str_len_ < 2) str_head_[str_len_] = static_cast<char>(c);
            if (++str_len_ == 2 && esc_ == Dcs && (str_head_[0] == '$' || str_head_[0] == '+') && str_head_[1] == 'q')
                str_query_ = true;
            break;
        case StrEsc:
            // ESC \ ends the string (counted above); anything else starts anew.
            esc_ = Ground;
            if (c == 0x1b) esc_ = Escape;
            break;
        default:
            esc_ = Ground;
        }
    }
}

// The command asked the terminal something and ended before any input came:
// the answers are on their way to the caller's shell. The terminal answers
// in order, so a device-attributes query of ours (which every terminal
// answers) is answered after them: input is read and dropped until as many
// such answers as were asked, ours included, have come, or kAnswerMs.
void Relay::settle_answers() {
    static const char ask[] = "\x1b[c";
    to_user_.append(ask, sizeof ask - 1);
    flush_to_user();
    if (!to_user_.empty()) return;  // not taken: no answer will come either
    int want = da_ + 1;
    const double until = spawn::now_ms() + kAnswerMs;
    // A device-attributes answer: ESC [ ? params c.
    enum { Plain, Esc, Lb, Params } st = Plain;
    char buf[512];
    while (want > 0) {
        const double left = until - spawn::now_ms();
        if (left <= 0) break;
        pollfd pfd{in_, POLLIN, 0};
        const int r = ::poll(&pfd, 1, static_cast<int>(left) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        const ssize_t n = ::read(in_, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n && want > 0; ++i) {
            const char c = buf[i];
            if (c == 0x1b) st = Esc;
            else if (st == Esc) st = c == '[' ? Lb : Plain;
            else if (st == Lb) st = c == '?' ? Params : Plain;
            else if (st == Params && c == 'c') st = Plain, --want;
            else if (st == Params && !((c >= '0' && c <= '9') || c == ';')) st = Plain;
        }
    }
}

void Relay::finish() {
    if (master_ < 0) return;
    // The first pty's last words (bwrap's), before the command's.
    if (first_master_ >= 0) first_master_ready();
    // What the command wrote before it ended is in the pty (the kernel moves
    // it to the master side asynchronously): read until no slave is left
    // (EIO), or briefly while something left behind still holds one.
    // Written while the user's terminal takes it: a terminal that takes
    // nothing for kStallMs (stopped, not read) has the rest dropped.
    const double until = spawn::now_ms() + 500, give_up = spawn::now_ms() + 3000;
    double taken = spawn::now_ms();
    bool pty_open = true;
    char buf[65536];
    for (;;) {
        const double now = spawn::now_ms();
        if (pty_open && now >= until) pty_open = false;
        if (!to_user_.empty() && (now - taken >= kStallMs || now >= give_up)) {
            to_user_.clear();
            dropped_ = true;
        }
        if (!pty_open && to_user_.empty()) break;
        pollfd pfd[2];
        nfds_t n = 0;
        const bool room = pty_open && to_user_.size() < kOutCap;
        if (room) pfd[n++] = {master_, POLLIN, 0};
        if (!to_user_.empty()) pfd[n++] = {out_nb_, POLLOUT, 0};
        const int r = ::poll(pfd, n, 50);
        if (r < 0 && errno == EINTR) continue;  // a signal (SIGWINCH, SIGCHLD) is not the end
        if (r < 0) break;
        if (r == 0 && room) pty_open = false;   // quiet: something left behind holds the slave
        if (!to_user_.empty() && (r > 0 || !room)) {
            const size_t before = to_user_.size();
            flush_to_user();
            if (to_user_.size() != before) taken = spawn::now_ms();
        }
        if (room && r > 0 && pfd[0].revents) {
            const ssize_t got = ::read(master_, buf, std::min(sizeof buf, kOutCap - to_user_.size()));
            if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (got <= 0) {
                pty_open = false;  // EIO: no slave left
                continue;
            }
            if (to_user_.empty()) taken = spawn::now_ms();
            relay_out(buf, static_cast<size_t>(got));
        }
    }
    const bool front = foreground();
    if (query_ && raw_ && in_ >= 0 && front) settle_answers();
    restore();
    // What came in meanwhile is not the caller's shell's to read: answers to
    // the command's queries above all (and keys typed in the moments since
    // the command ended, which the bare command's shell would have had).
    if (front) {
        HoldTtou hold;
        (void)::tcflush(user_, TCIFLUSH);
    }
    shared_nonblock(false);
    // The hangup: a process left holding the slave gets SIGHUP (if it is
    // the session's) and EIO on every read and write from now on.
    ::close(master_);
    master_ = -1;
}

void Relay::restore() {
    if (user_ < 0) return;
    HoldTtou hold;
    // The user's terminal as it was found: modes and line discipline. The
    // command never had it (only the pty), but something that reached the
    // device by name is undone too.
    // Only in front: in the background the terminal's modes are the
    // foreground job's (the caller's shell editing a line).
    if (saved_ && (raw_ || foreground())) {
        struct termios now {};
        if (raw_ || (::tcgetattr(user_, &now) == 0 && !same_termios(now, orig_)))
            (void)::tcsetattr(user_, dropped_ ? TCSANOW : TCSADRAIN, &orig_);  // nothing drains a terminal that took nothing
        raw_ = false;
    }
    int ld = -1;
    if (ldisc_ >= 0 && ::ioctl(user_, TIOCGETD, &ld) == 0 && ld != ldisc_) (void)::ioctl(user_, TIOCSETD, &ldisc_);
}

}  // namespace dsh::terminal
