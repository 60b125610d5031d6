// The command line -> Request: plain values, no side effects.
//
// Grammar: dsh-confine [OPTIONS] [--] COMMAND [ARG...], or
// dsh-confine [OPTIONS] SUBCOMMAND [ITS OPTIONS] (explain: then [--] COMMAND).
// Our options end at the first word that is not one of them: that word is the
// command (or a subcommand's name), and nothing after the command is ever read
// as ours. Every option takes exactly one value (`--name VALUE` or
// `--name=VALUE`) or none (a flag). One table (cli.cpp) says which is which;
// the split (where our words end), the CLI11 App that parses them, the help
// text and, through tests/packaging, the completions and the man page all
// follow it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "limits.hpp"
#include "policy_request.hpp"

namespace dsh {

// Usage: no word at all, answered with the short usage on stderr and the
// usage error's status (125), as a bare `tar` or `rsync` does.
enum class Action { Run, Probe, Explain, Check, SessionSetMode, SessionShow, SelfTest, Help, Version, Usage };

struct Request {
    Action action = Action::Run;
    // Policy inputs (all optional: resolution fills the rest).
    std::optional<std::string> mode;
    std::optional<std::string> root;
    std::optional<std::string> runner;
    std::optional<std::string> net;      // --net, checked by resolve
    std::vector<std::string> net_deny;   // --net-deny LIST (repeatable), checked by resolve
    std::vector<std::string> writable;
    std::vector<std::string> cache;      // --cache TOOLS (repeatable), each a known tool (src/caches.hpp)
    bool agent = false;                  // --agent: expanded by parse_cli into the options it stands for
    std::vector<std::string> protect;    // --protect
    std::vector<std::string> unprotect;  // --unprotect
    std::vector<std::string> deny_read;  // --deny-read
    bool hide_secrets = false;           // --hide-secrets
    bool private_tmp = false;  // --private-tmp
    bool keep_descendants = false;  // --keep-descendants
    bool allow_userns = false;      // --allow-userns
    std::vector<int> keep_fds;
    int report_fd = -1;
    std::optional<std::string> report_file;  // --report-file: made new, then its fd is report_fd
    std::optional<int> probe_timeout_ms;
    std::optional<std::string> config;
    std::optional<std::string> session;
    // Escalation.
    std::optional<std::string> escalate;
    std::optional<std::string> escalate_net;  // --escalate-net, checked by resolve
    std::optional<std::string> justification;
    std::optional<std::string> approver;
    // Execution.
    bool supervise = false;
    bool no_pty = false;  // --no-pty: the command gets the caller's terminal itself
    bool markers = false;
    bool dry_run = false;
    // Resource limits and the timeout (issue 21), parsed; over the config's.
    LimitSettings limits;
    // Environment.
    bool clearenv = false;
    std::vector<std::pair<std::string, std::string>> setenv;  // --setenv NAME=VALUE, split at the first '='
    std::vector<std::string> unsetenv;
    bool scrub_secrets = false;
    // Subcommands.
    bool json = false;                    // probe, check, self-test
    bool context = false;                 // explain --context
    std::optional<std::string> platform;  // explain --platform
    std::optional<std::string> check_write;  // check --write
    std::optional<std::string> check_read;   // check --read (one of the two)
    std::string session_file, session_mode;  // session set-mode FILE MODE
    std::optional<std::string> selftest_binary;   // self-test --binary: the program under test
    std::optional<std::string> selftest_attempt;  // self-test --attempt: the confined payload
    // The command: the first word that is not ours, and everything after it.
    std::vector<std::string> argv;
    std::string text;  // --help / --version output, or the short usage

    // The values resolution needs (policy_request.hpp).
    PolicyRequest policy_request() const;
};

// Parses argv. A usage error is Err::Usage with a one-line message.
Outcome parse_cli(int argc, const char* const* argv, Request& out);

// The long options of the table (for the tests that hold the table to the
// help text): name and whether it takes a value.
struct OptionName {
    std::string_view name;
    bool takes_value;
};
std::vector<OptionName> option_names();

}  // namespace dsh
