#include "session.hpp"
#include "own_state.hpp"

#include <cerrno>
#include <chrono>
#include <limits>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#if defined(_WIN32)
#include <io.h>
#define LOCK_SH 1
#define LOCK_EX 2
#define fsync _commit
#else
#include <sys/file.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "config.hpp"  // kMaxJsonDepth, json_depth_within
#include "net_allow.hpp"

namespace dsh {

namespace {

using json = nlohmann::json;

// flock(2), retried across signals. The lock is advisory: it orders
// dsh-confine's own readers and writers, which is what keeps lines whole.
#if defined(_WIN32)
// Windows: no flock(2); appends are single writes, but concurrent
// set-mode calls are not ordered there (not executed: see docs/PLATFORMS.md).
bool lock(int, int) {
    return true;
}
#else
bool lock(int fd, int how) {
    while (::flock(fd, how) != 0)
        if (errno != EINTR) return false;
    return true;
}
#endif

// Reads fd from its current offset to EOF, feeding the folder.
Outcome fold_fd(int fd, const std::string& path, SessionFolder& folder, off_t& size) {
    char buf[65536];
    size = 0;
    while (true) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            return failf(Err::SessionInvalid, "session log {}: cannot read: {}", path, std::strerror(errno));
        }
        if (n == 0) break;
        size += n;
        if (auto o = folder.feed(std::string_view(buf, static_cast<size_t>(n))); !o) return o;
    }
    return folder.finish();
}

}  // namespace

Outcome SessionFolder::line(std::string_view text) {
    ++lineno_;
    if (text.empty()) return Outcome::success();
    ++state_.lines;
    auto bad = [&](const std::string& why) {
        return failf(Err::SessionInvalid, "session log {} line {}: {}", origin_, lineno_, why);
    };
    if (text.size() > kMaxSessionLineBytes) return too_long(lineno_);
    if (!json_depth_within(text, kMaxJsonDepth))
        return bad(fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    json ev;
    try {
        ev = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        return bad(not_json_text(text, e.byte));
    } catch (const json::exception&) {
        return bad(not_json_text(text, 0));
    }
    if (!ev.is_object()) return bad("not a JSON object");
    auto type = ev.find("type");
    if (type == ev.end() || !type->is_string()) return bad("no string \"type\"");
    if (auto seq = ev.find("seq"); seq != ev.end() && seq->is_number_unsigned()) {
        const auto s = seq->get<uint64_t>();
        if (!state_.max_seq || s > *state_.max_seq) state_.max_seq = s;
    }
    if (type->get_ref<const std::string&>() == "session") return header(ev, bad);
    if (type->get_ref<const std::string&>() != "sandbox/mode") return Outcome::success();

    auto data = ev.find("data");
    if (data == ev.end() || !data->is_object()) return bad("sandbox/mode event has no \"data\" object");
    auto m = data->find("mode");
    // The seed's invariant text; the mode is shown as JSON, so a string keeps
    // its quotes and a missing one reads "undefined" as JSON.stringify would.
    if (m == data->end()) return bad("sandbox/mode carries unknown mode undefined");
    std::optional<Mode> mode;
    if (m->is_string()) mode = parse_mode(m->get_ref<const std::string&>());
    if (!mode) return bad("sandbox/mode carries unknown mode " + m->dump());
    std::string source;
    if (auto s = data->find("source"); s != data->end()) {
        if (!s->is_string()) return bad("sandbox/mode \"data.source\" must be a string");
        source = s->get<std::string>();
    }
    // The network is part of the policy: strict like the mode (an unknown
    // value is an error, never a fallback to a wider network).
    std::optional<Network> network;
    std::vector<std::string> allow, deny;
    if (auto n = data->find("network"); n != data->end()) {
        if (n->is_string() && n->get_ref<const std::string&>() == "allow") {
            // The allow-list (issue 19): its entries, checked as --net allow='s are.
            auto entries = [&](const char* key, std::vector<std::string>& out, bool required) -> Outcome {
                auto a = data->find(key);
                if (a == data->end() && !required) return Outcome::success();
                if (a == data->end() || !a->is_array() || (required && a->empty()))
                    return bad(fmt::format("sandbox/mode with network \"allow\" needs \"data.{}\": a{} list of "
                                           "entries", key, required ? " non-empty" : ""));
                for (const auto& e : *a) {
                    std::vector<net::Rule> rules;
                    if (!e.is_string()) return bad(fmt::format("sandbox/mode \"data.{}\" holds a non-string", key));
                    if (auto o = net::parse_rules(e.get_ref<const std::string&>(), rules); !o)
                        return bad("sandbox/mode: " + o.message);
                    for (auto& r : rules) out.push_back(std::move(r.text));
                }
                return Outcome::success();
            };
            if (auto o = entries("allow", allow, true); !o) return o;
            if (auto o = entries("deny", deny, false); !o) return o;
            network = Network::Loopback;
        } else if (n->is_string()) {
            network = parse_network(n->get_ref<const std::string&>());
        }
        if (!network)
            return bad("sandbox/mode carries unknown network " + n->dump() + " (off, loopback, host or allow)");
    }
    state_.mode = mode;
    state_.network = network;
    state_.net_allow = std::move(allow);
    state_.net_deny = std::move(deny);
    state_.source = std::move(source);
    state_.mode_line = lineno_;
    return Outcome::success();
}

// The session header: its cwd is the session's workspace root, and it is
// immutable, so a second header naming another directory is an error rather
// than a silent move of the root. A header without a cwd names none.
Outcome SessionFolder::header(const json& ev, const std::function<Outcome(const std::string&)>& bad) {
    auto cwd = ev.find("cwd");
    if (cwd == ev.end()) return Outcome::success();
    if (!cwd->is_string()) return bad("session header \"cwd\" must be a string");
    const auto& dir = cwd->get_ref<const std::string&>();
    if (dir.empty() || dir.front() != '/') return bad("session header \"cwd\" must be an absolute path");
    if (state_.cwd && *state_.cwd != dir)
        return bad(fmt::format("session header changes the session's cwd from {} (line {}); a session's cwd is "
                               "immutable: start a new log",
                               json(*state_.cwd).dump(), state_.cwd_line));
    if (!state_.cwd) {
        state_.cwd = dir;
        state_.cwd_line = lineno_;
    }
    return Outcome::success();
}

Outcome SessionFolder::too_long(size_t lineno) {
    return failf(Err::SessionInvalid, "session log {} line {}: longer than {} bytes; start a new log", origin_,
                 lineno, kMaxSessionLineBytes);
}

Outcome SessionFolder::feed(std::string_view chunk) {
    bytes_ += chunk.size();
    if (bytes_ > kMaxSessionBytes)
        return failf(Err::SessionInvalid, "session log {}: larger than {} bytes; start a new log", origin_,
                     kMaxSessionBytes);
    size_t start = 0;
    for (size_t nl; (nl = chunk.find('\n', start)) != std::string_view::npos; start = nl + 1) {
        if (pending_.empty()) {
            if (auto o = line(chunk.substr(start, nl - start)); !o) return o;
        } else {
            if (pending_.size() + (nl - start) > kMaxSessionLineBytes) return too_long(lineno_ + 1);
            pending_.append(chunk.substr(start, nl - start));
            if (auto o = line(pending_); !o) return o;
            pending_.clear();
        }
    }
    // A line without its end yet: bounded here, so memory is too.
    if (pending_.size() + (chunk.size() - start) > kMaxSessionLineBytes) return too_long(lineno_ + 1);
    pending_.append(chunk.substr(start));
    return Outcome::success();
}

Outcome SessionFolder::finish() {
    if (pending_.empty()) return Outcome::success();
    Outcome o = line(pending_);
    pending_.clear();
    return o;
}

Outcome fold_session_log(std::string_view text, const std::string& origin, SessionState& out) {
    SessionFolder f(origin);
    if (auto o = f.feed(text); !o) return o;
    if (auto o = f.finish(); !o) return o;
    out = f.state();
    return Outcome::success();
}

// The log opened (a regular file) and locked with `lock_op`; fd -1 on failure.
static Outcome open_locked(const std::string& path, int flags, int lock_op, int& fd) {
    if (auto o = open_regular_file(path, flags, Err::SessionInvalid, "session log", fd,
                                   OpenRules{/*follow_symlink=*/false, /*trusted=*/true});
        !o)
        return o;
    if (lock(fd, lock_op)) return Outcome::success();
    const int e = errno;
    ::close(fd);
    fd = -1;
    return failf(Err::SessionInvalid, "session log {}: cannot lock: {}", path, std::strerror(e));
}

Outcome read_session(const std::string& path, SessionState& out) {
    int fd = -1;
    if (auto o = open_locked(path, O_RDONLY, LOCK_SH, fd); !o) return o;
    SessionFolder f(path);
    off_t size = 0;
    Outcome o = fold_fd(fd, path, f, size);
#if defined(_WIN32)
    const bool sealed = false;
#else
    const bool sealed = sealed_file(fd, ::geteuid() == 0, kSystemConfigDir);
#endif
    ::close(fd);  // releases the lock
    if (!o) return o;
    out = f.state();
    out.sealed = sealed;
    return Outcome::success();
}

std::string mode_event_line(Mode mode, uint64_t seq, int64_t time_ms, std::optional<Network> network,
                            const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
    nlohmann::ordered_json ev;
    ev["type"] = "sandbox/mode";
    ev["seq"] = seq;
    ev["time"] = time_ms;
    ev["data"] = nlohmann::ordered_json{{"mode", to_string(mode)}};
    if (network) ev["data"]["network"] = to_string(*network);
    if (network && !allow.empty()) {
        ev["data"]["network"] = "allow";
        ev["data"]["allow"] = allow;
        if (!deny.empty()) ev["data"]["deny"] = deny;
    }
    return ev.dump() + "\n";
}

Outcome append_mode_event(const std::string& path, Mode mode, std::optional<Network> network,
                          const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
    // O_RDWR: the fold reads what is there under the same lock the append holds.
    int fd = -1;
    if (auto o = open_locked(path, O_RDWR | O_APPEND | O_CREAT, LOCK_EX, fd); !o) return o;
    auto done = [fd](Outcome o) {
        ::close(fd);  // releases the lock
        return o;
    };

    SessionFolder f(path);
    off_t size = 0;
    if (auto o = fold_fd(fd, path, f, size); !o) return done(o);
    const SessionState& s = f.state();
    // seq continues the log: one past the largest seen, else one past the
    // number of events (1 for a new log).
    // The largest seq has no successor: wrapping to 0 would make this event
    // read as the oldest, and the log's current mode would not change.
    if (s.max_seq && *s.max_seq == std::numeric_limits<uint64_t>::max())
        return done(fail(Err::SessionInvalid, session_seq_exhausted_text(path)));
    const uint64_t seq = s.max_seq ? *s.max_seq + 1 : static_cast<uint64_t>(s.lines) + 1;
    const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    const std::string line = network ? mode_event_line(mode, seq, ms, network, allow, deny)
                                     : mode_event_line(mode, seq, ms, s.network, s.net_allow, s.net_deny);

    // One write of the whole line: with O_APPEND and the exclusive lock no
    // other dsh-confine can interleave, and readers take the shared lock.
    ssize_t n;
    do n = ::write(fd, line.data(), line.size());
    while (n < 0 && errno == EINTR);
    int err = n < 0 ? errno : 0;
    if (n >= 0 && static_cast<size_t>(n) != line.size()) err = ENOSPC;  // a short write: the disk filled
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (err != 0) {
        // Undo a partial line so the log stays well-formed for the next reader.
        (void)!::ftruncate(fd, size);
        return done(failf(Err::SessionInvalid, "session log {}: cannot append the sandbox/mode event: {}", path,
                          std::strerror(err)));
    }
    return done(Outcome::success());
}

}  // namespace dsh
