#include "limits.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "errors.hpp"

#if !defined(_WIN32)
#include <csignal>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#if !defined(_WIN32)
#include "proctree.hpp"
#include "spawn.hpp"
#endif

namespace dsh {

void LimitSettings::fill_from(const LimitSettings& lower) {
    if (!timeout_ms) timeout_ms = lower.timeout_ms;
    if (!kill_after_ms) kill_after_ms = lower.kill_after_ms;
    if (!max_procs) max_procs = lower.max_procs;
    if (!memory) memory = lower.memory;
    if (!cpu_time_ms) cpu_time_ms = lower.cpu_time_ms;
    if (!file_size) file_size = lower.file_size;
    if (!nofile) nofile = lower.nofile;
    if (!required) required = lower.required;
    if (!allow_core) allow_core = lower.allow_core;
}

namespace limits {

namespace {

// Digits, then an optional fraction of up to 3 digits: the value times 1000
// (so that "1.5" is 1500). False on anything else or on overflow.
bool milli_number(std::string_view& s, uint64_t& out, bool fraction_ok) {
    uint64_t whole = 0;
    size_t i = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        if (whole > (UINT64_MAX / 10 - 9) / 1000) return false;
        whole = whole * 10 + static_cast<uint64_t>(s[i] - '0');
    }
    if (i == 0) return false;
    uint64_t frac = 0;
    if (i < s.size() && s[i] == '.') {
        if (!fraction_ok) return false;
        ++i;
        size_t digits = 0;
        for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
            if (digits >= 3) return false;
            frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
        }
        if (digits == 0) return false;
        for (; digits < 3; ++digits) frac *= 10;
    }
    out = whole * 1000 + frac;
    s.remove_prefix(i);
    return true;
}

bool mul(uint64_t a, uint64_t b, uint64_t& out) {
    if (a != 0 && b > UINT64_MAX / a) return false;
    out = a * b;
    return true;
}

}  // namespace

bool parse_count(std::string_view s, uint64_t& n) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t v = 0;
    for (char ch : s) {
        if (ch < '0' || ch > '9') return false;
        v = v * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (v == 0) return false;
    n = v;
    return true;
}

bool parse_size(std::string_view s, uint64_t& bytes) {
    uint64_t milli = 0;
    if (!milli_number(s, milli, false)) return false;
    uint64_t unit = 1;
    if (!s.empty()) {
        switch (s[0]) {
            case 'k': case 'K': unit = 1ULL << 10; break;
            case 'm': case 'M': unit = 1ULL << 20; break;
            case 'g': case 'G': unit = 1ULL << 30; break;
            case 't': case 'T': unit = 1ULL << 40; break;
            case 'b': case 'B': unit = 1; break;
            default: return false;
        }
        if (unit != 1) {
            s.remove_prefix(1);
            if (s == "iB" || s == "B" || s == "ib" || s == "b") s = {};
        } else {
            s.remove_prefix(1);
        }
        if (!s.empty()) return false;
    }
    uint64_t v = 0;
    if (!mul(milli / 1000, unit, v) || v == 0) return false;
    bytes = v;
    return true;
}

bool parse_duration_ms(std::string_view s, uint64_t& ms) {
    uint64_t milli = 0;
    if (!milli_number(s, milli, true)) return false;
    uint64_t per = 1000;  // a bare number is seconds, as timeout(1)
    if (s == "ms") per = 0;
    else if (s == "s") per = 1000;
    else if (s == "m") per = 60 * 1000;
    else if (s == "h") per = 3600 * 1000;
    else if (s == "d") per = 24 * 3600 * 1000;
    else if (!s.empty()) return false;
    uint64_t v = 0;
    if (per == 0) {
        if (milli % 1000 != 0) return false;  // no fractions of a millisecond
        v = milli / 1000;
    } else if (!mul(milli, per, v)) {
        return false;
    } else {
        v /= 1000;
    }
    if (v == 0) return false;
    ms = v;
    return true;
}

std::string_view rlimit_name(int resource) noexcept {
#if !defined(_WIN32)
    switch (resource) {
        case RLIMIT_AS: return "RLIMIT_AS";
        case RLIMIT_NPROC: return "RLIMIT_NPROC";
        case RLIMIT_CPU: return "RLIMIT_CPU";
        case RLIMIT_FSIZE: return "RLIMIT_FSIZE";
        case RLIMIT_NOFILE: return "RLIMIT_NOFILE";
        case RLIMIT_CORE: return "RLIMIT_CORE";
        default: break;
    }
#else
    (void)resource;
#endif
    return "RLIMIT_?";
}

bool needs_host(const LimitSettings& s) noexcept {
    return s.timeout_ms || s.memory || s.max_procs;
}

bool plan(const LimitSettings& s, const Host& h, Plan& out, std::string& refusal) {
    out = Plan{};
    out.required = s.required.value_or(false);
    out.kill_after_ms = s.kill_after_ms.value_or(kDefaultKillAfterMs);
    out.cgroup_dir = h.cgroup_dir;
    const bool leaf_ok = !h.cgroup_dir.empty() && h.can_make_leaf;
    const auto delegated = [&](const char* ctl) {
        return leaf_ok && std::find(h.delegated.begin(), h.delegated.end(), ctl) != h.delegated.end();
    };
    const std::string why = h.why_no_cgroup.empty() ? std::string("not delegated") : h.why_no_cgroup;
#if defined(_WIN32)
    (void)delegated;
    (void)why;
    // No rlimits, no cgroups: every limit asked is refused (the Windows runner
    // has a job object, not wired to these options yet).
    if (s.timeout_ms || s.memory || s.max_procs || s.cpu_time_ms || s.file_size || s.nofile) {
        refusal = limit_text(LimitText::NotOnThisPlatform, "resource limits and --timeout");
        return false;
    }
    return true;
#else
    const auto rl = [&](int res, uint64_t soft, uint64_t hard) { out.rlimits.push_back({res, soft, hard}); };
#if !defined(__linux__)
    // The process tree is found through Linux's /proc and subreaper.
    if (s.timeout_ms) {
        refusal = limit_text(LimitText::NotOnThisPlatform, "--timeout");
        return false;
    }
#endif
    if (s.timeout_ms) {
        out.timeout_ms = *s.timeout_ms;
        Planned p{"timeout", *s.timeout_ms, "", "", {}};
        if (leaf_ok) {
            out.leaf = true;
            p.backend = "cgroup";
            p.how = "cgroup.kill";
        } else {
            out.timeout_by_tree = true;
            p.backend = "process-tree";
            p.how = "kill-descendants";
        }
        out.limits.push_back(std::move(p));
    }
    if (s.memory) {
        Planned p{"memory", *s.memory, "", "", {}};
        if (delegated("memory")) {
            out.leaf = true;
            p.backend = "cgroup";
            p.how = "memory.max";
            out.cgroup_files.emplace_back("memory.max", std::to_string(*s.memory));
            // Swap would let the command past the bound (the file is there
            // only with swap accounting).
            out.cgroup_files.emplace_back("?memory.swap.max", "0");
        } else if (out.required) {
            refusal = limit_text(LimitText::MemoryNeedsCgroup, why);
            return false;
        } else {
            p.backend = "rlimit";
            p.how = std::string(rlimit_name(RLIMIT_AS));
            p.gaps.push_back({"address-space", limit_text(LimitText::GapAddressSpace)});
            rl(RLIMIT_AS, *s.memory, *s.memory);
        }
        out.limits.push_back(std::move(p));
    }
    if (s.max_procs) {
        Planned p{"pids", *s.max_procs, "", "", {}};
        if (delegated("pids")) {
            out.leaf = true;
            p.backend = "cgroup";
            p.how = "pids.max";
            out.cgroup_files.emplace_back("pids.max", std::to_string(*s.max_procs));
        } else if (out.required) {
            refusal = limit_text(LimitText::PidsNeedsCgroup, h.uid0 && leaf_ok ? "the pids controller is not delegated" : why);
            return false;
        } else if (h.uid0) {
            p.backend = "none";
            p.gaps.push_back({"uid-0-exempt", limit_text(LimitText::GapUid0)});
        } else {
            p.backend = "rlimit";
            p.how = std::string(rlimit_name(RLIMIT_NPROC));
            p.gaps.push_back({"per-uid", limit_text(LimitText::GapPerUid)});
            rl(RLIMIT_NPROC, *s.max_procs, *s.max_procs);
        }
        out.limits.push_back(std::move(p));
    }
    if (s.cpu_time_ms) {
        if (out.required) {
            refusal = limit_text(LimitText::CpuPerProcess);
            return false;
        }
        Planned p{"cpu", *s.cpu_time_ms, "rlimit", std::string(rlimit_name(RLIMIT_CPU)), {}};
        p.gaps.push_back({"per-process", limit_text(LimitText::GapPerProcessCpu)});
        // Whole seconds, rounded up: SIGXCPU at the soft limit, SIGKILL a
        // second later for a process that ignores it.
        const uint64_t secs = (*s.cpu_time_ms + 999) / 1000;
        rl(RLIMIT_CPU, secs, secs + 1);
        out.limits.push_back(std::move(p));
    }
    if (s.file_size) {
        out.limits.push_back({"file-size", *s.file_size, "rlimit", std::string(rlimit_name(RLIMIT_FSIZE)), {}});
        rl(RLIMIT_FSIZE, *s.file_size, *s.file_size);
    }
    if (s.nofile) {
        out.limits.push_back({"nofile", *s.nofile, "rlimit", std::string(rlimit_name(RLIMIT_NOFILE)), {}});
        rl(RLIMIT_NOFILE, *s.nofile, *s.nofile);
    }
    if (!s.allow_core.value_or(false)) {
        out.limits.push_back({"core", 0, "rlimit", std::string(rlimit_name(RLIMIT_CORE)), {}});
        rl(RLIMIT_CORE, 0, 0);
    }
    return true;
#endif
}

#if !defined(_WIN32)

namespace {

bool read_small(const std::string& path, std::string& out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    out.clear();
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && out.size() < (1 << 20)) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return n >= 0;
}

bool write_small(int dirfd, const char* file, std::string_view value) {
    const int fd = ::openat(dirfd, file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = ::write(fd, value.data(), value.size());
    const int e = errno;
    ::close(fd);
    errno = e;
    return n == static_cast<ssize_t>(value.size());
}

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
        size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\n' && s[j] != '\t') ++j;
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j;
    }
    return out;
}

// The inode of our PID namespace: a pid in a leaf's name means something only
// to runs in the same one.
std::string pid_ns() {
    struct stat st {};
    if (::stat("/proc/self/ns/pid", &st) != 0) return "0";
    return std::to_string(static_cast<unsigned long long>(st.st_ino));
}

// "0::/path" of /proc/self/cgroup, and the cgroup2 mount point.
std::string cgroup2_mount() {
    std::string mi;
    if (!read_small("/proc/self/mountinfo", mi)) return {};
    size_t pos = 0;
    while (pos < mi.size()) {
        size_t eol = mi.find('\n', pos);
        if (eol == std::string::npos) eol = mi.size();
        const std::string line = mi.substr(pos, eol - pos);
        pos = eol + 1;
        const size_t dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        const auto after = words(line.substr(dash + 3));
        if (after.empty() || after[0] != "cgroup2") continue;
        const auto before = words(line.substr(0, dash));
        if (before.size() < 5 || before[3] != "/") continue;  // the hierarchy's root mounted there
        return before[4];
    }
    return {};
}

}  // namespace

Host probe() {
    Host h;
    h.uid0 = ::getuid() == 0;
    std::string self;
    if (!read_small("/proc/self/cgroup", self)) {
        h.why_no_cgroup = "/proc/self/cgroup cannot be read";
        return h;
    }
    std::string rel;
    bool found = false;
    for (const auto& line : words(self))
        if (line.rfind("0::", 0) == 0) {
            rel = line.substr(3);
            found = true;
        }
    const std::string mount = cgroup2_mount();
    if (!found || mount.empty()) {
        h.why_no_cgroup = "no cgroup v2 hierarchy is mounted";
        return h;
    }
    // The mount may be under a cgroup namespace whose root is ours; a path
    // that leaves it ("/..") is not one we can reach.
    if (rel.find("/..") != std::string::npos) {
        h.why_no_cgroup = "this process's cgroup is outside the mounted cgroup v2 hierarchy";
        return h;
    }
    h.cgroup_dir = rel == "/" ? mount : mount + rel;
    struct stat st {};
    if (::stat(h.cgroup_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        h.why_no_cgroup = fmt::format("{} is not there", h.cgroup_dir);
        h.cgroup_dir.clear();
        return h;
    }
    // Delegated to us: we may make a child there and move a process into it
    // (write access to the common ancestor's cgroup.procs).
    h.can_make_leaf = ::access(h.cgroup_dir.c_str(), W_OK) == 0 &&
                      ::access((h.cgroup_dir + "/cgroup.procs").c_str(), W_OK) == 0;
    if (!h.can_make_leaf) {
        h.why_no_cgroup = fmt::format("{} is not delegated to this user", h.cgroup_dir);
        return h;
    }
    // The controllers its children get: enabled in its subtree_control (by
    // whoever delegated it; we never write a cgroup we did not make).
    std::string controllers, subtree;
    read_small(h.cgroup_dir + "/cgroup.controllers", controllers);
    read_small(h.cgroup_dir + "/cgroup.subtree_control", subtree);
    const auto have = words(controllers);
    for (const auto& c : words(subtree))
        if (std::find(have.begin(), have.end(), c) != have.end()) h.delegated.push_back(c);
    std::string list;
    for (const auto& c : h.delegated) list += (list.empty() ? "" : ", ") + c;
    h.why_no_cgroup = h.delegated.empty()
                          ? fmt::format("{} enables no controller for its children", h.cgroup_dir)
                          : fmt::format("{} enables only {} for its children", h.cgroup_dir, list);
    return h;
}

// --- the leaf ---

namespace {

// Kills what is in the leaf (cgroup.kill, or SIGKILL to each pid listed
// where the kernel has no cgroup.kill), waits until it is empty (bounded),
// then removes it.
bool kill_and_remove(const std::string& path, int ms) {
    const int dfd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return errno == ENOENT;
    const double until = spawn::now_ms() + ms;
    bool gone = false;
    while (true) {
        if (!write_small(dfd, "cgroup.kill", "1")) {
            std::string procs;
            if (read_small(path + "/cgroup.procs", procs))
                for (const auto& w : words(procs)) ::kill(static_cast<pid_t>(std::stol(w)), SIGKILL);
        }
        if (::rmdir(path.c_str()) == 0 || errno == ENOENT) {
            gone = true;
            break;
        }
        if (errno != EBUSY || spawn::now_ms() > until) break;
        ::usleep(5000);
    }
    ::close(dfd);
    return gone;
}

}  // namespace

int clean_stale(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    int removed = 0;
    const uid_t me = ::geteuid();
    const std::string ns = pid_ns();
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d)) {
        const std::string_view name = e->d_name;
        if (name.substr(0, kLeafPrefix.size()) != kLeafPrefix) continue;
        // dsh-confine-<pid ns>-<pid>-<start time>: its run is gone when that
        // pid is not alive or is another process now. A leaf of a run in
        // another PID namespace is not ours to judge.
        std::string_view rest = name.substr(kLeafPrefix.size());
        if (rest.substr(0, ns.size() + 1) != ns + "-") continue;
        rest.remove_prefix(ns.size() + 1);
        const size_t dash = rest.find('-');
        uint64_t pid = 0;
        if (dash == std::string_view::npos || !parse_count(rest.substr(0, dash), pid) || pid > INT_MAX) continue;
        const std::string path = dir + "/" + std::string(name);
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me) continue;
        if (proctree::stat_of(static_cast<long>(pid)).start_time == rest.substr(dash + 1)) continue;  // its run is alive
        stale.push_back(path);
    }
    ::closedir(d);
    for (const auto& p : stale)
        if (kill_and_remove(p, 2000)) ++removed;
    return removed;
}

Leaf::~Leaf() { (void)remove(); }

bool Leaf::make(const Plan& p, std::string& error) {
    if (!p.leaf) return true;
    clean_stale(p.cgroup_dir);
    const std::string mine = proctree::stat_of(static_cast<long>(::getpid())).start_time;
    path_ = fmt::format("{}/{}{}-{}-{}", p.cgroup_dir, kLeafPrefix, pid_ns(), ::getpid(), mine.empty() ? "0" : mine);
    if (::mkdir(path_.c_str(), 0755) != 0) {
        error = fmt::format("mkdir {}: {}", path_, std::strerror(errno));
        path_.clear();
        return false;
    }
    fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ >= 0) procs_fd_ = ::openat(fd_, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (fd_ < 0 || procs_fd_ < 0) {
        error = fmt::format("open {}: {}", path_, std::strerror(errno));
        remove();
        return false;
    }
    for (const auto& [file, value] : p.cgroup_files) {
        const bool optional = !file.empty() && file[0] == '?';
        const char* name = file.c_str() + (optional ? 1 : 0);
        if (!write_small(fd_, name, value) && !(optional && errno == ENOENT)) {
            error = fmt::format("{}/{}: {}", path_, name, std::strerror(errno));
            remove();
            return false;
        }
    }
    return true;
}

bool Leaf::kill() const noexcept {
    if (fd_ < 0) return false;
    return write_small(fd_, "cgroup.kill", "1");
}

bool Leaf::remove() {
    if (path_.empty()) return true;
    if (procs_fd_ >= 0) ::close(procs_fd_), procs_fd_ = -1;
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
    const bool ok = kill_and_remove(path_, 5000);
    if (ok) path_.clear();
    return ok;
}

uint64_t Leaf::counter(const char* file, const char* key) const {
    if (path_.empty()) return 0;
    std::string text;
    if (!read_small(path_ + "/" + file, text)) return 0;
    const auto w = words(text);
    for (size_t i = 0; i + 1 < w.size(); ++i) {
        uint64_t n = 0;
        if (w[i] == key) return parse_count(w[i + 1], n) ? n : 0;
    }
    return 0;
}

bool apply_in_child(int procs_fd, const Rlimit* rl, size_t n) noexcept {
    if (procs_fd >= 0 && ::write(procs_fd, "0", 1) != 1) return false;
    for (size_t i = 0; i < n; ++i) {
        struct rlimit r {};
        r.rlim_cur = rl[i].soft == UINT64_MAX ? RLIM_INFINITY : static_cast<rlim_t>(rl[i].soft);
        r.rlim_max = rl[i].hard == UINT64_MAX ? RLIM_INFINITY : static_cast<rlim_t>(rl[i].hard);
        // Never raise: a hard limit above the one we have fails (EPERM) for
        // an unprivileged caller; the lower of the two is kept.
        struct rlimit cur {};
        if (::getrlimit(rl[i].resource, &cur) == 0) {
            if (cur.rlim_max != RLIM_INFINITY && r.rlim_max > cur.rlim_max) r.rlim_max = cur.rlim_max;
            if (r.rlim_cur > r.rlim_max) r.rlim_cur = r.rlim_max;
        }
        if (::setrlimit(rl[i].resource, &r) != 0) return false;
    }
    return true;
}

#endif

}  // namespace limits
}  // namespace dsh
