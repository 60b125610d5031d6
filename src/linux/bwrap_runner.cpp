// The thin part of the bwrap runner, and the stage that runs as bwrap's child.
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
#include "harden.hpp"
#include "landlock_runner.hpp"

extern char** environ;

namespace dsh::bwrap {

Outcome check_binary(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return failf(Err::SandboxUnavailable, "bwrap is not usable: {}: {}", path, std::strerror(errno));
    if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0)
        return failf(Err::SandboxUnavailable, "bwrap is not usable: {}: not an executable file", path);
    return Outcome::success();
}

Outcome prepare(const std::string& bwrap_path, int report_fd, Launch& l) {
    Confinement& c = l.c;
    if (auto o = check_binary(bwrap_path); !o) return o;

    // The roots were opened when the policy was built (optional ones that
    // could not be are already in not_granted). Work on a copy: nothing of
    // the launch changes unless bwrap is taken.
    Policy p = c.policy;
    std::vector<int> root_fds;
    for (auto& r : p.writable_roots) {
        // bwrap puts a fresh tmpfs on /tmp: what is written there is gone
        // when the sandbox ends. Roots under it are bound from the host.
        // The stage's Landlock rule for it is then on that tmpfs, by path
        // (the host's /tmp descriptor names another inode).
        if (r.source == "tmp") {
            r.persists = false;
            r.fd = -1;
            continue;
        }
        // Bound by bwrap from the descriptor, and the stage's Landlock rule.
        if (r.fd < 0) return failf(Err::SandboxUnavailable, "the writable root {} was not opened", r.path);
        root_fds.push_back(r.fd);
    }

    // Landlock inside, where the kernel has it: it closes what a read-only
    // bind leaves open (FIFOs, reopening inherited files via /proc/self/fd).
    const int abi = landlock::query_abi();
    Layer bl = layer(p, bwrap_path);
    std::vector<Layer> layers;
    if (abi > 0) {
        landlock::Plan plan = landlock::plan(p, abi, p.mode == Mode::ReadOnly);
        layers = {bl, plan.layer};
    } else {
        bl.details["landlockStage"] = landlock::describe_unavailable(abi);
        layers = {bl};
    }

    // The stage is our own binary, handed to bwrap as an inherited fd and
    // exec'd as /proc/self/fd/N inside: the path we were started from may be
    // hidden (under /tmp, behind the tmpfs) or replaced by the time bwrap
    // execs it. Deliberately not close-on-exec; the stage closes it.
    int self = ::open("/proc/self/exe", O_RDONLY);
    if (self < 0)
        return failf(Err::SandboxUnavailable, "cannot open our own binary for the bwrap stage: {}",
                     std::strerror(errno));

    // The record travels to the stage in a memfd (see Launch::record_fd),
    // always: it is also what tells the stage that we started it (kStageFdName).
    int record = ::memfd_create(kStageFdName, MFD_CLOEXEC);
    if (record < 0) {
        const int e = errno;
        ::close(self);
        return failf(Err::SandboxUnavailable, "memfd_create: {}", std::strerror(e));
    }

    StageSpec spec;
    spec.self = "/proc/self/fd/" + std::to_string(self);
    spec.record_fd = record;
    spec.landlock_abi = abi > 0 ? abi : 0;
    spec.report_fd = report_fd;
    spec.command_path = c.command_path;
    spec.argv = c.argv;
    ProfileOptions opts;
    opts.stage_keeps_setpcap = ::geteuid() == 0;
    auto argv = wrap(bwrap_path, profile_args(p, opts), stage_args(p, spec));

    c.policy = std::move(p);
    c.runner = RunnerKind::Bwrap;
    c.layers = std::move(layers);
    // Both dialects: EROFS from the mount view, EACCES from Landlock.
    c.denial_signatures = {"read-only file system", "permission denied"};
    // The stage's seccomp layer refuses metadata calls with EPERM in read-only.
    if (c.policy.mode == Mode::ReadOnly) c.denial_signatures.push_back("operation not permitted");
    c.runner_failure_rules = nlohmann::json::array(
        {{{"fatalSignatures", {"bwrap: "}}},
         {{"allowedExitCodes", {125}}, {"fatalSignatures", {"dsh-confine: "}}}});
    c.hardening = {"new-session", "die-with-parent", "pid-namespace", "proc-sys-read-only", "inherited-fds-closed",
                   "ipc-namespace", "no-new-privs", "capabilities-dropped", "seccomp-tiocsti-tioclinux",
                   "seccomp-io-uring", "seccomp-keyrings", "seccomp-unknown-syscalls"};
    if (c.policy.mode == Mode::ReadOnly) c.hardening.insert(c.hardening.end(), {"seccomp-metadata", "seccomp-inode-ioctls"});
    if (opts.stage_keeps_setpcap) c.hardening.push_back("device-nodes-read-only");  // root's stage remounts them
    c.exec_argv = argv;
    l.landlock.reset();
    l.exec_path = bwrap_path;
    l.exec_argv = std::move(argv);
    l.exec_is_runner = true;
    l.inherit_fds = {self, record};
    l.inherit_fds.insert(l.inherit_fds.end(), root_fds.begin(), root_fds.end());
    if (report_fd >= 0) l.inherit_fds.push_back(report_fd);
    l.record_fd = record;
    std::vector<std::string> env;
    if (l.env) env = *l.env;
    else
        for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    auto stashed = stash_loader_env(env);
    if (stashed != env) l.env = std::move(stashed);
    return Outcome::success();
}

namespace {

int stage_failed(const Report& report, const Outcome& o) {
    print_error(o.message);
    (void)report.write(error_record(o));
    return o.exit_status();
}

// Common hardening when the kernel has no Landlock: the same steps as
// landlock::enter without the ruleset.
Outcome harden_only(const Policy& policy, int report_fd) {
    if (auto o = harden::close_inherited_fds(policy.keep_fds, report_fd); !o) return o;
    if (auto o = harden::set_no_new_privs(); !o) return o;
    if (auto o = harden::drop_capabilities(); !o) return o;
    return harden::install_seccomp({policy.mode == Mode::ReadOnly, false});
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
    print_error(o.message);
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
        print_error(o.message);
        return o.exit_status();
    }
    if (auto o = report.open(req.report_fd); !o) {
        print_error(o.message);
        return o.exit_status();
    }
    // The record the launcher prepared: read before the fd cleanup closes it.
    std::string record;
    struct stat rst {};
    if (::fstat(req.record_fd, &rst) != 0 || rst.st_size > kMaxRecordBytes)
        return stage_failed(report, fail(Err::Internal, "stage: the launcher's record is unreadable or too large"));
    {
        char buf[65536];
        ssize_t n;
        off_t off = 0;
        while ((n = ::pread(req.record_fd, buf, sizeof buf, off)) > 0) {
            record.append(buf, static_cast<size_t>(n));
            off += n;
        }
        ::close(req.record_fd);
    }
    // Inside bwrap's mount view before anything else (see check_mount_view).
    Outcome entered = in_mount_view();
    // Landlock is stacked whenever this kernel has it: a stage told less
    // (a launcher that could not see it, a forged command line) refuses.
    if (const int have = landlock::query_abi(); entered && req.landlock_abi < have)
        entered = failf(Err::SandboxUnavailable, "the stage was planned with Landlock ABI {} but the kernel has {}",
                        req.landlock_abi, have);
    if (entered) entered = seal_device_nodes();
    if (entered && req.landlock_abi > 0) {
        // The launcher planned for this ABI and said so in the report; a
        // kernel that offers less cannot keep that promise.
        const int abi = landlock::query_abi();
        if (abi < req.landlock_abi) {
            entered = abi <= 0 ? fail(Err::SandboxUnavailable, landlock::describe_unavailable(abi))
                               : failf(Err::SandboxUnavailable, "Landlock ABI {} is below the planned {}", abi,
                                       req.landlock_abi);
        } else {
            landlock::Plan plan = landlock::plan(req.policy, req.landlock_abi, req.policy.mode == Mode::ReadOnly);
            plan.host_namespaces = false;  // bwrap's IPC and PID namespaces
            std::vector<Skipped> not_granted;
            entered = landlock::enter(plan, req.policy, report.fd(), not_granted);
        }
    } else if (entered) {
        entered = harden_only(req.policy, report.fd());
    }
    if (!entered) {
        std::string text = sandbox_unavailable_text(to_string(req.policy.mode));
        return stage_failed(report, fail(Err::SandboxUnavailable, text + " Runner failure: " + entered.message));
    }
    // One line, as the launcher rendered it (no newline inside: JSON escapes it).
    if (!record.empty() && record.find('\n') == std::string::npos)
        if (auto o = report.write_line(std::move(record)); !o) return stage_failed(report, o);
    // Loader variables stashed for the trip through bwrap go back for the
    // command alone (see stash_loader_env).
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    env = unstash_loader_env(env);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    return stage_failed(report, exec_command(req.command_path, req.argv, envp.data()));
}

}  // namespace dsh::bwrap
