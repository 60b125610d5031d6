// The stage that runs as bwrap's child: dsh-confine again, inside the mount
// view, confining itself with the Landlock runner's layers before it execs the command.
#include "bwrap_runner.hpp"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <string_view>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "bwrap_plan.hpp"
#include "../bytes.hpp"
#include "../fd.hpp"
#include "../launch.hpp"
#include "../report.hpp"
#include "../spawn.hpp"
#include "fd_pass.hpp"
#include "harden.hpp"
#include "landlock_runner.hpp"
#include "net_relay.hpp"

extern char** environ;

namespace dsh::bwrap {

namespace {

// A command too long for bwrap's argv (kArgvInline): its words from the
// record, exactly ("argvBytes", hex, when a word is not UTF-8).
bool argv_of_record(const std::string& record, std::vector<std::string>& argv) {
    const auto j = nlohmann::json::parse(record, nullptr, false);
    if (!j.is_object()) return false;
    argv.clear();
    if (auto b = j.find("argvBytes"); b != j.end() && b->is_array()) {
        for (const auto& w : *b) {
            if (!w.is_string()) return false;
            auto word = from_hex(w.get_ref<const std::string&>());
            if (!word) return false;
            argv.push_back(std::move(*word));
        }
    } else if (auto a = j.find("argv"); a != j.end() && a->is_array()) {
        for (const auto& w : *a) {
            if (!w.is_string()) return false;
            argv.push_back(w.get<std::string>());
        }
    } else {
        return false;
    }
    return !argv.empty();
}

// A stage that fails says so three ways: one line on stderr, the error record
// on the report, and the same record in the launcher's mailbox (sealed), which
// is what a supervising launcher reads: failures cross processes as records.
int stage_failed(const Report& report, int mailbox, const Outcome& o) {
    const int status = report_failure(report, o);
    if (mailbox >= 0) {
        const std::string line = json_line(error_record(o));
        if (::ftruncate(mailbox, 0) == 0 && ::pwrite(mailbox, line.data(), line.size(), 0) > 0)
            (void)::fcntl(mailbox, F_ADD_SEALS, kMailboxSeals);
    }
    return status;
}

}  // namespace

namespace {

// Inside bwrap's mount view? (see check_mount_view)
[[gnu::hot]] Outcome in_mount_view() {
    struct statvfs root {};
    if (::statvfs("/", &root) != 0) return failf(Err::SandboxUnavailable, "statvfs /: {}", std::strerror(errno));
    return check_mount_view((root.f_flag & ST_RDONLY) != 0);
}

}  // namespace

namespace {

// bwrap's --dev binds the host's device nodes into its /dev read-write: null,
// zero, full, random, urandom, tty, and the caller's terminal as console when
// stdin is one. Root owns them, so a root command could chmod, chown or touch
// the host's /dev/null. A read-only bind keeps them working (the kernel skips
// the read-only check when a device node is opened for writing) and answers
// EROFS to metadata changes. bwrap's --remount-ro would add nodev, which makes
// them unusable, so the stage remounts them itself with the CAP_SYS_ADMIN the
// profile hands a root caller's stage (dropped with every other capability
// before the command). Other callers do not own these nodes (a terminal
// they own, reached through an inherited fd, is the bwrap layer's "metadata"
// gap in workspace-write).
constexpr const char* kBwrapDevNodes[] = {"/dev/null",    "/dev/zero", "/dev/full",   "/dev/random",
                                          "/dev/urandom", "/dev/tty",  "/dev/console"};

[[gnu::hot]] Outcome seal_device_nodes() {
    if (::geteuid() != 0) return Outcome::success();
    for (const char* node : kBwrapDevNodes) {
        struct statvfs st {};
        if (::statvfs(node, &st) != 0) {
            if (errno == ENOENT && std::strcmp(node, "/dev/console") == 0) continue;  // no terminal on stdin
            return failf(Err::SandboxUnavailable, "cannot make {} read-only: {}", node, std::strerror(errno));
        }
        // The bind's other flags stay as they are (some may be locked, in a
        // user namespace); read-only is added.
        unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
        for (auto [st_flag, ms_flag] : {std::pair<unsigned long, unsigned long>{ST_NOSUID, MS_NOSUID},
                                        {ST_NODEV, MS_NODEV},
                                        {ST_NOEXEC, MS_NOEXEC},
                                        {ST_NOATIME, MS_NOATIME},
                                        {ST_NODIRATIME, MS_NODIRATIME},
                                        {ST_RELATIME, MS_RELATIME}})
            if (st.f_flag & st_flag) flags |= ms_flag;
        if (::mount(nullptr, node, nullptr, flags, nullptr) != 0)
            return failf(Err::SandboxUnavailable, "cannot make {} read-only: {}", node, std::strerror(errno));
    }
    return Outcome::success();
}

// open_tree_attr (Linux 6.15): open_tree and mount_setattr in one call. Its
// number where this libc's headers predate it: 467 in the table every
// architecture shares from 424 up (alpha, which is not, and the rest: the
// two calls).
#if defined(SYS_open_tree_attr)
constexpr long kSysOpenTreeAttr = SYS_open_tree_attr;
#elif defined(__x86_64__) || defined(__aarch64__) || defined(__i386__) || defined(__arm__) || defined(__riscv)
constexpr long kSysOpenTreeAttr = 467;
#else
constexpr long kSysOpenTreeAttr = -1;
#endif

// The carve-outs bound by the stage (ProfileOptions::stage_binds) rather than
// by bwrap, whose --ro-bind reads the whole mountinfo again for every bind:
// here each is two calls (open_tree_attr, move_mount; three before 6.15).
// Each target is opened inside the sandbox without following any link and
// must be the very inode the launcher opened (its dev and ino came with it;
// the launcher holds its descriptor until the run ends, so the number cannot
// be reused): a path swapped since then is refused, never bound in its place.
// The clone is of that same place and goes back onto it, read-only (or, for
// the pinned .git, writable: a mount point, which cannot be renamed or
// removed), nosuid and nodev as bwrap's binds are; in order, so the .git is
// pinned before its hooks/ are bound. The clone is private and the sandbox's
// mounts are bwrap's slaves: nothing propagates to the host. The descriptors
// opened here are close-on-exec and closed with every other one before the
// command runs (harden), not one by one.
[[gnu::hot]] Outcome bind_carve_outs(const std::vector<StageRequest::Carve>& carves) {
    bool two_step = kSysOpenTreeAttr < 0;  // no open_tree_attr here (older kernel, or a filter refuses it)
    for (const auto& c : carves) {
        auto failed = [&](const char* what) {
            return failf(Err::SandboxUnavailable, "cannot make {} {} inside the sandbox ({}: {})", c.path,
                         c.pin ? "a mount point" : "read-only", what, std::strerror(errno));
        };
        struct open_how how {};
        how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        const int at = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, c.path.c_str(), &how, sizeof how));
        if (at < 0) return failed("openat2");
        struct stat got {};
        if (::fstat(at, &got) != 0) return failed("fstat");
        if (got.st_dev != c.dev || got.st_ino != c.ino)
            return failf(Err::SandboxUnavailable,
                         "{} was replaced after dsh-confine opened it; nothing was run: run the command again",
                         c.path);
        struct mount_attr attr {};
        attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (c.pin ? 0 : MOUNT_ATTR_RDONLY);
        constexpr unsigned kClone = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE;
        int tree = -1;
        if (!two_step) {
            tree = static_cast<int>(::syscall(kSysOpenTreeAttr, at, "", kClone, &attr, sizeof attr));
            two_step = tree < 0;  // any refusal: the two calls below say what is wrong, if anything
        }
        if (tree < 0) {
            tree = static_cast<int>(::syscall(SYS_open_tree, at, "", kClone));
            if (tree < 0) return failed("open_tree");
            if (::syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
                return failed("mount_setattr");
        }
        if (::syscall(SYS_move_mount, tree, "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
            return failed("move_mount");
    }
    return Outcome::success();
}

// The carve-outs bwrap bound (an unprivileged caller's: ProfileOptions::
// stage_binds is false). bwrap before 0.12 follows a symlink on the way to a
// bind's destination (and makes a missing one there): a link planted inside
// a writable root after the launcher's walk, by anything running beside
// this run, would put a bind somewhere else and leave the protected path
// unbound. So each place, opened without following any link, must be the
// root of a mount (a bind landed there) of the very inode the launcher
// opened, read-only unless pinned; otherwise nothing is run.
[[gnu::hot]] Outcome check_carve_outs(const std::vector<StageRequest::Carve>& carves) {
    for (const auto& c : carves) {
        struct open_how how {};
        how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
        how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        const int at = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, c.path.c_str(), &how, sizeof how));
        struct statx stx {};
        struct statfs fs {};
        const bool ok = at >= 0 && ::statx(at, "", AT_EMPTY_PATH, STATX_INO, &stx) == 0 &&
                        ::fstatfs(at, &fs) == 0 && makedev(stx.stx_dev_major, stx.stx_dev_minor) == c.dev &&
                        stx.stx_ino == c.ino &&
                        (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
                         (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) &&
                        (c.pin || (fs.f_flags & ST_RDONLY));
        if (!ok) return fail(Err::SandboxUnavailable, carve_misplaced_text(c.path));
    }
    return Outcome::success();
}

}  // namespace

int run_probe_check() {
    Outcome o = in_mount_view();
    if (o) return 0;
    print_error(o.text());
    return o.exit_status();
}

namespace {

// Whether `fd` is the memfd the launcher made for this stage: a file with no
// name on any file system (st_nlink 0, shmem: it has seals) that
// /proc/self/fd shows as memfd:dsh-confine-stage. A command line cannot hand
// one over; whoever can create one can run anything unconfined anyway.
// `st` is left holding the fd's fstat (the record's size).
[[gnu::hot]] bool launcher_fd(int fd, struct stat& st) {
    if (fd < 3) return false;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0) return false;
    if (::fcntl(fd, F_GET_SEALS) < 0) return false;
    char link[32] = "/proc/self/fd/";
    *std::to_chars(link + 14, link + sizeof link - 1, fd).ptr = '\0';
    constexpr std::string_view want = "/memfd:dsh-confine-stage (deleted)";
    static_assert(want.substr(7, want.size() - 17) == kStageFdName, "the memfd's name is kStageFdName");
    char buf[64];
    const ssize_t n = ::readlink(link, buf, sizeof buf);
    return n > 0 && std::string_view(buf, static_cast<size_t>(n)) == want;
}

// The launcher's record is a few KiB (it holds the argv); anything near this
// is not the launcher's.
constexpr off_t kMaxRecordBytes = 64 << 20;

// With a pty (the launcher made it, and bwrap's session is the pty's), the
// command leads the pty's foreground job, as a shell would make it: the
// terminal's Ctrl-C and Ctrl-Z then go to the command, never to bwrap (which
// would die of them and take the sandbox along). Without a controlling
// terminal (no pty: a session of its own) there is nothing to do. Seen from
// inside the PID namespace both groups are 0 (outside it), so they compare.
// bwrap's --dev names the terminal on fds 0-2 /dev/console (its own devpts
// does not hold the launcher's pty, nor the caller's terminal under
// --no-pty): a command run on it may use it by that name (less opens
// ttyname(2) and sets its modes), as the Landlock runner lets it use the
// pty's own name. A command on a pty of the sandbox's own (open_inner_pty)
// does not need it.
void allow_console(landlock::Ruleset& lp) {
    struct stat con {};
    if (::stat("/dev/console", &con) != 0 || !S_ISCHR(con.st_mode)) return;
    for (int fd = 0; fd < 3; ++fd) {
        struct stat st {};
        if (::isatty(fd) && ::fstat(fd, &st) == 0 && st.st_rdev == con.st_rdev) {
            lp.rules.push_back({"/dev/console",
                                (landlock::READ_FILE | landlock::WRITE_FILE | landlock::IOCTL_DEV) & lp.handled_fs,
                                false});
            return;
        }
    }
}

// The command's own pty (issue 42): bwrap's --dev mounts a devpts of the
// sandbox's own and binds the launcher's pty (the host's devpts) on
// /dev/console, where ttyname finds it: `tty` said /dev/console. A pty made
// here, from the sandbox's /dev/ptmx, is /dev/pts/N inside, as the bare
// command's terminal is outside. The slave gets the modes and window size
// of the terminal on fds 0-2 (the launcher's pty, which has the user's);
// `on` says which of fds 0-2 are that terminal (they get the slave).
struct InnerPty {
    Fd master, slave;
    unsigned on = 0;
};

InnerPty open_inner_pty() {
    InnerPty t;
    int user = -1;
    for (int fd = 0; fd < 3; ++fd)
        if (::isatty(fd) && user < 0) user = fd;
    if (user < 0) return t;
    struct stat us {};
    if (::fstat(user, &us) != 0) return t;
    for (int fd = 0; fd < 3; ++fd) {
        struct stat st {};
        if (::isatty(fd) && ::fstat(fd, &st) == 0 && st.st_rdev == us.st_rdev) t.on |= 1u << fd;
    }
    Fd m(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    char name[64];
    if (!m || ::unlockpt(m.get()) != 0 || ::ptsname_r(m.get(), name, sizeof name) != 0) return InnerPty{};
    Fd s(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!s) return InnerPty{};
    struct termios modes {};
    if (::tcgetattr(user, &modes) == 0) (void)::tcsetattr(s.get(), TCSANOW, &modes);
    struct winsize ws {};
    if (::ioctl(user, TIOCGWINSZ, &ws) == 0) (void)::ioctl(s.get(), TIOCSWINSZ, &ws);
    t.master = std::move(m);
    t.slave = std::move(s);
    return t;
}

// What the command's process runs once the pty is its (spawn::become's
// child): enter(), and on a failure the stage's own error, as run_stage
// says it without a pty.
struct PtyEntry {
    Entry* e;
    const Plan* p;
    const Report* report;
    int mailbox;
};

bool enter_from_pty(const void* data, Fault& f) noexcept {
    const auto* pe = static_cast<const PtyEntry*>(data);
    (void)::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);  // the command's process, as it would be (the exec sets it too)
    enter(pe->e, f);
    ::_exit(stage_failed(*pe->report, pe->mailbox, entry_failure(*pe->p, f)));
}

// The master goes to dsh-confine (its relay), never to the command; then
// this process becomes the pty's session leader and the command's monitor,
// the pty's agent beside it, as spawn's monitor under the Landlock runner
// (spawn::become). Returns only when the master could not be handed out: the
// command then runs on /dev/console as before.
void lead_inner_pty(InnerPty& t, int channel, bool behind, PtyEntry& pe) {
    const spawn::AgentMsg m{'m', 0};
    if (fdpass::send(channel, &m, sizeof m, t.master.get()) != static_cast<ssize_t>(sizeof m)) return;
    t.master.reset();
    spawn::Child c;
    c.terminal_fd = t.slave.get();
    c.terminal_on = t.on;
    c.monitor = true;
    c.agent_fd = channel;
    c.start_behind = behind;
    c.pdeathsig = SIGKILL;  // the command dies with its monitor
    c.enter = &enter_from_pty;
    c.enter_data = &pe;
    // The command execs with the stage's signal mask (become blocks them all).
    static sigset_t mask;
    ::sigprocmask(SIG_SETMASK, nullptr, &mask);
    pe.e->exec_mask = &mask;
    spawn::become(c);
}

// bwrap's --dev mounts a devpts of the sandbox's own at /dev/pts (/dev/ptmx
// links to its ptmx): every terminal there is the run's own, the command's
// included (open_inner_pty). The command may use them by name, and make more
// (`script`, tmux, expect): read, write and ioctl beneath it. The host's
// terminals are not there (the Landlock runner alone grants no write on the
// host's /dev/pts: its `other-terminals` gap).
void allow_own_devpts(landlock::Ruleset& lp) {
    struct statfs fs {};
    constexpr long kDevptsMagic = 0x1cd1;
    if (::statfs("/dev/pts", &fs) != 0 || fs.f_type != kDevptsMagic) return;
    lp.rules.push_back({"/dev/pts", (landlock::READ_FILE | landlock::WRITE_FILE | landlock::IOCTL_DEV) & lp.handled_fs,
                        false});
}

void take_foreground(bool behind) noexcept {
    for (int fd = 0; fd < 3; ++fd) {
        const pid_t fg = ::tcgetpgrp(fd);
        if (fg < 0) continue;
        // A group of its own in any case (in the session leader's group the
        // command's would be orphaned: no stop on SIGTTIN, EIO instead); in
        // front unless dsh-confine is behind (--behind: the pty's agent is in
        // front, and the command starts in the background of its pty).
        if (fg != ::getpgrp() && !behind) return;
        if (::setpgid(0, 0) != 0 || behind) return;
        sigset_t ttou, old;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        ::sigprocmask(SIG_BLOCK, &ttou, &old);
        (void)::tcsetpgrp(fd, ::getpid());
        ::sigprocmask(SIG_SETMASK, &old, nullptr);
        return;
    }
}

}  // namespace

[[gnu::hot]] int run_stage(int argc, const char* const* argv) {
    std::vector<std::string> args(argv + 2, argv + argc);
    StageRequest req;
    Report report;
    struct stat rst {};
    // The stage word from a command line (not from bwrap under us) is refused
    // before anything else is read or opened.
    if (!parse_stage(args, req) || !launcher_fd(req.record_fd, rst)) {
        const Outcome o = failf(Err::Usage,
                                "{} is the internal entry of dsh-confine's bwrap stage and runs only when "
                                "dsh-confine starts it; to run a command, put it after --: dsh-confine [OPTIONS] "
                                "-- COMMAND",
                                kStageArg);
        print_error(o.text());
        return o.exit_status();
    }
    // bwrap in the caller's process group started with the forwarded signals
    // ignored: the caller's dispositions back, first, so that from here a
    // signal to the group does to the stage what it would to the command.
    if (req.caller_signals >= 0)
        for (int s : kShielded) ::signal(s, (req.caller_signals >> s) & 1 ? SIG_IGN : SIG_DFL);
    // From here a signal does to the stage what it would to the command:
    // dsh-confine may forward to it. The ready line carries the stage's own
    // pidfd (the command's, after the exec), so dsh-confine holds the
    // command before it exists and reads its wait status even when bwrap's
    // init reaps it at once (BwrapWatch::find_command). Without a pidfd the
    // line goes alone: dsh-confine then signals the pid the kernel gives it
    // with the line (its end has SO_PASSCRED).
    if (req.ready_fd >= 0) {
        const int self = spawn::pidfd_open(::getpid());
        (void)fdpass::send(req.ready_fd, kStageReadyLine, std::strlen(kStageReadyLine), self);
        if (self >= 0) ::close(self);
        if (!req.carve_late) ::close(req.ready_fd);
    }
    const int mailbox = req.record_fd;
    // Inherited through bwrap: close-on-exec from here, so the command never holds it.
    (void)::fcntl(mailbox, F_SETFD, FD_CLOEXEC);
    // The carve-outs walked while bwrap built this sandbox (--carve-late):
    // the launcher's word on the ready socket says the record and the list
    // are in the memfd. Anything else (its end closed: it failed, and says
    // why itself, or died) ends the stage before anything is run or said.
    if (req.carve_late) {
        char word[sizeof kStageGo] = {};
        ssize_t n;
        while ((n = ::recv(req.ready_fd, word, sizeof word, 0)) < 0 && errno == EINTR) {
        }
        ::close(req.ready_fd);
        if (n != static_cast<ssize_t>(sizeof kStageGo - 1) || std::memcmp(word, kStageGo, sizeof kStageGo - 1) != 0)
            return 125;  // nothing said: dsh-confine reports its own failure (and ends bwrap)
        if (::fstat(mailbox, &rst) != 0) rst.st_size = -1;
    }
    if (auto o = report.open(req.report_fd); !o) return stage_failed(report, mailbox, o);
    // The record the launcher prepared (written before it exec'd bwrap, so
    // the size launcher_fd read is final), read into one buffer of that size.
    if (rst.st_size < 0 || rst.st_size > kMaxRecordBytes)
        return stage_failed(report, mailbox,
                            fail(Err::Internal, "stage: the launcher's record is unreadable or too large"));
    std::string record(static_cast<size_t>(rst.st_size), '\0');
    {
        size_t got = 0;
        ssize_t n;
        while (got < record.size() &&
               (n = ::pread(mailbox, record.data() + got, record.size() - got, static_cast<off_t>(got))) > 0)
            got += static_cast<size_t>(n);
        record.resize(got);
    }
    // Late, the line ends at its newline and the carve-outs follow (carve_list).
    if (req.carve_late) {
        const size_t nl = record.find('\n');
        if (nl == std::string::npos || !parse_carve_list(std::string_view(record).substr(nl + 1), req.carves))
            return stage_failed(report, mailbox, fail(Err::Internal, "stage: the launcher's carve-outs are unreadable"));
        record.resize(nl);
    }
    // One line, as the launcher rendered it (no newline inside: JSON escapes it).
    if (record.find('\n') != std::string::npos) record.clear();
    // The run's nonce is the launcher's: the stage's own records carry it too.
    (void)adopt_run_id(record);
    // Inside bwrap's mount view before anything else (see check_mount_view).
    Outcome entered = in_mount_view();
    // Landlock is stacked whenever this kernel has it: a stage told less
    // (a launcher that could not see it, a forged command line) refuses, and
    // a kernel that offers less than the launcher planned for cannot keep
    // the promise the record makes.
    const int have = landlock::query_abi();
    if (entered && req.landlock_abi < have)
        entered = failf(Err::SandboxUnavailable, "the stage was planned with Landlock ABI {} but the kernel has {}",
                        req.landlock_abi, have);
    if (entered && req.landlock_abi > 0 && req.landlock_abi > have)
        entered = have <= 0 ? fail(Err::SandboxUnavailable, landlock::describe_unavailable(have))
                            : failf(Err::SandboxUnavailable, "Landlock ABI {} is below the planned {}", have,
                                    req.landlock_abi);
    if (entered) entered = seal_device_nodes();
    if (entered) entered = req.carves_bound ? check_carve_outs(req.carves) : bind_carve_outs(req.carves);
    // --net allow= (issue 19): the namespace's way out, made before the
    // command exists, so its first connection is queued, never refused.
    if (entered && req.relay_fd >= 0) {
        uint16_t port = 0;
        int err = 0;
        if (!net::hand_out_listener(req.relay_fd, port, err))
            entered = failf(Err::SandboxUnavailable, "cannot hand the allow-list's listener to dsh-confine: {}",
                            std::strerror(err));
        ::close(req.relay_fd);
        if (entered)
            for (const auto& [name, value] : net::proxy_environment(port, req.no_proxy)) ::setenv(name.c_str(), value.c_str(), 1);
    }
    if (!entered)
        return stage_failed(report, mailbox, unavailable(to_string(req.policy.mode), entered.message));
    if (req.argv_from_record && !argv_of_record(record, req.argv))
        return stage_failed(report, mailbox, fail(Err::Internal, "stage: the launcher's record holds no argv"));

    // The Landlock runner's layers (ABI 0: the hardening alone), on bwrap's
    // IPC and PID namespaces; the record goes to the report once they hold.
    // The ruleset alone: the launcher built and reported this layer from the
    // same policy and ABI (landlock::plan is plan_rules and the layer's record).
    const bool read_only = req.policy.mode == Mode::ReadOnly;
    const bool allow_userns = req.policy.allow_userns;
    landlock::Ruleset lp;
    if (req.landlock_abi > 0) lp = landlock::plan_rules(req.policy, req.landlock_abi);
    else landlock::plan_network(lp, req.policy.network, 0);  // the socket filter alone
    lp.host_namespaces = false;
    // With a pty relayed, the command's own from the sandbox's devpts.
    InnerPty pty;
    if (req.pty_fd >= 0) {
        (void)::fcntl(req.pty_fd, F_SETFD, FD_CLOEXEC);
        pty = open_inner_pty();
    }
    if (req.landlock_abi > 0) {
        allow_own_devpts(lp);
        // The launcher's pty, by the name bwrap gives it, only where the
        // command runs on it (no pty of the sandbox's own).
        if (!pty.master) allow_console(lp);
    }
    Plan p;
    p.c.policy = std::move(req.policy);
    p.in_process = std::make_unique<landlock::Layers>(std::move(lp), read_only, allow_userns);
    p.exec_path = std::move(req.command_path);
    p.exec_argv = std::move(req.argv);
    p.rlimits = std::move(req.rlimits);
    Entry e;
    if (auto o = prepare_entry(p, report, &record, {mailbox}, e); !o)
        return stage_failed(report, mailbox, o);
    // Loader variables stashed for the trip through bwrap go back for the
    // command alone (see stash_loader_env): pointers into our own environment,
    // nothing copied (p.env stays unset, so prepare_entry made no array).
    e.envp = unstash_loader_envp(environ);
    // Sealed as it is just before exec: from then on nothing (the command
    // included) can leave a record in it.
    e.seal_fd = mailbox;
    // The command on a pty of the sandbox's own, the stage its monitor.
    if (pty.master) {
        // The monitor stays for the whole run beside the command: it keeps
        // none of the stage's capabilities (a root caller's stage has
        // CAP_SYS_ADMIN for its remounts). enter() finds them gone.
        if (Fault f; !harden::drop_capabilities(f)) return stage_failed(report, mailbox, entry_failure(p, f));
        // Nor can a process of the run's user trace it or its agent where
        // Landlock does not forbid that (a kernel without it): not dumpable.
        (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        PtyEntry pe{&e, &p, &report, mailbox};
        lead_inner_pty(pty, req.pty_fd, req.behind, pe);
    }
    if (req.pty_fd >= 0) ::close(req.pty_fd);
    pty = InnerPty{};
    // On the launcher's pty the command becomes its foreground job; in the
    // caller's process group (no pty) the caller's terminal, if any, stays
    // the caller's.
    if (req.caller_signals < 0) take_foreground(req.behind);
    Fault f;
    enter(&e, f);
    return stage_failed(report, mailbox, entry_failure(p, f));
}

namespace {

// The stage and the probe's child start here, before main: in the static
// binary (the one shipped) glibc runs .preinit_array once libc itself is
// ready (TLS, malloc, stdio, IRELATIVE relocations, environ) and before any
// static initialiser. Those initialisers are the launcher's: libstdc++'s
// iostreams and locale (pulled in by the command-line library) and the
// command-line library's own objects; in the stage they cost about 45k
// instructions and a dozen page faults, more than the stage's own work, for
// nothing it uses. Nothing the stage calls depends on one
// (tests/packaging/stage_entry.py holds the project to no dynamic initialiser
// outside cli.cpp). Exceptions unwind through the binary's PT_GNU_EH_FRAME
// (meson.build links the static binary with --eh-frame-hdr), as frame_dummy
// has not registered .eh_frame yet. The process leaves with _exit: exit()
// would run the fini side of initialisers that never ran (crtbegin's
// __deregister_frame_info aborts on frames it never registered), and the
// stage writes through no stdio buffer.
// A dynamic build (-Dstatic=false, the sanitizers) is different: ld.so runs
// the executable's .preinit_array before libc.so's own initialiser, so
// environ is not set yet; there the stage starts from main
// (run_internal_entry), as it always did.
[[gnu::hot]] void early_entry(int argc, char** argv, char** envp) {
    if (argc < 2 || argv == nullptr || argv[1] == nullptr) return;
    if (environ != envp) return;  // libc is not initialised yet (a dynamic build)
    int status;
    if (std::strcmp(argv[1], kStageArg) == 0)
        status = run_stage(argc, argv);
    else if (argc == 2 && std::strcmp(argv[1], kProbeArg) == 0)
        status = run_probe_check();
    else
        return;  // the launcher: main, after the initialisers
    ::_exit(status);
}

[[gnu::used, gnu::section(".preinit_array")]] void (*const early_entry_hook)(int, char**, char**) = early_entry;

}  // namespace

}  // namespace dsh::bwrap
