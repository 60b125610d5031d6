#include "config.hpp"
#include "caches.hpp"
#include "own_state.hpp"
#include "net_allow.hpp"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace dsh {

namespace {

using json = nlohmann::json;

const char* type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float: return "a number";
        case json::value_t::object: return "an object";
        case json::value_t::array: return "an array";
        case json::value_t::binary: return "binary";
        case json::value_t::discarded: return "nothing";
    }
    return "nothing";
}

struct Checker {
    const std::string& origin;

    Outcome err(const std::string& msg) const { return fail(Err::ConfigInvalid, "config " + origin + ": " + msg); }
    Outcome wrong(const std::string& key, const char* want, const json& v) const {
        return err("\"" + key + "\" must be " + want + ", not " + type_name(v));
    }
    // The seed's provider validation texts keep their own "sandbox-local: " prefix.
    Outcome seed(const char* text) const { return err(std::string("sandbox-local: ") + text); }

    Outcome string(const std::string& key, const json& v, std::string& out) const {
        if (!v.is_string()) return wrong(key, "a string", v);
        out = v.get<std::string>();
        if (out.empty()) return err("\"" + key + "\" must not be empty");
        if (out.find('\0') != std::string::npos) return err("\"" + key + "\" contains a NUL byte");
        return Outcome::success();
    }
    Outcome absolute_path(const std::string& key, const json& v, std::string& out) const {
        if (auto o = string(key, v, out); !o) return o;
        // Relative to what? The caller's cwd changes per call, the config's
        // directory says nothing about the workspace: refuse the ambiguity.
        if (out[0] != '/') return err("\"" + key + "\" must be an absolute path, not " + json(out).dump());
        return Outcome::success();
    }
    Outcome strings(const std::string& key, const json& v, std::vector<std::string>& out) const {
        if (!v.is_array()) return wrong(key, "an array of strings", v);
        out.clear();
        for (size_t i = 0; i < v.size(); ++i) {
            if (!v[i].is_string())
                return err("\"" + key + "\"[" + std::to_string(i) + "] must be a string, not " + type_name(v[i]));
            out.push_back(v[i].get<std::string>());
            if (out.back().find('\0') != std::string::npos)
                return err("\"" + key + "\"[" + std::to_string(i) + "] contains a NUL byte");
        }
        return Outcome::success();
    }
};

bool blank(const std::string& s) {
    return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

}  // namespace

bool json_depth_within(std::string_view text, size_t limit) {
    size_t depth = 0;
    bool in_string = false, escaped = false;
    for (char ch : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (ch == '\\') escaped = true;
            else if (ch == '"') in_string = false;
            continue;
        }
        switch (ch) {
            case '"': in_string = true; break;
            case '[':
            case '{':
                if (++depth > limit) return false;
                break;
            case ']':
            case '}':
                if (depth > 0) --depth;
                break;
            default: break;
        }
    }
    return true;
}

Outcome parse_config(std::string_view text, const std::string& origin, Config& out) {
    out = Config{};
    out.path = origin;
    const Checker c{origin};

    // Duplicate keys are ambiguous (nlohmann keeps the last one silently):
    // track the keys of each object being parsed and refuse a repeat.
    std::vector<std::set<std::string>> keys;
    std::string duplicate;
    if (text.size() > kMaxConfigBytes) return c.err(fmt::format("larger than {} bytes", kMaxConfigBytes));
    if (!json_depth_within(text, kMaxJsonDepth))
        return c.err(fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    json doc;
    try {
        doc = json::parse(
            text.begin(), text.end(),
            [&](int, json::parse_event_t ev, json& parsed) {
                switch (ev) {
                    case json::parse_event_t::object_start: keys.emplace_back(); break;
                    case json::parse_event_t::object_end:
                        if (!keys.empty()) keys.pop_back();
                        break;
                    case json::parse_event_t::key:
                        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
                            duplicate.empty())
                            duplicate = parsed.get<std::string>();
                        break;
                    case json::parse_event_t::array_start:
                    case json::parse_event_t::array_end:
                    case json::parse_event_t::value: break;
                }
                return true;
            },
            /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const json::parse_error& e) {
        return c.err(not_json_text(text, e.byte));
    } catch (const json::exception&) {
        return c.err(not_json_text(text, 0));
    }
    // Keys are echoed as JSON, like values: a key holding a newline or an
    // escape sequence must not break the message's one line (found by
    // fuzz/fuzz_config.cpp).
    if (!duplicate.empty()) return c.err("key " + json(duplicate).dump() + " appears more than once");
    if (!doc.is_object()) return c.err(std::string("must be a JSON object, not ") + type_name(doc));

    bool have_timeout = false;
    double timeout = 0;
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        const std::string& k = it.key();
        const json& v = it.value();
        std::string s;
        if (k == "mode") {
            if (auto o = c.string(k, v, s); !o) return o;
            auto m = parse_mode(s);
            if (!m)
                return c.err("\"mode\": unknown mode " + v.dump() +
                             " (read-only, workspace-write or danger-full-access)");
            out.mode = *m;
        } else if (k == "workspaceRoot") {
            if (auto o = c.absolute_path(k, v, s); !o) return o;
            out.workspace_root = s;
        } else if (k == "runner") {
            if (auto o = c.string(k, v, s); !o) return o;
            auto r = parse_runner(s);
            if (!r)
                return c.err("\"runner\": unknown runner " + v.dump() +
                             " (auto, bwrap, landlock, seatbelt, windows-acl or custom)");
            out.runner = *r;
        } else if (k == "bwrapPath") {
            // Exec'd by absolute path only: a PATH lookup could find a
            // workspace's own "bwrap".
            if (auto o = c.absolute_path(k, v, s); !o) return o;
            out.bwrap_path = s;
        } else if (k == "runnerCommand") {
            if (auto o = c.strings(k, v, out.runner_command); !o) return o;
            if (!out.runner_command.empty()) {
                if (out.runner_command[0].empty() || out.runner_command[0][0] != '/')
                    return c.err("\"runnerCommand\"[0] must be an absolute path, not " +
                                 json(out.runner_command[0]).dump());
            }
        } else if (k == "runnerFailureSignatures") {
            if (auto o = c.strings(k, v, out.runner_failure_signatures); !o) return o;
        } else if (k == "probeTimeoutMs") {
            if (!v.is_number()) return c.wrong(k, "a number", v);
            timeout = v.get<double>();
            have_timeout = true;
        } else if (k == "writableRoots") {
            if (auto o = c.strings(k, v, out.writable_roots); !o) return o;
            for (size_t i = 0; i < out.writable_roots.size(); ++i) {
                const auto& p = out.writable_roots[i];
                if (p.empty() || p[0] != '/')
                    return c.err("\"writableRoots\"[" + std::to_string(i) + "] must be an absolute path, not " +
                                 json(p).dump());
            }
        } else if (k == "cache") {
            std::vector<std::string> list;
            if (auto o = c.strings(k, v, list); !o) return o;
            for (const auto& t : list)
                if (auto o = caches::parse_list(t, out.cache); !o) return c.err("\"cache\": " + o.text());
        } else if (k == "protect" || k == "unprotect" || k == "denyRead") {
            auto& list = k == "protect" ? out.protect : k == "unprotect" ? out.unprotect : out.deny_read;
            if (auto o = c.strings(k, v, list); !o) return o;
            for (size_t i = 0; i < list.size(); ++i)
                if (list[i].empty() || list[i][0] != '/')
                    return c.err("\"" + k + "\"[" + std::to_string(i) + "] must be an absolute path, not " +
                                 json(list[i]).dump());
        } else if (k == "network" && v.is_object()) {
            // {"allow": [...], "deny": [...]} (issue 19): every key known, every entry a rule.
            for (auto it = v.begin(); it != v.end(); ++it) {
                const std::string key = "network." + it.key();
                std::vector<std::string> list;
                if (it.key() != "allow" && it.key() != "deny")
                    return c.err("unknown key \"" + key + "\" (network takes allow and deny)");
                if (auto o = c.strings(key, it.value(), list); !o) return o;
                for (const auto& e : list) {
                    net::Rule r;
                    if (auto o = net::parse_rule(e, r); !o) return c.err("\"" + key + "\": " + o.text());
                }
                if (it.key() == "allow") out.network_allow = std::move(list);
                else out.network_deny = std::move(list);
            }
            if (!out.network_allow || out.network_allow->empty())
                return c.err("\"network\": an object must have a non-empty \"allow\" list");
        } else if (k == "network") {
            if (auto o = c.string(k, v, s); !o) return o;
            auto n = parse_network(s);
            if (!n) return c.err("\"network\": unknown network mode " + v.dump() + " (off, loopback, host, or {\"allow\": [...]} for an allow-list)");
            out.network = *n;
        } else if (k == "approver") {
            if (auto o = c.string(k, v, s); !o) return o;
            out.approver = s;
        } else if (k == "timeout" || k == "killAfter" || k == "cpuTime") {
            // A duration: "90s", "5m", or a number of seconds.
            uint64_t ms = 0;
            const bool ok = v.is_string() ? limits::parse_duration_ms(v.get<std::string>(), ms)
                            : v.is_number_unsigned() ? (ms = v.get<uint64_t>() * 1000) > 0 && ms / 1000 == v.get<uint64_t>()
                                                     : false;
            if (!v.is_string() && !v.is_number()) return c.wrong(k, "a duration (\"90s\", \"5m\" or seconds)", v);
            if (!ok) return c.err("\"" + k + "\": " + v.dump() + " is not a positive duration such as \"90s\", \"5m\" or 30");
            (k == "timeout" ? out.limits.timeout_ms : k == "killAfter" ? out.limits.kill_after_ms : out.limits.cpu_time_ms) = ms;
        } else if (k == "memory" || k == "fileSize") {
            uint64_t bytes = 0;
            const bool ok = v.is_string() ? limits::parse_size(v.get<std::string>(), bytes)
                            : v.is_number_unsigned() ? (bytes = v.get<uint64_t>()) > 0
                                                     : false;
            if (!v.is_string() && !v.is_number()) return c.wrong(k, "a size (\"512M\", \"2G\" or bytes)", v);
            if (!ok) return c.err("\"" + k + "\": " + v.dump() + " is not a positive size such as \"512M\", \"2G\" or 1048576");
            (k == "memory" ? out.limits.memory : out.limits.file_size) = bytes;
        } else if (k == "maxProcs" || k == "nofile") {
            if (!v.is_number()) return c.wrong(k, "a number", v);
            if (!v.is_number_unsigned() || v.get<uint64_t>() == 0)
                return c.err("\"" + k + "\": " + v.dump() + " is not a positive whole number");
            (k == "maxProcs" ? out.limits.max_procs : out.limits.nofile) = v.get<uint64_t>();
        } else if (k == "limits") {
            if (auto o = c.string(k, v, s); !o) return o;
            if (s != "required" && s != "best-effort")
                return c.err("\"limits\": unknown value " + v.dump() + " (required or best-effort)");
            out.limits.required = s == "required";
        } else if (k == "allowCore") {
            if (!v.is_boolean()) return c.wrong(k, "true or false", v);
            out.limits.allow_core = v.get<bool>();
        } else if (k == "privateTmp") {
            if (!v.is_boolean()) return c.wrong(k, "true or false", v);
            out.private_tmp = v.get<bool>();
        } else if (k == "hideSecrets") {
            if (!v.is_boolean()) return c.wrong(k, "true or false", v);
            out.hide_secrets = v.get<bool>();
        } else if (k == "secretPaths") {
            // More for --hide-secrets to hide (with it only): a list adds,
            // it can never take a table entry away.
            if (auto o = c.strings(k, v, out.secret_paths); !o) return o;
            for (size_t i = 0; i < out.secret_paths.size(); ++i) {
                const auto& p = out.secret_paths[i];
                if (p.empty() || (p[0] != '/' && p.rfind("~/", 0) != 0))
                    return c.err("\"secretPaths\"[" + std::to_string(i) + "] must be an absolute path or start with ~/, not " +
                                 json(p).dump());
            }
        } else if (k == "keepDescendants") {
            if (!v.is_boolean()) return c.wrong(k, "true or false", v);
            out.keep_descendants = v.get<bool>();
        } else {
            return c.err("unknown key " + json(k).dump() +
                         " (known: mode, workspaceRoot, runner, bwrapPath, runnerCommand, "
                         "runnerFailureSignatures, probeTimeoutMs, writableRoots, cache, protect, unprotect, denyRead, hideSecrets, secretPaths, approver, privateTmp, network, "
                         "keepDescendants, timeout, killAfter, maxProcs, memory, cpuTime, fileSize, nofile, limits, "
                         "allowCore)");
        }
    }

    // The seed's provider checks, in the seed's order.
    if (have_timeout) {
        if (!std::isfinite(timeout) || timeout <= 0) return c.seed("probeTimeoutMs must be a positive finite number");
        // Whole milliseconds, rounded up so a tiny positive value never becomes 0
        // ("no timeout"); anything past INT_MAX ms (24 days) is as good as that.
        out.probe_timeout_ms = timeout >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(std::ceil(timeout));
    }
    if (!out.runner_failure_signatures.empty() && out.runner_command.empty())
        return c.seed("runnerFailureSignatures requires runnerCommand");
    if (!out.runner_command.empty() && out.runner_failure_signatures.empty())
        return c.seed("runnerCommand requires at least one runnerFailureSignatures entry");
    for (const auto& sig : out.runner_failure_signatures)
        if (blank(sig) || sig.find_first_of("\r\n") != std::string::npos)
            return c.seed("runnerFailureSignatures entries must be non-empty single-line strings");
    return Outcome::success();
}

std::vector<ConfigCandidate> config_candidates(const std::optional<std::string>& flag,
                                               const std::function<const char*(const char*)>& getenv) {
    std::vector<ConfigCandidate> out;
    if (flag) {
        out.push_back({*flag, true});
        return out;
    }
    const char* env = getenv("DSH_CONFINE_CONFIG");
    if (env != nullptr && *env != '\0') {
        out.push_back({env, true});
        return out;
    }
    // XDG Base Directory: a relative $XDG_CONFIG_HOME is invalid and ignored.
    const char* xdg = getenv("XDG_CONFIG_HOME");
    const char* home = getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/')
        out.push_back({std::string(xdg) + "/dsh-confine/config.json", false});
    else if (home != nullptr && home[0] == '/')
        out.push_back({std::string(home) + "/.config/dsh-confine/config.json", false});
    out.push_back({kSystemConfigPath, false});
    return out;
}

std::vector<std::string> config_state_paths(const std::optional<std::string>& flag,
                                            const std::function<const char*(const char*)>& getenv) {
    std::vector<std::string> out;
    if (flag) out.push_back(*flag);
    const char* env = getenv("DSH_CONFINE_CONFIG");
    if (env != nullptr && *env != '\0') out.push_back(env);
    // Both per-user places: a run with $XDG_CONFIG_HOME set must not write
    // the file the next run without it reads.
    const char* xdg = getenv("XDG_CONFIG_HOME");
    const char* home = getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/') out.push_back(std::string(xdg) + "/dsh-confine/config.json");
    if (home != nullptr && home[0] == '/') out.push_back(std::string(home) + "/.config/dsh-confine/config.json");
    out.push_back(kSystemConfigPath);
    return out;
}

static Outcome read_file(const std::string& path, std::string& text, bool& sealed) {
    int fd = -1;
    if (auto o = open_regular_file(path, O_RDONLY, Err::ConfigInvalid, "config", fd,
                                   OpenRules{/*follow_symlink=*/true, /*trusted=*/true});
        !o)
        return o;
#if defined(_WIN32)
    sealed = false;
#else
    sealed = sealed_file(fd, ::geteuid() == 0, kSystemConfigDir);
#endif
    text.clear();
    char buf[65536];
    while (true) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            ::close(fd);
            return failf(Err::ConfigInvalid, "config {}: cannot read: {}", path, std::strerror(e));
        }
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > kMaxConfigBytes) {
            ::close(fd);
            return failf(Err::ConfigInvalid, "config {}: larger than {} bytes", path, kMaxConfigBytes);
        }
    }
    ::close(fd);
    return Outcome::success();
}

Outcome load_config(const std::optional<std::string>& flag, Config& out) {
    out = Config{};
    for (const auto& cand : config_candidates(flag, [](const char* n) { return std::getenv(n); })) {
        struct stat st {};
        if (::stat(cand.path.c_str(), &st) != 0) {
            // Only "there is no such file" means absent; anything else (EACCES
            // on a directory on the way, ELOOP, ...) could hide a real config.
            if ((errno == ENOENT || errno == ENOTDIR) && !cand.explicit_) continue;
            return failf(Err::ConfigInvalid, "config {}: {}", cand.path, std::strerror(errno));
        }
        std::string text;
        bool sealed = false;
        if (auto o = read_file(cand.path, text, sealed); !o) return o;
        if (auto o = parse_config(text, cand.path, out); !o) return o;
        out.sealed = sealed;
        return check_widening(out);
    }
    return Outcome::success();
}

Outcome check_widening(const Config& c) {
    if (c.sealed) return Outcome::success();
    // What takes a run out of confinement or runs a program outside it: a
    // file that an earlier confined run could have written (whatever that
    // run's roots were, which this run cannot know) must not say it.
    auto refuse = [&](std::string_view key, std::string_view fix) {
        return fail(Err::StateUnsafe, unsealed_widening_text("config", c.path, key, fix));
    };
    const std::string system = fmt::format("put it in {} (or a root-owned file in {} named by --config)",
                                           kSystemConfigPath, kSystemConfigDir);
    if (c.mode == Mode::DangerFullAccess)
        return refuse("\"mode\": \"danger-full-access\"",
                      "pass --mode danger-full-access (or --escalate) on the command line, or " + system);
    if (!c.runner_command.empty()) return refuse("\"runnerCommand\"", system);
    if (c.bwrap_path) return refuse("\"bwrapPath\"", system);
    if (c.approver && *c.approver != "tty")
        return refuse("an \"approver\" command", "pass --approver on the command line, or " + system);
    // Dropping a protection lets the command plant what the next unconfined
    // git runs (a hook): as wide as running it outside (attack pass).
    if (!c.unprotect.empty())
        return refuse("\"unprotect\"", "pass --unprotect on the command line, or " + system);
    return Outcome::success();
}

}  // namespace dsh
