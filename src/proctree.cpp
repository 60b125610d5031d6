#include "proctree.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

#include "fd.hpp"
#include "spawn.hpp"

namespace dsh::proctree {

namespace {

void numbers(const std::string& text, std::vector<long>& out) {
    const char* s = text.c_str();
    char* end = nullptr;
    for (long v; (v = std::strtol(s, &end, 10)), end != s; s = end)
        if (v > 0) out.push_back(v);
}

// Whether the kernel keeps each thread's list of children
// (CONFIG_PROC_CHILDREN); without it the tree is read from every process's
// parent.
bool have_children_lists() {
    static const bool have = [] {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%d/children", static_cast<int>(::getpid()));
        return ::access(path, R_OK) == 0;
    }();
    return have;
}

// The children of pid, of every one of its threads.
void children_of(long pid, std::vector<long>& out) {
    char path[96];
    if (!have_children_lists()) {
        DIR* d = ::opendir("/proc");
        if (!d) return;
        while (dirent* e = ::readdir(d)) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
            const long p = std::atol(e->d_name);
            if (stat_of(p).ppid == pid) out.push_back(p);
        }
        ::closedir(d);
        return;
    }
    std::snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR* d = ::opendir(path);
    if (!d) return;
    std::string text;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::snprintf(path, sizeof path, "/proc/%ld/task/%.20s/children", pid, e->d_name);
        if (read_small(path, text)) numbers(text, out);
    }
    ::closedir(d);
}

struct Descendant {
    long pid, parent;
    int depth;  // 1: our children
};

// Every descendant, breadth first.
std::vector<Descendant> descendants() {
    std::vector<Descendant> out;
    std::vector<long> level{static_cast<long>(::getpid())};
    for (int depth = 1; !level.empty() && depth < 4096 && out.size() < 1000000; ++depth) {
        std::vector<long> next;
        for (long p : level) {
            const size_t from = next.size();
            children_of(p, next);
            for (size_t k = from; k < next.size(); ++k) out.push_back({next[k], p, depth});
        }
        level = std::move(next);
    }
    return out;
}

int pidfd_signal(int pidfd, int sig) {
#if defined(__linux__)
    return static_cast<int>(::syscall(424 /* SYS_pidfd_send_signal */, pidfd, sig, nullptr, 0U));
#else
    (void)pidfd, (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}

}  // namespace

Stat stat_of(long pid) {
    Stat st;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    std::string text;
    if (!read_small(path, text)) return st;
    // "pid (comm) state ppid ...": comm may hold anything, so from the last ')'.
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return st;
    std::vector<std::string> f;
    for (size_t i = close + 1; i < text.size();) {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
        size_t j = i;
        while (j < text.size() && text[j] != ' ' && text[j] != '\n') ++j;
        if (j > i) f.push_back(text.substr(i, j - i));
        i = j;
    }
    // f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (start time).
    if (f.size() < 2 || f[0].empty()) return st;
    st.state = f[0][0];
    st.ppid = std::atol(f[1].c_str());
    if (f.size() > 19) st.start_time = f[19];
    return st;
}

bool become_subreaper() {
#if defined(__linux__)
    return ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
#else
    return false;
#endif
}

namespace {

// signal_all, also listing what it signalled.
int signal_listed(int sig, int skip_depth, std::vector<long>* signalled) {
    int n = 0;
    for (const auto& d : descendants()) {
        if (d.depth <= skip_depth) continue;
        // Held first, then checked: the pidfd pins the process the check saw.
        const int pidfd = spawn::pidfd_open(static_cast<pid_t>(d.pid));
        if (pidfd < 0 && errno != ENOSYS) continue;  // gone
        const Stat st = stat_of(d.pid);
        const bool live = st.state != 0 && st.state != 'Z' && st.state != 'X' && st.ppid == d.parent;
        // Without pidfds (Linux < 5.3) the check and the kill are apart.
        if (live && (pidfd >= 0 ? pidfd_signal(pidfd, sig) : ::kill(static_cast<pid_t>(d.pid), sig)) == 0) {
            ++n;
            if (signalled) signalled->push_back(d.pid);
        }
        if (pidfd >= 0) ::close(pidfd);
    }
    return n;
}

}  // namespace

int signal_all(int sig, int skip_depth) { return signal_listed(sig, skip_depth, nullptr); }

int end_all(pid_t keep) {
    std::set<long> killed;
    for (int round = 0; round < 200; ++round) {
        std::vector<long> now;
        const int n = signal_listed(SIGKILL, 0, &now);
        killed.insert(now.begin(), now.end());
        // Reap our own: the ones just killed are waited for (SIGKILL cannot
        // be refused), the others only if they have ended (a process that
        // came to us during the round is alive: it is killed in the next).
        // Children of the killed come to us, and go in the next round.
        std::set<long> just(now.begin(), now.end());
        std::vector<long> mine;
        children_of(static_cast<long>(::getpid()), mine);
        for (long c : mine) {
            if (c == keep) continue;
            const int flags = just.count(c) ? 0 : WNOHANG;
            while (::waitpid(static_cast<pid_t>(c), nullptr, flags) < 0 && errno == EINTR) {
            }
        }
        if (n == 0) break;
    }
    return static_cast<int>(killed.size());
}

void reap_orphans(pid_t keep) {
    for (;;) {
        siginfo_t si{};
        if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 || si.si_pid == keep) return;
        ::waitpid(si.si_pid, nullptr, 0);
    }
}

}  // namespace dsh::proctree
