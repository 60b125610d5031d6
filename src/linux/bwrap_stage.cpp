// The stage that runs as bwrap's child: dsh-confine again, inside the mount
// view, confining itself with the Landlock runner's layers before it execs the command.
#include "bwrap_runner.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bwrap_plan.hpp"
#include "../launch.hpp"
#include "../report.hpp"
#include "landlock_runner.hpp"

extern char** environ;

namespace dsh::bwrap {

namespace {

// A stage that fails says so three ways: one line on stderr, the error record
// on the report, and the same record in the launcher's mailbox (sealed), which
// is what a supervising launcher reads: failures cross processes as records.
int stage_failed(const Report& report, int mailbox, const Outcome& o) {
    print_error(o.text());
    const auto rec = error_record(o);
    (void)report.write(rec);
    if (mailbox >= 0) {
        const std::string line = rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        if (::ftruncate(mailbox, 0) == 0 && ::pwrite(mailbox, line.data(), line.size(), 0) > 0)
            (void)::fcntl(mailbox, F_ADD_SEALS, kMailboxSeals);
    }
    return o.exit_status();
}

}  // namespace

namespace {

// Inside bwrap's mount view? (see check_mount_view)
Outcome in_mount_view() {
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

Outcome seal_device_nodes() {
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
bool launcher_fd(int fd) {
    if (fd < 3) return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0) return false;
    if (::fcntl(fd, F_GET_SEALS) < 0) return false;
    char buf[256];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    return n > 0 && std::string_view(buf, static_cast<size_t>(n)) ==
                        std::string("/memfd:") + kStageFdName + " (deleted)";
}

// The launcher's record is a few KiB (it holds the argv); anything near this
// is not the launcher's.
constexpr off_t kMaxRecordBytes = 64 << 20;

}  // namespace

int run_stage(int argc, const char* const* argv) {
    std::vector<std::string> args(argv + 2, argv + argc);
    StageRequest req;
    Report report;
    // The stage word from a command line (not from bwrap under us) is refused
    // before anything else is read or opened.
    if (!parse_stage(args, req) || !launcher_fd(req.record_fd)) {
        const Outcome o = failf(Err::Usage,
                                "{} is the internal entry of dsh-confine's bwrap stage and runs only when "
                                "dsh-confine starts it; to run a command, put it after --: dsh-confine [OPTIONS] "
                                "-- COMMAND",
                                kStageArg);
        print_error(o.text());
        return o.exit_status();
    }
    const int mailbox = req.record_fd;
    // Inherited through bwrap: close-on-exec from here, so the command never holds it.
    (void)::fcntl(mailbox, F_SETFD, FD_CLOEXEC);
    if (auto o = report.open(req.report_fd); !o) return stage_failed(report, mailbox, o);
    // The record the launcher prepared.
    std::string record;
    struct stat rst {};
    if (::fstat(mailbox, &rst) != 0 || rst.st_size > kMaxRecordBytes)
        return stage_failed(report, mailbox,
                            fail(Err::Internal, "stage: the launcher's record is unreadable or too large"));
    {
        char buf[65536];
        ssize_t n;
        off_t off = 0;
        while ((n = ::pread(mailbox, buf, sizeof buf, off)) > 0) {
            record.append(buf, static_cast<size_t>(n));
            off += n;
        }
    }
    // One line, as the launcher rendered it (no newline inside: JSON escapes it).
    if (record.find('\n') != std::string::npos) record.clear();
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
    const std::string mode(to_string(req.policy.mode));
    if (!entered) return stage_failed(report, mailbox, unavailable(mode, entered.message));

    // The Landlock runner's layers (ABI 0: the hardening alone), on bwrap's
    // IPC and PID namespaces; the record goes to the report once they hold.
    Plan p;
    p.c.policy = req.policy;
    landlock::Plan lp;
    if (req.landlock_abi > 0) lp = landlock::plan(req.policy, req.landlock_abi, req.policy.mode == Mode::ReadOnly);
    lp.host_namespaces = false;
    p.in_process = std::make_unique<landlock::Layers>(std::move(lp), req.policy.mode == Mode::ReadOnly);
    p.exec_path = req.command_path;
    p.exec_argv = req.argv;
    // Loader variables stashed for the trip through bwrap go back for the
    // command alone (see stash_loader_env).
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    p.env = unstash_loader_env(env);
    Entry e;
    if (auto o = prepare_entry(p, report.fd(), &record, {mailbox}, e); !o)
        return stage_failed(report, mailbox, o);
    // Sealed as it is just before exec: from then on nothing (the command
    // included) can leave a record in it.
    e.seal_fd = mailbox;
    Fault f;
    enter(&e, f);
    return stage_failed(report, mailbox, entry_failure(p, f));
}

}  // namespace dsh::bwrap
