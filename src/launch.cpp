#include "launch.hpp"

#include "linux/landlock_runner.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
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

// execve with `mask` in force only for the call itself.
static int execve_masked(const char* path, char* const* argv, char* const* envp, const sigset_t* mask) {
    if (!mask) {
        ::execve(path, argv, envp);
        return errno;
    }
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, mask, nullptr);
    ::execve(path, argv, envp);
    const int e = errno;
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    return e;
}

Outcome exec_command(const std::string& resolved, const std::vector<std::string>& argv, char* const* envp,
                     const ExecMask* exec_mask) {
    std::vector<char*> args;
    args.reserve(argv.size() + 2);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int e = execve_masked(resolved.c_str(), args.data(), envp, exec_mask);
    if (e == ENOEXEC) {
        std::vector<char*> sh;
        sh.push_back(const_cast<char*>("sh"));
        sh.push_back(const_cast<char*>(resolved.c_str()));
        for (size_t k = 1; k < argv.size(); ++k) sh.push_back(const_cast<char*>(argv[k].c_str()));
        sh.push_back(nullptr);
        e = execve_masked("/bin/sh", sh.data(), envp, exec_mask);
    }
    if (e == ENOENT) return failf(Err::CommandNotFound, "{}: {}", resolved, std::strerror(e));
    return failf(Err::CommandNotExecutable, "{}: cannot execute: {}", resolved, std::strerror(e));
}

Outcome enter_and_exec(Launch& l, const Report& report, bool write_record) {
#ifdef __linux__  // Landlock is Linux's; other hosts never fill l.landlock
    if (l.landlock) {
        if (auto o = landlock::enter(*l.landlock, l.c.policy, report.fd(), l.c.not_granted, l.status_fd); !o) {
            std::string text = sandbox_unavailable_text(to_string(l.c.policy.mode));
            return fail(Err::SandboxUnavailable, text + " Runner failure: " + o.message);
        }
    }
#endif
    if (write_record && l.record_fd >= 0) {
        std::string line = confinement_record(l.c).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        if (::pwrite(l.record_fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()))
            return failf(Err::Internal, "cannot hand the confinement record to the bwrap stage: {}",
                         std::strerror(errno));
    } else if (write_record) {
        if (auto o = report.write(confinement_record(l.c)); !o) return o;
    }
    for (int fd : l.inherit_fds) {
        int fl = ::fcntl(fd, F_GETFD);
        if (fl < 0 || ::fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
            return failf(Err::Internal, "cannot pass fd {} to the runner: {}", fd, std::strerror(errno));
    }
    std::vector<char*> envp;
    if (l.env) {
        envp.reserve(l.env->size() + 1);
        for (auto& e : *l.env) envp.push_back(e.data());
        envp.push_back(nullptr);
    }
    Outcome o = exec_command(l.exec_path, l.exec_argv, l.env ? envp.data() : environ, l.exec_mask);
    if (o || !l.exec_is_runner) return o;
    return fail(Err::SandboxUnavailable, sandbox_unavailable_text(to_string(l.c.policy.mode)) +
                                             " Runner failure: cannot start the runner " + o.message);
}

}  // namespace dsh
