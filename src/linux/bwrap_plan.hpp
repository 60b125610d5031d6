// bubblewrap, the pure part: policy -> bwrap argv. No system calls here; the
// thin part (bwrap_runner.cpp) decides which roots exist, opens our own binary
// for the stage and execs. Every element is an argv element: a path never
// becomes option text, whatever it starts with (bwrap takes the words after
// --bind, --tmpfs ... as paths unconditionally).
#pragma once

#include <string>
#include <vector>

#include "../policy.hpp"
#include "../confinement.hpp"

namespace dsh::bwrap {

struct ProfileOptions {
    // Real root: bwrap (privileged mode, no user namespace) keeps the whole
    // bounding set, and its --cap-drop ALL leaves the stage no CAP_SETPCAP to
    // empty it. --cap-add CAP_SETPCAP hands just that one (as an ambient cap)
    // to our stage, which empties the bounding set, locks SECBIT_NOROOT and
    // drops it again before the command is exec'd. CAP_SYS_ADMIN as well, for
    // the stage to remount the device nodes --dev binds from the host
    // read-only (root owns them: the command could chmod the host's
    // /dev/null); the stage drops it with every other capability.
    // Unprivileged callers get nothing added.
    bool stage_keeps_setpcap = false;
    // The stage binds the carve-outs itself (bind_carve_outs in
    // bwrap_stage.cpp), so the profile has none of them. Only a stage that
    // holds CAP_SYS_ADMIN over bwrap's mount namespace can (a root caller's),
    // where the kernel offers the new mount API and no hidden path overlaps a
    // carve-out.
    bool stage_binds = false;
    // bwrap binds the terminal on fd 1 at /dev/console (the caller's pty on
    // the host, which the caller owns): made read-only, so that its mode and
    // owner cannot be changed (writing to it still works).
    bool console_read_only = false;
};

// The carve-outs that get a bind (issue 18), ancestors first: the pinned
// .git (a mount point of its own: no rename, no rmdir) before the read-only
// hooks/ and config inside it. Only what existed when the policy was built,
// bound from the descriptor opened without following a link: an absent one
// gets no mount point, so nothing is created on the host
// (docs/DECISIONS.md "Carve-outs (issue 18)").
std::vector<const ProtectedPath*> carve_binds(const Policy& policy);

// Whether the stage may bind the carve-outs rather than bwrap: bwrap hides
// the hidden paths after its own binds, so a carve-out at, above or below a
// hidden path keeps the order bwrap gives it (all of them stay bwrap's).
bool stage_may_bind(const Policy& policy);

// The profile, without the bwrap path and without "--":
//   --ro-bind / / --dev /dev --unshare-pid --proc /proc --die-with-parent   (the seed)
//   --unshare-ipc --cap-drop ALL
//   [--cap-add CAP_SETPCAP --cap-add CAP_SYS_ADMIN]                          (hardening)
//   --ro-bind /proc/sys /proc/sys --ro-bind-try /proc/sysrq-trigger ...      (host knobs read-only)
//   read-only with a private /tmp: --tmpfs /tmp --remount-ro /tmp
//   workspace-write: [--tmpfs /tmp] then --bind R R for every other root,
//   ancestors before descendants, so nothing bound is hidden by a later mount.
// The "tmp" root becomes the tmpfs when it does not persist (--private-tmp);
// otherwise it is the host's /tmp, bound like every other root.
// The caller removes roots that do not exist (bwrap would refuse them).
std::vector<std::string> profile_args(const Policy& policy, const ProfileOptions& opts);

// The hidden argument that makes dsh-confine run as bwrap's child stage.
// The word alone selects nothing: the stage also needs the launcher's memfd
// (kStageFdName, passed as --record-fd), which a command line cannot carry,
// so a harness that puts untrusted words first never reaches a stage that
// might confine less than a normal run (see run_stage, docs/DECISIONS.md).
inline constexpr const char* kStageArg = "__dsh_confine_stage_v1";
// What the stage sends on --ready-fd (a socket of the watch's own, so that
// bwrap's status lines wake nobody while it builds the sandbox) once the
// caller's signal dispositions are back: from then on a signal sent to it is
// what the command would get. One message, with the stage's pidfd.
inline constexpr const char* kStageReadyLine = "{\"dsh-stage-ready\": true}\n";
inline constexpr const char* kStageReady = "\"dsh-stage-ready\"";
inline constexpr const char* kStageFdName = "dsh-confine-stage";
// The hidden argument of the probe's child: exits 0 only inside the mount
// view bwrap was asked for (check_mount_view), so a "bwrap" that ignores its
// options fails the probe and `auto` falls back instead of failing closed.
inline constexpr const char* kProbeArg = "__dsh_confine_probe_v1";

// What the stage needs to rebuild the policy and confine itself.
// bwrap refuses a command line of more than 9000 words (its MAX_ARGS). A
// command with more than this many words does not ride on bwrap's argv: the
// stage takes it from the launcher's record (its "argv", or "argvBytes" when
// a word is not UTF-8), which holds it exactly.
inline constexpr size_t kArgvInline = 4096;

struct StageSpec {
    std::string self;       // how bwrap finds us: "/proc/self/fd/N"
    int landlock_abi = 0;   // 0: no Landlock layer (the kernel has none)
    int report_fd = -1;
    int record_fd = -1;     // the launcher's memfd (kStageFdName): the record to copy to the report after confining
    std::string command_path;
    std::vector<std::string> argv;
    // The rlimits the stage sets just before it execs the command (issue 21):
    // not on bwrap or the stage itself (RLIMIT_AS would starve a sanitized
    // stage's shadow memory).
    std::vector<limits::Rlimit> rlimits;
    // --net allow= (issue 19): the inherited socketpair end the stage sends
    // the namespace's listener over (src/linux/net_relay.hpp); -1: none.
    int relay_fd = -1;
    std::string no_proxy;  // NO_PROXY for the command (net::direct_loopback)
    bool stage_binds = false;  // the carve-outs ride on the stage's argv (ProfileOptions::stage_binds)
    // ...or come later (Plan::late_walk): the stage waits for the launcher's
    // word on its ready socket, then reads them from the record's memfd
    // (carve_list), after the record.
    bool carve_late = false;
    // --behind: dsh-confine is in the background of the user's terminal
    // (terminal::std_terminal_behind): the command starts in the background
    // of its pty (the pty's agent is in front), so it stops on reading as the
    // bare command would.
    bool behind = false;
};

// <self> __dsh_confine_stage_v1 --mode M [--landlock ABI] [--report-fd N]
//        --record-fd N [--keep-fd N]... [--rlimit RES:SOFT:HARD]... [--file PATH]... [--rw SOURCE PATH FD]...
//        [--carve ro|pin PATH DEV:INO]... | [--carve-late]
//        -- COMMAND_PATH ARGV...
std::vector<std::string> stage_args(const Policy& policy, const StageSpec& spec);

// bwrap_path, profile, "--", tail.
std::vector<std::string> wrap(const std::string& bwrap_path, const std::vector<std::string>& profile,
                              const std::vector<std::string>& tail);

// Inserts "--json-status-fd N" right after argv[0] (the bwrap path), where
// bwrap reads its options. bwrap writes {"child-pid":..} when the sandbox is
// up and {"exit-code":..} when the child exits; no exit-code record means
// bwrap's setup or exec failed. For a process that stays around to read it
// (supervise mode); exec mode has nobody left to.
void add_json_status_fd(std::vector<std::string>& argv, int fd);

// The layer record for bwrap: what the mount view governs and what it does not.
Layer layer(const Policy& policy, const std::string& bwrap_path);

// The custom runner (config runnerCommand): the same bwrap-shaped profile, no
// stage (the operator asserts the runner applies it), then "--" and argv.
// Every root by its path (--bind R R), never /proc/self/fd/N: the runner is
// given no descriptor of ours (docs/DECISIONS.md, "Contract regressions").
std::vector<std::string> custom_argv(const std::vector<std::string>& runner_command, const Policy& policy,
                                     const std::vector<std::string>& argv);

// bwrap is a dynamic binary the caller did not ask to run: variables the
// dynamic loader acts on (LD_PRELOAD, LD_AUDIT, ...) must not run code in it
// before anything is confined. They cross bwrap renamed (kStashPrefix + name)
// and the stage restores them for the command only.
inline constexpr const char* kStashPrefix = "DSH_CONFINE_STAGE_ENV_";
bool loader_variable(std::string_view name);
std::vector<std::string> stash_loader_env(const std::vector<std::string>& env);
std::vector<std::string> unstash_loader_env(const std::vector<std::string>& env);
// The same over a NULL-terminated environment (the stage's own): pointers into
// `env`'s strings, nothing copied; the result is NULL-terminated, ready for execve.
std::vector<char*> unstash_loader_envp(char* const* env);

// The stage's own command line -> what it needs. Pure; errors are Err::Usage.
// --record-fd is required (the launcher's memfd; run_stage checks what it is).
struct StageRequest {
    Policy policy;
    int landlock_abi = 0;
    int report_fd = -1;
    int record_fd = -1;
    std::string command_path;
    std::vector<std::string> argv;
    bool argv_from_record = false;  // --argv-from-record: argv is the record's (kArgvInline)
    std::vector<limits::Rlimit> rlimits;  // --rlimit RES:SOFT:HARD
    int relay_fd = -1;                    // --net-relay N (issue 19)
    std::string no_proxy = "localhost,127.0.0.1,::1";  // --no-proxy LIST: NO_PROXY (net::direct_loopback)
    // --caller-signals MASK (issue 15): bwrap shares the caller's process group
    // and was started with kShielded ignored; bit n set: the caller ignored
    // signal n too. -1: not given (a pty's session, or exec'd in place).
    long caller_signals = -1;
    int ready_fd = -1;  // --ready-fd N: one message sent, then closed (BwrapWatch)
    // --carve ro|pin PATH DEV:INO: a carve-out for the stage to bind, in
    // order (carve_binds); DEV:INO is what the launcher's descriptor of it
    // said, which the launcher holds until the run ends (the inode cannot be
    // freed, so its number cannot be reused meanwhile).
    struct Carve {
        std::string path;
        uint64_t dev = 0, ino = 0;
        bool pin = false;
    };
    std::vector<Carve> carves;
    bool carve_late = false;  // --carve-late: the carves come after the launcher's "go" (StageSpec::carve_late)
    // --carves-bound: bwrap bound the carves (an unprivileged caller); the
    // stage only checks that each landed where it was meant to (check_carve_outs).
    bool carves_bound = false;
    bool behind = false;  // --behind (StageSpec::behind)
    // --pty-fd N (issue 42): a terminal is relayed; the stage makes the
    // command's pty from the sandbox's own devpts and hands its master out
    // over this socket (the watch's, BwrapWatch::own_pty).
    int pty_fd = -1;
};

// The carve-outs as a late stage reads them: after the record's line (its
// '\n'), for each of carve_binds(policy) "ro" or "pin", the path and
// "DEV:INO", each ended by a NUL (a path may hold any other byte).
std::string carve_list(const Policy& policy);
// ...and back; false on anything else.
bool parse_carve_list(std::string_view list, std::vector<StageRequest::Carve>& out);
// The word a late stage waits for on its ready socket (kStageGo), after the
// launcher has written the record and the list.
inline constexpr char kStageGo[] = "go";

// A hidden path below a hidden directory that exists: the directory's
// tmpfs hides it (it gets no mount of its own).
bool hidden_within(const Policy& policy, const ProtectedPath& h);

// The carve-outs' part of a bwrap plan (issue 18): each protected and hidden
// path's status, the layers' word on them, and the descriptors bwrap binds
// from (none where the stage binds: it checks each path's DEV:INO against the
// launcher's, which holds the descriptor). `late`: the list was walked after
// the plan (Plan::late_walk), so the Landlock layer has not seen it yet.
std::vector<int> settle_carve_outs(Confinement& c, bool stage_binds, bool late);
// The signals bwrap starts ignored when it shares the caller's process group:
// the forwarded ones whose default action ends the process.
inline constexpr int kShielded[] = {1 /* HUP */, 2 /* INT */, 3 /* QUIT */, 10 /* USR1 */, 12 /* USR2 */,
                                    15 /* TERM */};
Outcome parse_stage(const std::vector<std::string>& args, StageRequest& out);

// The stage's check that it runs inside the mount view bwrap was asked for:
// the profile starts with `--ro-bind / /`, so there the root is a read-only
// mount (statvfs ST_RDONLY). A "bwrap" that ignored its options (a wrapper, a
// shim, an incompatible build) would leave the stage on the host's writable
// root, where Landlock alone does not govern metadata (chmod, chown, utimes)
// and the record's `full` would be false: the stage refuses instead.
Outcome check_mount_view(bool root_read_only);

}  // namespace dsh::bwrap
