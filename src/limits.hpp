// Resource limits and the timeout (issue 21): what was asked (flags and the
// config's keys), which backend enforces each limit here and what it leaves
// open, and the machinery: rlimits set by the process that becomes the
// command, a cgroup v2 leaf of ours (limits, cgroup.kill), and the kill of
// every descendant at a timeout.
//
// Backends, best first: a cgroup v2 leaf that dsh-confine creates under the
// caller's own cgroup where that cgroup is delegated to it (writable by us,
// the controller enabled for its children), then rlimits, each with its
// weakness as a typed gap. `--limits required` refuses a limit that only a
// weaker backend could give (125, nothing runs). A cgroup that dsh-confine
// did not create is never written; the leaves it made are removed at the end
// of the run, and a leaf left by a run that was SIGKILLed is removed by the
// next run that makes one (same parent, our name prefix, owned by us, its
// run gone).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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
};
#if !defined(_WIN32)
Host probe();
#endif

struct Plan {
    bool required = false;
    std::vector<Planned> limits;
    std::vector<Rlimit> rlimits;                                 // set by the command's process
    std::vector<std::pair<std::string, std::string>> cgroup_files;  // written in the leaf (file, value)
    bool leaf = false;              // a cgroup leaf is made for this run
    std::string cgroup_dir;         // its parent
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
// The run's cgroup leaf: made under the plan's parent, named
// "dsh-confine-<pid ns inode>-<pid>-<start time>", removed by remove().
// Stale leaves of ours (the same prefix and PID namespace, owned by us,
// their run gone) are removed first.
class Leaf {
public:
    Leaf() = default;
    Leaf(const Leaf&) = delete;
    Leaf& operator=(const Leaf&) = delete;
    ~Leaf();  // remove()
    // Makes the leaf and writes the plan's files; the error text on failure.
    bool make(const Plan& p, std::string& error);
    bool active() const noexcept { return fd_ >= 0; }
    // cgroup.procs opened for writing: the child writes "0" into it (joins).
    int procs_fd() const noexcept { return procs_fd_; }
    // Every process in it gets SIGKILL (cgroup.kill).
    bool kill() const noexcept;
    // Waits (bounded) until it is empty, then removes it.
    bool remove();
    // Counters from memory.events ("oom_kill") and pids.events ("max").
    uint64_t counter(const char* file, const char* key) const;
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
    int fd_ = -1;
    int procs_fd_ = -1;
};

// Removes the stale leaves of ours under `dir` (kills what is left in them).
// Returns how many were removed.
int clean_stale(const std::string& dir);
// The name prefix of our leaves.
inline constexpr std::string_view kLeafPrefix = "dsh-confine-";

// In the child, before exec (system calls only): joins the leaf through
// `procs_fd` (-1: none) and sets the rlimits. Returns false with errno set.
bool apply_in_child(int procs_fd, const Rlimit* rl, size_t n) noexcept;
#endif

}  // namespace limits
}  // namespace dsh
