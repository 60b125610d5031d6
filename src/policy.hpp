// The policy: a plain value built once from the request, read by every runner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "environment.hpp"
#include "errors.hpp"
#include "net_allow.hpp"
#ifndef _WIN32
#include "roots.hpp"
#endif

namespace dsh {

enum class Mode { ReadOnly, WorkspaceWrite, DangerFullAccess };

std::string_view to_string(Mode m) noexcept;

// Who decided the mode, and the workspace root (the report's modeSource and
// rootSource, by to_string).
enum class ModeSource { Default, Flag, Session, Config, Escalation };
enum class RootSource { Cwd, Flag, Session, Config };
std::string_view to_string(ModeSource s) noexcept;
std::string_view to_string(RootSource s) noexcept;
std::optional<Mode> parse_mode(std::string_view s) noexcept;
// The seed's escalation ladder: read-only < workspace-write < danger-full-access.
bool is_strictly_wider(Mode target, Mode current) noexcept;

// The network axis (issue 17): what the command may reach over sockets.
// host: today's behaviour, not governed; loopback: a private loopback only;
// off: no IP traffic, no unix socket outside the writable roots.
enum class Network { Host, Loopback, Off };
// Session: the session log's last sandbox/mode event; Escalation: --escalate-net, approved.
enum class NetworkSource { Default, Flag, Config, Session, Escalation };
std::string_view to_string(Network n) noexcept;
std::string_view to_string(NetworkSource s) noexcept;
std::optional<Network> parse_network(std::string_view s) noexcept;

enum class Enforcement { Full, Partial, None };
std::string_view to_string(Enforcement e) noexcept;

// A path the command may write under. `persists` is false for a private /tmp
// (--private-tmp): a fresh file system there, discarded when the command ends.
// Where a writable root came from: the report's `source`, and what a
// runner may treat differently (/tmp can be private; the workspace and the
// roots a caller named are the ones a refusal's fix points at).
// Shm: the private /dev/shm the bwrap runner mounts in workspace-write (issue 42).
enum class Grant { Workspace, Tmp, Tmpdir, Flag, Config, Shm, Cache };
std::string_view to_string(Grant g) noexcept;
std::optional<Grant> parse_grant(std::string_view s) noexcept;
// Named by the caller (--root, --writable, the config's writableRoots, a
// tool's cache by --cache or the config's cache), as opposed to the temp
// areas every workspace-write run gets.
constexpr bool caller_named(Grant g) noexcept {
    return g == Grant::Workspace || g == Grant::Flag || g == Grant::Config || g == Grant::Cache;
}

struct WritableRoot {
    std::string path;
    Grant source = Grant::Workspace;
    bool persists = true;
    // What is granted: the directory (or file) opened once when the policy was
    // built (src/roots.hpp), shared by every copy of the policy and left open
    // until exec (close-on-exec). -1 where nothing was opened (explain of
    // another platform, unit tests, Windows).
    int fd = -1;
    uint64_t dev = 0, ino = 0;
    // A --writable (or config writableRoots) path that did not exist and was
    // made for this run below the caller's home (issue 42; the report's
    // `created`). Explain and check make nothing: there it says it would be.
    bool created = false;
    // Grant::Cache: the tool whose cache this is ("npm"; the report's `cache`).
    std::string tool;
    // A fresh tmpfs of the sandbox's own (the private /tmp, bwrap's /dev/shm),
    // mounted rather than bound from the host, and discarded at exit.
    bool private_mount() const noexcept { return !persists && (source == Grant::Tmp || source == Grant::Shm); }
};

// An implicit writable path (/tmp, $TMPDIR) that was not granted, and why.
struct NotGranted {
    std::string path;
    std::string reason;
};

// A path inside a writable root kept read-only for the command (issue 18,
// src/carveouts.hpp): what decides what runs next (git hooks and config, the
// agent's and editor's control files, a home's start-up files).
struct ProtectedPath {
    std::string path;          // absolute, as walked (no symlink on the way)
    std::string source;        // "default", "flag" or "config"
    std::string what;          // "git", "agent", "home", "named"
    bool exists = false;       // found when the policy was built
    bool directory = false;
    // A mount point of its own, writable inside (the .git directory): it can
    // be neither renamed nor removed, so a fresh .git cannot take its place.
    bool pin = false;
    // Not bound, only fingerprinted (a submodule's config: git rewrites it,
    // core.worktree, on every `submodule update`): why_not says so.
    bool watched = false;
    int fd = -1;               // O_PATH, opened without following a symlink; -1: absent
    uint64_t dev = 0, ino = 0;
    // Filled by the runner's plan: how it is enforced ("read-only-bind",
    // "mount-point") or empty, and why not.
    std::string enforced;
    std::string why_not;
    // dsh-confine's own state (what "own"): a runner that cannot keep this
    // path read-only refuses the run with this message (chain.cpp can_give).
    std::string refusal;
    // A hidden directory's parts left readable inside it (~/.ssh's public
    // keys, known_hosts*, config): the name below `path` and an O_PATH
    // descriptor of the regular file found there (bound through it).
    std::vector<std::pair<std::string, int>> shown;
};

struct Policy {
    Mode mode = Mode::ReadOnly;
    ModeSource mode_source = ModeSource::Default;
    std::string workspace_root;  // canonical, absolute
    RootSource root_source = RootSource::Cwd;
    std::vector<WritableRoot> writable_roots;  // directories (or files) writable in full
    std::vector<std::string> writable_files;   // single nodes: "/dev/null"
    std::vector<int> keep_fds;                 // inherited on purpose (--keep-fd, then make's jobserver)
    // make's jobserver as the caller's MAKEFLAGS names it (issue 42): its
    // fds join keep_fds when the run is planned, if they are make's pipe.
    Jobserver jobserver;
    std::vector<NotGranted> not_granted;       // implicit roots refused while building
    // --private-tmp (or the config's privateTmp) in a confined mode: the
    // command gets a fresh, empty /tmp of its own, discarded at exit, instead
    // of the host's. Writable in workspace-write (the "tmp" root, persists
    // false, not opened on the host), read-only in read-only: it never
    // widens a mode. Only a runner that can mount one takes it (chain.cpp).
    bool private_tmp = false;
    // --keep-descendants (or the config's keepDescendants) in a confined
    // mode: processes the command leaves running when it exits run on
    // (still confined). Default: they are killed with it, wherever a runner
    // or dsh-confine as the parent can (Confinement::descendants says which).
    bool keep_descendants = false;
    // --allow-userns (issue 38): the command may make user namespaces
    // (refused by default, by the seccomp layer of the bwrap and Landlock
    // runners; Confinement::user_namespaces records which).
    bool allow_userns = false;
    Network network = Network::Host;           // --net > config "network" > host
    NetworkSource network_source = NetworkSource::Default;
    // The config asked for this, and danger-full-access (which confines
    // nothing) overrode it: reported, never silently dropped.
    std::optional<Network> network_requested;
    // --net allow= (issue 19): the network is `loopback` (the command's own
    // namespace) and its one way out is dsh-confine's proxy, which these
    // rules govern. Set: the record's network mode says "allow".
    std::optional<net::Rules> net_allow;
    // workspace-write: the protected set (src/carveouts.hpp) and the
    // defaults --unprotect (or the config's unprotect) dropped.
    std::vector<ProtectedPath> protected_paths;
    std::vector<std::string> unprotected;
    // --deny-read (config denyRead): hidden from the command in every mode.
    // Absolute and canonical (a link's target is what is hidden); `exists`,
    // `directory` as found; `enforced`/`why_not` filled by the runner.
    std::vector<ProtectedPath> hidden_paths;
};

// The names of a path, in order, without empty ones ("//a/./b" -> a . b).
std::vector<std::string_view> path_names(std::string_view path);

// Lexical normalisation of an absolute path: collapses "//", ".", ".." and a
// trailing slash. ".." at "/" stays at "/".
std::string lexically_normal(std::string_view absolute);

// The seed's canonicalPath: realpath first (so "link/.." resolves as chdir
// would), then absolute and lexically normal. A path that does not exist keeps
// the realpath of its longest existing ancestor followed by the rest, normalised.
std::string canonical_path(std::string_view path, std::string_view cwd);

struct PolicyInput {
    Mode mode = Mode::ReadOnly;
    ModeSource mode_source = ModeSource::Default;
    std::optional<std::string> root;   // --root or config workspaceRoot
    RootSource root_source = RootSource::Cwd;
    std::vector<std::string> writable;  // --writable
    std::vector<std::string> config_writable;
    // --cache and the config's cache, expanded (src/caches.hpp): path and tool.
    std::vector<std::pair<std::string, std::string>> cache;
    std::optional<std::string> tmpdir;  // $TMPDIR as found in the environment
    std::string cwd;
    std::vector<int> keep_fds;
    Jobserver jobserver;  // from $MAKEFLAGS
    bool private_tmp = false;  // asked for (flag or config); ignored in danger-full-access
    bool keep_descendants = false;  // likewise
    bool allow_userns = false;      // --allow-userns
    // The caller's home from the password database (getpwuid of the real
    // uid), never $HOME, which the caller sets: a missing --writable path
    // below it is made (issue 42). Empty: none, nothing is made.
    std::string home;
    // Make those paths now (a run); false (explain, check): check that they
    // could be, make nothing, and grant them by path (nothing runs).
    bool create_missing = false;
#ifndef _WIN32
    // The names never made for it (resolve: the carve-outs' lists).
    roots::NeverMade never_made;
#endif
};

Outcome build_policy(const PolicyInput& in, Policy& out);

// Whether the policy lets a write land at `path` (canonicalised like the roots).
bool write_allowed(const Policy& p, std::string_view path, std::string_view cwd);

}  // namespace dsh
