// The session mode log: JSON lines, one event each. The last
// {"type":"sandbox/mode","seq":N,"time":MS,"data":{"mode":M,"network":NET}}
// event sets the session's mode and, when it names one, its network (off,
// loopback or host: part of the policy, issue 17); replaying the log is the state. Reading never guesses: a
// line that does not parse, or a mode outside the closed set, is an error
// (a silent skip could fall back to a wider mode from an earlier event).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "policy.hpp"

namespace dsh {

// Bounds on what a log may hold (see docs/DECISIONS.md): one event is well
// under 200 bytes, so these leave room for years of set-mode calls while a
// garbage file is refused instead of read into memory.
inline constexpr size_t kMaxSessionLineBytes = 64 * 1024;
inline constexpr size_t kMaxSessionBytes = 16 * 1024 * 1024;

struct SessionState {
    std::optional<Mode> mode;      // the last sandbox/mode event's mode; none: no event
    std::optional<Network> network;  // that event's data.network; none: the session sets no network
    // data.network "allow" (issue 19): network is loopback (the namespace)
    // and these are data.allow / data.deny, the entries as given (checked).
    std::vector<std::string> net_allow, net_deny;
    std::string source;            // its data.source ("delegation"), empty when absent
    size_t mode_line = 0;          // 1-based line of that event
    size_t lines = 0;              // non-empty lines seen
    std::optional<uint64_t> max_seq;  // the largest "seq" seen on any line
    // The session header's cwd ({"type":"session","cwd":ABS,...}): the
    // session's immutable working directory, its workspace root.
    std::optional<std::string> cwd;
    size_t cwd_line = 0;           // 1-based line of that header
    // No confined run could have written the log (sealed_file; read_session
    // sets it): only then is its danger-full-access taken (issue 37).
    bool sealed = false;
};

// Folds a log line by line. `origin` names the log in messages:
// "session log FILE line N: ...".
class SessionFolder {
public:
    explicit SessionFolder(std::string origin) : origin_(std::move(origin)) {}
    // One line without its '\n'. Empty lines are skipped.
    Outcome line(std::string_view text);
    // Bytes as they arrive, split anywhere: whole lines go to line(), a
    // partial one waits for the next chunk. Memory stays bounded by the
    // longest line. finish() folds a last line that has no '\n' (a torn
    // append then shows up as a parse error, which is the point).
    Outcome feed(std::string_view chunk);
    Outcome finish();
    const SessionState& state() const noexcept { return state_; }

private:
    Outcome too_long(size_t lineno);
    Outcome header(const nlohmann::json& ev, const std::function<Outcome(const std::string&)>& bad);
    std::string origin_;
    size_t lineno_ = 0;
    size_t bytes_ = 0;
    std::string pending_;
    SessionState state_;
};

// Pure: folds a whole log held in memory.
Outcome fold_session_log(std::string_view text, const std::string& origin, SessionState& out);

// Reads and folds the log at `path` under a shared lock (so an append in
// progress is never half-seen). A missing file is an error: the caller named it.
// The log decides the next run's mode, so it must be a regular file (not a
// symlink, FIFO or device) that only the caller or root can write, in
// directories only they can write (OpenRules::trusted).
Outcome read_session(const std::string& path, SessionState& out);

// The one event line set-mode appends, '\n' included.
// `network`: written when given (the event then carries the whole policy).
// `allow` non-empty: the network is "allow" with these entries (and `deny`).
std::string mode_event_line(Mode mode, uint64_t seq, int64_t time_ms, std::optional<Network> network = std::nullopt,
                            const std::vector<std::string>& allow = {}, const std::vector<std::string>& deny = {});

// Appends one sandbox/mode event: creates the file if needed (mode 0644,
// never through a symlink, only in a directory chain owned by the caller or
// root and writable by nobody else), takes an
// exclusive flock, folds what is there (a malformed log is refused, not
// extended), writes the line with one O_APPEND write, fsyncs. A short write
// or a failed fsync (a full disk) is undone by truncating back, and is an error.
// network: the event's network; none: the log's current one is carried over,
// so a set-mode that only names a mode never widens the network by dropping it.
// allow/deny: --net allow='s entries (network is then loopback); carried over with the network.
Outcome append_mode_event(const std::string& path, Mode mode, std::optional<Network> network = std::nullopt,
                          const std::vector<std::string>& allow = {}, const std::vector<std::string>& deny = {});

}  // namespace dsh
