// One enum, one table: every failure dsh-confine itself can report, with its
// stable code, its exit status and its exact text. Switches over Err have no
// default, so adding a case makes the compiler point at every place to update.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace dsh {

enum class Err {
    Usage,                  // bad command line
    InvalidRoot,            // workspace root missing / not a directory / unopenable
    InvalidPath,            // a --writable path that cannot be used
    ReportFd,               // --report-fd names an fd that is not open for writing
    ReportWrite,            // the report could not be written: nothing runs
    SandboxUnavailable,     // fail closed: the seed's exact text
    CommandNotFound,        // 127
    CommandNotExecutable,   // 126
    ConfigInvalid,          // config file: unknown key, wrong type, bad value
    SessionInvalid,         // session log: malformed line, unknown mode
    EscalationInvalid,      // pairing / blank justification (seed texts)
    EscalationNotWider,
    EscalationNoApprover,
    EscalationRejected,
    EscalationCancelled,
    EscalationUnavailable,
    StateUnsafe,            // own state (config, session log, approver) writable by the run or by another user
    LimitUnavailable,       // --limits required: a limit cannot be enforced as asked (issue 21)
    ProtectionUnavailable,  // a protection asked for cannot hold on any runner that may run (issue 37)
    Internal,               // a system call that should not fail did
};

struct ErrInfo {
    std::string_view code;   // stable, SCREAMING_SNAKE, used in the report
    int exit_status;         // 125 for our own failures, 126/127 for the command
};

ErrInfo info(Err e) noexcept;

// A message as it goes to the terminal: control characters (a newline or an
// escape sequence inside an argument or a path) are shown escaped, so the
// error stays one line and cannot drive the caller's terminal. UTF-8 is kept.
std::string one_line(std::string_view message);

// Writes all of `data` to fd. SIGPIPE is held off meanwhile, so a reader that
// went away is a failed write (EPIPE), not a death by signal; the disposition
// is put back, because SIG_IGN would survive exec into the command.
// A non-blocking fd that is full (EAGAIN: the caller's stderr may share a
// non-blocking open file description) is waited on until it takes more.
// Returns 0 or the errno of the failed write. The one write loop of the
// program: the report, stderr, the relays.
int write_whole(int fd, std::string_view data) noexcept;

// Whether fd is an open descriptor of this process.
bool fd_is_open(int fd) noexcept;

// "dsh-confine: MESSAGE" as one line on stderr, best effort.
void print_error(std::string_view message);

// The seed's fail-closed text; mode is the requested mode's name.
std::string sandbox_unavailable_text(std::string_view mode);
// A runner named with --runner that cannot run this request (the seed's
// text above is for no runner at all): `reason` is the runner's own line;
// when it names no fix, the fix is another runner or auto. `others`: the
// platform's other runners, comma-separated.
std::string forced_runner_text(std::string_view runner, std::string_view reason, std::string_view others);
// --runner names a runner this platform does not have.
std::string runner_absent_text(std::string_view runner, std::string_view platform, std::string_view runners);

// Why --net loopback cannot hold on a runner that makes no network namespace
// of its own, or whose namespace the host refused (`cause`: the failed step,
// empty when the runner makes none).
std::string loopback_unavailable_text(std::string_view runner, std::string_view cause);
// --supervise --markers after a network refusal (issue 38): the marker, and
// the way to a wider network (`net`: the record's network mode, "off",
// "loopback" or "allow"): --escalate-net where an approver is configured,
// --net otherwise. The seed's file-denial marker and mode hint cannot help.
std::string network_denial_marker(std::string_view net);
std::string network_hint(std::string_view net, bool escalation_advertised);
// The custom runner binds the roots by path: one no longer names the
// directory the policy opened (checked just before the exec).
std::string custom_root_moved_text(std::string_view path);
// Why a runner cannot take --net allow= (issue 19): it cannot hand its
// namespace's listener to dsh-confine's proxy.
std::string net_allow_unavailable_text(std::string_view runner);
// --net allow= on a runner whose own network namespace this host refused
// (cause: the failed step) or that makes none here (cause empty).
std::string net_allow_namespace_text(std::string_view runner, std::string_view cause);

// The command-line spelling stderr adds to an escalation failure whose
// report text is the harness contract's (Outcome::hint). `a`: the target mode.
enum class Hint {
    EscalateNeedsJustification,  // --escalate without --justification
    JustificationNeedsEscalate,  // --justification without --escalate
    BlankJustification,
    NotWider,                    // a: the call's current mode
    NetNotWider,                 // a: the call's current network
    NoApprover,
};
std::string hint_text(Hint h, std::string_view a = {});

// A write the command tried on a protected path and was refused (issue 42:
// `git remote add` and .git/config): the path, and the flag that lifts it.
std::string protected_refused_text(std::string_view path);
// Shared memory under Landlock alone (issue 42): the layer's gap `shm`.
std::string shm_unavailable_text();
// A required root (--root, --writable, writableRoots) at or under /dev/shm.
std::string shm_root_text(std::string_view what, std::string_view path);
// Why a runner is passed over for --private-tmp (the record's skippedRunners,
// and a forced runner's reason).
std::string private_tmp_unavailable_text(std::string_view runner);
// Carve-outs (issue 18): a protected path with a symlink on the way (at `link`).
std::string protected_symlink_text(std::string_view path, std::string_view link);
// A carve-out bwrap bound that is not where it was meant to be (a link
// planted on the way after the launcher's walk): nothing was run.
std::string carve_misplaced_text(std::string_view path);
// A protected path that could not be looked at (errno text `why`).
std::string protected_unreadable_text(std::string_view path, std::string_view why);
// A git config that names a path as "~user/..." for a user /etc/passwd does
// not hold (git would look the user up elsewhere, where we cannot follow).
std::string git_config_user_text(std::string_view value, std::string_view user);
// A writable root inside a git directory (`gitdir`): every name there is git's.
std::string root_in_git_dir_text(std::string_view root, std::string_view gitdir);
// A git config larger than what is read of it (its includes and
// core.hooksPath past that point would go unseen).
std::string git_config_too_large_text(std::string_view config, size_t limit);
// A config file or session log line that does not parse: where (`byte`,
// 1-based, into `text`; 0 when unknown), in our words, never the parser's.
std::string not_json_text(std::string_view text, size_t byte);
// The per-entry reasons a protected path is not enforced (the record's whyNot).
inline constexpr const char* kProtectedAbsentText =
    "absent when the run started: nothing is mounted for it (no placeholder is left on the host); if the run "
    "creates it, it is renamed aside when the run ends";
inline constexpr const char* kProtectedLandlockText =
    "landlock cannot make a path inside a writable root read-only (its rights are inherited down the tree); "
    "use --runner bwrap (or auto where bwrap works)";
inline constexpr const char* kProtectedSubmoduleConfigText =
    "a submodule's config is rewritten by every git submodule update (core.worktree): not bound, only checked by "
    "the integrity check with --supervise";
inline constexpr const char* kHiddenAbsentText = "absent when the run started: nothing to hide";
inline constexpr const char* kHiddenLandlockText =
    "landlock grants read on the whole file system and cannot take it back for one path; use --runner bwrap";
inline constexpr const char* kProtectedCustomText = "the custom runner's profile (runnerCommand) carries no carve-outs";
inline constexpr const char* kProtectedOutsideText = "outside the writable roots: read-only already";
// The record's whyNot is a short code (issue 42: a record of many absent
// paths repeated the prose in each entry); the prose once, in the record's
// whyNotText table (only the codes it uses) and in the man page. Codes are
// fixed: a reader may compare them.
struct CarveReason {
    const char* code;
    const char* text;
};
inline constexpr CarveReason kCarveReasons[] = {
    {"absent", kProtectedAbsentText},
    {"landlock", kProtectedLandlockText},
    {"submodule-config", kProtectedSubmoduleConfigText},
    {"hidden-absent", kHiddenAbsentText},
    {"hidden-landlock", kHiddenLandlockText},
    {"custom-runner", kProtectedCustomText},
    {"outside-roots", kProtectedOutsideText},
};
// The supervise integrity check's violation (the result record's protectedChanged).
std::string protected_changed_text(size_t n);
// Protected names the run created where nothing was (carveouts::quarantine_created).
std::string protected_quarantined_text(size_t n);
// ...and those it could not move aside (movedTo null), by path.
std::string protected_stuck_text(const std::vector<std::string>& paths);
// Why a runner is passed over for --keep-descendants: `how` is its
// Runner::ends_descendants().
std::string keep_descendants_unavailable_text(std::string_view runner, std::string_view how);
// A runner that cannot carve, refused because it would leave a protection
// of the run unenforced (issue 37): `path` the first such (hidden: a
// --deny-read or --hide-secrets path; else one to keep read-only), `more`
// how many others, `instead` what would hold it, `drop` how to drop it.
std::string protection_lost_text(std::string_view runner, std::string_view path, bool hidden, size_t more,
                                 std::string_view instead, std::string_view drop);
// `instead` under auto when --keep-descendants passed over the runner that
// carves (`how`: its Runner::ends_descendants()), or when it was not usable.
std::string keep_descendants_rules_out_text(std::string_view runner, std::string_view how);
std::string carver_unusable_text(std::string_view runner, std::string_view reason);

// The command line's texts (and the mode/runner names wherever a flag gives
// them), one line each: what is wrong and how to fix it. `a` and `b` are the
// words the text names (an option, a value, a subcommand); see errors.cpp.
enum class UsageText {
    NoCommand,            // nothing to run
    EmptyCommand,         // the command word is ""
    UnknownOption,        // a: the option, b: the help command ("dsh-confine probe")
    UnknownOptionNear,    // a: the option, b: the option of this context it most likely meant
    UnknownCommandOption, // a: the option, seen after a word that looks like a command
    OptionNotHere,        // a: the option, b: the help command
    NeedsValue,           // a: the option, b: its value's name
    TakesNoValue,         // a: the flag
    GivenTwice,           // a: the option
    NotAnFd,              // a: the option, b: the value
    NotMilliseconds,      // a: the option, b: the value
    SetenvForm,           // a: the value given to --setenv
    TakesNoCommand,       // a: the subcommand
    TakesNoWord,          // a: the subcommand, b: the word
    SessionNeedsSetMode,  // a: the word given after "session", or empty
    SetModeArgs,          // session set-mode without FILE and MODE, or with more
    ShowArgs,             // session show without FILE, or with more
    CheckNeedsWrite,      // check without --write or --read, or with both
    Unreadable,           // CLI11 refused words the split let through (not expected)
    UnknownMode,          // a: the mode
    UnknownModeNear,      // a: the mode, b: the mode it most likely meant
    UnknownRunner,        // a: the runner
    PrivateTmpUnconfined, // --private-tmp with danger-full-access
    KeepDescendantsWithLimits, // --keep-descendants with --timeout or a cgroup leaf
    UnknownNetwork,       // a: the --net value
    NetworkUnderDanger,   // a: the --net value (off or loopback) asked with danger-full-access
    NetAllowEntry,        // a: an allow/deny entry, b: why it is refused
    NetDenyWithoutAllow,  // --net-deny without an allow list
};
std::string usage_text(UsageText t, std::string_view a = {}, std::string_view b = {});

// The workspace root and the --writable paths (issue 42), one line each:
// what is wrong and how to fix it. `a` and `b` are the words the text names.
enum class RootText {
    RootMissing,        // a: the root (--root, or the session's or config's), which does not exist
    RootUnreachable,    // a: the root, b: why it cannot be reached (an errno's text)
    RootNotDirectory,   // a: the root
    WritableReadOnly,   // a: where the read-only mode came from ("the default", "--mode", ...)
    WritableMissing,    // a: the path, which does not exist, b: why dsh-confine does not create it
    WritableNotMade,    // a: the path, b: the errno's text of the mkdir that failed
};
std::string root_text(RootText t, std::string_view a = {}, std::string_view b = {});

// The tool-cache preset and the agent preset (issue 42), one line each.
enum class CacheText {
    UnknownTool,    // a: the word given to --cache, b: the nearest tool's name (or empty)
    NotAbsolute,    // a: the tool, b: "VAR=value", a variable the tool reads, not absolute
    HoldsHome,      // a: the tool, b: "path (from)", a cache directory that is / or holds the home
    NoHome,         // a: the tool, b: the variable that would name its cache (or empty)
    ReadOnly,       // a: where the read-only mode came from ("the default mode", "--mode read-only", ...)
    AgentMode,      // a: the --mode given beside --agent
    AgentNet,       // a: the --net given beside --agent
};
std::string cache_text(CacheText t, std::string_view a = {}, std::string_view b = {});

// The report's texts (issue 38), one line each: what is wrong and how to fix it.
// How long a report write waits for a reader that takes nothing (report.hpp kReportWaitMs).
inline constexpr int kReportWaitSeconds = 10;
enum class ReportText {
    KeepFdIsReport,      // a: the --keep-fd, which is the --report-fd's number
    KeepFdSharesReport,  // a: the --keep-fd, b: the --report-fd whose open file it reaches
    StdFdSharesReport,   // a: the standard fd (0, 1, 2), b: the --report-fd whose open file it reaches
    KeptSocketGap,       // a: a --keep-fd that is a socket, under a --net other than host (a network gap)
    Stalled,             // a: the report's fd, b: 1 for the record that waited, 0 for one dropped after it
};
std::string report_text(ReportText t, int a, int b = -1);

// --report-file PATH (issue 42), one line each: `a` the path, `b` why (an errno's text, or a root).
enum class ReportFileText {
    WithReportFd,  // both --report-file and --report-fd
    Exists,        // a: the path, which exists (anything: a file, a link, a FIFO)
    CannotCreate,  // a: the path, b: the errno's text
    InWritable,    // a: the path, b: the writable root it is under
    // --report-fd N above 2 that is a file by name (a regular file, a FIFO):
    FdInWritable,  // a: N, b: its path, c: the writable root it is under
    FdLinked,      // a: N, b: its path (a regular file with more than one name)
    FdDatagram,    // a: N, a datagram socket
};
std::string report_file_text(ReportFileText t, std::string_view a = {}, std::string_view b = {},
                             std::string_view c = {});

// Why make's jobserver fds, named by MAKEFLAGS, were not kept (issue 42), or
// why there is nothing to keep: one line each, in the record's
// jobserver.whyNot. `a` is the fd (for NotOnePipe the read end, `b` the
// write end); `what` names what the fd is (NotPipe) or the direction (WrongEnd).
enum class JobserverText {
    Stdio,       // a: 0, 1 or 2
    NotOpen,     // a: an fd not open in dsh-confine
    Report,      // a: the report's fd, or one that reaches the report's file
    NotInherited,// a: close-on-exec, so opened by dsh-confine itself
    NotPipe,     // a: the fd, what: what it is ("a regular file", "a directory", ...)
    NotOnePipe,  // a, b: two pipes, not the two ends of one
    WrongEnd,    // a: the fd, what: "reading" or "writing"
    EnvChanged,  // the command's MAKEFLAGS differs from the caller's (--clearenv, --unsetenv, --setenv)
    Fifo,        // make 4.4's fifo: nothing to keep
    NoFdPassing, // Windows: no fd is passed to the command
};
std::string jobserver_text(JobserverText t, int a = -1, int b = -1, std::string_view what = {});

// A confined run refused because the command would inherit `fd`, a directory:
// a handle outside every read-only view (its path read from the fd).
std::string directory_fd_text(int fd);

// session set-mode on a log whose largest seq is the 64-bit maximum: no next
// seq exists (it would wrap to 0, and readers take the largest as the latest).
std::string session_seq_exhausted_text(std::string_view path);

// The resource limits' texts (issue 21), one line each. `a` and `b` are the
// words the text names (the option and its value, or a reason).
enum class LimitText {
    NotSize,             // a: the option, b: the value
    NotDuration,         // a: the option, b: the value
    NotCount,            // a: the option, b: the value
    NotLimitsMode,       // a: the value of --limits
    MemoryNeedsCgroup,   // a: why there is no cgroup memory controller
    PidsNeedsCgroup,     // a: why there is no cgroup pids controller
    CpuPerProcess,       // --cpu-time under required (RLIMIT_CPU is per process)
    LeafFailed,          // a: the cgroup leaf that could not be made, and why
    NotOnThisPlatform,   // a: what ("--timeout", "resource limits")
    GapAddressSpace,     // the gap of --memory under RLIMIT_AS
    GapPerUid,           // the gap of --max-procs under RLIMIT_NPROC
    GapUid0,             // --max-procs for uid 0, which RLIMIT_NPROC does not bind
    GapPerProcessCpu,    // the gap of --cpu-time under RLIMIT_CPU
};
std::string limit_text(LimitText t, std::string_view a = {}, std::string_view b = {});

// Outcome = status + reason, as data: a code, a detail in our words and, for
// a confined mode that cannot be enforced, the requested mode and the runner's
// own failure (the cause). The one line the user and the report get is
// rendered from these by text(), at the edge, never earlier: nothing parses
// a message to learn what happened. The first cause wins: callers return the
// first failing Outcome unchanged.
struct Outcome {
    bool ok = true;
    Err err = Err::Internal;
    std::string message;  // the detail (SandboxUnavailable: empty, or why a runner cannot be used)
    std::string mode;     // SandboxUnavailable at the edge: the requested mode the seed's text names
    std::string runner_failure;  // SandboxUnavailable: the runner's own failure, when it had one
    // The stderr line, when it is not text(): where the report's text is a
    // contract's exact wording (the escalation texts harnesses match), the
    // line says it in the command line's words, with the fix.
    std::string hint;

    static Outcome success() { return {}; }
    explicit operator bool() const noexcept { return ok; }
    int exit_status() const noexcept { return ok ? 0 : info(err).exit_status; }
    std::string_view code() const noexcept { return info(err).code; }
    // The seed's fail-closed text (+ " Runner failure: " + runner_failure)
    // for SandboxUnavailable with a mode; the detail otherwise.
    std::string text() const;
    // The stderr line: the hint when there is one, else text().
    std::string stderr_text() const;
};

inline Outcome fail(Err e, std::string message) { return Outcome{false, e, std::move(message), {}, {}, {}}; }
// `o` with its stderr line (Outcome::hint).
Outcome with_hint(Outcome o, std::string hint);
// `o` with its stderr line: its text, then "; " and how to fix it here.
Outcome with_fix(Outcome o, std::string_view fix);

// A confined mode (by name) that cannot be enforced: nothing runs.
// runner_failure: what went wrong while setting up or starting the runner
// (empty when no runner could be used at all; the report's skipped list says why).
Outcome unavailable(std::string_view mode, std::string runner_failure = {});

template <typename... Args>
Outcome failf(Err e, fmt::format_string<Args...> f, Args&&... args) {
    return fail(e, fmt::format(f, std::forward<Args>(args)...));
}

// A step of entering confinement that failed, as data: what the process that
// becomes the command (or its supervised child) can report without
// allocating. The text is rendered from the one table by fault_outcome, in
// the launcher. err: the errno (0 when there is none); arg: the fd or
// capability the step names.
enum class Step : unsigned char {
    CloseRange,        // close_range over the inherited fds
    KeepFd,            // making a --keep-fd inheritable
    RootFd,            // a writable root's descriptor is not open
    NoNewPrivs,
    RestrictSelf,      // landlock_restrict_self
    LandlockUnverified,  // restrict_self said yes and a write it refuses was not refused (arg: how, see errors.cpp)
    CapGet,
    SecureBits,
    CapBsetDrop,       // arg: the capability
    CapBsetEndless,
    AmbientClear,
    CapSet,
    CapsRemain,
    RootBoundingSet,   // arg: the capability left in uid 0's bounding set
    Seccomp,
    SeccompPrctl,
    SeccompUnverified,  // the filter loaded said yes and did not take (arg 0: TIOCSTI passed; 1: its own mark did)
    NetNamespace,      // --net loopback, Landlock runner: unshare (arg 1: with CLONE_NEWUSER)
    NetIdMap,          // its user namespace's maps (arg 0 setgroups, 1 uid_map, 2 gid_map)
    LoopbackUp,        // its lo brought up (SIOCSIFFLAGS)
    RelayHandOut,      // --net allow=, Landlock runner: the listener made and sent to dsh-confine
    RecordHandOver,    // pwrite of the record to the bwrap stage's memfd
    ReportWrite,       // arg: the report fd
    InheritFd,         // arg: the fd handed to the runner
    SealMailbox,       // bwrap's stage: sealing the launcher's memfd before exec
    PdeathSig,         // supervise's child
    Stdio,             // supervise's child: dup2 of the stderr pipe
    Pty,               // the launcher: opening the command's pseudo-terminal (terminal.cpp)
    Ctty,              // the child: setsid / TIOCSCTTY on that pseudo-terminal
    CgroupJoin,        // the child: joining the run's cgroup leaf (issue 21)
    Rlimit,            // the child: setrlimit; arg: the resource
    PidNamespace,      // supervise's child as its PID namespace's init: forking the command
    Exec,              // execve: 127 for ENOENT, else 126
};
struct Fault {
    Step step = Step::Exec;
    int err = 0;
    int arg = -1;
};
// The code a fault stands for (no allocation: a child may call it).
Err fault_code(const Fault& f) noexcept;
// The Outcome a fault stands for: its code and detail. exec_path names the
// file an Exec fault could not run.
Outcome fault_outcome(const Fault& f, std::string_view exec_path = {});

// How open_regular_file treats what it finds at `path`.
struct OpenRules {
    // The last component may be a symlink (to a regular file): a dotfile
    // manager links ~/.config/dsh-confine/config.json. Otherwise O_NOFOLLOW:
    // a symlink there is refused, and O_CREAT never creates through one.
    bool follow_symlink = false;
    // OpenSSH StrictModes: the file (and a symlink to it) owned by the caller
    // (euid) or root and not group/world writable, and every directory from
    // its own up to / (of the link and of its target) owned by the caller or
    // root and not group/world writable unless sticky (/tmp). The state that
    // decides the next run (config, session log, approver) must not be
    // something another user can rewrite.
    bool trusted = false;
};

// Opens `path` with `flags` | O_CLOEXEC | O_NOCTTY (mode 0644 if it creates,
// so a new file is never group/world writable) and checks that it is a
// regular file. Never blocks: a FIFO or a device at `path` is refused before
// it is opened (lstat), and the open itself is O_NONBLOCK (cleared after the
// fstat) in case one is swapped in. On failure: `err` with "WHAT PATH: ..."
// (cannot open, not a regular file, a symlink, not trusted), and fd is -1.
// The config, session-log and approver checks' one way in.
Outcome open_regular_file(const std::string& path, int flags, Err err, std::string_view what, int& fd,
                          OpenRules rules = {});

// A small kernel file (/proc, /sys) read whole, up to 4 KiB, with trailing
// newlines and spaces removed; nullopt when it cannot be read.
std::optional<std::string> read_kernel_text(const char* path);

// The StrictModes checks of OpenRules::trusted for an existing file (not
// opened: the approver program is run by /bin/sh, never read by us).
Outcome check_trusted_file(const std::string& path, Err err, std::string_view what);

}  // namespace dsh
