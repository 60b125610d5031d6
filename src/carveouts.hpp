// Carve-outs inside the writable roots (issue 18): the protected set, paths
// that stay read-only for the command although their root is writable.
//
// The default list (docs/DECISIONS.md "Carve-outs (issue 18)"), per
// caller-named writable root R (--root, --writable, writableRoots):
//   git: R/.git (a mount point of its own, so it can be neither renamed nor
//        removed), its hooks/, config, config.worktree, info/attributes,
//        commondir; the same in every .git/modules/* (nested) and the
//        config.worktree and commondir of .git/worktrees/*; for a .git FILE
//        (a linked worktree, a submodule) the file itself and the pointed
//        gitdir's and its common dir's hooks/ and config; the .git file of
//        each submodule listed in R/.gitmodules; the core.hooksPath of
//        R/.git/config and config.worktree (for a .git file: of the common
//        dir's config and the gitdir's config.worktree, wherever they lie)
//        and of the global and system configs (~/.gitconfig,
//        $XDG_CONFIG_HOME/git/config, ~/.config/git/config,
//        $GIT_CONFIG_GLOBAL, /etc/gitconfig, $GIT_CONFIG_SYSTEM) when it lies
//        inside a root; every file those configs include (include.path,
//        includeIf.*.path, followed 10 deep as git does) inside a root;
//   agent and editor control files: .codex .claude .agents .mcp.json
//        .vscode .idea .envrc .devcontainer;
//   the same git and agent lists for each repository directly below R
//        (R/NAME/.git; one level, see DECISIONS);
//   when R contains $HOME: the shell start-up files, .gitconfig,
//        .config/git, .ssh, .config/systemd/user, .config/autostart,
//        .local/bin.
//   dsh-confine's own state under such a root (Input::own): the config's,
//        session log's and probe cache's directories (made when absent) and
//        an approver file; a runner that cannot carve refuses the run.
//
//   every directory between a root and a protected path (issue 37): pinned
//        (ancestors()); HEAD at each repository's top, watched when absent.
//
// Every path is walked from its root's descriptor with O_PATH|O_NOFOLLOW:
// a symlink anywhere below the root fails the run (closed), with the fix.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "policy.hpp"

namespace dsh::carveouts {

// Looks an environment variable up (nullptr: unset); getenv in a run.
using Lookup = const char* (*)(const char*);

// dsh-confine's own state under a caller-named root (resolve.cpp): the
// directory of a config, session log or probe cache (made, 0700, when
// absent) or an approver file, bound read-only as a whole; `refusal` is the
// message for a runner that cannot (and for anything in the way).
struct OwnPath {
    std::string path;
    std::string what;
    bool directory = true;
    std::string refusal;
};

struct Input {
    std::vector<OwnPath> own;
    std::vector<std::string> protect_flag, protect_config;      // --protect, config "protect"
    std::vector<std::string> unprotect_flag, unprotect_config;  // --unprotect, config "unprotect"
    std::string home;  // $HOME as found; empty: none
    std::vector<std::string> deny_flag, deny_config;  // --deny-read, config "denyRead"
    bool hide_secrets = false;  // --hide-secrets or config hideSecrets: secrets(home, env, secret_extra)
    std::vector<std::string> secret_extra;  // config secretPaths: more to hide with them, never fewer
    Lookup env = nullptr;                   // the variables the table names (resolve: getenv)
    // Where git finds its global and system configs (core.hooksPath and
    // includes there can name files inside a root): as found; empty: unset.
    std::string xdg_config_home, git_config_global, git_config_system;
    std::string system_gitconfig = "/etc/gitconfig";
    std::string passwd = "/etc/passwd";  // where "~user/" in a git config is looked up

    std::string cwd;
};

// The --hide-secrets table (docs: the man page's HIDDEN SECRETS): every
// credential store, one entry each. `base` "~" is $HOME; any other base is
// an environment variable whose value is the place ("" rel) or the directory
// `rel` lies in ($XDG_RUNTIME_DIR falls back to /run/user/UID; KUBECONFIG is
// a colon-separated list). `directory`: the store is a directory, hidden
// whole (whatever lies below it, and what is created there during the run);
// otherwise a file or a socket.
struct Secret {
    const char* base;
    const char* rel;
    bool directory;
    const char* why;
};
const std::vector<Secret>& secret_table();

// ~/.ssh: hidden whole; these names directly in it stay readable (regular
// files with one link only): *.pub, known_hosts*, config.
bool ssh_public_name(std::string_view name);

// The --hide-secrets list: each table entry's path (absolute, as named;
// entries whose base is unset are left out), each IdentityFile of
// ~/.ssh/config, the target of each link below ~/.ssh (a key kept elsewhere
// and linked there), then `extra` (config secretPaths, "~/" for $HOME).
std::vector<std::string> secrets(const std::string& home, Lookup env, const std::vector<std::string>& extra = {});

// What one git config file's text says about what git runs and reads next,
// parsed as git parses it (sections case-insensitive, subsections not;
// quotes, escapes, comments, continued lines, a key after "[section]" on the
// same line): the values of core.hooksPath and of include.path and every
// includeIf.<condition>.path whatever the condition, and of every
// submodule.<name>.path (a .gitmodules file), as written, in order.
// A malformed line is skipped (git would refuse the whole file).
struct GitConfigKeys {
    std::vector<std::string> hooks_paths;
    std::vector<std::string> includes;
    std::vector<std::string> submodule_paths;  // submodule.<name>.path (.gitmodules)
};
GitConfigKeys git_config_keys(std::string_view text);

// The names protected in every caller-named root, and below $HOME.
const std::vector<std::string>& agent_names();
const std::vector<std::string>& home_names();

// Fills p.hidden_paths (hide: every confined mode, a look at each path),
// then p.protected_paths and p.unprotected (walk: workspace-write only;
// other modes are left alone; opens what exists, fails closed on a symlink).
// protect is both. A run whose stage waits for the list walks after the
// spawn (chain::walk_now, docs/DECISIONS.md "The walk while bwrap starts").
Outcome protect(Policy& p, const Input& in);
void hide(Policy& p, const Input& in);
Outcome walk(Policy& p, const Input& in);

// What the integrity check compares (supervise): one line per protected path
// and, for a directory, per entry below it (type, size, mode, mtime, inode),
// read through the descriptors opened when the policy was built and, for
// absent paths, by name from the root's descriptor.
// Per protected path (in the policy's order): its lines.
using Fingerprint = std::vector<std::pair<std::string, std::vector<std::string>>>;
Fingerprint fingerprint(const Policy& p);

// The protected paths whose lines differ between two fingerprints of the
// same policy, as the result record's violations
// ([{"type": "protected-path-changed", "path": P}]).
nlohmann::ordered_json violations(const Fingerprint& before, const Fingerprint& after);

// The protected names that were absent when the run started (bwrap: no
// mount point can be made for a name that does not exist without leaving a
// file on the host) and exist now: a commondir, a hooks/ that was missing,
// a bare layout's HEAD, objects/ or refs/ at a repository's top, a .git
// where there was none. Each is renamed aside in its own directory (a link
// made on the way: that link), walked from its root's descriptor without
// following a link, to NAME.dsh-confine-quarantine-TAG, so the next git or
// editor run finds nothing there. Called once nothing of the run is alive.
// One entry per name: {"path": P, "movedTo": Q} (Q null: it could not be
// moved, and is still there).
nlohmann::ordered_json quarantine_created(const Policy& p, std::string_view tag);

// The run's exit status when it changed what the next unconfined program
// reads (a protected name created and quarantined, a protected path changed):
// the integrity record says what. One below timeout(1)'s 124.
inline constexpr int kIntegrityStatus = 123;

}  // namespace dsh::carveouts
