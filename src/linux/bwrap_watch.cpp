// Supervise's evidence for a bwrap run. Our child is bwrap, whose child
// (reported on --json-status-fd as "child-pid") is its PID-namespace init,
// whose child is our stage, which execs the command (same pid). bwrap does
// not forward signals (a SIGTERM kills bwrap, and --die-with-parent then
// SIGKILLs the command) and reports a death by signal n as exit 128+n. So the
// stage sends its own pidfd with its ready line, which supervise holds and
// signals, and the watch reads the command's exact wait status from it with
// PIDFD_GET_INFO / PIDFD_INFO_EXIT (6.15) once it is gone, even when bwrap's
// init reaped it at once. The line's credentials (SO_PASSCRED) give the
// stage's pid in our namespace from the kernel. Without the pidfd (a kernel
// or a seccomp profile that refuses pidfd_open) signals go to that pid, and
// bwrap's own status stands, as it does without PIDFD_INFO_EXIT.
//
// How a run ended, in the order the evidence is trusted:
// 1. the stage's mailbox (the launcher's memfd), sealed: a stage that failed
//    left its error record there (a structured record, never a message);
// 2. bwrap's status: no {"exit-code":..} means bwrap never exec'd the stage,
//    so bwrap itself failed (its own `bwrap: ` line says why);
// 3. otherwise the command ran, and only denials are read from stderr.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../report.hpp"
#include "../spawn.hpp"
#include "bwrap_plan.hpp"
#include "bwrap_runner.hpp"
#include "fd_pass.hpp"
#include "probe_cache.hpp"


namespace dsh::bwrap {

namespace {

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

// The stage's own failure (exit status 125: it could not confine itself), when
// it left its error record in a sealed mailbox. A record of the command's
// (126/127: the stage could not exec it) is the command's failure, not the
// runner's, as in exec mode.
std::optional<nlohmann::json> mailbox_error(int fd) {
    if (fd < 0) return std::nullopt;
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (static_cast<unsigned>(seals) & kMailboxSeals) != kMailboxSeals) return std::nullopt;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > 65536) return std::nullopt;
    // Left as it was (the launcher's record, sealed at the command's exec)
    // unless the stage wrote its error record there, which begins so: the
    // record is only parsed then.
    static constexpr char kHead[] = R"({"type":"error")";
    char head[sizeof kHead - 1];
    if (::pread(fd, head, sizeof head, 0) != static_cast<ssize_t>(sizeof head) ||
        std::memcmp(head, kHead, sizeof head) != 0)
        return std::nullopt;
    std::string text(static_cast<size_t>(st.st_size), '\0');
    if (::pread(fd, text.data(), text.size(), 0) != st.st_size) return std::nullopt;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "error" || j.value("exitStatus", 0) != 125) return std::nullopt;
    return j;
}

class BwrapWatch final : public Watch {
public:
    BwrapWatch(int record_fd, bool probe_cached) : record_fd_(record_fd), probe_cached_(probe_cached) {}
    Outcome arm(Plan& p) override {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) return failf(Err::Internal, "pipe2: {}", std::strerror(errno));
        read_.reset(fds[0]);
        write_.reset(fds[1]);
        add_json_status_fd(p.exec_argv, fds[1]);
        p.inherit_fds.push_back(fds[1]);
        // The stage says on a socket of its own when it is there to be
        // signalled (its caller's dispositions back), and sends its pidfd
        // with it: until then that socket alone is watched, one wake-up
        // instead of one for each of bwrap's status lines or a look in /proc
        // each millisecond.
        if (has_stage(p)) {
            // Our end takes the sender's credentials: the kernel's word for
            // the stage's pid (in our namespace), pidfd or not.
            const int on = 1;
            if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
                return failf(Err::Internal, "socketpair: {}", std::strerror(errno));
            if (::setsockopt(fds[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
                const int e = errno;
                ::close(fds[0]);
                ::close(fds[1]);
                return failf(Err::Internal, "setsockopt(SO_PASSCRED): {}", std::strerror(e));
            }
            ready_read_.reset(fds[0]);
            ready_write_.reset(fds[1]);
            staged_ = true;
            to_stage(p, {"--ready-fd", std::to_string(fds[1])});
            p.inherit_fds.push_back(fds[1]);
        }
        p.c.exec_argv = p.exec_argv;
        return Outcome::success();
    }

    // bwrap in the caller's process group: a group's SIGINT or SIGTERM would
    // kill bwrap, and with it the command by SIGKILL, before the command
    // could see the signal. bwrap starts with them ignored (bwrap sets no
    // handler; its init, pid 1 of the sandbox, drops what it does not
    // handle), and the stage puts the caller's dispositions back
    // (--caller-signals) before it execs the command.
    bool shield(Plan& p, unsigned caller_ignored) override {
        // No stage to give the caller's dispositions back: not shielded
        // (the command must never start with signals the caller did not ignore).
        if (!has_stage(p)) return false;
        to_stage(p, {"--caller-signals", std::to_string(caller_ignored)});
        p.c.exec_argv = p.exec_argv;
        return true;
    }
    // bwrap and its init (pid 1 of the sandbox) are the runner's; the stage is the command
    // (or, leading the command's pty, its monitor: supervise counts that level).
    int runner_depth() const noexcept override { return 2; }

    // The stage makes the command's pty from the sandbox's /dev/ptmx and
    // sends its master on this socket, then the pty's agent says hello on it
    // (Relay::adopt). Our end takes the senders' credentials: their pids in
    // our namespace.
    int own_pty(Plan& p) override {
        if (!has_stage(p)) return -1;
        int fds[2];
        const int on = 1;
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return -1;
        if (::setsockopt(fds[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
            ::close(fds[0]);
            ::close(fds[1]);
            return -1;
        }
        pty_write_.reset(fds[1]);
        to_stage(p, {"--pty-fd", std::to_string(fds[1])});
        p.c.exec_argv = p.exec_argv;
        p.inherit_fds.push_back(fds[1]);
        return fds[0];
    }

    // The stage waits on its ready socket (--carve-late): the carve-outs'
    // statuses settled, the record's line and the list written to the memfd
    // it reads them from, then the word. A stage gone by now (bwrap failed)
    // is not our failure: the loop reads bwrap's.
    Outcome go(Plan& p, bool record) override {
        if (!staged_ || !ready_read_) return fail(Err::Internal, "the bwrap stage has no ready socket to wait on");
        settle_carve_outs(p.c, true, true);
        std::string data;
        if (record || p.record_carries_argv)
            data = report_line(confinement_record(p.c));
        data += '\n';
        data += carve_list(p.c.policy);
        size_t done = 0;
        while (done < data.size()) {
            const ssize_t n = ::pwrite(record_fd_, data.data() + done, data.size() - done, static_cast<off_t>(done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return failf(Err::SandboxUnavailable, "cannot hand the carve-outs to the bwrap stage: {}",
                                     std::strerror(n < 0 ? errno : EIO));
            done += static_cast<size_t>(n);
        }
        ssize_t n;
        while ((n = ::send(ready_read_.get(), kStageGo, sizeof kStageGo - 1, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
        }
        if (n < 0 && errno != EPIPE && errno != ECONNRESET && errno != ECONNREFUSED)
            return failf(Err::SandboxUnavailable, "cannot tell the bwrap stage to go on: {}", std::strerror(errno));
        return Outcome::success();
    }

    // The stage reads the closed socket's EOF where it waits for the word, and exits 125.
    void halt() override { ready_read_.reset(); }

    void spawned() override {
        write_.reset();
        ready_write_.reset();
        pty_write_.reset();
        for (const Fd* f : {&read_, &ready_read_})
            if (*f) ::fcntl(f->get(), F_SETFL, ::fcntl(f->get(), F_GETFL) | O_NONBLOCK);
    }

    // The ready socket until the stage has spoken (or is gone), then bwrap's
    // status until the command is found. Then nothing: the rest of bwrap's
    // status (its "exit-code" line, just before it exits) would only wake us
    // once more on the way out, and ended() reads it.
    int fd() const noexcept override {
        if (found_) return -1;
        return ready_read_ ? ready_read_.get() : read_.get();
    }

    void readable() override {
        char buf[4096];
        if (ready_read_) {
            // One message: all the stage says, its pidfd and its pid.
            int fd = -1;
            const ssize_t n = fdpass::receive(ready_read_.get(), buf, sizeof buf - 1, fd, &stage_pid_);
            if (n > 0) {
                buf[n] = '\0';
                ready_ = std::strstr(buf, kStageReady) != nullptr;
            }
            if (ready_ && fd >= 0) command_fd_.reset(fd);
            else if (fd >= 0) ::close(fd);
            if (n >= 0 || errno != EAGAIN) ready_read_.reset();
        }
        while (read_) {
            ssize_t n = ::read(read_.get(), buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return;
            if (n <= 0) {
                read_.reset();
                return;
            }
            if (status_.size() < 65536) status_.append(buf, static_cast<size_t>(n));
        }
    }

    int find_command(pid_t& pid) override {
        // Until the stage says it is ready (its socket) and bwrap has reported
        // its child (the status pipe), those wake the loop. Then the command
        // is the pidfd the stage sent.
        if (!staged_) return -2;  // no stage to say so (none today)
        if (ready_read_) return -1;
        if (!init_) {
            const auto child = status_value("child-pid");
            if (!child) return -1;
            init_ = static_cast<pid_t>(*child);
            if (init_ <= 0) return -2;
            init_fd_ = Fd(spawn::pidfd_open(init_));
        }
        // The stage ended (or never started) before it was ready: not found.
        // Ready: its pidfd, else its pid alone (0 only if the kernel gave no
        // credentials: then not found either).
        found_ = true;
        if (!ready_) return -2;
        pid = stage_pid_;
        return command_fd_ ? command_fd_.release() : -2;
    }

    void ended(int command_pidfd, int& status) override {
        readable();
        // bwrap reports the command's end (and exits) while its init is still
        // ending the namespace's other processes, and before init itself has
        // exited: the run is over when init is, and with it every process the
        // command left and the sandbox's namespaces (a bound, in case one is
        // stuck in the kernel). Nothing of the run outlives dsh-confine.
        if (init_fd_) {
            pollfd pfd{init_fd_.get(), POLLIN, 0};
            while (::poll(&pfd, 1, 5000) < 0 && errno == EINTR) {
            }
        }
        // The command's pidfd: supervise's, or the stage's still here when
        // bwrap ended before supervise took it.
        const int fd = command_pidfd >= 0 ? command_pidfd : command_fd_.get();
        if (fd >= 0)
            if (auto st = exit_status_of(fd)) status = *st;
    }

    Classification classify(const Plan& p, std::optional<int> exit_code, const std::string& tail,
                            const char*& evidence) override {
        Classification c;
        evidence = "json-status-fd";
        if (auto rec = mailbox_error(record_fd_)) {
            evidence = "stage-record";
            c.runner_failed = true;
            c.reported = true;
            const auto& detail = rec->contains("runnerFailure") ? (*rec)["runnerFailure"] : (*rec)["message"];
            c.runner_failure = detail.is_string() ? detail.get<std::string>() : std::string("the bwrap stage failed");
        } else if (!ready_ && status_.find("\"exit-code\"") == std::string::npos && exit_code &&
                   *exit_code != 0) {
            // bwrap never exec'd the stage: its setup (or exec) failed, and its
            // own line on stderr says why.
            FailureRule own;
            own.fatal_signatures = {"bwrap: "};
            c.runner_failed = true;
            c.runner_failure = match_runner_failure({own}, exit_code, tail);
            if (!c.runner_failure)
                c.runner_failure = fmt::format("bwrap exited with status {} before starting the command", *exit_code);
        } else {
            // The stage exec'd the command: a `bwrap: ` line now is the
            // command's, not bwrap's.
            c = dsh::classify({}, p.c.denial_signatures, exit_code, tail);
        }
        // A run that failed on a verdict taken from the probe cache: the entry
        // is stale (or forged), so the next run probes again.
        if (c.runner_failed && probe_cached_) probe_cache::forget();
        return c;
    }

private:
    // The number bwrap's status gives for `key` ("child-pid", "exit-code")
    // once its line is complete (each line is one write of bwrap's).
    std::optional<long> status_value(const char* key) const {
        const size_t at = status_.find(fmt::format("\"{}\"", key));
        if (at == std::string::npos || status_.find('\n', at) == std::string::npos) return std::nullopt;
        const size_t colon = status_.find(':', at);
        if (colon == std::string::npos) return std::nullopt;
        return std::atol(status_.c_str() + colon + 1);
    }

    // The stage's words in bwrap's argv (kStageArg, then its own options).
    static bool has_stage(const Plan& p) {
        return std::find(p.exec_argv.begin(), p.exec_argv.end(), kStageArg) != p.exec_argv.end();
    }
    // `args` as the stage's first options (has_stage(p) holds).
    static void to_stage(Plan& p, std::initializer_list<std::string> args) {
        const auto at = std::find(p.exec_argv.begin(), p.exec_argv.end(), kStageArg);
        p.exec_argv.insert(at + 1, args);
    }

    int record_fd_;
    bool probe_cached_;
    Fd read_, write_;              // bwrap's --json-status-fd
    Fd ready_read_, ready_write_;  // the stage's --ready-fd (its end: until bwrap has it)
    Fd pty_write_;                 // the stage's --pty-fd (its end: until bwrap has it)
    bool staged_ = false;          // the plan has the stage, and so the ready socket
    bool ready_ = false;           // the stage said it is ready
    Fd command_fd_;                // ...and the pidfd it sent with it (the command's)
    pid_t stage_pid_ = 0;          // ...and its pid in our namespace (the kernel's, SO_PASSCRED)
    bool found_ = false;           // looked for and settled: the status pipe is left for ended()
    std::string status_;
    pid_t init_ = 0;
    Fd init_fd_;  // init's pidfd: readable once the namespace is empty
};

}  // namespace

std::unique_ptr<Watch> make_watch(int record_fd, bool probe_cached) {
    return std::make_unique<BwrapWatch>(record_fd, probe_cached);
}

}  // namespace dsh::bwrap
