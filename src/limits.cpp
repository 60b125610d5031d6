#include "limits.hpp"
#include "bytes.hpp"

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
#include "fd.hpp"
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
    // A cgroup v1 hierarchy of the controller where we may make a leaf, and
    // the reason for the refusal when neither version gives one.
    const auto v1_ok = [](const Host::V1& v) { return !v.dir.empty() && v.can_make_leaf; };
    const auto why_both = [&](const Host::V1& v) { return v.why.empty() ? why : why + "; " + v.why; };
    const auto v1_leaf = [&](const char* ctl, const Host::V1& v,
                             std::vector<std::pair<std::string, std::string>> files) {
        out.leaf = true;
        out.v1.push_back({ctl, v.dir, std::move(files)});
    };
#if defined(_WIN32)
    (void)delegated;
    (void)why;
    (void)v1_ok;
    (void)why_both;
    (void)v1_leaf;
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
            out.leaf = out.v2 = true;
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
            out.leaf = out.v2 = true;
            p.backend = "cgroup";
            p.how = "memory.max";
            out.cgroup_files.emplace_back("memory.max", std::to_string(*s.memory));
            // Swap would let the command past the bound (the file is there
            // only with swap accounting).
            out.cgroup_files.emplace_back("?memory.swap.max", "0");
        } else if (v1_ok(h.v1_memory)) {
            p.backend = "cgroup";
            p.how = "memory.limit_in_bytes (cgroup v1)";
            // memsw (memory + swap) after the memory limit (the kernel keeps
            // memsw >= memory); there only with swap accounting.
            const std::string v = std::to_string(*s.memory);
            v1_leaf("memory", h.v1_memory, {{"memory.limit_in_bytes", v}, {"?memory.memsw.limit_in_bytes", v}});
        } else if (out.required) {
            refusal = limit_text(LimitText::MemoryNeedsCgroup, why_both(h.v1_memory));
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
            out.leaf = out.v2 = true;
            p.backend = "cgroup";
            p.how = "pids.max";
            out.cgroup_files.emplace_back("pids.max", std::to_string(*s.max_procs));
        } else if (v1_ok(h.v1_pids)) {
            p.backend = "cgroup";
            p.how = "pids.max (cgroup v1)";
            v1_leaf("pids", h.v1_pids, {{"pids.max", std::to_string(*s.max_procs)}});
        } else if (out.required) {
            refusal = limit_text(LimitText::PidsNeedsCgroup, why_both(h.v1_pids));
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

namespace {

// A mountinfo field with its octal escapes ("\040" for a space) undone.
std::string unescape(std::string_view f) {
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] == '\\' && i + 3 < f.size() && f[i + 1] >= '0' && f[i + 1] <= '3' && f[i + 2] >= '0' &&
            f[i + 2] <= '7' && f[i + 3] >= '0' && f[i + 3] <= '7') {
            out += static_cast<char>((f[i + 1] - '0') * 64 + (f[i + 2] - '0') * 8 + (f[i + 3] - '0'));
            i += 3;
        } else {
            out += f[i];
        }
    }
    return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (true) {
        const size_t j = s.find(sep, i);
        out.push_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
        if (j == std::string_view::npos) return out;
        i = j + 1;
    }
}

bool has(const std::vector<std::string_view>& list, std::string_view w) {
    return std::find(list.begin(), list.end(), w) != list.end();
}

}  // namespace

std::string v1_dir(const std::string& mountinfo, const std::string& self_cgroup, std::string_view controller,
                   std::string& why) {
    // "4:memory:/a/b" (the controllers of a hierarchy comma-separated; the
    // path may hold colons).
    std::string rel;
    bool found = false;
    for (std::string_view line : split(self_cgroup, '\n')) {
        const size_t c1 = line.find(':');
        if (c1 == std::string_view::npos) continue;
        const size_t c2 = line.find(':', c1 + 1);
        if (c2 == std::string_view::npos) continue;
        if (!has(split(line.substr(c1 + 1, c2 - c1 - 1), ','), controller)) continue;
        rel = std::string(line.substr(c2 + 1));
        found = true;
        break;
    }
    if (!found || rel.empty() || rel[0] != '/') {
        why = fmt::format("no cgroup v1 {} hierarchy holds this process", controller);
        return {};
    }
    if (rel.find("/..") != std::string::npos) {
        why = fmt::format("this process's cgroup is outside the mounted cgroup v1 {} hierarchy", controller);
        return {};
    }
    // "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory":
    // the hierarchy's root in the mount (field 4), the mount point (5), the
    // super options after " - " name the controllers.
    bool mounted = false;
    for (std::string_view line : split(mountinfo, '\n')) {
        const size_t dash = line.find(" - ");
        if (dash == std::string_view::npos) continue;
        std::vector<std::string_view> after, before;
        for (auto w : split(line.substr(dash + 3), ' '))
            if (!w.empty()) after.push_back(w);
        if (after.size() < 3 || after[0] != "cgroup" || !has(split(after[2], ','), controller)) continue;
        for (auto w : split(line.substr(0, dash), ' '))
            if (!w.empty()) before.push_back(w);
        if (before.size() < 5) continue;
        mounted = true;
        const std::string root = unescape(before[3]);
        const std::string mount = unescape(before[4]);
        // Our cgroup must be the mounted root or below it.
        if (root == "/") return rel == "/" ? mount : mount + rel;
        if (rel == root) return mount;
        if (rel.size() > root.size() && rel.compare(0, root.size(), root) == 0 && rel[root.size()] == '/')
            return mount + rel.substr(root.size());
    }
    why = mounted ? fmt::format("this process's cgroup is outside the mounted cgroup v1 {} hierarchy", controller)
                  : fmt::format("no cgroup v1 {} hierarchy is mounted", controller);
    return {};
}

#if !defined(_WIN32)

namespace {

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
    std::string point;
    for_each_line(mi, [&](std::string_view l) {
        const std::string line(l);
        const size_t dash = line.find(" - ");
        if (dash == std::string::npos) return true;
        const auto after = words(line.substr(dash + 3));
        if (after.empty() || after[0] != "cgroup2") return true;
        const auto before = words(line.substr(0, dash));
        if (before.size() < 5 || before[3] != "/") return true;  // the hierarchy's root mounted there
        point = before[4];
        return false;
    });
    return point;
}

}  // namespace

namespace {

void probe_v2(Host& h, const std::string& self) {
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
        return;
    }
    // The mount may be under a cgroup namespace whose root is ours; a path
    // that leaves it ("/..") is not one we can reach.
    if (rel.find("/..") != std::string::npos) {
        h.why_no_cgroup = "this process's cgroup is outside the mounted cgroup v2 hierarchy";
        return;
    }
    h.cgroup_dir = rel == "/" ? mount : mount + rel;
    struct stat st {};
    if (::stat(h.cgroup_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        h.why_no_cgroup = fmt::format("{} is not there", h.cgroup_dir);
        h.cgroup_dir.clear();
        return;
    }
    // Delegated to us: we may make a child there and move a process into it
    // (write access to the common ancestor's cgroup.procs).
    h.can_make_leaf = ::access(h.cgroup_dir.c_str(), W_OK) == 0 &&
                      ::access((h.cgroup_dir + "/cgroup.procs").c_str(), W_OK) == 0;
    if (!h.can_make_leaf) {
        h.why_no_cgroup = fmt::format("{} is not delegated to this user", h.cgroup_dir);
        return;
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
}

Host::V1 probe_v1(const std::string& mountinfo, const std::string& self, std::string_view controller) {
    Host::V1 v;
    v.dir = v1_dir(mountinfo, self, controller, v.why);
    if (v.dir.empty()) return v;
    struct stat st {};
    if (::stat(v.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        v.why = fmt::format("{} is not there", v.dir);
        v.dir.clear();
        return v;
    }
    // cgroup v1 has no delegation of its own: a directory we may make there
    // (and move ourselves into: our leaf's cgroup.procs is ours).
    v.can_make_leaf = ::access(v.dir.c_str(), W_OK) == 0;
    if (!v.can_make_leaf) v.why = fmt::format("the cgroup v1 {} directory {} is not writable by this user", controller, v.dir);
    return v;
}

}  // namespace

Host probe() {
    Host h;
    h.uid0 = ::getuid() == 0;
    std::string self, mountinfo;
    if (!read_small("/proc/self/cgroup", self)) {
        h.why_no_cgroup = "/proc/self/cgroup cannot be read";
        return h;
    }
    probe_v2(h, self);
    read_small("/proc/self/mountinfo", mountinfo);
    h.v1_memory = probe_v1(mountinfo, self, "memory");
    h.v1_pids = probe_v1(mountinfo, self, "pids");
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

bool Leaf::add(const std::string& parent, bool v1, const std::vector<std::pair<std::string, std::string>>& files,
               std::string& error) {
    if (n_ >= kMaxLeaves) {
        error = "too many cgroup leaves";
        return false;
    }
    clean_stale(parent);
    const std::string mine = proctree::stat_of(static_cast<long>(::getpid())).start_time;
    std::string path = fmt::format("{}/{}{}-{}-{}", parent, kLeafPrefix, pid_ns(), ::getpid(), mine.empty() ? "0" : mine);
    if (::mkdir(path.c_str(), 0755) != 0) {
        error = fmt::format("mkdir {}: {}", path, std::strerror(errno));
        return false;
    }
    // Ours from here on: remove() takes it down whatever fails next.
    const size_t i = n_++;
    paths_[i] = std::move(path);
    v1_[i] = v1;
    fds_[i] = ::open(paths_[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fds_[i] >= 0) procs_fds_[i] = ::openat(fds_[i], "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (fds_[i] < 0 || procs_fds_[i] < 0) {
        error = fmt::format("open {}: {}", paths_[i], std::strerror(errno));
        return false;
    }
    for (const auto& [file, value] : files) {
        const bool optional = !file.empty() && file[0] == '?';
        const char* name = file.c_str() + (optional ? 1 : 0);
        if (!write_small(fds_[i], name, value) && !(optional && errno == ENOENT)) {
            error = fmt::format("{}/{}: {}", paths_[i], name, std::strerror(errno));
            return false;
        }
    }
    return true;
}

bool Leaf::make(const Plan& p, std::string& error) {
    if (!p.leaf) return true;
    bool ok = !p.v2 || add(p.cgroup_dir, false, p.cgroup_files, error);
    for (const auto& l : p.v1) ok = ok && add(l.parent, true, l.files, error);
    if (!ok) remove();
    return ok;
}

bool Leaf::kill() const noexcept {
    bool ok = n_ > 0;
    for (size_t i = 0; i < n_; ++i) {
        if (fds_[i] < 0) continue;
        if (!v1_[i]) {
            ok = write_small(fds_[i], "cgroup.kill", "1") && ok;
            continue;
        }
        // No cgroup.kill in v1: SIGKILL to each pid listed, in rounds while
        // new ones appear (a fork between the read and the kill), bounded.
        for (int round = 0; round < 50; ++round) {
            char buf[4096];
            const int fd = ::openat(fds_[i], "cgroup.procs", O_RDONLY | O_CLOEXEC);
            if (fd < 0) break;
            const ssize_t n = ::read(fd, buf, sizeof buf);
            ::close(fd);
            if (n <= 0) break;
            long pid = 0;
            bool digits = false;
            for (ssize_t k = 0; k < n; ++k) {
                if (buf[k] >= '0' && buf[k] <= '9') {
                    pid = pid * 10 + (buf[k] - '0');
                    digits = true;
                } else {
                    if (digits && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
                    pid = 0;
                    digits = false;
                }
            }
            if (digits && pid > 0 && n < static_cast<ssize_t>(sizeof buf)) ::kill(static_cast<pid_t>(pid), SIGKILL);
            ::usleep(2000);
        }
    }
    return ok;
}

bool Leaf::remove() {
    bool ok = true;
    size_t kept = 0;
    for (size_t i = 0; i < n_; ++i) {
        if (procs_fds_[i] >= 0) ::close(procs_fds_[i]), procs_fds_[i] = -1;
        if (fds_[i] >= 0) ::close(fds_[i]), fds_[i] = -1;
        if (kill_and_remove(paths_[i], 5000)) {
            paths_[i].clear();
        } else {
            ok = false;
            // Not removed: kept for another try (the destructor's).
            if (kept != i) paths_[kept] = std::move(paths_[i]);
            v1_[kept++] = v1_[i];
        }
    }
    n_ = kept;
    return ok;
}

uint64_t Leaf::counter(const char* file, const char* key) const {
    for (size_t i = 0; i < n_; ++i) {
        std::string text;
        if (paths_[i].empty() || !read_small(paths_[i] + "/" + file, text)) continue;
        const auto w = words(text);
        for (size_t k = 0; k + 1 < w.size(); ++k) {
            uint64_t v = 0;
            if (w[k] == key) return parse_count(w[k + 1], v) ? v : 0;
        }
        return 0;
    }
    return 0;
}

bool Leaf::oom_killed() const {
    // v2: memory.events; v1: memory.oom_control's oom_kill (memory.failcnt
    // counts every charge that hit the limit, also those that reclaim
    // resolved, and stays 0 on some kernels at an OOM kill).
    return counter("memory.events", "oom_kill") > 0 || counter("memory.oom_control", "oom_kill") > 0;
}

bool Leaf::pids_refused() const { return counter("pids.events", "max") > 0; }

bool apply_in_child(const int* procs_fds, const Rlimit* rl, size_t n) noexcept {
    for (size_t i = 0; procs_fds && i < kMaxLeaves && procs_fds[i] >= 0; ++i)
        if (::write(procs_fds[i], "0", 1) != 1) return false;
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
