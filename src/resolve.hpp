// Resolution: the request, the config file and the session log -> one Policy,
// with the source of every value recorded. Highest first:
//   mode: approved escalation > --mode > session's last sandbox/mode > config > read-only
//   root: --root > the session header's cwd > config workspaceRoot > current directory
//   runner, probe timeout, approver: flag > config > built-in default
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "policy_request.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "escalation.hpp"
#include "policy.hpp"
#include "session.hpp"

namespace dsh {

// What resolution did with an --escalate request.
enum class EscalationState {
    None,      // no --escalate
    Granted,   // asked and allowed once: the policy's mode is the target
    Pending,   // validated, not asked (explain / --dry-run): the policy shows the target
};

namespace carveouts {
struct Input;
}

struct Resolution {
    Policy policy;
    // The carve-outs' walk left for after the spawn (PolicyRequest::late_walk
    // and the cases it holds in: resolve.cpp, carve()); the plan takes it
    // (Plan::late_walk). Null: walked already (policy.protected_paths), or none.
    std::shared_ptr<const carveouts::Input> late_walk;
    // The config as loaded (path empty: no file), with the flags that
    // override it merged in: runner, probeTimeoutMs, approver.
    Config settings;
    std::string runner_source = "default";         // "flag", "config", "default"
    std::string probe_timeout_source = "default";
    std::string approver_source = "none";          // "flag", "config", "none"
    std::optional<std::string> session_path;
    SessionState session;
    // The mode before escalation, and who decided it.
    Mode base_mode = Mode::ReadOnly;
    ModeSource base_source = ModeSource::Default;
    EscalationState escalation = EscalationState::None;
    std::optional<Mode> escalation_target;      // --escalate
    std::optional<Network> network_escalation;  // --escalate-net
    Network base_network = Network::Host;       // the network before escalation
    // The config's network mode when danger-full-access overrode it.
    std::optional<Network> network_requested;
    // --cache and the config's cache (issue 42), expanded in the command's
    // environment: each directory with its tool.
    std::vector<std::pair<std::string, std::string>> cache_dirs;
};

struct ResolveEnv {
    std::string cwd;
    std::optional<std::string> tmpdir;  // $TMPDIR as found
    Jobserver jobserver;                // make's, as $MAKEFLAGS names it (issue 42)
};
ResolveEnv current_env();

// Ask: run the approver for an --escalate request (run, check). Otherwise the
// request is validated in full but nobody is asked (explain): Pending.
enum class AskApprover { Yes, No };

// The subject an approval request names: "command" for a command, "operation"
// for check --write (the seed's fs fence says operation).
Outcome resolve(const PolicyRequest& req, const ResolveEnv& env, AskApprover ask, Resolution& out);

// The runners' settings alone (config file, then runner and probe-timeout
// flags over it), for `probe`, which resolves no policy.
Outcome runner_settings(const PolicyRequest& req, Config& out);

// Builds the approver an escalation goes to: "tty", or a command. Empty: none.
std::unique_ptr<Approver> make_approver(const std::optional<std::string>& spec, const std::string& cwd);

// The one-line policy text the seed shows a model (sandbox-policy's runtime
// context), for harnesses to put in front of theirs.
std::string policy_context_text(const Policy& p);

}  // namespace dsh
