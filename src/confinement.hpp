// The confinement record: what was asked (the policy), what each layer
// enforces, and the argv that will run. The report is written from this;
// every runner fills it (runner.hpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "environment.hpp"
#include "limits.hpp"
#include "policy.hpp"

namespace dsh {

enum class RunnerKind { Auto, Bwrap, Landlock, Seatbelt, WindowsAcl, Custom, None };
std::string_view to_string(RunnerKind r) noexcept;
std::optional<RunnerKind> parse_runner(std::string_view s) noexcept;

// An effect the runner does not govern on this host. `own_effect` is true for
// the command's own file effects (these make enforcement partial); false for
// ways out through someone else (a host daemon, a signal), listed for honesty.
struct Gap {
    std::string effect;
    std::string detail;
    bool own_effect = true;
};

// The command shares the caller's process group (no terminal of its own, and
// no PID namespace's init of ours above it in another group): the gap the
// Linux runners declare then (`process-group`; attack passes of session 25).
Gap process_group_gap();

// The network axis as enforced on this host (the record's `network`): how
// each part is enforced ("landlock-tcp", "seccomp-socket-families",
// "net-namespace", "unix-socket-refused", ...) and the typed gaps left.
struct NetworkAxis {
    std::vector<std::string> enforced;
    std::vector<Gap> gaps;
    // What a refusal of this axis prints (the record's network.denialSignatures):
    // --supervise's network denial, apart from the file denial (issue 38).
    std::vector<std::string> denial_signatures;
};

// What becomes of the processes the command leaves running when it exits:
// killed (by the runner's mechanism, or by dsh-confine as their subreaper),
// or left running (asked for, or nothing remains that could end them).
struct Descendants {
    bool killed = false;
    std::string by;   // "pid-namespace", "job-object", "subreaper"; empty when left running
    std::string why;  // left running: why ("asked", or what was missing)
};

struct Layer {
    std::string name;  // "landlock", "bwrap", "seccomp", ...
    Enforcement enforcement = Enforcement::Full;
    std::vector<Gap> gaps;
    nlohmann::json details = nlohmann::json::object();
};

struct Skipped {
    std::string runner;
    std::string reason;
};

struct Confinement {
    Policy policy;
    RunnerKind runner = RunnerKind::None;
    std::vector<Layer> layers;
    std::vector<Skipped> skipped;     // runners passed over by the chain, and why
    std::vector<Skipped> not_granted; // optional writable paths that could not be granted
    std::vector<std::string> denial_signatures;
    nlohmann::json runner_failure_rules = nlohmann::json::array();
    std::vector<std::string> argv;       // the command's argv, as given
    std::vector<std::string> exec_argv;  // what is finally exec'd (runner prefix + command); empty: argv
    std::string command_path;       // the resolved COMMAND
    std::vector<std::string> hardening;  // e.g. "no-new-privs", "capabilities-dropped"
    // New user namespaces for the command (issue 38): "refused" (the
    // default) or "allowed" (--allow-userns), set by the runners that
    // govern them (bwrap, Landlock); empty: not governed (the record's null).
    std::string user_namespaces;
    EnvChanges environment;              // names changed by the env flags (never values)
    NetworkAxis network;                 // filled by the runner's plan
    Descendants descendants;             // settled once it is known whether a parent stays (launch.hpp)
    limits::Plan limits;                 // the resource limits and the timeout (issue 21)

    // The overall verdict: the strongest claim every own effect supports.
    Enforcement enforcement() const;
    std::vector<Gap> gaps() const;  // union over layers, own effects first
};

// Adds process_group_gap() to the first layer, once (no layer or
// danger-full-access: nothing confined, nothing said).
void declare_process_group(Confinement& c);

// Gaps that no layer closes: an effect is closed when any layer in the stack
// does not list it.
std::vector<Gap> open_gaps(const std::vector<Layer>& layers);

}  // namespace dsh
