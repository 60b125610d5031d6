// Resource limits and the timeout (issue 21): what was asked (flags and the
// config's keys), which backend enforces each limit here and what it leaves
// open, and the machinery: rlimits set by the process that becomes the
// command, a cgroup v2 leaf of ours (limits, cgroup.kill), and the kill of
// every descendant at a timeout.
//
// Backends, best first: a cgroup v2 leaf that dsh-confine creates under the
// caller's own cgroup where that cgroup is delegated to it (writable by us,
// the controller enabled for its children); else, for memory and pids, a
// cgroup v1 leaf under the caller's cgroup in that controller's v1
// hierarchy where it is writable by us (root on a host whose controllers are
// bound to v1); then rlimits, each with its weakness as a typed gap. `--limits required` refuses a limit that only a
// weaker backend could give (125, nothing runs). A cgroup that dsh-confine
// did not create is never written; the leaves it made are removed at the end
// of the run, and a leaf left by a run that was SIGKILLed is removed by the
// next run that makes one (same parent, our name prefix, owned by us, its
// run gone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsh {

// What was asked, from the flags and the config ("limits" keys); nullopt: not asked.
struct LimitSettings {
    std::optional<uint64_t> timeout_ms;     // --timeout, "timeout"
    std::optional<uint64_t> kill_after_ms;  // --kill-after, "killAfter" (default 5 s)
    std::optional<uint64_t> max_procs;      // --max-procs, "maxProcs"
    std::optional<uint64_t> memory;         // --memory, "memory" (bytes)
    std::optional<uint64_t> cpu_time_ms;    // --cpu-time, "cpuTime"
    std::optional<uint64_t> file_size;      // --file-size, "fileSize" (bytes)
    std::optional<uint64_t> nofile;         // --nofile, "nofile"
    std::optional<bool> required;           // --limits required|best-effort, "limits"
    std::optional<bool> allow_core;         // --allow-core, "allowCore"

    // Each member the other has and this one has not (flags over the config).
    void fill_from(const LimitSettings& lower);
};

inline constexpr uint64_t kDefaultKillAfterMs = 5000;
// timeout(1)'s status for a command it timed out.
inline constexpr int kTimeoutStatus = 124;

namespace limits {

// "512M", "2G", "64k", "1048576" (bytes); K, M, G, T are powers of 1024, an
// optional "B" or "iB" after them. Positive, no overflow.
bool parse_size(std::string_view s, uint64_t& bytes);
// "90s", "5m", "1h", "500ms", "1.5s", "30" (seconds, as timeout(1)). Positive.
bool parse_duration_ms(std::string_view s, uint64_t& ms);
// A positive whole number.
bool parse_count(std::string_view s, uint64_t& n);

// One limit as enforced here: the record's `limits` member names each.
struct Gap {
    std::string effect;  // "address-space", "per-uid", "per-process", "uid-0-exempt", ...
    std::string detail;
};
struct Planned {
    std::string name;     // "timeout", "memory", "pids", "cpu", "file-size", "nofile", "core"
    uint64_t value = 0;   // bytes, a count, or milliseconds
    std::string backend;  // "cgroup", "rlimit", "process-tree", "none"
    std::string how;      // "memory.max", "RLIMIT_AS", "cgroup.kill", ...
    std::vector<Gap> gaps;
};

struct Rlimit {
    int resource = 0;
    uint64_t soft = 0, hard = 0;
};

// What the host offers: found by probe(), or made up by the unit tests.
struct Host {
    // The caller's cgroup v2 directory (the leaf's parent); empty: none.
    std::string cgroup_dir;
    bool can_make_leaf = false;             // the directory is writable by us
    std::vector<std::string> delegated;     // controllers enabled for its children ("memory", "pids", "cpu")
    std::string why_no_cgroup;              // when there is no leaf to make, or a controller is missing
    bool uid0 = false;                      // RLIMIT_NPROC does not bind uid 0
    // The cgroup v1 hierarchies of "memory" and "pids": the caller's cgroup
    // in each (the leaf's parent; empty: none) and whether we may make a
    // directory there.
    struct V1 {
        std::string dir;
        bool can_make_leaf = false;
        std::string why;  // when there is no leaf to make
    };
    V1 v1_memory, v1_pids;
};

// The caller's cgroup directory in the cgroup v1 hierarchy that holds
// `controller` (pure: the text of /proc/self/mountinfo and /proc/self/cgroup).
// Empty, with the reason in `why`, when there is none or it is not reachable
// through the mount.
std::string v1_dir(const std::string& mountinfo, const std::string& self_cgroup, std::string_view controller,
                   std::string& why);
#if !defined(_WIN32)
Host probe();
#endif

// The most cgroup leaves a run makes: the v2 one, v1 memory, v1 pids.
inline constexpr size_t kMaxLeaves = 3;

// A cgroup v1 leaf to make: its parent (the caller's cgroup in the
// controller's hierarchy) and the files written in it, in order ("?file":
// written where it exists).
struct V1Leaf {
    std::string controller;  // "memory", "pids"
    std::string parent;
    std::vector<std::pair<std::string, std::string>> files;
};

struct Plan {
    bool required = false;
    std::vector<Planned> limits;
    std::vector<Rlimit> rlimits;                                 // set by the command's process
    std::vector<std::pair<std::string, std::string>> cgroup_files;  // written in the leaf (file, value)
    bool leaf = false;              // a cgroup leaf (v2 or v1) is made for this run
    bool v2 = false;                // the v2 leaf, under cgroup_dir, with cgroup_files
    std::string cgroup_dir;         // its parent
    std::vector<V1Leaf> v1;         // the v1 leaves (no cgroup.kill: the timeout is the process tree's)
    std::optional<uint64_t> timeout_ms;
    uint64_t kill_after_ms = kDefaultKillAfterMs;
    bool timeout_by_tree = false;   // the timeout kills the process tree (no leaf)

    bool needs_parent() const noexcept { return timeout_ms.has_value() || leaf; }
};

// The backend for each limit (pure). Under `required`, a limit that no
// backend here gives as asked is refused: false, and the reason (errors.cpp's
// table) in `refusal`.
bool plan(const LimitSettings& s, const Host& h, Plan& out, std::string& refusal);

// Whether any limit that needs the host's answer (a cgroup) is asked.
bool needs_host(const LimitSettings& s) noexcept;

// "RLIMIT_AS", ... for the record.
std::string_view rlimit_name(int resource) noexcept;

#if !defined(_WIN32)
// The run's cgroup leaves: the v2 one under the plan's parent and one per
// v1 hierarchy, each named "dsh-confine-<pid ns inode>-<pid>-<start time>",
// removed by remove(). Stale leaves of ours in the same parent (the same
// prefix and PID namespace, owned by us, their run gone) are removed first.
class Leaf {
public:
    Leaf() = default;
    Leaf(const Leaf&) = delete;
    Leaf& operator=(const Leaf&) = delete;
    ~Leaf();  // remove()
    // Makes the leaves and writes the plan's files; the error text on
    // failure (what was made is removed).
    bool make(const Plan& p, std::string& error);
    bool active() const noexcept { return n_ > 0; }
    // Each leaf's cgroup.procs opened for writing (-1 past the last): the
    // child writes "0" into each (joins).
    const int* procs_fds() const noexcept { return procs_fds_; }
    // Every process in them gets SIGKILL: cgroup.kill (v2); each pid listed
    // in cgroup.procs (v1, in rounds until empty, bounded).
    bool kill() const noexcept;
    // Waits (bounded) until each is empty, then removes it.
    bool remove();
    // A counter of the first leaf that has the file: "memory.events"
    // "oom_kill", "memory.oom_control" "oom_kill" (v1), "pids.events" "max".
    uint64_t counter(const char* file, const char* key) const;
    // The command met the memory limit (an OOM kill in a leaf) / the pids
    // limit (a fork refused in a leaf).
    bool oom_killed() const;
    bool pids_refused() const;
    const std::string& path(size_t i = 0) const noexcept { return paths_[i]; }
    size_t size() const noexcept { return n_; }

private:
    std::string paths_[kMaxLeaves];
    bool v1_[kMaxLeaves] = {};
    int fds_[kMaxLeaves] = {-1, -1, -1};
    int procs_fds_[kMaxLeaves] = {-1, -1, -1};
    size_t n_ = 0;
    bool add(const std::string& parent, bool v1, const std::vector<std::pair<std::string, std::string>>& files,
             std::string& error);
};

// Removes the stale leaves of ours under `dir` (kills what is left in them).
// Returns how many were removed.
int clean_stale(const std::string& dir);
// The name prefix of our leaves.
inline constexpr std::string_view kLeafPrefix = "dsh-confine-";

// In the child, before exec (system calls only): joins each leaf through
// `procs_fds` (up to kMaxLeaves, -1 ends the list; null: none) and sets the
// rlimits. Returns false with errno set.
bool apply_in_child(const int* procs_fds, const Rlimit* rl, size_t n) noexcept;
#endif

}  // namespace limits
}  // namespace dsh
