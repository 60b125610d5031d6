// The config file: a deployment's defaults, strict JSON. Every key is known
// and typed; anything else is an error that names the key, so a typo can never
// quietly fall back to a different (possibly wider) behaviour.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"
#include "policy.hpp"
#include "confinement.hpp"
#include "limits.hpp"

namespace dsh {

// Every JSON document the launcher reads (config, session-log lines) is
// refused past this nesting depth before it is parsed: a deeply nested value
// would otherwise be built and later walked recursively (json::dump), and a
// 200,000-deep one overflows the stack. Ours are at most 3 deep.
inline constexpr size_t kMaxJsonDepth = 64;
// A config larger than this is not a config; refusing it bounds the read.
inline constexpr size_t kMaxConfigBytes = 1 << 20;

// Pure: whether the arrays and objects in `text` nest at most `limit` deep
// (brackets inside strings do not count). Malformed text is left to the parser.
bool json_depth_within(std::string_view text, size_t limit);

// Default bound on each functional probe (the seed's probeTimeoutMs default).
inline constexpr int kDefaultProbeTimeoutMs = 5000;

// The system config and its directory: the one place a root caller's runs
// can never have written (every run refuses a root inside it and binds it
// read-only, or refuses, under a root above it), so widening values may come
// from a file there (issue 37): the system config, or one an operator names
// with --config.
inline constexpr const char* kSystemConfigDir = "/etc/dsh-confine";
inline constexpr const char* kSystemConfigPath = "/etc/dsh-confine/config.json";

struct Config {
    std::string path;                              // the file it came from; empty: no file
    // No confined run could have written the file (sealed_file): only then
    // are danger-full-access, runnerCommand, bwrapPath and an approver
    // command taken from it.
    bool sealed = false;
    std::optional<Mode> mode;                      // "mode"
    std::optional<std::string> workspace_root;     // "workspaceRoot" (absolute)
    std::optional<RunnerKind> runner;              // "runner"
    std::optional<std::string> bwrap_path;         // "bwrapPath" (absolute)
    std::vector<std::string> runner_command;       // "runnerCommand"; empty: not configured
    std::vector<std::string> runner_failure_signatures;  // "runnerFailureSignatures"
    std::optional<int> probe_timeout_ms;           // "probeTimeoutMs" (> 0)
    std::vector<std::string> writable_roots;       // "writableRoots" (absolute)
    std::vector<std::string> cache;                // "cache": tools, see --cache (src/caches.hpp)
    std::vector<std::string> protect;              // "protect" (absolute): see --protect
    std::vector<std::string> unprotect;            // "unprotect" (absolute): see --unprotect
    std::vector<std::string> deny_read;            // "denyRead" (absolute): see --deny-read
    std::optional<bool> hide_secrets;              // "hideSecrets": see --hide-secrets
    std::vector<std::string> secret_paths;         // "secretPaths" (absolute or "~/..."): more for --hide-secrets
    std::optional<std::string> approver;           // "approver": "tty" or a command
    std::optional<bool> private_tmp;               // "privateTmp": a private /tmp in confined modes
    std::optional<Network> network;                // "network": off, loopback or host
    // "network": {"allow": [...], "deny": [...]} (issue 19): the entries as
    // written, each checked by net::parse_rule when the config is read.
    std::optional<std::vector<std::string>> network_allow;
    std::vector<std::string> network_deny;
    std::optional<bool> keep_descendants;          // "keepDescendants": see --keep-descendants
    // "timeout", "killAfter", "cpuTime" (durations: "90s" or seconds as a
    // number), "memory", "fileSize" (sizes: "512M" or bytes as a number),
    // "maxProcs", "nofile" (counts), "limits" ("required" or "best-effort"),
    // "allowCore" (a boolean): issue 21.
    LimitSettings limits;

    bool custom_runner() const noexcept { return !runner_command.empty(); }
};

// Parses and validates one config document. `origin` names it in messages
// ("config FILE: ..."). Pure: reads no file.
Outcome parse_config(std::string_view text, const std::string& origin, Config& out);

// Where the config lives: --config FILE, else $DSH_CONFINE_CONFIG, else
// $XDG_CONFIG_HOME/dsh-confine/config.json (or $HOME/.config/...), else
// /etc/dsh-confine/config.json. `explicit_` is true for the first two: a
// file the caller named must exist. `getenv` is injectable for tests.
struct ConfigCandidate {
    std::string path;
    bool explicit_ = false;
};
std::vector<ConfigCandidate> config_candidates(const std::optional<std::string>& flag,
                                               const std::function<const char*(const char*)>& getenv);

// Every path a config could be read from by some run of this caller, whether
// it exists or not (a confined command could create it): the flag's, the
// environment's, $XDG_CONFIG_HOME's and $HOME/.config's, and /etc's. A run
// must not be able to write any of them (see check_own_state in resolve).
std::vector<std::string> config_state_paths(const std::optional<std::string>& flag,
                                            const std::function<const char*(const char*)>& getenv);

// Finds and loads the config. No file anywhere is fine (an empty Config); the
// common case costs a stat per candidate and reads nothing. A file that exists
// but cannot be read, or does not parse, is an error, and so is one that
// another user could have written (OpenRules::trusted: owner and modes of the
// file and of every directory above it). The last component may be a symlink
// (dotfile managers) owned by the caller or root; the target is checked too.
Outcome load_config(const std::optional<std::string>& flag, Config& out);
// A config that is not sealed and holds what widens a run beyond
// confinement (danger-full-access, runnerCommand, bwrapPath, an approver
// command): UNSAFE_STATE (issue 37, docs/SECURITY.md "Our own state").
Outcome check_widening(const Config& c);

}  // namespace dsh
