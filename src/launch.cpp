#include "launch.hpp"

#include "spawn.hpp"
#include "report.hpp"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

extern char** environ;

namespace dsh {

static Outcome check_candidate(const std::string& path, bool& found) {
    struct stat st {};
    found = false;
    if (::stat(path.c_str(), &st) != 0) return failf(Err::CommandNotFound, "{}: command not found", path);
    found = true;
    if (S_ISDIR(st.st_mode)) return failf(Err::CommandNotExecutable, "{}: is a directory", path);
    if (::access(path.c_str(), X_OK) != 0 || !S_ISREG(st.st_mode))
        return failf(Err::CommandNotExecutable, "{}: permission denied", path);
    return Outcome::success();
}

Outcome resolve_command(const std::string& name, const char* path_env, std::string& resolved) {
    if (name.empty()) return fail(Err::CommandNotFound, "the command name is empty");
    bool found = false;
    if (name.find('/') != std::string::npos) {
        resolved = name;
        return check_candidate(name, found);
    }
    const std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    Outcome first_unusable = Outcome::success();
    size_t i = 0;
    while (i <= path.size()) {
        size_t j = path.find(':', i);
        if (j == std::string::npos) j = path.size();
        std::string dir = path.substr(i, j - i);
        std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + name;
        Outcome o = check_candidate(cand, found);
        if (o) {
            resolved = cand;
            return o;
        }
        if (found && first_unusable) first_unusable = fail(Err::CommandNotExecutable, name + ": permission denied");
        i = j + 1;
    }
    if (!first_unusable) return first_unusable;
    return failf(Err::CommandNotFound, "{}: command not found", name);
}

[[gnu::hot]] Outcome prepare_entry(Plan& p, const Report& report, const std::string* record, const std::vector<int>& open_fds,
                      Entry& e) {
    e = Entry{};
    const int report_fd = report.fd();
    if (p.in_process) {
        std::vector<int> keep = open_fds;
        if (report_fd >= 0) keep.push_back(report_fd);
        if (p.record_fd >= 0) keep.push_back(p.record_fd);
        // The layers cannot be made: a runner failure, whatever the step.
        if (auto o = p.in_process->prepare(p.c, keep); !o)
            return o.err == Err::SandboxUnavailable && o.mode.empty() ? unavailable(to_string(p.c.policy.mode), o.message)
                                                                       : o;
        e.layers = p.in_process.get();
#if defined(__linux__)
        // A runner that becomes the command, left in the caller's process
        // group with no init of ours above it (exec mode, the subreaper):
        // the process-group gap, as bwrap's without a terminal. Under a PID
        // namespace the init, in a group of its own, keeps the group linked.
        if (p.c.descendants.by != "pid-namespace") declare_process_group(p.c);
#endif
    }
    // Rendered only for a reader: the report, or bwrap's stage when the
    // command's words ride in it. A few hundred JSON nodes cost 0.1-0.3 ms,
    // the largest single piece of a start that nobody asked a report of.
    if (record) e.record = *record;
    else if (report_fd >= 0 || p.record_carries_argv)
        e.record = report_line(confinement_record(p.c));
    e.record_fd = p.record_fd;
    e.report_fd = report_fd;
    e.report_named = report.named();
    // A line of the report; the stage's mailbox takes it bare (the stage ends the line).
    if (!e.record.empty() && e.record_fd < 0) e.record += '\n';
    e.inherit = p.inherit_fds;
    e.path = p.exec_path.c_str();
    e.exec_fd = p.exec_fd;
    e.argv = spawn::c_array(p.exec_argv);
    // execvp's fallback for a file the kernel cannot exec: sh FILE ARGS...
    e.sh_argv.push_back(const_cast<char*>("sh"));
    e.sh_argv.push_back(const_cast<char*>(p.exec_path.c_str()));
    for (size_t k = 1; k < p.exec_argv.size(); ++k) e.sh_argv.push_back(const_cast<char*>(p.exec_argv[k].c_str()));
    e.sh_argv.push_back(nullptr);
    if (p.env) e.envp = spawn::c_array(*p.env);
    for (size_t i = 0; i < limits::kMaxLeaves; ++i) e.cgroup_procs_fds[i] = p.cgroup_procs_fds[i];
    e.rlimits = p.rlimits;
    return Outcome::success();
}

[[gnu::hot]] bool enter(const void* entry, Fault& f) noexcept {
    const Entry& e = *static_cast<const Entry*>(entry);
    // Into the run's cgroup leaves before anything else: whatever this
    // process starts from here on is in them.
    if (e.cgroup_procs_fds[0] >= 0 && !limits::apply_in_child(e.cgroup_procs_fds, nullptr, 0)) {
        f = Fault{Step::CgroupJoin, errno, -1};
        return false;
    }
    if (e.layers && !e.layers->apply(f)) return false;
    if (!e.record.empty()) {
        if (e.record_fd >= 0) {
            const auto n = static_cast<ssize_t>(e.record.size());
            if (::pwrite(e.record_fd, e.record.data(), e.record.size(), 0) != n) {
                f = Fault{Step::RecordHandOver, errno, -1};
                return false;
            }
        } else if (e.report_fd >= 0) {
            if (const int err = write_report(e.report_fd, e.record)) {
                f = Fault{Step::ReportWrite, err, e.report_named};
                return false;
            }
        }
    }
    // FD_CLOEXEC is the only descriptor flag: one call each.
    for (int fd : e.inherit) {
        if (::fcntl(fd, F_SETFD, 0) < 0) {
            f = Fault{Step::InheritFd, errno, fd};
            return false;
        }
    }
#if defined(__linux__)
    if (e.seal_fd >= 0 && ::fcntl(e.seal_fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) {
        f = Fault{Step::SealMailbox, errno, e.seal_fd};
        return false;
    }
#endif
    char* const* envp = e.envp.empty() ? environ : e.envp.data();
    for (const auto& r : e.rlimits)
        if (!limits::apply_in_child(nullptr, &r, 1)) {
            f = Fault{Step::Rlimit, errno, r.resource};
            return false;
        }
    if (e.exec_mask) ::sigprocmask(SIG_SETMASK, e.exec_mask, nullptr);
#if defined(__linux__)
    if (e.exec_fd >= 0) {
        // The file that was checked, whatever its path names now. A script
        // cannot run this way (its interpreter would open /dev/fd/N, closed
        // at the exec: ENOENT), nor where the kernel has no execveat
        // (before 3.19): by its checked path then (SECURITY, known gaps).
        ::syscall(SYS_execveat, e.exec_fd, "", e.argv.data(), envp, AT_EMPTY_PATH);
        if (errno != ENOENT && errno != ENOSYS) {
            f = Fault{Step::Exec, errno, -1};
            return false;
        }
    }
#endif
    ::execve(e.path, e.argv.data(), envp);
    if (errno == ENOEXEC) ::execve(e.sh.c_str(), e.sh_argv.data(), envp);
    f = Fault{Step::Exec, errno, -1};
    return false;
}

Outcome entry_failure(const Plan& p, const Fault& f) {
    Outcome o = fault_outcome(f, p.exec_path);
    const std::string mode(to_string(p.c.policy.mode));
    if (f.step == Step::Exec && p.exec_is_runner) return unavailable(mode, "cannot start the runner " + o.message);
    if (o.err == Err::SandboxUnavailable) return unavailable(mode, o.message);
    return o;
}

Outcome enter_and_exec(Plan& p, const Report& report) {
    // Only a parent that stays can walk the carve-outs after the spawn.
    if (p.late_walk) return fail(Err::Internal, "the carve-outs were left for a parent that is not there");
    Entry e;
    if (auto o = prepare_entry(p, report, nullptr, {}, e); !o) return o;
    Fault f;
    enter(&e, f);
    return entry_failure(p, f);
}

}  // namespace dsh
