// Escalation: one call asks for a strictly wider mode, a human approves it
// once. The ladder, the argument checks and every outcome text are the seed's;
// each step fails closed, and all of it happens before anything runs.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "policy.hpp"

namespace dsh {

// The seed's WIDER_MODES: read-only -> workspace-write, danger-full-access;
// workspace-write -> danger-full-access; danger-full-access -> nothing.
std::vector<Mode> wider_modes(Mode current);
// The network's ladder (issue 17): off -> loopback, host; loopback -> host.
std::vector<Network> wider_networks(Network current);
// --escalate-net's value: loopback or host (off is never wider).
Outcome parse_network_escalation(const std::string& target, Network& out);

// Argument checks, in the seed's order: pairing, then a blank justification.
// Then (ours) the target must name a mode.
Outcome validate_escalation_args(const std::optional<std::string>& target,
                                 const std::optional<std::string>& justification, Mode& target_mode);

// Failed: an approver ran and ended without an answer (a command that exited
// 3..255 or died by a signal); Unavailable: there was nobody to ask (no
// terminal for tty, an approver command that could not be started).
enum class Approval { AllowedOnce, Rejected, Cancelled, Unavailable, Failed };
std::string_view to_string(Approval a) noexcept;

struct EscalationRequest {
    Mode target = Mode::WorkspaceWrite;
    Mode current = Mode::ReadOnly;       // the call's effective mode without the escalation
    // The network (issue 17): the call's without the escalation, and the
    // target of --escalate-net. mode_asked false: only the network widens
    // (target == current mode).
    bool mode_asked = true;
    Network current_network = Network::Host;
    std::optional<Network> target_network;
    std::string justification;
    std::string subject = "command";     // the seed's subject for a command (fs says "operation")
    std::vector<std::string> argv;
    std::string root;
};

// The seed's reason: "escalate sandbox to <mode>: <justification>"; with a
// network: "escalate sandbox network to <net>: ..." (network only) or
// "escalate sandbox to <mode> with network <net>: ...".
std::string escalation_reason(const EscalationRequest& r);
// What an approver command reads on stdin (one JSON object, then EOF).
nlohmann::ordered_json approval_request_json(const EscalationRequest& r);

// Who answers. Implementations: tty, command; tests use fakes.
class Approver {
public:
    virtual ~Approver() = default;
    virtual Approval ask(const EscalationRequest& r) = 0;
    // After ask() returned Failed or Unavailable: what happened, in our
    // words ("it exited with status 5"); empty when there is nothing to add.
    virtual std::string failure() const { return {}; }
};

// The seed's approveEscalation, in order: not strictly wider (nobody is
// asked), no approver, then the approver's outcome mapped to its own error.
// `approver` null means none is configured. On success `granted` is the target.
// (The seed's "no agent to route it through" step has no counterpart: the
// caller of dsh-confine is the agent.)
Outcome approve_escalation(const EscalationRequest& r, Approver* approver, Mode& granted);

// The text and error of each refused outcome (allowed-once is not an error).
// `failure`: the approver's own account (Approver::failure): part of the
// text for Failed, a stderr-only hint for Unavailable, whose text the
// harnesses match exactly.
Outcome approval_error(Approval a, const EscalationRequest& r, const std::string& failure = {});

// The tty approver's answer to one prompt (pure): the line as typed, without
// its '\n', trimmed of spaces, tabs and '\r' and lowered (ASCII), must be one
// of a/allow/allow once/y/yes (allowed once), r/reject/n/no (rejected) or
// c/cancel (cancelled); anything else is unclear: nullopt, ask again.
std::optional<Approval> approval_from_answer(std::string_view line);

// The longest answer line kept; the rest of a longer line is read and dropped,
// so a stuck key cannot grow memory and still leaves the terminal in step.
inline constexpr size_t kMaxAnswerBytes = 256;

// The tty conversation, shared by TtyApprover and fuzz/fuzz_approver.cpp:
// asks up to three times. `say` writes the question and returns false when it
// cannot (unavailable); `read_byte` returns the next byte typed, or -1 at EOF
// (Ctrl-D) or on a read error. EOF before a line's '\n' cancels, as do three
// unclear answers; the first clear answer decides.
Approval tty_conversation(const std::function<bool(std::string_view)>& say, const std::function<int()>& read_byte);

// Text for the terminal prompt: C0 and C1 controls, DEL, the bidi controls
// and bytes that are not UTF-8 escaped (\xNN, \u{NNNN}); the rest as is.
std::string escape_for_terminal(std::string_view s);

// "tty": asks on /dev/tty; no terminal means unavailable. The question is
// asked after tcflush: nothing typed before it was shown answers it.
class TtyApprover : public Approver {
public:
    Approval ask(const EscalationRequest& r) override;
    std::string failure() const override { return failure_; }

private:
    std::string failure_;
};

// An approver command as it is run (issue 37): no shell reads it. The text
// is split on blanks into plain words; anything a shell would read otherwise
// (quotes, escapes, $, `, ~, globs, redirections, ;, &, |, parentheses,
// braces, a leading NAME=) is refused, so what is checked is what runs.
struct ApproverCommand {
    // argv[0]: the program, absolute: as named when it holds a '/' (against
    // the cwd when relative), else the first executable regular file of that
    // name on PATH (empty PATH entries: the cwd); as named when none is found.
    std::vector<std::string> argv;
    // Every file it runs or would run, for the own-state checks: the PATH
    // candidates before and including the program (a later run could find a
    // name planted in an earlier PATH directory), and each argument that
    // names an existing regular file (an interpreter's script).
    std::vector<std::string> files;
};
Outcome parse_approver(const std::string& command, const std::string& cwd, const char* path_env,
                       ApproverCommand& out);

// A command (ApproverCommand), with the JSON request on stdin and its
// stdout sent to our stderr. Its program is opened once, checked (owner and
// mode, as check_approver_files) and executed by that descriptor. Exit 0
// allowed-once, 1 rejected, 2 cancelled; any other status or a signal: failed
// (with the status); failure to start it: unavailable.
class CommandApprover : public Approver {
public:
    explicit CommandApprover(ApproverCommand command) : command_(std::move(command)) {}
    Approval ask(const EscalationRequest& r) override;
    std::string failure() const override { return failure_; }

private:
    ApproverCommand command_;
    std::string failure_;
};

// The files of parse_approver (empty for "tty" and for a command it refuses).
std::vector<std::string> approver_files(const std::string& command, const std::string& cwd, const char* path_env);

// StrictModes on each approver file that exists (see OpenRules::trusted):
// the approver decides an escalation, so another user must not be able to
// change it. The error names the file and the fix.
Outcome check_approver_files(const std::vector<std::string>& files);

// Maps an approver command's wait status to the outcome (pure, for tests).
Approval approval_from_status(int wait_status) noexcept;
// How a failed approver command ended, for the Failed text (pure): "it
// exited with status 5", "it was killed by signal 9 (SIGKILL)".
std::string approver_status_text(int wait_status);

}  // namespace dsh
