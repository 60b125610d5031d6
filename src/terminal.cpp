#include "terminal.hpp"

#include "errors.hpp"

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spawn.hpp"

namespace dsh::terminal {

namespace {

// How often a stop of the command is looked for when nothing was typed.
constexpr double kLookMs = 200;

// The same terminal device?
bool same_tty(int a, int b) {
    struct stat sa {}, sb {};
    return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && S_ISCHR(sa.st_mode) && sa.st_rdev == sb.st_rdev;
}

// Terminal calls that would stop a background process (SIGTTOU) are made with
// SIGTTOU blocked: the kernel then lets them through.
struct HoldTtou {
    sigset_t old;
    HoldTtou() {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGTTOU);
        ::sigprocmask(SIG_BLOCK, &s, &old);
    }
    ~HoldTtou() { ::sigprocmask(SIG_SETMASK, &old, nullptr); }
};

bool same_termios(const struct termios& a, const struct termios& b) {
    return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag && a.c_lflag == b.c_lflag &&
           std::equal(std::begin(a.c_cc), std::end(a.c_cc), std::begin(b.c_cc)) &&
           ::cfgetispeed(&a) == ::cfgetispeed(&b) && ::cfgetospeed(&a) == ::cfgetospeed(&b);
}

}  // namespace

bool any_std_terminal() noexcept { return ::isatty(0) || ::isatty(1) || ::isatty(2); }

Relay::~Relay() {
    if (raw_) restore();  // a failure between going raw and the child's start
    if (slave_ >= 0) ::close(slave_);
    if (master_ >= 0) ::close(master_);
    if (own_in_ && in_ >= 0) ::close(in_);
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

void Relay::spawned(pid_t leader) {
    if (slave_ >= 0) ::close(slave_);
    slave_ = -1;
    leader_ = leader;
    next_look_ = spawn::now_ms() + kLookMs;
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

void Relay::resume() { go_raw(); }

int Relay::input_fd() const noexcept {
    // In the background the terminal is not ours to read (SIGTTIN); and
    // input waits while the pty has not taken what came before.
    if (in_ < 0 || input_done_ || !raw_ || held_ || !to_master_.empty()) return -1;
    return in_;
}

short Relay::master_events() const noexcept {
    if (master_ < 0 || master_done_) return 0;
    return static_cast<short>(POLLIN | (to_master_.empty() ? 0 : POLLOUT));
}

void Relay::input_readable() {
    if (!command_in_front()) {
        held_ = true;
        return;
    }
    char buf[4096];
    ssize_t n = ::read(in_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        input_done_ = true;  // hung up
        return;
    }
    to_master_.append(buf, static_cast<size_t>(n));
    flush_to_master();
    watch_until_ = spawn::now_ms() + 500;
}

int Relay::watch_ms() const noexcept {
    if (master_ < 0) return -1;
    if (held_) return 2;
    const double now = spawn::now_ms();
    if (now < watch_until_) return 25;
    return now >= next_look_ ? 0 : static_cast<int>(next_look_ - now) + 1;
}

bool Relay::command_stopped(pid_t command) const noexcept {
    if (master_ < 0 || command <= 0) return false;
    const pid_t job = ::tcgetpgrp(master_);
    if (job != command) return false;
    char path[64], buf[512];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(job));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    // "pid (comm) state ...": the state follows the last ')'.
    const char* close = std::strrchr(buf, ')');
    return close && close[1] == ' ' && close[2] == 'T';
}

void Relay::follow_stop(pid_t command) {
    watch_until_ = 0;
    if (!foreground()) return;  // not ours to stop: the job waits for a SIGCONT from elsewhere
    restore();
    // The terminal would have sent SIGTSTP to the bare command's process
    // group, which is ours: the caller's shell sees its job stopped.
    (void)::kill(0, SIGTSTP);
    // Continued (fg, or bg): the job goes on too, in raw mode if in front.
    go_raw();
    (void)::kill(-command, SIGCONT);
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
    for (;;) {
        ssize_t n = ::read(master_, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            // EIO: no slave is open (the command closed its terminal): the
            // master is not polled again until the end.
            master_done_ = true;
            return;
        }
        (void)write_whole(out_, std::string_view(buf, static_cast<size_t>(n)));
    }
}

void Relay::finish() {
    if (master_ < 0) return;
    // What the command wrote before it ended is in the pty (the kernel moves
    // it to the master side asynchronously): read until no slave is left
    // (EIO), or briefly while something left behind still holds one.
    const double until = spawn::now_ms() + 500;
    char buf[65536];
    while (spawn::now_ms() < until) {
        pollfd pfd{master_, POLLIN, 0};
        const int r = ::poll(&pfd, 1, 50);
        if (r < 0 && errno == EINTR) continue;  // a signal (SIGWINCH, SIGCHLD) is not the end
        if (r <= 0) break;
        ssize_t n = ::read(master_, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        (void)write_whole(out_, std::string_view(buf, static_cast<size_t>(n)));
    }
    restore();
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
    if (saved_) {
        struct termios now {};
        if (raw_ || (::tcgetattr(user_, &now) == 0 && !same_termios(now, orig_)))
            (void)::tcsetattr(user_, TCSADRAIN, &orig_);
        raw_ = false;
    }
    int ld = -1;
    if (ldisc_ >= 0 && ::ioctl(user_, TIOCGETD, &ld) == 0 && ld != ldisc_) (void)::ioctl(user_, TIOCSETD, &ldisc_);
}

}  // namespace dsh::terminal
