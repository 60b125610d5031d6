// Classification of a supervised run (the seed's bash-sandbox rules, §7 of
// the upstream contract). Pure: exit status + stderr text + the runner's rules
// in, facts out. Out-of-band evidence (the exec pipe, a runner's Watch: bwrap's
// --json-status-fd and the stage's record) outranks everything here; these
// stderr rules are the fallback for runners that give nothing better.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsh {

// One runner-failure rule. A rule with allowed_exit_codes applies only when
// the exit code is one of them (landlock-run: 125); without, to any non-zero
// exit. A stderr line that equals an informational line (whole, untrimmed,
// case-insensitive) is never a match, whatever it contains.
struct FailureRule {
    std::optional<std::vector<int>> allowed_exit_codes;
    std::vector<std::string> fatal_signatures;
    std::vector<std::string> informational_lines;
};

// The report's `runnerFailureRules` JSON (allowedExitCodes, fatalSignatures,
// informationalLines) -> rules. Members of the wrong type are ignored.
std::vector<FailureRule> rules_from_json(const nlohmann::json& rules);

// The first stderr line that makes the run a runner failure, or nothing.
// exit_code is empty when the process died by a signal: never a match, nor is 0.
std::optional<std::string> match_runner_failure(const std::vector<FailureRule>& rules,
                                                std::optional<int> exit_code, std::string_view stderr_text);

// A network refusal under --net off, loopback or allow= (the record's
// network.denialSignatures): the socket filter answers ENETUNREACH, which no
// socket() of the kernel's own does, and a namespace without a route to the
// host says the same for a connect. Never a file denial: the file dialects
// (EROFS, EACCES) are other words (issue 38).
inline constexpr const char* kNetworkDenialSignature = "network is unreachable";

// Denial: a non-null, non-zero exit and stderr containing any signature
// (case-insensitive, anywhere in the collected text).
bool is_denial(std::optional<int> exit_code, std::string_view stderr_text,
               const std::vector<std::string>& denial_signatures);

struct Classification {
    bool runner_failed = false;
    std::optional<std::string> runner_failure;  // the matched line, or the out-of-band detail
    bool denied = false;
    // A network refusal (the record's network.denialSignatures), apart from
    // `denied`, which is the file denial of the seed's contract.
    bool network_denied = false;
    // The runner's own process already reported the failure (its line on
    // stderr, its `error` record): exec mode does not say it twice.
    bool reported = false;
};

// The seed's order: runner failure first (a runner's own error can contain
// denial words: `bwrap: Can't mkdir ...: Read-only file system`), then denial.
// A runner failure is never also a denial.
Classification classify(const std::vector<FailureRule>& rules, const std::vector<std::string>& denial_signatures,
                        std::optional<int> exit_code, std::string_view stderr_text);

// The protected path (of `protected_paths`, absolute) that a line of the
// command's stderr names as refused (issue 42: git's "could not write config
// file .git/config: Device or resource busy"), or nothing. The line must name
// the path itself or a name under it, absolute or relative to `cwd` (not a
// longer name ending in it), and a refusal's words: EBUSY (a rename onto the bind), EROFS or
// EACCES. Only paths the policy keeps read-only are passed in: the text
// alone never decides.
std::optional<std::string> protected_refusal(const std::vector<std::string>& protected_paths, std::string_view cwd,
                                             std::string_view stderr_text);

// The marker texts (seed, exact). subject: "command".
std::string denial_marker(std::string_view mode);
std::string escalation_hint(std::string_view subject);
std::string runner_failure_marker(std::string_view mode);

}  // namespace dsh
