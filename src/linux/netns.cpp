#include "netns.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dsh::netns {

namespace {

bool write_proc(const char* path, const char* text, int which, Fault& f) noexcept {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    const size_t n = std::strlen(text);
    const bool ok = fd >= 0 && ::write(fd, text, n) == static_cast<ssize_t>(n);
    const int e = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) f = Fault{Step::NetIdMap, e, which};
    return ok;
}

}  // namespace

Plan make_plan() {
    Plan p;
    p.active = true;
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    p.user = uid != 0;
    std::snprintf(p.uid_map, sizeof p.uid_map, "%u %u 1\n", static_cast<unsigned>(uid), static_cast<unsigned>(uid));
    std::snprintf(p.gid_map, sizeof p.gid_map, "%u %u 1\n", static_cast<unsigned>(gid), static_cast<unsigned>(gid));
    return p;
}

bool write_id_maps(const char* uid_map, const char* gid_map, Fault& f) noexcept {
    return write_proc("/proc/self/setgroups", "deny", 0, f) && write_proc("/proc/self/uid_map", uid_map, 1, f) &&
           write_proc("/proc/self/gid_map", gid_map, 2, f);
}

bool enter(const Plan& p, Fault& f) noexcept {
    if (!p.active) return true;
    if (::unshare(CLONE_NEWNET | (p.user ? CLONE_NEWUSER : 0)) != 0) {
        f = Fault{Step::NetNamespace, errno, p.user ? 1 : 0};
        return false;
    }
    if (p.user && !write_id_maps(p.uid_map, p.gid_map, f)) return false;
    // A new network namespace has lo, down: up, it answers 127.0.0.1 and ::1.
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, "lo", 3);
    bool ok = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
    if (ok) {
        ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
        ok = ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    }
    const int e = errno;
    if (s >= 0) ::close(s);
    if (!ok) f = Fault{Step::LoopbackUp, e, -1};
    return ok;
}

const std::string& check(const Plan& p) {
    static std::string answer;
    static bool known = false;
    if (known) return answer;
    known = true;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        answer = fault_outcome(Fault{Step::NetNamespace, errno, p.user ? 1 : 0}).message;
        return answer;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        Fault f{};
        const bool ok = enter(p, f);
        if (!ok) (void)!::write(fds[1], &f, sizeof f);
        ::_exit(ok ? 0 : 1);
    }
    const int fork_errno = errno;
    ::close(fds[1]);
    Fault f{};
    ssize_t n = -1;
    if (pid > 0) {
        do n = ::read(fds[0], &f, sizeof f);
        while (n < 0 && errno == EINTR);
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (n != static_cast<ssize_t>(sizeof f) && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            f = Fault{Step::NetNamespace, ECHILD, p.user ? 1 : 0}, n = sizeof f;
    } else {
        f = Fault{Step::NetNamespace, fork_errno, p.user ? 1 : 0};
        n = sizeof f;
    }
    ::close(fds[0]);
    if (n == static_cast<ssize_t>(sizeof f)) answer = fault_outcome(f).message;
    return answer;
}

}  // namespace dsh::netns
