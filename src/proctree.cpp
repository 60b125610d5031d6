#include "proctree.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <algorithm>
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

std::vector<long> children(long pid) {
    std::vector<long> out;
    children_of(pid, out);
    return out;
}

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
    // f[0] is field 3 (state), f[1] field 4 (ppid), f[17] field 20 (threads),
    // f[19] field 22 (start time).
    if (f.size() < 2 || f[0].empty()) return st;
    st.state = f[0][0];
    st.ppid = std::atol(f[1].c_str());
    if (f.size() > 17) st.threads = std::atol(f[17].c_str());
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
        const bool live = st.state != 0 && (st.state != 'Z' || st.threads > 1) && st.state != 'X' && st.ppid == d.parent;
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

namespace {

double now_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1000.0 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// A zombie leader's group: is any of its threads neither stopped nor ended?
bool group_running(long pid) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR* d = ::opendir(path);
    if (!d) return false;
    bool running = false;
    std::string text;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::snprintf(path, sizeof path, "/proc/%ld/task/%.20s/stat", pid, e->d_name);
        if (!read_small(path, text)) continue;
        const size_t close = text.rfind(')');
        const char state = close != std::string::npos && close + 2 < text.size() ? text[close + 2] : 'X';
        if (state != 'T' && state != 't' && state != 'Z' && state != 'X') running = true;
    }
    ::closedir(d);
    return running;
}

// One look at the whole tree, signalling each process listed with `sig`
// (held by a pidfd and checked to be the child it was listed as, as in
// signal_listed; zombies too: a thread group whose leader exited shows 'Z'
// while its other threads run, and a signal to a real zombie does nothing).
struct Round {
    std::set<long> live;          // listed and not a zombie
    std::set<long> zombies;       // listed as zombies
    bool running = false;         // some live process was not stopped
    std::vector<long> signalled;  // live ones signalled now
    bool moved = false;           // one listed had ended or moved by the time it was read
};

// `only_running`: signals only the processes not stopped (the freeze).
Round look(int sig, bool only_running) {
    Round r;
    for (const auto& d : descendants()) {
        const int pidfd = spawn::pidfd_open(static_cast<pid_t>(d.pid));
        if (pidfd < 0 && errno != ENOSYS) {  // ended (and reaped) since it was listed
            r.moved = true;
            continue;
        }
        const Stat st = stat_of(d.pid);
        if (st.state == 0 || st.state == 'X' || st.ppid != d.parent) {
            // Gone, or moved to another parent (us, when its parent ended):
            // found where it is now in the next round.
            r.moved = true;
        } else {
            // A group leader that exited shows 'Z' while its other threads
            // run (the group's thread count still holds it): alive, and
            // signalled and counted as the process it still is.
            const bool zombie = st.state == 'Z' && st.threads <= 1;
            const bool stopped = st.state == 'Z' ? !zombie && !group_running(d.pid) : st.state == 'T' || st.state == 't';
            (zombie ? r.zombies : r.live).insert(d.pid);
            if (!zombie && !stopped) r.running = true;
            if (sig && !(only_running && stopped) &&
                (pidfd >= 0 ? pidfd_signal(pidfd, sig) : ::kill(static_cast<pid_t>(d.pid), sig)) == 0 && !zombie)
                r.signalled.push_back(d.pid);
        }
        if (pidfd >= 0) ::close(pidfd);
    }
    return r;
}

// Reaps our own children that have ended (never `keep`: the caller reaps it).
void reap_ended(pid_t keep, const Round& r) {
    std::vector<long> mine;
    children_of(static_cast<long>(::getpid()), mine);
    for (long c : mine)
        if (c != keep && r.zombies.count(c))
            while (::waitpid(static_cast<pid_t>(c), nullptr, WNOHANG) < 0 && errno == EINTR) {
            }
}

void pause_briefly() {
    timespec ts{0, 1000000};  // 1 ms: a killed process's exit, a stop taking effect
    ::nanosleep(&ts, nullptr);
}

}  // namespace

End end_all(pid_t keep, double budget_ms) {
    End out;
    const double deadline = now_ms() + budget_ms;
    // 1. Freeze. SIGSTOP to every process of the run, round after round,
    // until two rounds in a row list the same processes, all of them
    // stopped, none gone or newly a zombie in between. A stopped process
    // neither forks nor exits, so its children stay where the next round
    // looks; a process forked or reparented to us during a round is listed
    // in the next (a fork's child under its parent, an orphan under us). So
    // the second look sees the whole tree, and it cannot move any more.
    // Bounded (half the budget): a process that cannot stop (uninterruptible
    // sleep, a vfork parent) does not hold the end up; step 2 goes on.
    {
        std::set<long> prev_live, prev_zombies;
        bool prev_still = false;
        const double freeze_until = now_ms() + budget_ms / 2;
        while (now_ms() < freeze_until) {
            Round r = look(SIGSTOP, true);
            reap_ended(keep, r);
            bool new_zombie = false;
            for (long z : r.zombies)
                if (!prev_zombies.count(z)) new_zombie = true;
            const bool still = !r.running && !r.moved && !new_zombie;
            if (still && prev_still && r.live == prev_live) break;
            prev_still = still;
            prev_live = std::move(r.live);
            prev_zombies = std::move(r.zombies);
            if (r.running && r.signalled.empty()) pause_briefly();  // stops still to take effect
        }
    }
    // 2. Kill. SIGKILL to every process of the run, round after round, until
    // a round finds none alive (only zombies that were zombies the round
    // before: their children came to us before they became zombies, so our
    // own list, read first, holds the top of anything left). Never ended by
    // a round that signalled nobody: a process in the middle of a fork or of
    // being reparented is not seen in that round, and is in the next.
    std::set<long> prev_zombies, last_live;
    for (;;) {
        Round r = look(SIGKILL, false);
        bool fresh = false;  // signalled for the first time
        for (long p : r.signalled) fresh = out.killed.insert(p).second || fresh;
        reap_ended(keep, r);
        bool new_zombie = false;
        for (long z : r.zombies)
            if (z != keep && !prev_zombies.count(z)) new_zombie = true;
        last_live = r.live;
        if (r.live.empty() && !r.moved && !new_zombie) break;
        if (now_ms() >= deadline) break;
        prev_zombies = std::move(r.zombies);
        if (!fresh) pause_briefly();  // killed ones still exiting
    }
    // Zombies of ours that ended last; and what is still there: a loop
    // that gave up names what a last look finds alive, not the pids of its
    // last round (those it killed; a fork chain's newest link is not among
    // them).
    const Round last = look(0, false);
    reap_ended(keep, last);
    last_live.insert(last.live.begin(), last.live.end());
    out.left.assign(last_live.begin(), last_live.end());
    // Whatever the last round still found may have ended since: only those still there are left.
    out.left.erase(std::remove_if(out.left.begin(), out.left.end(),
                                  [](long p) {
                                      const char s = stat_of(p).state;
                                      return s == 0 || s == 'Z' || s == 'X';
                                  }),
                   out.left.end());
    return out;
}

void reap_orphans(pid_t keep) {
    for (;;) {
        siginfo_t si{};
        if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 || si.si_pid == keep) return;
        ::waitpid(si.si_pid, nullptr, 0);
    }
}

}  // namespace dsh::proctree
