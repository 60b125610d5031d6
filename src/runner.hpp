// The runner seam. A runner is one folder (src/<os>/...) and one line in its
// host's registry (src/<os>/registry.cpp); nothing else in the program asks
// which runner it is talking to. A runner answers three questions:
//
//   probe  can it confine here, and if not, why (a real run where one is needed)
//   plan   Policy + command -> Plan: the record, what to exec, the fds to pass,
//          the layers this process applies to itself before exec, and how
//          supervise reads the run's end (its Watch)
//   describe  its row of `dsh-confine probe`
//
// The chain (chain.hpp) walks the registry for run, explain, probe and the
// self-test alike.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "classify.hpp"
#include "config.hpp"
#include "confinement.hpp"
#include "errors.hpp"
#include "fd.hpp"

namespace dsh {

namespace carveouts {
struct Input;
}

// What a runner may know besides the policy: the effective settings (config
// with the flags merged in) and the run's fds.
struct RunnerEnv {
    Config config;
    int report_fd = -1;
    int probe_timeout_ms = 5000;
    bool use_probe_cache = true;  // `probe` itself always runs the probe
};

struct Verdict {
    enum Kind { Usable, Unusable } kind = Unusable;
    std::string reason;  // Unusable: why (goes to the record's `skipped`)
    std::string how;     // Usable: how it was found ("ran", "cached", "forced"; empty when nothing ran)
};

// Layers applied in the process that becomes the command, just before exec
// (Landlock and the common hardening). Split so that a supervised child only
// makes system calls: prepare() runs in the launcher and makes every kernel
// object and array the layers need (it may allocate, fail with a message and
// add to the record's notGranted); apply() is system calls on that data only.
class InProcess {
public:
    virtual ~InProcess() = default;
    // open_fds: ours, close-on-exec, to keep open through the fd cleanup (the
    // report, supervise's exec pipe).
    virtual Outcome prepare(Confinement& c, const std::vector<int>& open_fds) = 0;
    virtual bool apply(Fault& f) const noexcept = 0;
    // Before prepare(): the command's own terminal by name (the pty's slave).
    // A layer that governs device ioctls lets the command use it as its
    // terminal (less opens it by name and sets its modes).
    virtual void allow_terminal(const std::string& path) { (void)path; }
    // For explain: the member name ("landlock"), what is applied as JSON, and
    // the same as labelled text lines.
    virtual std::string name() const = 0;
    virtual nlohmann::ordered_json explain() const = 0;
    virtual std::vector<std::pair<std::string, std::string>> explain_lines() const = 0;
};

struct Plan;

// How the parent (supervise, or exec mode's forwarder) reads the end of a run
// whose exec'd program is not the command (bwrap's sandbox); a plan with a
// Watch is never exec'd in place, because the program forwards no signal. Without a Watch the command is supervise's own
// child: its wait status is the command's, the exec pipe tells whether an
// in-process layer failed, and the record's runnerFailureRules read stderr.
class Watch {
public:
    virtual ~Watch() = default;
    // Before the spawn: pipes, argv, fds to inherit.
    virtual Outcome arm(Plan& p) = 0;
    // Without a pty the child stays in the caller's process group (issue 15),
    // so that a signal sent to the group (kill -STOP, Ctrl-C with --no-pty, a
    // service manager's) reaches the command as it would the bare command.
    // A runner whose own program must not die of such a signal (bwrap: the
    // sandbox would go with it) returns true: the forwarded signals that
    // terminate by default start ignored in the child, and the runner tells
    // its stage which of them the caller ignored itself (`caller_ignored`,
    // bit n: signal n), so that the command gets the caller's dispositions back.
    virtual bool shield(Plan& p, unsigned caller_ignored) = 0;
    // Before the spawn, with a pty relayed (terminal.hpp): a runner whose
    // sandbox has a devpts of its own (bwrap's --dev) has its stage make the
    // command's pty there, so that the command's terminal has its own name
    // inside (`tty`: /dev/pts/N, not bwrap's /dev/console), and hand the
    // master out over the socket returned here (ours, the relay's from then
    // on: Relay::inside). -1: the relay's own pty is the command's.
    virtual int own_pty(Plan&) { return -1; }
    // After the spawn, in the parent: close the child's ends.
    virtual void spawned() = 0;
    // An fd to poll (-1: none) and what to do when it is readable.
    virtual int fd() const noexcept = 0;
    virtual void readable() = 0;
    // Looks for the command. Returns its pidfd once found (then never called
    // again) and sets `pid` to its pid, -1 while looking, -2 when it cannot
    // be held by a pidfd: signals then go to `pid` where it was set (found
    // by its pid alone), else to the child. Called again each time fd() is
    // readable, until it no longer returns -1.
    virtual int find_command(pid_t& pid) = 0;
    // The child is reaped: the command's own wait status where it can be
    // known better than the child's, and the run's classification from the
    // runner's evidence. `evidence` names it for the result record.
    virtual void ended(int command_pidfd, int& status) = 0;
    virtual Classification classify(const Plan& p, std::optional<int> exit_code, const std::string& tail,
                                    const char*& evidence) = 0;
    // How many levels of the child's process tree are the runner's own
    // (bwrap and its init: 2). A timeout's SIGTERM goes to the processes
    // below them, so that the command gets its grace period; the SIGKILL
    // after it goes to all.
    virtual int runner_depth() const noexcept { return 0; }
    // A stage that waits for the carve-outs (Plan::late_walk), once they are
    // walked: what the plan says of them settled, the record (`record`: a
    // report or the stage wants one) and the list handed over, and the stage
    // told to go on. Called once, after spawned(), before the loop.
    virtual Outcome go(Plan&, bool /*record*/) { return fail(Err::Internal, "this runner's stage waits for nothing"); }
    // ...or told that the word will not come (the walk failed): the stage
    // ends without running anything, and the runner with it, in their own
    // time. Never killed in their first moments instead: bwrap killed before
    // it has released its child leaves that child waiting for ever, holding
    // the caller's output open.
    virtual void halt() {}
};

// Everything needed to start the confined command: the record, what this
// process applies to itself, and what to exec. Filled by the runner's plan().
struct Plan {
    Confinement c;
    Config config;                          // the effective settings
    std::unique_ptr<InProcess> in_process;  // applied here before exec; null: none
    std::unique_ptr<Watch> watch;           // supervise's evidence; null: the generic one
    std::string exec_path;                  // the command, or the runner (bwrap, sandbox-exec)
    // The runner's program (bwrap, a custom runner) as it was opened and
    // checked (owner, mode, directories; issue 37), executed through this
    // descriptor so that a file swapped in after the check never runs; -1:
    // exec_path is looked up at the exec (the command itself).
    int exec_fd = -1;
    // exec_path is a runner, not the command: its failing to start is a
    // runner failure (125), never the command's 126/127.
    bool exec_is_runner = false;
    std::vector<std::string> exec_argv;
    // The command's environment when an env flag (or the runner) changed it;
    // nullopt: it inherits this process's environment unchanged.
    std::optional<std::vector<std::string>> env;
    // fds the runner needs across the exec (bwrap's stage: our own binary,
    // the roots, the report); made inheritable just before it.
    std::vector<int> inherit_fds;
    // The record goes here (pwrite at 0) instead of the report: bwrap's
    // stage reads it and writes it to the report once it has confined
    // itself. -1: the record goes to the report from this process.
    int record_fd = -1;
    // The reader of record_fd needs the record even without a report: the
    // command's words ride in it (bwrap's kArgvInline).
    bool record_carries_argv = false;
    // What the plan opened (bwrap: our own binary, the record's memfd):
    // closed with it, in whichever process it ends.
    std::vector<Fd> owned;
    // The rlimits the process that becomes the command sets just before its
    // exec (the record's `limits`); a runner whose own program must not run
    // under them (bwrap: the stage sets them) takes them over and clears this.
    std::vector<limits::Rlimit> rlimits;
    // The cgroup leaves' cgroup.procs (supervise; -1 past the last): the
    // child joins each first.
    int cgroup_procs_fds[limits::kMaxLeaves] = {-1, -1, -1};
    // --net allow= (issue 19): our end of the socketpair the bwrap stage sends
    // its namespace's listener over (supervise runs the proxy on it), and the
    // stage's end, which supervise closes once the child is spawned. -1: none.
    int relay_fd = -1;
    int relay_child_fd = -1;
    // The carve-outs' walk, not made yet (issue 18): it is made by whoever
    // needs the list first (chain::walk_now), which is supervise, after the
    // spawn, where a runner's stage waits for it (bwrap as root: the walk
    // runs while bwrap builds the sandbox; Watch::go). Null: walked, or none.
    std::shared_ptr<const carveouts::Input> late_walk;
};

class Runner {
public:
    virtual ~Runner() = default;
    virtual RunnerKind kind() const noexcept = 0;
    // Whether auto considers it at all here, without running anything (a
    // custom runner only when configured). Not a candidate: not in auto's
    // chain, the self-test's runner list or the record's `skipped`.
    virtual bool candidate(const Config&) const noexcept { return true; }
    // Only for auto: forced runners are planned without a probe.
    virtual Verdict probe(const RunnerEnv& env) const = 0;
    // Whether it can give the command a private /tmp (Policy::private_tmp):
    // a mount of its own there. The chain passes over one that cannot.
    virtual bool private_tmp() const noexcept { return false; }
    // Its own way of ending every process the command leaves running when it
    // exits ("pid-namespace", "job-object"), or empty: none, and dsh-confine
    // does it as their parent where it stays one (supervise.cpp). A runner
    // with one cannot honour --keep-descendants; the chain passes over it.
    virtual std::string_view ends_descendants() const noexcept { return {}; }
    // Whether it keeps the protected paths (Policy::protected_paths) read-only
    // inside the writable roots. auto tries the ones that do first when any
    // protected path exists (chain.cpp); one that does not reports each as
    // not enforced and the gap protected-paths.
    virtual bool protects_paths() const noexcept { return false; }
    // Whether it can take --net allow= (issue 19, Policy::net_allow): make the
    // command's network namespace, a listener inside it before the command
    // starts, and hand it out over Plan::relay_child_fd. The chain passes over
    // one that cannot (its namespace, if any, is not one we can reach).
    virtual bool egress_proxy() const noexcept { return false; }
    // Fills the plan (p.c.policy, argv and command_path are set). A failure
    // with Err::SandboxUnavailable and no mode is "this runner cannot be
    // used" (the chain records it and goes on); anything else ends the run.
    virtual Outcome plan(const RunnerEnv& env, const Verdict& v, Plan& p) const = 0;
    // The runner's row for `dsh-confine probe` (runs its probe afresh).
    virtual nlohmann::ordered_json describe(const RunnerEnv& env) const = 0;
    // Files of the runner's own that decide later runs (path, what they are),
    // which a run must not be able to write (resolve's own-state check).
    virtual std::vector<std::pair<std::string, std::string>> state_files() const { return {}; }
};

// This host's runners, in auto's order, and its name ("linux", "darwin",
// "windows"): src/<os>/registry.cpp.
const std::vector<const Runner*>& registry();
std::string_view host_platform() noexcept;
// A runner's own entry into this binary from inside its sandbox (bwrap's
// stage and probe check): its exit status, or nullopt for a normal command line.
std::optional<int> run_internal_entry(int argc, const char* const* argv);

// For describe(): the enforcement and open gaps of a stack of layers, per
// confined mode (chain.cpp).
nlohmann::ordered_json per_mode(const std::function<std::vector<Layer>(const Policy&)>& layers_for);

}  // namespace dsh
