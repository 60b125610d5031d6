#include "errors.hpp"
#include "own_state.hpp"
#include "bytes.hpp"

#include "fd.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#ifndef _WIN32
#include <poll.h>
#endif
#include <sys/stat.h>
#include <unistd.h>
#include <climits>
#include <cstdio>
#include <cstdlib>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0  // Windows: handles are not inherited by default
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif

namespace dsh {

ErrInfo info(Err e) noexcept {
    switch (e) {
        case Err::Usage: return {"USAGE", 125};
        case Err::InvalidRoot: return {"INVALID_WORKSPACE_ROOT", 125};
        case Err::InvalidPath: return {"INVALID_WRITABLE_PATH", 125};
        case Err::ReportFd: return {"REPORT_FD_INVALID", 125};
        case Err::ReportWrite: return {"REPORT_WRITE_FAILED", 125};
        case Err::SandboxUnavailable: return {"SANDBOX_UNAVAILABLE", 125};
        case Err::CommandNotFound: return {"COMMAND_NOT_FOUND", 127};
        case Err::CommandNotExecutable: return {"COMMAND_NOT_EXECUTABLE", 126};
        case Err::ConfigInvalid: return {"CONFIG_INVALID", 125};
        case Err::SessionInvalid: return {"SESSION_INVALID", 125};
        case Err::EscalationInvalid: return {"ESCALATION_INVALID", 125};
        case Err::EscalationNotWider: return {"ESCALATION_NOT_WIDER", 125};
        case Err::EscalationNoApprover: return {"ESCALATION_NO_APPROVER", 125};
        case Err::EscalationRejected: return {"ESCALATION_REJECTED", 125};
        case Err::EscalationCancelled: return {"ESCALATION_CANCELLED", 125};
        case Err::EscalationUnavailable: return {"ESCALATION_UNAVAILABLE", 125};
        case Err::StateUnsafe: return {"UNSAFE_STATE", 125};
        case Err::LimitUnavailable: return {"LIMIT_UNAVAILABLE", 125};
        case Err::ProtectionUnavailable: return {"PROTECTION_UNAVAILABLE", 125};
        case Err::Internal: return {"INTERNAL_ERROR", 125};
    }
    return {"INTERNAL_ERROR", 125};  // unreachable: every enumerator is listed above
}

std::string one_line(std::string_view message) {
    std::string out;
    out.reserve(message.size());
    for (unsigned char ch : message) {
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch == '\r') out += "\\r";
        else if (ch < 0x20 || ch == 0x7f) out += fmt::format("\\x{:02x}", ch);
        else out += static_cast<char>(ch);
    }
    return out;
}

std::string sandbox_unavailable_text(std::string_view mode) {
    return fmt::format(
        "sandbox mode \"{}\" is requested but no sandbox backend is usable on this host; "
        "refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing "
        "kernel (Linux), ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token "
        "runner can start (Windows) \u2014 otherwise switch the consumer to danger-full-access.",
        mode);
}

std::string Outcome::stderr_text() const { return !ok && !hint.empty() ? hint : text(); }

std::string forced_runner_text(std::string_view runner, std::string_view reason, std::string_view others) {
    // The refusals of one option (--private-tmp, --net allow=, ...) end in
    // their fix, which names a runner; a runner unusable here does not.
    if (reason.find("--runner") != std::string_view::npos) return fmt::format("--runner {}: {}", runner, reason);
    if (others.empty()) return fmt::format("--runner {}: {}; nothing else can confine this run here", runner, reason);
    return fmt::format("--runner {}: {}; use --runner {} or auto (which picks a runner that can)", runner, reason,
                       others);
}

std::string runner_absent_text(std::string_view runner, std::string_view platform, std::string_view runners) {
    return fmt::format("--runner {}: that runner does not exist on {}; use --runner {} or auto", runner, platform,
                       runners.empty() ? std::string_view("custom") : runners);
}

Outcome with_hint(Outcome o, std::string hint) {
    o.hint = std::move(hint);
    return o;
}

Outcome with_fix(Outcome o, std::string_view fix) {
    if (fix.empty()) return o;
    std::string line = o.text() + "; " + std::string(fix);
    return with_hint(std::move(o), std::move(line));
}

std::string hint_text(Hint h, std::string_view a) {
    switch (h) {
        // The contract's texts for these name the harness's tool-call fields
        // (sandbox_permissions): the line says it in our flags instead.
        case Hint::EscalateNeedsJustification:
            return "--escalate needs --justification TEXT, saying in words why the wider mode is needed";
        case Hint::JustificationNeedsEscalate:
            return "--justification goes with --escalate MODE or --escalate-net NET: add one, or drop "
                   "--justification";
        case Hint::BlankJustification:
            return "--justification is blank: say in words why the wider mode is needed";
        case Hint::NotWider:
            return fmt::format("--escalate takes a mode wider than the call's \"{}\" "
                               "(read-only < workspace-write < danger-full-access)", a);
        case Hint::NetNotWider:
            return fmt::format("--escalate-net takes a network wider than the call's \"{}\" (off < loopback < host)", a);
        case Hint::NoApprover:
            return fmt::format("escalating to {} needs someone to approve it, and none is set: give --approver tty "
                               "(asks on the terminal) or --approver COMMAND, or \"approver\" in the config", a);
    }
    return {};  // unreachable: every enumerator is listed above
}

std::string carve_misplaced_text(std::string_view path) {
    return fmt::format("{} is not the directory or file dsh-confine opened, or its bind did not land on it (a "
                       "symlink was planted on the way while the sandbox was built); nothing was run: remove the "
                       "link and run the command again",
                       path);
}

std::string protected_symlink_text(std::string_view path, std::string_view link) {
    return fmt::format("the protected path {} cannot be kept read-only: {} is a symlink inside a writable root "
                       "(an earlier run could have planted it); remove the link, or --unprotect {}",
                       path, link, path);
}

std::string protected_unreadable_text(std::string_view path, std::string_view why) {
    return fmt::format("the protected path {} cannot be looked at ({}); fix its permissions, or --unprotect {}", path,
                       why, path);
}

std::string git_config_user_text(std::string_view value, std::string_view user) {
    return fmt::format("a git config names {} (an include or core.hooksPath), and the user {} is not in /etc/passwd, "
                       "so what git would read there cannot be checked; write that path out in full",
                       value, user);
}

std::string root_in_git_dir_text(std::string_view root, std::string_view gitdir) {
    return fmt::format("the writable root {} is inside the git directory {}, whose hooks and config the next git run "
                       "follows; name the repository's working tree as the root instead",
                       root, gitdir);
}

std::string git_config_too_large_text(std::string_view config, size_t limit) {
    return fmt::format("the git config {} is larger than {} MiB, too large to check for includes and core.hooksPath; "
                       "shorten it",
                       config, limit >> 20);
}

std::string not_json_text(std::string_view text, size_t byte) {
    if (byte == 0) return "not valid JSON; correct it";
    const size_t at = std::min(byte - 1, text.size());
    size_t line = 1, column = at + 1;
    for (size_t i = 0; i < at; ++i)
        if (text[i] == '\n') line++, column = at - i;
    if (line == 1 && text.find('\n') == std::string_view::npos)
        return fmt::format("not valid JSON at column {}; correct it", column);
    return fmt::format("not valid JSON at line {}, column {}; correct it (a missing bracket, quote or comma, or "
                       "a comment: JSON has none)",
                       line, column);
}

std::string protected_changed_text(size_t n) {
    return fmt::format("{} protected path{} changed during the run (see the result record's violations); check them before the next "
                       "git or editor run",
                       n, n == 1 ? "" : "s");
}

std::string protected_refused_text(std::string_view path) {
    return fmt::format("{} is protected in workspace-write (read-only inside, so the command could not change it); "
                       "to let it, run again with --unprotect {}",
                       path, path);
}

std::string protected_stuck_text(const std::vector<std::string>& paths) {
    std::string list;
    for (const auto& p : paths) list += (list.empty() ? "" : ", ") + p;
    return fmt::format("the command created {} protected name{} that did not exist when the run started and that "
                       "could not be moved aside (the quarantine name was taken meanwhile): {}; delete {} before the "
                       "next git or editor run there",
                       paths.size(), paths.size() == 1 ? "" : "s", list, paths.size() == 1 ? "it" : "them");
}

std::string protected_quarantined_text(size_t n) {
    return fmt::format("the command created {} protected name{} that did not exist when the run started (a git "
                       "commondir, hooks, a bare repository's HEAD, ...); each was renamed to "
                       "NAME.dsh-confine-quarantine-RUN so that the next git or editor run does not read it: "
                       "inspect and delete {}",
                       n, n == 1 ? "" : "s", n == 1 ? "it" : "them");
}

std::string shm_unavailable_text() {
    return "shared memory (/dev/shm: shm_open, sem_open, Python multiprocessing) is not writable: Landlock alone "
           "has no mount namespace to give the command a private /dev/shm, and the host's is never granted; use "
           "--runner bwrap";
}

std::string shm_root_text(std::string_view what, std::string_view path) {
    return fmt::format("{} {} cannot be granted: /dev/shm is the host's shared memory, never writable; in "
                       "workspace-write the bwrap runner gives the command a private, writable /dev/shm "
                       "(--runner bwrap; auto prefers it): drop {}",
                       what, path, path);
}

std::string private_tmp_unavailable_text(std::string_view runner) {
    return fmt::format("{} cannot give the command a private /tmp (--private-tmp): it restricts access to the "
                       "host's files and mounts nothing; use --runner bwrap (or auto), or drop --private-tmp",
                       runner);
}

static std::string_view mechanism(std::string_view how) {
    return how == "pid-namespace" ? "PID namespace" : how == "job-object" ? "job object" : how;
}

std::string keep_descendants_unavailable_text(std::string_view runner, std::string_view how) {
    return fmt::format("{} cannot leave the command's background processes running (--keep-descendants): its {} "
                       "ends them all with the command; use --runner landlock (or auto), or drop --keep-descendants",
                       runner, mechanism(how));
}

std::string protection_lost_text(std::string_view runner, std::string_view path, bool hidden, size_t more,
                                 std::string_view instead, std::string_view drop) {
    const std::string others = more == 0 ? std::string() : fmt::format(" (and {} more)", more);
    return fmt::format("{} cannot {} {}{}, which this run asks for, and would run without it: {}; or {}", runner,
                       hidden ? "hide" : "protect", path, others, instead, drop);
}

std::string keep_descendants_rules_out_text(std::string_view runner, std::string_view how) {
    return fmt::format("--keep-descendants rules out {}, whose {} ends the command's background processes with it, "
                       "so drop --keep-descendants",
                       runner, mechanism(how));
}

std::string carver_unusable_text(std::string_view runner, std::string_view reason) {
    return fmt::format("{}, which can, is not usable here ({})", runner, reason);
}

std::string net_allow_unavailable_text(std::string_view runner) {
    return fmt::format("--net allow= needs the bwrap or Landlock runner: the {} runner cannot hand a listener in "
                       "the command's network namespace to dsh-confine's proxy; use --runner bwrap or --runner "
                       "landlock (or auto)",
                       runner);
}

std::string net_allow_namespace_text(std::string_view runner, std::string_view cause) {
    if (cause.empty())
        return fmt::format("--net allow= needs a network namespace of its own, which the {} runner does not make "
                           "here: use the bwrap runner (--runner bwrap)", runner);
    return fmt::format("--net allow= needs a network namespace of its own, and this host refused the {} runner one "
                       "({}): allow unprivileged user namespaces (sysctl user.max_user_namespaces, "
                       "kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns), or use the "
                       "bwrap runner (--runner bwrap)", runner, cause);
}

// Not the seed's (its markers are file-only, classify.cpp); the same shape.
std::string network_denial_marker(std::string_view net) {
    return fmt::format("[sandbox: network access refused under --net {}]", net);
}

std::string network_hint(std::string_view net, bool escalation_advertised) {
    const std::string_view wider = net == "off" ? "loopback or host" : "host";
    if (escalation_advertised)
        return fmt::format("[sandbox: network escalation available \u2014 retry this exact command once with "
                           "--escalate-net {} + --justification; the approval prompt asks the user]", wider);
    return fmt::format("[sandbox: the command ran with --net {}; run it again with --net {} if it needs the network]",
                       net, wider);
}

std::string custom_root_moved_text(std::string_view path) {
    return fmt::format("the writable root {} is no longer the directory opened for it (replaced or moved while the "
                       "run started); the custom runner binds roots by path, so nothing ran: run it again once "
                       "nothing is changing that path", path);
}

std::string loopback_unavailable_text(std::string_view runner, std::string_view cause) {
    if (cause.empty())
        return fmt::format("--net loopback needs a network namespace of its own, which the {} runner does not "
                           "make: use the bwrap runner (--runner bwrap), or --net off", runner);
    return fmt::format("--net loopback needs a network namespace of its own, and this host refused the {} runner "
                       "one ({}): allow unprivileged user namespaces (sysctl user.max_user_namespaces, "
                       "kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns), use the "
                       "bwrap runner (--runner bwrap), or --net off", runner, cause);
}

Outcome unavailable(std::string_view mode, std::string runner_failure) {
    Outcome o = fail(Err::SandboxUnavailable, {});
    o.mode = std::string(mode);
    o.runner_failure = std::move(runner_failure);
    return o;
}

Err fault_code(const Fault& f) noexcept {
    switch (f.step) {
        case Step::CloseRange: return Err::SandboxUnavailable;
        case Step::KeepFd: return Err::SandboxUnavailable;
        case Step::RootFd: return Err::SandboxUnavailable;
        case Step::NoNewPrivs: return Err::SandboxUnavailable;
        case Step::RestrictSelf: return Err::SandboxUnavailable;
        case Step::LandlockUnverified: return Err::SandboxUnavailable;
        case Step::CapGet: return Err::SandboxUnavailable;
        case Step::SecureBits: return Err::SandboxUnavailable;
        case Step::CapBsetDrop: return Err::SandboxUnavailable;
        case Step::CapBsetEndless: return Err::SandboxUnavailable;
        case Step::AmbientClear: return Err::SandboxUnavailable;
        case Step::CapSet: return Err::SandboxUnavailable;
        case Step::CapsRemain: return Err::SandboxUnavailable;
        case Step::RootBoundingSet: return Err::SandboxUnavailable;
        case Step::Seccomp: return Err::SandboxUnavailable;
        case Step::SeccompPrctl: return Err::SandboxUnavailable;
        case Step::SeccompUnverified: return Err::SandboxUnavailable;
        case Step::NetNamespace: return Err::SandboxUnavailable;
        case Step::NetIdMap: return Err::SandboxUnavailable;
        case Step::LoopbackUp: return Err::SandboxUnavailable;
        case Step::RelayHandOut: return Err::SandboxUnavailable;
        case Step::RecordHandOver: return Err::Internal;
        case Step::ReportWrite: return Err::ReportWrite;
        case Step::InheritFd: return Err::Internal;
        case Step::SealMailbox: return Err::Internal;
        case Step::PdeathSig: return Err::Internal;
        case Step::Stdio: return Err::Internal;
        case Step::Pty: return Err::Internal;
        case Step::Ctty: return Err::Internal;
        case Step::CgroupJoin: return Err::LimitUnavailable;
        case Step::Rlimit: return Err::LimitUnavailable;
        case Step::PidNamespace: return Err::Internal;
        case Step::Exec: return f.err == ENOENT ? Err::CommandNotFound : Err::CommandNotExecutable;
    }
    return Err::Internal;
}

Outcome fault_outcome(const Fault& f, std::string_view exec_path) {
    const char* why = f.err ? std::strerror(f.err) : "";
    switch (f.step) {
        case Step::CloseRange: return failf(fault_code(f), "close_range: {}", why);
        case Step::KeepFd: return failf(fault_code(f), "--keep-fd {}: {}", f.arg, why);
        case Step::RootFd:
            return failf(fault_code(f), "a writable root's descriptor {} is not open: {}", f.arg, why);
        case Step::NoNewPrivs: return failf(fault_code(f), "prctl(PR_SET_NO_NEW_PRIVS): {}", why);
        case Step::RestrictSelf: return failf(fault_code(f), "landlock_restrict_self: {}", why);
        case Step::LandlockUnverified:
            // Something around dsh-confine (a container's seccomp profile, a
            // supervisor) answers landlock_restrict_self with success and
            // restricts nothing; or the check itself cannot be made.
            if (f.arg == 2)
                return failf(fault_code(f),
                             "cannot check that Landlock took: /proc/self/comm is not writable before restricting "
                             "({}); run it with /proc mounted read-write",
                             why);
            if (f.arg == 1)
                return failf(fault_code(f),
                             "cannot check that Landlock took: opening /proc/self/comm for writing after "
                             "restricting failed with {}, not permission denied",
                             why);
            return fail(fault_code(f),
                        "landlock_restrict_self reported success but Landlock did not take (a write it refuses "
                        "was allowed); the environment answers it without restricting: run it where Landlock works");
        case Step::CapGet: return failf(fault_code(f), "capget: {}", why);
        case Step::SecureBits: return failf(fault_code(f), "prctl(PR_SET_SECUREBITS): {}", why);
        case Step::CapBsetDrop: return failf(fault_code(f), "prctl(PR_CAPBSET_DROP, {}): {}", f.arg, why);
        case Step::CapBsetEndless:
            return fail(fault_code(f), "prctl(PR_CAPBSET_DROP): no end to the capabilities");
        case Step::AmbientClear: return failf(fault_code(f), "prctl(PR_CAP_AMBIENT_CLEAR_ALL): {}", why);
        case Step::CapSet: return failf(fault_code(f), "capset: {}", why);
        case Step::CapsRemain: return fail(fault_code(f), "capabilities remain after dropping them");
        case Step::RootBoundingSet:
            return failf(fault_code(f),
                         "running as uid 0 without CAP_SETPCAP: capability {} stays in the bounding set", f.arg);
        case Step::Seccomp: return failf(fault_code(f), "seccomp(SECCOMP_SET_MODE_FILTER): {}", why);
        case Step::SeccompPrctl: return failf(fault_code(f), "prctl(PR_SET_SECCOMP): {}", why);
        case Step::SeccompUnverified:
            return failf(fault_code(f),
                         "the seccomp filter was reported loaded but a call it refuses was not refused ({}); the "
                         "environment answers seccomp() without filtering: run it where seccomp works",
                         f.err ? why : "it succeeded");
        case Step::NetNamespace:
            return failf(fault_code(f), "unshare({}): {}", f.arg == 1 ? "CLONE_NEWUSER|CLONE_NEWNET" : "CLONE_NEWNET",
                         why);
        case Step::NetIdMap:
            return failf(fault_code(f), "cannot write /proc/self/{} of the new user namespace: {}",
                         f.arg == 0 ? "setgroups" : f.arg == 1 ? "uid_map" : "gid_map", why);
        case Step::LoopbackUp:
            return failf(fault_code(f), "cannot bring lo up in the new network namespace (SIOCSIFFLAGS): {}", why);
        case Step::RelayHandOut:
            return failf(fault_code(f), "cannot hand the allow-list's listener to dsh-confine: {}", why);
        case Step::RecordHandOver:
            return failf(fault_code(f), "cannot hand the confinement record to the bwrap stage: {}", why);
        case Step::ReportWrite:
            if (f.err == ETIMEDOUT) return fail(fault_code(f), report_text(ReportText::Stalled, f.arg, 1));
            return failf(fault_code(f), "cannot write the report to fd {}: {}", f.arg, why);
        case Step::InheritFd: return failf(fault_code(f), "cannot pass fd {} to the runner: {}", f.arg, why);
        case Step::SealMailbox: return failf(fault_code(f), "cannot seal the bwrap stage's mailbox: {}", why);
        case Step::PdeathSig: return failf(fault_code(f), "prctl(PR_SET_PDEATHSIG): {}", why);
        case Step::PidNamespace: return failf(fault_code(f), "cannot start the command in its PID namespace: {}", why);
        case Step::Stdio: return failf(fault_code(f), "dup2: {}", why);
        case Step::Pty:
            return failf(fault_code(f),
                         "cannot open a pseudo-terminal for the command: {}; pass --no-pty to give it this "
                         "terminal instead",
                         why);
        case Step::Ctty:
            return failf(fault_code(f), "cannot make the pseudo-terminal the command's controlling terminal: {}",
                         why);
        case Step::CgroupJoin:
            return failf(fault_code(f), "cannot join the cgroup made for the command's limits: {}", why);
        case Step::Rlimit: return failf(fault_code(f), "cannot set resource limit {}: {}", f.arg, why);
        case Step::Exec:
            if (f.err == ENOENT) return failf(fault_code(f), "{}: {}", exec_path, why);
            return failf(fault_code(f), "{}: cannot execute: {}", exec_path, why);
    }
    return failf(fault_code(f), "an unknown step failed: {}", why);
}

std::string Outcome::text() const {
    if (ok || err != Err::SandboxUnavailable || mode.empty()) return message;
    std::string t = sandbox_unavailable_text(mode);
    if (!runner_failure.empty()) t += " Runner failure: " + runner_failure;
    return t;
}

std::string jobserver_text(JobserverText t, int a, int b, std::string_view what) {
    // Every case ends in the fix: a '+' rule (make passes its pipe only to a
    // rule it knows recurses), or --keep-fd for an fd the caller does mean to give.
    constexpr std::string_view plus = "call dsh-confine from a make rule prefixed with '+' so that make passes its pipe";
    switch (t) {
        case JobserverText::Stdio:
            return fmt::format("MAKEFLAGS names fd {} as make's jobserver, a standard stream: not kept as one (the "
                               "command gets its standard streams anyway); {}", a, plus);
        case JobserverText::NotOpen:
            return fmt::format("MAKEFLAGS names fd {} as make's jobserver, which is not open: not kept; {}", a, plus);
        case JobserverText::Report:
            return fmt::format("MAKEFLAGS names fd {} as make's jobserver, which reaches the --report-fd: not kept, "
                               "so the command cannot forge records; give the report another fd", a);
        case JobserverText::NotInherited:
            return fmt::format("MAKEFLAGS names fd {} as make's jobserver, which the caller did not pass (dsh-confine "
                               "opened it itself): not kept; {}", a, plus);
        case JobserverText::NotPipe:
            return fmt::format("MAKEFLAGS names fd {} as make's jobserver, which is {}, not a pipe: not kept, since "
                               "it could reach more than make's job tokens; pass it with --keep-fd {} if the command "
                               "should have it", a, what, a);
        case JobserverText::NotOnePipe:
            return fmt::format("MAKEFLAGS names fds {} and {} as make's jobserver, which are not the two ends of one "
                               "pipe: not kept; pass them with --keep-fd if the command should have them", a, b);
        case JobserverText::WrongEnd:
            return fmt::format("MAKEFLAGS names fd {} as make's jobserver, which is not open for {}: not kept; {}", a,
                               what, plus);
        case JobserverText::EnvChanged:
            return std::string("the command's MAKEFLAGS is not the caller's (--clearenv, --unsetenv or --setenv "
                               "changed it), so the caller's jobserver fds are not kept; leave MAKEFLAGS as it is "
                               "to keep them");
        case JobserverText::Fifo:
            return std::string("MAKEFLAGS names a fifo as make's jobserver (make 4.4): no fd to keep; the command's "
                               "make opens it by path, which it can where it may write the fifo (workspace-write's "
                               "/tmp, not --private-tmp's)");
        case JobserverText::NoFdPassing:
            return std::string("MAKEFLAGS names fds as make's jobserver, and this platform passes the command no "
                               "fd but its standard streams: not kept; the command's make runs its jobs one at a "
                               "time");
    }
    return {};
}

std::string report_text(ReportText t, int a, int b) {
    switch (t) {
        case ReportText::KeepFdIsReport:
            return fmt::format("--keep-fd {}: that is the --report-fd, which the command must not write; "
                               "pass the command another fd", a);
        case ReportText::KeepFdSharesReport:
            return fmt::format("--keep-fd {}: it is the same open file as --report-fd {}, so the command could "
                               "write forged records into the report; pass the command an fd of another file",
                               a, b);
        case ReportText::StdFdSharesReport:
            if (a == 0)
                return fmt::format("fd 0 is the same open file as --report-fd {}, so the command could write forged "
                                   "records into the report; give the report a file of its own (a pipe)",
                                   b);
            return fmt::format("fd {} is the same open file as --report-fd {}, so the command could write forged "
                               "records into the report; give the report a file of its own (a pipe), or name fd "
                               "{} itself with --report-fd {} to share it on purpose",
                               a, b, a, a);
        case ReportText::KeptSocketGap:
            return fmt::format("fd {} (--keep-fd) is a socket: it reaches whatever it is connected to, or any "
                               "address it sends to, whatever --net says; pass no socket to keep --net whole",
                               a);
        case ReportText::Stalled:
            if (b == 0)
                return fmt::format("the report's reader on fd {} stalled earlier: this record was dropped", a);
            return fmt::format("the report's reader took nothing from fd {} for {} s: a record was cut short or not "
                               "written, and the rest of the report is dropped; read the report while the command "
                               "runs, or use --report-file",
                               a, kReportWaitSeconds);
    }
    return {};
}

std::string report_file_text(ReportFileText t, std::string_view a, std::string_view b, std::string_view c) {
    switch (t) {
        case ReportFileText::WithReportFd:
            return "--report-file and --report-fd both name the report; give one";
        case ReportFileText::Exists:
            return fmt::format("--report-file {}: it exists (a file, a link or a FIFO there is never opened); "
                               "remove it or name a new path",
                               a);
        case ReportFileText::CannotCreate:
            return fmt::format("--report-file {}: cannot create it: {}; name a path in a directory you can write",
                               a, b);
        case ReportFileText::FdInWritable:
            return fmt::format("--report-fd {}: {} is under the writable root {}, where the command could rewrite it "
                               "with a forged report; give the report a pipe, or a file outside the writable roots",
                               a, b, c);
        case ReportFileText::FdDatagram:
            return fmt::format("--report-fd {}: it is a datagram socket, whose receiver the command could flood until "
                               "the report is dropped; give the report a pipe or a stream socket",
                               a);
        case ReportFileText::FdLinked:
            return fmt::format("--report-fd {}: {} has more than one name, and the command could rewrite it through "
                               "another; give the report a pipe, or a file of its own",
                               a, b);
        case ReportFileText::InWritable:
            return fmt::format("--report-file {}: it is under the writable root {}, where the command could "
                               "replace it with a forged report; name a path outside the writable roots",
                               a, b);
    }
    return {};
}

std::string unsealed_widening_text(std::string_view what, std::string_view path, std::string_view key,
                                   std::string_view fix) {
    return fmt::format("{} {}: {} is taken only from the command line or from a file no confined run could have "
                       "written (owned by root in directories only root can write; for root, one in "
                       "/etc/dsh-confine), and an earlier run could have written this one; {}",
                       what, path, key, fix);
}

std::string system_dir_root_text(std::string_view root, std::string_view source, std::string_view dir) {
    return fmt::format("the writable root {} ({}) lies in {}, where the configs that decide every later run are kept; "
                       "choose a root outside it",
                       root, source, dir);
}

std::string approver_syntax_text(std::string_view command, std::string_view what) {
    return fmt::format("approver {}: holds {}, but it is run directly, not by a shell; give a program and plain "
                       "arguments (such as /usr/local/bin/approve --quiet), and put anything else in a script",
                       command, what);
}

std::string session_seq_exhausted_text(std::string_view path) {
    return fmt::format("session log {}: its last seq is 18446744073709551615, the largest there is, so no event "
                       "can follow it; start a new session log",
                       path);
}

// "; did you mean X?" for the nearest candidate, or nothing.
static std::string did_you_mean(std::string_view near) {
    return near.empty() ? std::string() : fmt::format("; did you mean {}?", near);
}

std::string usage_text(UsageText t, std::string_view a, std::string_view b) {
    switch (t) {
        case UsageText::NoCommand: return "no command given: dsh-confine [OPTIONS] -- COMMAND [ARG...]";
        case UsageText::EmptyCommand: return "the command name is empty";
        case UsageText::UnknownOption: return fmt::format("unknown option \"{}\"; Try '{} --help'", a, b);
        case UsageText::UnknownOptionNear: return fmt::format("unknown option \"{}\"; did you mean {}?", a, b);
        case UsageText::UnknownCommandOption:
            return fmt::format(
                "unknown option \"{}\"; if it is the command's, put the command after --: "
                "dsh-confine [OPTIONS] -- COMMAND [ARG...]",
                a);
        case UsageText::OptionNotHere: return fmt::format("option {} does not apply here; Try '{} --help'", a, b);
        case UsageText::NeedsValue: return fmt::format("option {} needs a value: {} {}", a, a, b);
        case UsageText::TakesNoValue: return fmt::format("option {} takes no value: give it alone", a);
        case UsageText::GivenTwice: return fmt::format("option {} is given twice: give it once", a);
        case UsageText::NotAnFd:
            return fmt::format("option {} takes a file descriptor number (0, 1, 2, ...), not \"{}\"", a, b);
        case UsageText::NotMilliseconds:
            return fmt::format("option {} takes a positive whole number of milliseconds, not \"{}\"", a, b);
        case UsageText::SetenvForm:
            return fmt::format("option --setenv takes one word NAME=VALUE, not \"{}\": --setenv {}=VALUE", a, a);
        case UsageText::TakesNoCommand:
            return fmt::format("{} takes no command after --; Try 'dsh-confine {} --help'", a, a);
        case UsageText::TakesNoWord:
            return fmt::format(
                "{} takes no argument \"{}\"; to run a command named {}, put it after --: "
                "dsh-confine [OPTIONS] -- {} [ARG...]",
                a, b, a, a);
        case UsageText::SessionNeedsSetMode:
            return a.empty() ? std::string("session needs a subcommand: dsh-confine session set-mode FILE MODE, or "
                                           "session show FILE")
                             : fmt::format("unknown session subcommand \"{}\": dsh-confine session set-mode FILE MODE, "
                                           "or session show FILE",
                                           a);
        case UsageText::ShowArgs: return "session show takes one FILE: dsh-confine session show FILE";
        case UsageText::SetModeArgs: return "session set-mode takes a FILE and a MODE: dsh-confine session set-mode FILE MODE";
        case UsageText::CheckNeedsWrite:
            return "check asks about one path and one access: dsh-confine check --write PATH, or check --read PATH";
        case UsageText::Unreadable: return "the options could not be read; Try 'dsh-confine --help'";
        case UsageText::UnknownMode:
            return fmt::format("unknown mode \"{}\" (read-only, workspace-write or danger-full-access)", a);
        case UsageText::UnknownModeNear:
            return fmt::format(
                "unknown mode \"{}\"; did you mean {}? (read-only, workspace-write or danger-full-access)", a, b);
        case UsageText::UnknownRunner: {
            static constexpr std::string_view kRunners[] = {"auto", "bwrap", "landlock", "seatbelt", "windows-acl",
                                                            "custom"};
            return fmt::format("unknown runner \"{}\"{} (auto, bwrap, landlock, seatbelt, windows-acl or custom)", a,
                               did_you_mean(nearest_word(a, kRunners, std::size(kRunners))));
        }
        case UsageText::KeepDescendantsWithLimits:
            return "--keep-descendants cannot be combined with --timeout or with limits held by a cgroup: those end "
                   "every process the command started when it ends; drop one of them";
        case UsageText::PrivateTmpUnconfined:
            return "--private-tmp needs a confined mode (read-only or workspace-write): danger-full-access runs the "
                   "command on the host's /tmp; drop one of the two";
        case UsageText::UnknownNetwork: {
            static constexpr std::string_view kNetworks[] = {"off", "loopback", "host"};
            return fmt::format("unknown network mode \"{}\" for --net{} (off, loopback, host or allow=LIST)", a,
                               did_you_mean(nearest_word(a, kNetworks, std::size(kNetworks))));
        }
        case UsageText::NetworkUnderDanger:
            return fmt::format("--net {} cannot hold under danger-full-access, which confines nothing; "
                               "choose read-only or workspace-write, or drop --net", a);
        case UsageText::NetAllowEntry:
            return fmt::format("bad network rule \"{}\": {}; a rule is a host, *.domain, an IP address or CIDR, "
                               "each with an optional :PORT ([IPv6]:PORT)", a, b);
        case UsageText::NetDenyWithoutAllow:
            return "--net-deny narrows an allow list and needs one: add --net allow=LIST (or the config's "
                   "network.allow)";
    }
    return "bad command line; Try 'dsh-confine --help'";  // unreachable: every enumerator is listed above
}

std::string root_text(RootText t, std::string_view a, std::string_view b) {
    switch (t) {
        case RootText::RootMissing:
            return fmt::format("workspace root {} does not exist; create it first (mkdir -p {}) or name an existing "
                               "directory",
                               a, a);
        case RootText::RootUnreachable:
            return fmt::format("workspace root {} cannot be reached ({}); name a directory you can reach", a, b);
        case RootText::RootNotDirectory:
            return fmt::format("workspace root {} is not a directory; name a directory", a);
        case RootText::WritableReadOnly:
            return fmt::format("--writable has no effect in read-only mode ({}): nothing is writable there; use "
                               "--mode workspace-write, or drop --writable",
                               a);
        case RootText::WritableMissing:
            return fmt::format("writable path {} does not exist, and dsh-confine creates one only below your home "
                               "directory, never through a symlink ({}); create it first: mkdir -p {}",
                               a, b, a);
        case RootText::WritableNotMade:
            return fmt::format("writable path {} does not exist and could not be created ({}); create it first: "
                               "mkdir -p {}",
                               a, b, a);
    }
    return {};  // unreachable: every enumerator is listed above
}

std::string cache_text(CacheText t, std::string_view a, std::string_view b) {
    switch (t) {
        case CacheText::UnknownTool:
            return fmt::format("--cache: unknown tool '{}'{}; the tools are npm, pip, cargo, go, yarn, maven and "
                               "ccache (name another cache directory with --writable)",
                               a, b.empty() ? std::string() : fmt::format(" (did you mean {}?)", b));
        case CacheText::NotAbsolute:
            return fmt::format("--cache {}: {} is not an absolute path, so where the tool writes depends on its "
                               "current directory; set it to an absolute path or unset it",
                               a, b);
        case CacheText::HoldsHome:
            return fmt::format("--cache {}: its cache directory {} is / or holds your home directory, which "
                               "--cache never grants; point the tool's cache variable at a directory of its own, "
                               "or drop {} from --cache",
                               a, b, a);
        case CacheText::NoHome:
            return fmt::format("--cache {}: its cache is under $HOME, which is not set, and no home directory is "
                               "known for your user; set HOME{}",
                               a, b.empty() ? std::string() : fmt::format(" or {}", b));
        case CacheText::ReadOnly:
            return fmt::format("--cache has no effect in read-only mode ({}): nothing is writable there; use "
                               "--mode workspace-write (or --agent), or drop --cache",
                               a);
        case CacheText::AgentMode:
            return fmt::format("--agent runs in workspace-write, and --mode {} would widen it; drop --mode, or "
                               "drop --agent and give its options one by one",
                               a);
        case CacheText::AgentNet:
            return fmt::format("--agent turns the network off, and --net {} would widen it; drop --net, or drop "
                               "--agent and give its options one by one (--mode workspace-write --hide-secrets "
                               "--scrub-secrets --net ...)",
                               a);
    }
    return {};  // unreachable: every enumerator is listed above
}

std::string limit_text(LimitText t, std::string_view a, std::string_view b) {
    switch (t) {
        case LimitText::NotSize:
            return fmt::format("option {} takes a size such as 512M, 2G or 1048576 (bytes; K, M, G, T are powers of "
                               "1024), not \"{}\"",
                               a, b);
        case LimitText::NotDuration:
            return fmt::format("option {} takes a duration such as 90s, 5m, 1h or 500ms (a bare number is "
                               "seconds), not \"{}\"",
                               a, b);
        case LimitText::NotCount:
            return fmt::format("option {} takes a positive whole number, not \"{}\"", a, b);
        case LimitText::NotLimitsMode:
            return fmt::format("option --limits takes required or best-effort, not \"{}\"", a);
        case LimitText::MemoryNeedsCgroup:
            return fmt::format("--memory cannot be enforced as asked under --limits required: no cgroup v2 memory "
                               "controller is delegated to dsh-confine here and no cgroup v1 memory hierarchy is "
                               "writable by it ({}), and RLIMIT_AS bounds address "
                               "space, not memory; delegate a cgroup (systemd-run --user -p Delegate=yes) or use "
                               "--limits best-effort",
                               a);
        case LimitText::PidsNeedsCgroup:
            return fmt::format("--max-procs cannot be enforced as asked under --limits required: no cgroup v2 pids "
                               "controller is delegated to dsh-confine here and no cgroup v1 pids hierarchy is "
                               "writable by it ({}), and RLIMIT_NPROC counts every "
                               "process of the user (and binds no process of uid 0); delegate a cgroup "
                               "(systemd-run --user -p Delegate=yes) or use --limits best-effort",
                               a);
        case LimitText::CpuPerProcess:
            return "--cpu-time cannot be enforced as asked under --limits required: RLIMIT_CPU bounds each process's "
                   "own CPU time, not the command's total; use --limits best-effort, or --timeout for a bound on "
                   "the whole command";
        case LimitText::LeafFailed:
            return fmt::format("cannot make the cgroup for the command's limits: {}; nothing was run", a);
        case LimitText::NotOnThisPlatform:
            return fmt::format("{} cannot be enforced on this platform yet; nothing was run: drop it", a);
        case LimitText::GapAddressSpace:
            return "RLIMIT_AS bounds each process's address space, not the memory it uses: mappings that are never "
                   "touched count, and the command's processes are bounded one by one, not together";
        case LimitText::GapPerUid:
            return "RLIMIT_NPROC counts every process of the user, not the command's: the user's other processes "
                   "use up the same allowance";
        case LimitText::GapUid0:
            return "the command runs as uid 0, which RLIMIT_NPROC does not bind, and no cgroup pids controller is "
                   "delegated here (nor a cgroup v1 pids hierarchy writable): the number of processes is not limited";
        case LimitText::GapPerProcessCpu:
            return "RLIMIT_CPU bounds each process's own CPU time: the command's processes together may use more";
    }
    return "bad limit";  // unreachable: every enumerator is listed above
}

std::optional<std::string> read_kernel_text(const char* path) {
#ifdef _WIN32
    (void)path;
    return std::nullopt;
#else
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[4096];
    const auto n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n < 0) return std::nullopt;
    std::string s(buf, static_cast<size_t>(n));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
#endif
}

bool fd_is_open(int fd) noexcept {
#ifdef _WIN32
    struct _stat st {};
    return ::_fstat(fd, &st) == 0;
#else
    return ::fcntl(fd, F_GETFD) >= 0;
#endif
}

int write_whole(int fd, std::string_view data) noexcept {
#ifndef _WIN32  // Windows has no SIGPIPE: a gone reader is a failed write
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old);
#endif
    int err = 0;
    while (!data.empty()) {
#ifdef _WIN32
        const auto n = ::write(fd, data.data(), static_cast<unsigned>(data.size()));
#else
        const ssize_t n = ::write(fd, data.data(), data.size());
#endif
        if (n < 0 && errno == EINTR) continue;
#ifndef _WIN32
        if (n < 0 && errno == EAGAIN) {
            pollfd pfd{fd, POLLOUT, 0};
            (void)::poll(&pfd, 1, -1);
            continue;
        }
#endif
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
#ifndef _WIN32
    ::sigaction(SIGPIPE, &old, nullptr);
#endif
    return err;
}

#ifdef _WIN32
// Windows: no symlinks to speak of for these files, no uids; the regular-file
// check only (not executed: see docs/PLATFORMS.md).
Outcome open_regular_file(const std::string& path, int flags, Err err, std::string_view what, int& fd,
                          OpenRules) {
    fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) return failf(err, "{} {}: cannot open: {}", what, path, std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fd = -1;
        return failf(err, "{} {}: not a regular file", what, path);
    }
    return Outcome::success();
}
Outcome check_trusted_file(const std::string&, Err, std::string_view) { return Outcome::success(); }
bool sealed_file(int, bool, std::string_view) { return false; }
Outcome open_trusted_program(const std::string& path, Err err, std::string_view what, int& fd) {
    return open_regular_file(path, O_RDONLY, err, what, fd);
}
#else
namespace {

// The caller (effective uid) or root: the only owners whose files and
// directories decide a run. (A uid outside our user namespace shows as the
// overflow uid, 65534: not trusted, since we cannot tell who it is.)
bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

#if defined(__linux__)
// Inside a user namespace other than the first, a directory owned by a uid
// that is not mapped into it shows as the overflow uid: the host's root-owned
// /, /var, /var/tmp all do in a container. Such a directory is accepted
// (when nobody else may write it, as for any other): refusing it would
// refuse every state file under a container's host paths. Files themselves
// must still be ours or root's. In the first namespace the overflow uid is
// the real user "nobody" and gets no such pass.
bool unmapped_owner(uid_t uid) {
    static const bool in_child_userns = [] {
        int fd = ::open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        char buf[256];
        const ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        if (n <= 0) return false;
        unsigned long inner = 1, outer = 1, count = 0;
        buf[n] = '\0';
        // The first namespace maps everything: "0 0 4294967295", one line.
        return !(std::sscanf(buf, "%lu %lu %lu", &inner, &outer, &count) == 3 && inner == 0 && outer == 0 &&
                 count == 4294967295UL && std::strchr(buf, '\n') == buf + n - 1);
    }();
    static const long overflow = [] {
        int fd = ::open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return 65534L;
        char buf[32];
        const ssize_t n = ::read(fd, buf, sizeof buf - 1);
        ::close(fd);
        if (n <= 0) return 65534L;
        buf[n] = '\0';
        return std::strtol(buf, nullptr, 10);
    }();
    return in_child_userns && static_cast<long>(uid) == overflow;
}
#else
bool unmapped_owner(uid_t) { return false; }
#endif

std::string octal(mode_t m) { return fmt::format("{:04o}", static_cast<unsigned>(m & 07777)); }

// Where an open descriptor really is: no symlink in it, and no race between
// the check and the open (the name is what the kernel opened).
std::string fd_path(int fd) {
#if defined(__linux__)
    char buf[4096];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n <= 0 || buf[0] != '/') return {};
    std::string p(buf, static_cast<size_t>(n));
    constexpr std::string_view kDeleted = " (deleted)";
    if (p.size() > kDeleted.size() && p.compare(p.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
        return {};
    return p;
#elif defined(__APPLE__)
    char buf[PATH_MAX];
    if (::fcntl(fd, F_GETPATH, buf) != 0) return {};
    return buf;
#else
    (void)fd;
    return {};
#endif
}

std::string dir_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The owner and mode rules for the file itself (or a symlink to it).
Outcome check_owner_mode(const struct stat& st, const std::string& path, Err err, std::string_view what,
                         std::string_view kind) {
    if (!trusted_owner(st.st_uid))
        return failf(err,
                     "{} {}: {}owned by uid {}, neither you (uid {}) nor root, so another user could change "
                     "what the next run does; use a file you own",
                     what, path, kind, st.st_uid, ::geteuid());
    if (!S_ISLNK(st.st_mode) && (st.st_mode & 022) != 0)
        return failf(err,
                     "{} {}: {}writable by group or others (mode {}), so another user could change what the next "
                     "run does; chmod go-w {}",
                     what, path, kind, octal(st.st_mode), path);
    return Outcome::success();
}

// `dir` (a real path: no symlinks) and every ancestor up to /.
Outcome check_dirs(std::string dir, Err err, std::string_view what, const std::string& path) {
    if (dir.empty() || dir[0] != '/')
        return failf(err, "{} {}: cannot tell which directory it is in, so cannot check who may replace it", what,
                     path);
    while (true) {
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0)
            return failf(err, "{} {}: cannot check directory {}: {}", what, path, dir, std::strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return failf(err, "{} {}: {} changed while it was checked; try again", what, path, dir);
        if (!trusted_owner(st.st_uid) && !unmapped_owner(st.st_uid))
            return failf(err,
                         "{} {}: directory {} is owned by uid {}, neither you (uid {}) nor root, so another user "
                         "could replace the file; move it to a directory you own",
                         what, path, dir, st.st_uid, ::geteuid());
        // Sticky (/tmp): others may add entries, but not rename or remove ours.
        if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)
            return failf(err,
                         "{} {}: directory {} is writable by group or others (mode {}) without the sticky bit, so "
                         "another user could replace the file; chmod go-w {}",
                         what, path, dir, octal(st.st_mode), dir);
        if (dir == "/") return Outcome::success();
        dir = dir_of(dir);
    }
}

Outcome open_checked(const std::string& path, int flags, Err err, std::string_view what, int& fd, OpenRules rules,
                     bool path_only) {
    fd = -1;
    auto cannot = [&](int e) { return failf(err, "{} {}: cannot open: {}", what, path, std::strerror(e)); };
    if (path.empty()) return cannot(ENOENT);
    // The directory first: the checks and the open below are relative to the
    // same directory, so a rename between them cannot swap which one it is.
    const std::string base = base_of(path);
    if (base.empty() || base == "." || base == "..") return failf(err, "{} {}: not a regular file", what, path);
#if defined(O_PATH)
    Fd dir(::open(dir_of(path).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));  // needs no read permission
#else
    Fd dir(::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK));
#endif
    if (dir.get() < 0) return cannot(errno);
    if (rules.trusted)
        if (auto o = check_dirs(fd_path(dir.get()), err, what, path); !o) return o;

    // What is there, before anything opens it: a FIFO, a socket or a device
    // is refused without being opened (an open could block or act).
    struct stat st {};
    bool exists = ::fstatat(dir.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT) return cannot(errno);
    if (!exists && (flags & O_CREAT) == 0) return cannot(ENOENT);
    bool was_link = false;
    if (exists && S_ISLNK(st.st_mode)) {
        if (!rules.follow_symlink)
            return failf(err, "{} {}: is a symlink, which dsh-confine does not follow here; name the file itself",
                         what, path);
        if (rules.trusted)
            if (auto o = check_owner_mode(st, path, err, what, "a symlink "); !o) return o;
        was_link = true;
        if (::fstatat(dir.get(), base.c_str(), &st, 0) != 0) return cannot(errno);
    }
    if (exists && !S_ISREG(st.st_mode)) return failf(err, "{} {}: not a regular file", what, path);

    int oflags = flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    if (!rules.follow_symlink) oflags |= O_NOFOLLOW;
#if defined(O_PATH)
    if (path_only) oflags = O_PATH | O_CLOEXEC | (rules.follow_symlink ? 0 : O_NOFOLLOW);
#else
    (void)path_only;
#endif
    Fd file(::openat(dir.get(), base.c_str(), oflags, 0644));
    if (file.get() < 0) {
        if (errno == ELOOP && !rules.follow_symlink)
            return failf(err, "{} {}: is a symlink, which dsh-confine does not follow here; name the file itself",
                         what, path);
        return cannot(errno);
    }
    if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return failf(err, "{} {}: not a regular file", what, path);
    if (rules.trusted) {
        if (auto o = check_owner_mode(st, path, err, what, ""); !o) return o;
        // A symlink's target lives elsewhere: its directories count too.
        if (was_link)
            if (auto o = check_dirs(dir_of(fd_path(file.get())), err, what, path); !o) return o;
    }
    if (!path_only && (flags & O_NONBLOCK) == 0) {
        const int fl = ::fcntl(file.get(), F_GETFL);
        if (fl < 0 || ::fcntl(file.get(), F_SETFL, fl & ~O_NONBLOCK) != 0) return cannot(errno);
    }
    fd = file.release();
    return Outcome::success();
}

}  // namespace

std::string directory_fd_text(int fd) {
    const std::string path = fd_path(fd);
    return fmt::format(
        "fd {} is a directory{}: through it a confined command could change the modes and times of every file "
        "below it, which no read-only view covers; give the command a file or /dev/null there instead (e.g. {}</dev/null)",
        fd, path.empty() ? "" : " (" + path + ")", fd);
}

Outcome open_regular_file(const std::string& path, int flags, Err err, std::string_view what, int& fd,
                          OpenRules rules) {
    return open_checked(path, flags, err, what, fd, rules, false);
}

Outcome check_trusted_file(const std::string& path, Err err, std::string_view what) {
    int fd = -1;
    Outcome o = open_checked(path, O_RDONLY, err, what, fd, OpenRules{true, true}, true);
    if (fd >= 0) ::close(fd);
    return o;
}

Outcome open_trusted_program(const std::string& path, Err err, std::string_view what, int& fd) {
    return open_checked(path, O_RDONLY, err, what, fd, OpenRules{true, true}, true);
}

bool sealed_file(int fd, bool caller_is_root, std::string_view system_dir) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) return false;
    const std::string path = fd_path(fd);
    if (path.empty() || path[0] != '/') return false;
    // Root's runs may have any directory as a root but never the system
    // config's (check_own_state): nothing else is out of their reach.
    if (caller_is_root && dir_of(path) != system_dir) return false;
    for (std::string dir = dir_of(path);; dir = dir_of(dir)) {
        // Sticky is no exception here: /tmp lets any run add a name.
        if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0)
            return false;
        if (dir == "/") return true;
    }
}

#endif

void print_error(std::string_view message) {
    (void)write_whole(STDERR_FILENO, "dsh-confine: " + one_line(message) + "\n");
}

}  // namespace dsh
