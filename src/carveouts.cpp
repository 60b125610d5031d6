#include "carveouts.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#ifndef O_PATH
#define O_PATH O_RDONLY
#endif

namespace dsh::carveouts {

const std::vector<std::string>& agent_names() {
    static const std::vector<std::string> n = {".codex", ".claude", ".agents", ".mcp.json",
                                               ".vscode", ".idea", ".envrc", ".devcontainer"};
    return n;
}

const std::vector<std::string>& home_names() {
    static const std::vector<std::string> n = {
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile",
        ".zlogin", ".zlogout", ".config/fish", ".gitconfig", ".config/git", ".ssh", ".config/systemd/user",
        ".config/autostart", ".local/bin"};
    return n;
}

namespace {

bool under(std::string_view path, std::string_view root) {
    if (root == "/") return true;
    return path.size() >= root.size() && path.compare(0, root.size(), root) == 0 &&
           (path.size() == root.size() || path[root.size()] == '/');
}

std::string absolute(const std::string& p, const std::string& cwd) {
    return lexically_normal(!p.empty() && p[0] == '/' ? p : cwd + "/" + p);
}

// The deepest writable root that holds `path` (the one whose bind is visible there).
const WritableRoot* root_of(const Policy& p, const std::string& path) {
    const WritableRoot* best = nullptr;
    for (const auto& r : p.writable_roots)
        if (r.persists && under(path, r.path) && (!best || r.path.size() > best->path.size())) best = &r;
    return best;
}

enum class Walk { Found, Absent, Symlink, Error };

// A small regular file's text from a descriptor opened for reading (closed
// here): the first 64 KiB, or "" for anything but a regular file.
std::string read_open(int r) {
    std::string out;
    if (r < 0) return out;
    struct stat st {};
    if (::fstat(r, &st) == 0 && S_ISREG(st.st_mode)) {
        char buf[8192];
        ssize_t n = 0;
        while (out.size() < 65536 && (n = ::read(r, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    }
    ::close(r);
    return out;
}

constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

// A small text file read through an O_PATH descriptor (its own inode, reopened).
std::string read_small(int fd) { return read_open(::open(fmt::format("/proc/self/fd/{}", fd).c_str(), kReadFlags)); }

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return s.substr(i);
}

std::string dir_of(const std::string& p) {
    const auto slash = p.rfind('/');
    return slash == 0 ? "/" : p.substr(0, slash);
}

// Looks paths up below a root one name at a time, never following a
// symlink.
struct Walker {
    // The directories walked so far (O_PATH, owned here; -1: absent or not a
    // directory), so that each name below a root is opened once: a
    // repository with a worktree and two submodules looks up some 30 paths
    // that share a few parents, and walking each one from its root cost
    // about 300 system calls (BENCHMARKS.md "Carve-outs").
    struct Dir {
        std::string path;
        int fd;
        Walk walk;
        std::string at;
    };
    std::vector<Dir> dirs;

    const std::vector<ProtectedPath>* known = nullptr;  // opened already: borrowed

    Walker() = default;
    Walker(const Walker&) = delete;
    Walker& operator=(const Walker&) = delete;
    ~Walker() {
        for (const auto& d : dirs)
            if (d.fd >= 0) ::close(d.fd);
    }

    // The O_PATH descriptor of directory `path` (inside `root`), borrowed:
    // the root's own, a protected directory's, or one opened on the way.
    // One openat per directory, never following a link (O_NOFOLLOW with
    // O_DIRECTORY fails on a link; only then is it looked at).
    Walk dir(const WritableRoot& root, const std::string& path, int& fd, std::string& at, int& error) {
        fd = -1;
        if (path == root.path && root.fd >= 0) {
            fd = root.fd;
            return Walk::Found;
        }
        for (const auto& d : dirs)
            if (d.path == path) {
                fd = d.fd;
                at = d.at;
                return d.walk;
            }
        if (known)
            for (const auto& e : *known)
                if (e.path == path && e.fd >= 0 && e.directory) {
                    fd = e.fd;
                    return Walk::Found;
                }
        Walk w = Walk::Found;
        int next = -1;
        if (path == root.path) {
            next = ::open(root.path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (next < 0) {
                error = errno;
                return Walk::Error;  // not cached: the root itself
            }
        } else {
            int parent = -1;
            w = dir(root, dir_of(path), parent, at, error);
            if (w == Walk::Error) return w;
            if (w == Walk::Found) {
                const std::string name = path.substr(path.rfind('/') + 1);
                next = ::openat(parent, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0) {
                    const int e = errno;
                    struct stat st {};
                    if (e == ENOENT) w = Walk::Absent;
                    else if (e != ENOTDIR) {
                        error = e;
                        return Walk::Error;
                    } else if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                        w = Walk::Symlink;
                        at = path;
                    } else {
                        w = Walk::Absent;
                    }
                }
            }
        }
        dirs.push_back({path, next, w, w == Walk::Symlink ? at : std::string()});
        fd = next;
        return w;
    }

    // Looks `path` up again next time (it was just made).
    void forget(const std::string& path) {
        for (auto it = dirs.begin(); it != dirs.end(); ++it)
            if (it->path == path) {
                if (it->fd >= 0) ::close(it->fd);
                dirs.erase(it);
                return;
            }
    }

    // `path` below `root`: its parent from dir(), then one openat and one
    // fstat. Found: `fd` is an O_PATH descriptor of the node (the caller's).
    Walk lookup(const WritableRoot& root, const std::string& path, int& fd, struct stat& st, std::string& at,
                int& error) {
        fd = -1;
        int parent = -1;
        const Walk w = dir(root, dir_of(path), parent, at, error);
        if (w != Walk::Found) return w;
        const std::string name = path.substr(path.rfind('/') + 1);
        const int node = ::openat(parent, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (node < 0) {
            if (errno == ENOENT || errno == ENOTDIR) return Walk::Absent;
            error = errno;
            return Walk::Error;
        }
        if (::fstat(node, &st) != 0) {
            error = errno;
            ::close(node);
            return Walk::Error;
        }
        if (S_ISLNK(st.st_mode)) {
            ::close(node);
            at = path;
            return Walk::Symlink;
        }
        fd = node;
        return Walk::Found;
    }
};

struct Builder {
    Policy& p;
    std::vector<ProtectedPath> out;
    Outcome failure = Outcome::success();
    std::vector<std::string> drop;  // --unprotect: never looked at, nor anything below
    Walker w;
    std::string home;  // for core.hooksPath "~/..."

    Builder(Policy& p_) : p(p_) { w.known = &out; }

    // Adds `path` (absolute, normal); returns its descriptor when it exists
    // (owned by the entry), -1 otherwise.
    int add(const std::string& path, const char* source, const char* what, bool pin = false) {
        if (!failure) return -1;
        if (std::strcmp(source, "flag") != 0 && std::strcmp(what, "own") != 0)
            for (const auto& d : drop)
                if (under(path, d)) return -1;
        for (const auto& e : out)
            if (e.path == path) return e.fd;
        ProtectedPath e;
        e.path = path;
        e.source = source;
        e.what = what;
        e.pin = pin;
        // A submodule's own config (see kProtectedSubmoduleConfigText).
        if (path.size() > 7 && path.compare(path.size() - 7, 7, "/config") == 0 &&
            path.find("/.git/modules/") != std::string::npos) {
            e.watched = true;
            e.why_not = kProtectedSubmoduleConfigText;
        }
        const WritableRoot* root = root_of(p, path);
        if (!root) {
            e.watched = false;
            e.why_not = kProtectedOutsideText;
            out.push_back(std::move(e));
            return -1;
        }
        if (root->path == path) return -1;  // a whole root: nothing to carve
        int fd = -1, error = 0;
        struct stat st {};
        std::string at;
        switch (w.lookup(*root, path, fd, st, at, error)) {
            case Walk::Found:
                e.exists = true;
                e.fd = fd;
                e.directory = S_ISDIR(st.st_mode);
                e.dev = st.st_dev;
                e.ino = st.st_ino;
                if (e.pin && !e.directory) e.pin = false;
                break;
            case Walk::Absent: break;
            case Walk::Symlink: failure = fail(Err::StateUnsafe, protected_symlink_text(path, at)); return -1;
            case Walk::Error: failure = fail(Err::StateUnsafe, protected_unreadable_text(path, std::strerror(error))); return -1;
        }
        out.push_back(std::move(e));
        return fd;
    }

    // hooks/, config and the rest of a git directory (a repository's, a
    // submodule's or a linked worktree's private one).
    void gitdir(const std::string& g, int depth) {
        for (const char* n : {"hooks", "config", "config.worktree", "info/attributes", "commondir"})
            add(g + "/" + n, "default", "git");
        if (depth > 8) return;
        // Submodules' git directories, nested as git nests them.
        if (const int mfd = find(g + "/modules"); mfd >= 0)
            for (const auto& name : entries(mfd)) gitdir(g + "/modules/" + name, depth + 1);
        if (const int wfd = find(g + "/worktrees"); wfd >= 0)
            for (const auto& name : entries(wfd)) {
                add(g + "/worktrees/" + name + "/config.worktree", "default", "git");
                add(g + "/worktrees/" + name + "/commondir", "default", "git");
            }
    }

    // A directory looked up (not protected itself; borrowed), or -1.
    int find(const std::string& path) {
        const WritableRoot* root = root_of(p, path);
        if (!root) return -1;
        int fd = -1, error = 0;
        std::string at;
        return w.dir(*root, path, fd, at, error) == Walk::Found ? fd : -1;
    }

    // The directory names under an O_PATH directory descriptor (borrowed).
    static std::vector<std::string> entries(int fd) {
        std::vector<std::string> names;
        const int d = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0) return names;
        DIR* dir = ::fdopendir(d);
        if (!dir) {
            ::close(d);
            return names;
        }
        while (const dirent* e = ::readdir(dir)) {
            const std::string n = e->d_name;
            if (n == "." || n == ".." || e->d_type != DT_DIR) continue;
            names.push_back(n);
        }
        ::closedir(dir);
        std::sort(names.begin(), names.end());
        return names;
    }

    // A .git file: "gitdir: X". The file is protected; so are the pointed
    // gitdir's hooks/ and config, and its common dir's.
    void gitfile(const std::string& file, int fd) {
        std::string text = read_small(fd);
        if (text.rfind("gitdir:", 0) != 0) return;
        std::string target = trim(text.substr(7, text.find('\n') == std::string::npos ? std::string::npos
                                                                                         : text.find('\n') - 7));
        if (target.empty()) return;
        const std::string g = absolute(target, dir_of(file));
        // Outside the roots they are read-only already; inside, protected.
        if (root_of(p, g))
            for (const char* n : {"hooks", "config", "config.worktree", "commondir"})
                add(g + "/" + n, "default", "git");
        const std::string common = trim(read_file(g + "/commondir"));
        const std::string c = common.empty() ? g : absolute(common, g);
        if (!common.empty() && root_of(p, c))
            for (const char* n : {"hooks", "config", "info/attributes"}) add(c + "/" + n, "default", "git");
        // core.hooksPath as git reads it for this working tree: the common
        // config, then the worktree's own config.worktree; wherever those
        // lie (a linked worktree's main repository is often outside every
        // root, and its relative hooksPath then names a directory inside
        // this one).
        const std::string top = dir_of(file);
        hooks_path(top, c + "/config");
        hooks_path(top, g + "/config.worktree");
    }

    void repo(const std::string& r) {
        const std::string dotgit = r + "/.git";
        const int fd = add(dotgit, "default", "git", true);
        if (!failure) return;
        const auto it = std::find_if(out.begin(), out.end(), [&](const ProtectedPath& e) { return e.path == dotgit; });
        if (fd < 0 || it == out.end()) return;
        if (it->directory) {
            gitdir(dotgit, 0);
            hooks_path(r, dotgit + "/config");
            hooks_path(r, dotgit + "/config.worktree");
        } else {
            gitfile(dotgit, fd);
        }
        // Submodule checkouts: each one's .git file (the pointer).
        {
            const std::string text = read_file(r + "/.gitmodules");
            size_t i = 0;
            while (i < text.size()) {
                size_t j = text.find('\n', i);
                if (j == std::string::npos) j = text.size();
                std::string line = trim(text.substr(i, j - i));
                i = j + 1;
                if (line.rfind("path", 0) != 0) continue;
                const auto eq = line.find('=');
                if (eq == std::string::npos || trim(line.substr(4, eq - 4)) != "") continue;
                const std::string sub = trim(line.substr(eq + 1));
                if (sub.empty() || sub[0] == '/') continue;
                const std::string sp = lexically_normal(r + "/" + sub);
                if (!under(sp, r) || sp == r) continue;
                const int sfd = add(sp + "/.git", "default", "git");
                if (sfd >= 0 && !out.back().directory) gitfile(sp + "/.git", sfd);
            }
        }
    }

    // core.hooksPath in the repository's config (read as it is now; the
    // config itself is protected): its target, when inside a root, is
    // protected like .git/hooks. Relative paths are git's: from the top of
    // the working tree; "~/" is $HOME's (a root may hold $HOME).
    // Called for configs inside and outside the roots alike.
    void hooks_path(const std::string& top, const std::string& config) {
        const std::string text = read_file(config);
        bool in_core = false;
        size_t i = 0;
        while (i < text.size()) {
            size_t j = text.find('\n', i);
            if (j == std::string::npos) j = text.size();
            std::string line = trim(text.substr(i, j - i));
            i = j + 1;
            if (!line.empty() && line[0] == '[') {
                std::string name = line.substr(1, line.find(']') == std::string::npos ? 0 : line.find(']') - 1);
                for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                in_core = trim(name) == "core";
                continue;
            }
            const auto eq = line.find('=');
            if (!in_core || eq == std::string::npos) continue;
            std::string key = trim(line.substr(0, eq));
            for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            if (key != "hookspath") continue;
            std::string v = trim(line.substr(eq + 1));
            if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
            if (v.rfind("~/", 0) == 0 && !home.empty()) v = home + v.substr(1);
            if (v.empty() || v[0] == '~') continue;  // ~user: not looked up
            add(absolute(v, top), "default", "git");
        }
    }

    // dsh-confine's own state under a root: its directory made when absent
    // (0700, one name at a time from the root's descriptor, never through a
    // link) and checked to be the caller's; then protected like any path.
    void own(const OwnPath& o) {
        if (!failure) return;
        const WritableRoot* root = root_of(p, o.path);
        if (!root || root->path == o.path) {
            failure = fail(Err::StateUnsafe, o.refusal);
            return;
        }
        if (o.directory) {
            std::string cur = root->path == "/" ? "" : root->path;
            const auto names = path_names(std::string_view(o.path).substr(cur.size()));
            for (const auto& name : names) {
                const std::string parent = cur.empty() ? "/" : cur;
                cur += "/" + std::string(name);
                int fd = -1, pfd = -1, error = 0;
                std::string at;
                Walk found = w.dir(*root, cur, fd, at, error);
                if (found == Walk::Absent && w.dir(*root, parent, pfd, at, error) == Walk::Found &&
                    ::mkdirat(pfd, std::string(name).c_str(), 0700) == 0) {
                    w.forget(cur);
                    found = w.dir(*root, cur, fd, at, error);
                }
                if (found == Walk::Symlink) {
                    failure = fail(Err::StateUnsafe, protected_symlink_text(o.path, at));
                    return;
                }
                struct stat st {};
                if (found != Walk::Found || ::fstat(fd, &st) != 0 ||
                    (&name == &names.back() && st.st_uid != ::geteuid())) {
                    failure = fail(Err::StateUnsafe, o.refusal);
                    return;
                }
            }
        }
        add(o.path, "own-state", "own");
        if (!failure) return;
        const auto it = std::find_if(out.begin(), out.end(), [&](const ProtectedPath& e) { return e.path == o.path; });
        if (it == out.end() || !it->exists || it->fd < 0 || it->directory != o.directory) {
            failure = fail(Err::StateUnsafe, o.refusal);
            return;
        }
        it->what = "own";
        it->refusal = o.refusal;
    }

    // The repositories directly below root `r` (subdirectories, not links,
    // holding a .git) not already covered (a submodule, a worktree seen from
    // its repository): the root's list for each.
    void nested(const std::string& r) {
        const int fd = find(r);
        if (fd < 0) return;
        for (const auto& name : entries(fd)) {
            if (!failure) return;
            if (name == ".git") continue;
            const std::string sub = (r == "/" ? "" : r) + "/" + name;
            const std::string dotgit = sub + "/.git";
            if (std::any_of(out.begin(), out.end(), [&](const ProtectedPath& e) { return e.path == dotgit; })) continue;
            const WritableRoot* root = root_of(p, dotgit);
            if (!root) continue;
            int gfd = -1, error = 0;
            struct stat st {};
            std::string at;
            const Walk found = w.lookup(*root, dotgit, gfd, st, at, error);
            if (found == Walk::Found) ::close(gfd);
            else if (found != Walk::Symlink) continue;  // a link fails the run in repo(), as at the root
            repo(sub);
            for (const auto& n : agent_names()) add(sub + "/" + n, "default", "agent");
        }
    }

    // The text of a small file, or "": inside a root looked up without
    // following links (through the protected entry's descriptor when it is
    // one); outside every root (read-only for the command) by its path.
    std::string read_file(const std::string& path) {
        const WritableRoot* root = root_of(p, path);
        if (!root) return read_open(::open(path.c_str(), kReadFlags));
        for (const auto& e : out)
            if (e.path == path) return e.fd >= 0 && !e.directory ? read_small(e.fd) : std::string();
        int fd = -1, error = 0;
        struct stat st {};
        std::string at;
        if (w.lookup(*root, path, fd, st, at, error) != Walk::Found) return {};
        std::string text = S_ISREG(st.st_mode) ? read_small(fd) : std::string();
        ::close(fd);
        return text;
    }
};

}  // namespace

Outcome protect(Policy& p, const Input& in) {
    p.protected_paths.clear();
    p.unprotected.clear();
    p.hidden_paths.clear();
    // Read-deny, every confined mode: the canonical path (a link's target).
    std::vector<std::string> defaults;
    if (in.hide_secrets && !in.home.empty()) defaults = secrets(in.home, in.ssh_auth_sock);
    if (p.mode != Mode::DangerFullAccess)
        for (const std::vector<std::string>* list : {static_cast<const std::vector<std::string>*>(&defaults), &in.deny_config, &in.deny_flag})
            for (const auto& s : *list) {
                ProtectedPath e;
                e.path = canonical_path(s, in.cwd);
                e.source = list == &in.deny_flag ? "flag" : list == &defaults ? "hide-secrets" : "config";
                e.what = "secret";
                struct stat st {};
                if (::lstat(e.path.c_str(), &st) == 0) {
                    e.exists = true;
                    e.directory = S_ISDIR(st.st_mode);
                }
                if (std::none_of(p.hidden_paths.begin(), p.hidden_paths.end(),
                                 [&](const ProtectedPath& h) { return h.path == e.path; }))
                    p.hidden_paths.push_back(std::move(e));
            }
    if (p.mode != Mode::WorkspaceWrite) return Outcome::success();
    Builder b(p);
    std::vector<std::string> drop;
    for (const auto& s : in.unprotect_config) drop.push_back(absolute(s, in.cwd));
    for (const auto& s : in.unprotect_flag) drop.push_back(absolute(s, in.cwd));
    b.drop = drop;
    if (!in.home.empty() && in.home[0] == '/') b.home = lexically_normal(in.home);
    std::vector<std::string> named;
    for (const auto& r : p.writable_roots)
        if (caller_named(r.source) && r.persists) named.push_back(r.path);
    for (const auto& r : named) {
        b.repo(r);
        for (const auto& n : agent_names()) b.add(r + "/" + n, "default", "agent");
    }
    // Repositories one level below a root (a root that is a directory of
    // checkouts, ~/src): each gets the root's treatment. One level only: it
    // costs one lookup per subdirectory of the root, and a deeper search
    // would multiply that by every directory on the way (docs/DECISIONS.md).
    for (const auto& r : named) b.nested(r);
    if (!in.home.empty() && in.home[0] == '/') {
        const std::string home = lexically_normal(in.home);
        for (const auto& r : named)
            if (under(home, r)) {
                for (const auto& n : home_names()) b.add(home + "/" + n, "default", "home");
                break;
            }
    }
    for (const auto& o : in.own) b.own(o);
    for (const auto& s : in.protect_config) b.add(absolute(s, in.cwd), "config", "named");
    for (const auto& s : in.protect_flag) b.add(absolute(s, in.cwd), "flag", "named");
    // --unprotect dropped a default or a config entry (and everything below
    // it: a planted link there is the caller's to keep); --protect wins.
    for (const auto& d : b.drop)
        if (std::find(p.unprotected.begin(), p.unprotected.end(), d) == p.unprotected.end()) p.unprotected.push_back(d);
    if (!b.failure) {
        for (auto& e : b.out)
            if (e.fd >= 0) ::close(e.fd);
        p.unprotected.clear();
        return b.failure;
    }
    p.protected_paths = std::move(b.out);
    return Outcome::success();
}

std::vector<std::string> secrets(const std::string& home, const std::string& sock) {
    std::vector<std::string> out;
    const std::string ssh = home + "/.ssh";
    if (DIR* d = ::opendir(ssh.c_str())) {
        std::vector<std::string> names;
        while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
        ::closedir(d);
        std::sort(names.begin(), names.end());
        for (const auto& n : names) {
            const auto ends = [&](const char* suf) {
                const size_t k = std::strlen(suf);
                return n.size() >= k && n.compare(n.size() - k, k, suf) == 0;
            };
            if (n == "." || n == ".." || ends(".pub") || n.rfind("known_hosts", 0) == 0 || n == "config" ||
                n.rfind("authorized_keys", 0) == 0)
                continue;
            struct stat st {};
            if (::lstat((ssh + "/" + n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(ssh + "/" + n);
        }
    }
    // IdentityFile lines of ~/.ssh/config (keys kept elsewhere).
    if (std::FILE* f = std::fopen((ssh + "/config").c_str(), "re")) {
        char line[4096];
        while (std::fgets(line, sizeof line, f)) {
            std::string l = trim(line);
            std::string key = l.substr(0, l.find_first_of(" \t="));
            for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            if (key != "identityfile") continue;
            std::string v = trim(l.substr(key.size()));
            if (!v.empty() && v[0] == '=') v = trim(v.substr(1));
            if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
            if (v.rfind("~/", 0) == 0) v = home + v.substr(1);
            if (!v.empty() && v[0] == '/' && v.find('%') == std::string::npos) out.push_back(v);
        }
        std::fclose(f);
    }
    for (const char* n : {"/.aws/credentials", "/.config/gcloud", "/.azure", "/.kube/config", "/.docker/config.json",
                          "/.gnupg", "/.netrc", "/.git-credentials", "/.config/gh/hosts.yml", "/.npmrc", "/.pypirc",
                          "/.cargo/credentials", "/.cargo/credentials.toml"})
        out.push_back(home + n);
    if (!sock.empty() && sock[0] == '/') out.push_back(sock);
    return out;
}

namespace {

void stat_line(std::vector<std::string>& out, const std::string& name, const struct stat& st) {
#if defined(__APPLE__)
    const struct timespec& mt = st.st_mtimespec;
#else
    const struct timespec& mt = st.st_mtim;
#endif
    out.push_back(fmt::format("{} {:o} {} {} {}.{} {}", name, static_cast<unsigned>(st.st_mode),
                              static_cast<long long>(st.st_size), static_cast<unsigned long long>(st.st_ino),
                              static_cast<long long>(mt.tv_sec), static_cast<long>(mt.tv_nsec),
                              static_cast<unsigned long>(st.st_nlink)));
}

void tree(std::vector<std::string>& out, int dirfd, const std::string& prefix, int depth) {
    const int d = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return;
    DIR* dir = ::fdopendir(d);
    if (!dir) {
        ::close(d);
        return;
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        struct stat st {};
        if (::fstatat(::dirfd(dir), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        stat_line(out, prefix + "/" + n, st);
        if (S_ISDIR(st.st_mode) && depth < 8) {
            const int sub = ::openat(::dirfd(dir), n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                tree(out, sub, prefix + "/" + n, depth + 1);
                ::close(sub);
            }
        }
    }
    ::closedir(dir);
}

}  // namespace

Fingerprint fingerprint(const Policy& p) {
    Fingerprint all;
    Walker w;
    for (const auto& e : p.protected_paths) {
        std::vector<std::string> out;
        if (e.pin) continue;  // its contents are writable by design
        if (e.why_not == kProtectedOutsideText) continue;
        const WritableRoot* root = root_of(p, e.path);
        if (!root) continue;
        int fd = -1, error = 0;
        struct stat st {};
        std::string at;
        // By name from the root, never following a link: what the next git
        // or editor run will find there.
        switch (w.lookup(*root, e.path, fd, st, at, error)) {
            case Walk::Found:
                stat_line(out, e.path, st);
                if (S_ISDIR(st.st_mode)) tree(out, fd, e.path, 0);
                ::close(fd);
                break;
            case Walk::Absent: out.push_back(e.path + " absent"); break;
            case Walk::Symlink: out.push_back(e.path + " symlink at " + at); break;
            case Walk::Error: out.push_back(fmt::format("{} error {}", e.path, error)); break;
        }
        all.emplace_back(e.path, std::move(out));
    }
    return all;
}

nlohmann::ordered_json violations(const Fingerprint& before, const Fingerprint& after) {
    nlohmann::ordered_json v = nlohmann::ordered_json::array();
    for (size_t i = 0; i < before.size() && i < after.size(); ++i)
        if (before[i] != after[i])
            v.push_back({{"type", "protected-path-changed"}, {"path", before[i].first}});
    return v;
}

}  // namespace dsh::carveouts
