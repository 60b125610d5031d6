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
#include "runner.hpp"

namespace dsh {

// Default bound on each functional probe (the seed's probeTimeoutMs default).
inline constexpr int kDefaultProbeTimeoutMs = 5000;

struct Config {
    std::string path;                              // the file it came from; empty: no file
    std::optional<Mode> mode;                      // "mode"
    std::optional<std::string> workspace_root;     // "workspaceRoot" (absolute)
    std::optional<RunnerKind> runner;              // "runner"
    std::optional<std::string> bwrap_path;         // "bwrapPath" (absolute)
    std::vector<std::string> runner_command;       // "runnerCommand"; empty: not configured
    std::vector<std::string> runner_failure_signatures;  // "runnerFailureSignatures"
    std::optional<int> probe_timeout_ms;           // "probeTimeoutMs" (> 0)
    std::vector<std::string> writable_roots;       // "writableRoots" (absolute)
    std::optional<std::string> approver;           // "approver": "tty" or a command

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

// Finds and loads the config. No file anywhere is fine (an empty Config); the
// common case costs a stat per candidate and reads nothing. A file that exists
// but cannot be read, or does not parse, is an error.
Outcome load_config(const std::optional<std::string>& flag, Config& out);

}  // namespace dsh
