#include "carveouts.hpp"
#include "bytes.hpp"
#include "fd.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <climits>
#include <map>
#include <optional>
#include <set>
#include <dirent.h>
#include <fnmatch.h>
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

GitConfigKeys git_config_keys(std::string_view text) {
    // Follows git's config.c (git_parse_source, get_base_var, get_value,
    // parse_value) closely enough that what git reads as a key is read here.
    GitConfigKeys out;
    size_t i = text.compare(0, 3, "\xef\xbb\xbf") == 0 ? 3 : 0;  // a UTF-8 BOM
    bool end = false;
    // The next character, "\r\n" as "\n"; "\n" for ever at the end.
    const auto get = [&]() -> int {
        if (i >= text.size()) {
            end = true;
            return '\n';
        }
        if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
            i += 2;
            return '\n';
        }
        return static_cast<unsigned char>(text[i++]);
    };
    const auto space = [](int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    const auto alpha = [](int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    const auto keychar = [&](int c) { return alpha(c) || (c >= '0' && c <= '9') || c == '-'; };
    const auto lower = [](int c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
    std::string section;  // "core", "includeif.gitdir:~/w/": lower-case name, subsection as written
    bool have_section = false, comment = false;
    int c = 0;
    // "[name]", "[name "sub"]" (the "[" read): false when malformed, with
    // `c` the last character read.
    const auto header = [&]() {
        std::string name;
        for (;;) {
            c = get();
            if (end) return false;
            if (c == ']') break;
            if (space(c)) {
                for (; space(c); c = get())
                    if (c == '\n') return false;
                if (c != '"') return false;
                name += '.';
                for (;;) {
                    c = get();
                    if (c == '\n') return false;
                    if (c == '"') break;
                    if (c == '\\' && (c = get()) == '\n') return false;
                    name += static_cast<char>(c);
                }
                if ((c = get()) != ']') return false;
                break;
            }
            if (!keychar(c) && c != '.') return false;
            name += lower(c);
        }
        section = std::move(name);
        return true;
    };
    // A value after "=": nothing when malformed (`c` the last character read).
    const auto value = [&]() -> std::optional<std::string> {
        std::string v;
        size_t spaces = 0;
        bool quote = false, rest_is_comment = false;
        for (;;) {
            c = get();
            if (c == '\n') {
                if (quote) return std::nullopt;
                return v;
            }
            if (rest_is_comment) continue;
            if (space(c) && !quote) {
                if (!v.empty()) ++spaces;
                continue;
            }
            if (!quote && (c == ';' || c == '#')) {
                rest_is_comment = true;
                continue;
            }
            if (spaces) {
                v.append(spaces, ' ');
                spaces = 0;
            }
            if (c == '\\') {
                switch (c = get()) {
                    case '\n': continue;  // a continued line
                    case 't': c = '\t'; break;
                    case 'b': c = '\b'; break;
                    case 'n': c = '\n'; break;
                    case '\\':
                    case '"': break;
                    default: return std::nullopt;
                }
            } else if (c == '"') {
                quote = !quote;
                continue;
            }
            v += static_cast<char>(c);
        }
    };
    for (;;) {
        c = get();
        if (c == '\n') {
            if (end) break;
            comment = false;
            continue;
        }
        if (comment || space(c)) continue;
        if (c == '#' || c == ';') {
            comment = true;
            continue;
        }
        if (c == '[') {
            have_section = header();
            comment = c != '\n' && !have_section;  // git refuses the file: skip the line
            if (end) break;
            continue;
        }
        if (!alpha(c)) {
            comment = true;
            continue;
        }
        std::string key(1, lower(c));
        for (;;) {
            c = get();
            if (end || !keychar(c)) break;
            key += lower(c);
        }
        while (c == ' ' || c == '\t') c = get();
        if (c == '\n') {  // a boolean: no path
            if (end) break;
            continue;
        }
        if (c != '=') {
            comment = true;
            continue;
        }
        const auto v = value();
        if (!v) {
            comment = c != '\n';
            if (end) break;
            continue;
        }
        if (have_section && key == "path") {
            const size_t dot = section.find('.');
            const std::string base = section.substr(0, dot);
            if ((base == "include" && dot == std::string::npos) ||
                (base == "includeif" && dot != std::string::npos))
                out.includes.push_back(*v);
            else if (base == "submodule" && dot != std::string::npos)
                out.submodule_paths.push_back(*v);
        } else if (have_section && key == "hookspath" && section == "core") {
            out.hooks_paths.push_back(*v);
        }
        if (end) break;
    }
    return out;
}

namespace {

std::string absolute(const std::string& p, const std::string& cwd) {
    return lexically_normal(!p.empty() && p[0] == '/' ? p : cwd + "/" + p);
}

// The deepest writable root that holds `path` (the one whose bind is visible there).
const WritableRoot* root_of(const Policy& p, const std::string& path) {
    const WritableRoot* best = nullptr;
    for (const auto& r : p.writable_roots)
        if (r.persists && path_under(path, r.path) && (!best || r.path.size() > best->path.size())) best = &r;
    return best;
}

enum class Walk { Found, Absent, Symlink, Error };

constexpr size_t kSmall = 65536;
// A git config: the whole of any sane one (a longer one is read this far).
constexpr size_t kConfigLimit = size_t{4} << 20;
// git's MAX_INCLUDE_DEPTH: includes nested deeper make git refuse the config.
constexpr int kIncludeDepth = 10;

// A small regular file's text from a descriptor opened for reading (closed
// here): the first `limit` bytes, or "" for anything but a regular file.
// With `same` (a device and inode number), `same_ok` says whether it is that
// inode (nothing is read if not).
std::string read_open(int r, size_t limit = kSmall, const std::pair<uint64_t, uint64_t>* same = nullptr,
                      bool* same_ok = nullptr) {
    std::string out;
    if (r < 0) return out;
    struct stat st {};
    const bool stat_ok = ::fstat(r, &st) == 0;
    if (same) {
        *same_ok = stat_ok && static_cast<uint64_t>(st.st_dev) == same->first &&
                   static_cast<uint64_t>(st.st_ino) == same->second;
        if (!*same_ok) {
            ::close(r);
            return out;
        }
    }
    if (stat_ok && S_ISREG(st.st_mode)) {
        char buf[8192];
        ssize_t n = 0;
        // A regular file's short read is its end: no read that returns 0.
        while (out.size() < limit && (n = ::read(r, buf, sizeof buf)) > 0) {
            out.append(buf, static_cast<size_t>(n));
            if (static_cast<size_t>(n) < sizeof buf) break;
        }
    }
    ::close(r);
    return out;
}

constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

// A small text file read through an O_PATH descriptor (its own inode, reopened).
std::string read_small(int fd, size_t limit = kSmall) {
    return read_open(::open(fmt::format("/proc/self/fd/{}", fd).c_str(), kReadFlags), limit);
}

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
    std::string passwd;  // for "~user/..."
    // core.hooksPath values of the global and system configs that are
    // relative: git takes them from each working tree's top.
    std::vector<std::string> global_hooks;
    std::set<std::string> real_dirs;  // outside the roots, not links (follow())
    std::set<std::string> regular;    // the entries of `out` that are regular files

    Builder(Policy& p_) : p(p_) {
        w.known = &out;
        out.reserve(64);  // a repository with a worktree and two submodules: some 30
    }

    // Adds `path` (absolute, normal); returns its descriptor when it exists
    // (owned by the entry), -1 otherwise.
    int add(const std::string& path, const char* source, const char* what, bool pin = false) {
        if (!failure) return -1;
        // Own state and the directories above a protected path (ancestors())
        // are never dropped: --unprotect of a parent must not undo them.
        if (std::strcmp(source, "flag") != 0 && std::strcmp(what, "own") != 0 && std::strcmp(what, "ancestor") != 0)
            for (const auto& d : drop)
                if (path_under(path, d)) return -1;
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
        if (not_listed(path)) {
            out.push_back(std::move(e));
            return -1;
        }
        int fd = -1, error = 0;
        struct stat st {};
        std::string at;
        switch (w.lookup(*root, path, fd, st, at, error)) {
            case Walk::Found:
                e.exists = true;
                e.fd = fd;
                e.directory = S_ISDIR(st.st_mode);
                if (S_ISREG(st.st_mode)) regular.insert(path);
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
        modules(g + "/modules", depth);
        for (const auto& name : subdirs(g + "/worktrees")) {
            add(g + "/worktrees/" + name + "/config.worktree", "default", "git");
            add(g + "/worktrees/" + name + "/commondir", "default", "git");
        }
    }

    // The git directories under a modules/ directory. A submodule's name may
    // hold '/' (`git submodule add URL libs/sub` names it "libs/sub"), so a
    // directory there is either a git directory (it has objects/ and refs/)
    // or one level of such a name, looked into further (an attack pass found
    // .git/modules/libs/sub/modules/* neither bound nor watched).
    void modules(const std::string& dir, int depth) {
        if (depth > 8) return;
        for (const auto& name : subdirs(dir)) {
            const std::string sub = dir + "/" + name;
            const auto inner = subdirs(sub);
            const bool git = std::find(inner.begin(), inner.end(), "objects") != inner.end() &&
                             std::find(inner.begin(), inner.end(), "refs") != inner.end();
            if (git) gitdir(sub, depth + 1);
            else modules(sub, depth + 1);
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

    // Directory `path`'s subdirectories and dot names (inside a root, looked
    // up as find() does), listed once and kept: add() takes a dot name
    // missing from its parent's listing as absent without a lookup of its own
    // (a root's ten agent and editor names). nullptr when it cannot be listed.
    struct Name {
        std::string name;
        bool dir;
    };
    std::map<std::string, std::vector<Name>, std::less<>> listed;
    const std::vector<Name>* listing(const std::string& path) {
        if (const auto it = listed.find(path); it != listed.end()) return &it->second;
        const int fd = find(path);
        if (fd < 0) return nullptr;
        const int d = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0) return nullptr;
        std::vector<Name> names;
        bool whole = true;
        // A file system that does not give the type (DT_UNKNOWN) is asked.
        auto take = [&](const char* name, unsigned char type) {
            const std::string_view n(name);
            if (n == "." || n == "..") return;
            struct stat st {};
            const bool dir = type == DT_DIR || (type == DT_UNKNOWN && ::fstatat(d, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                                S_ISDIR(st.st_mode));
            // Kept: directories, and every dot name (what the lists look
            // for), so a huge flat directory costs no more than before.
            if (dir || n[0] == '.') names.push_back({std::string(n), dir});
        };
#if defined(__linux__)
        whole = each_entry(d, take);
        ::close(d);
#else
        DIR* dir = ::fdopendir(d);
        if (!dir) {
            ::close(d);
            return nullptr;
        }
        errno = 0;
        while (const dirent* e = ::readdir(dir)) take(e->d_name, e->d_type);
        whole = errno == 0;
        ::closedir(dir);
#endif
        if (!whole) return nullptr;  // a name missing from a partial listing says nothing
        std::sort(names.begin(), names.end(), [](const Name& x, const Name& y) { return x.name < y.name; });
        return &listed.emplace(path, std::move(names)).first->second;
    }

    // The subdirectories of `path` (listing()), sorted.
    std::vector<std::string> subdirs(const std::string& path) {
        std::vector<std::string> out;
        if (const auto* names = listing(path))
            for (const auto& n : *names)
                if (n.dir) out.push_back(n.name);
        return out;
    }

    // Absent from its parent's listing, where the parent was listed.
    bool not_listed(const std::string& path) const {
        const size_t slash = path.rfind('/');
        const auto it = listed.find(std::string_view(path).substr(0, slash == 0 ? 1 : slash));
        if (it == listed.end()) return false;
        const std::string_view base = std::string_view(path).substr(path.rfind('/') + 1);
        if (base.empty() || base[0] != '.') return false;  // only dot names are all kept
        return !std::binary_search(it->second.begin(), it->second.end(), base,
                                   [](const auto& x, const auto& y) { return name_of(x) < name_of(y); });
    }
    static std::string_view name_of(const Name& n) { return n.name; }
    static std::string_view name_of(std::string_view n) { return n; }

    // A .git file: "gitdir: X". The file is protected; so are the pointed
    // gitdir's hooks/ and config, and its common dir's.
    void gitfile(const std::string& file) {
        std::string text = read_file(file);
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
        repo_configs(dir_of(file), {c + "/config", g + "/config.worktree"});
    }

    // A name git's discovery reads when it appears, absent now: watched
    // for creation (quarantine_created), never bound where it exists (a
    // project may keep a file of that name).
    void absent_only(const std::string& path) {
        const WritableRoot* root = root_of(p, path);
        if (!failure || !root) return;
        int fd = -1, error = 0;
        struct stat st {};
        std::string at;
        const Walk found = w.lookup(*root, path, fd, st, at, error);
        if (found == Walk::Found) ::close(fd);
        else if (found == Walk::Absent) add(path, "default", "git");
    }

    // git's is_git_directory on a directory outside the walk (HEAD, objects/
    // and refs/), looked at HEAD first: one lstat where there is none.
    static bool bare_layout(const std::string& d) {
        const std::string base = d == "/" ? "" : d;
        struct stat st {};
        if (::lstat((base + "/HEAD").c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) return false;
        return ::stat((base + "/objects").c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
               ::stat((base + "/refs").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }

    void repo(const std::string& r) {
        // A root that is a git directory itself (a bare repository, or a
        // .git named as the root): git reads its hooks and config as it
        // reads a working tree's .git's (attack pass: --root ~/bare.git had
        // hooks/ and core.fsmonitor written). A root below one is refused.
        const size_t in_git = (r + "/").find("/.git/");
        if (in_git != std::string::npos && in_git + 5 < r.size()) {
            if (!failure) return;
            failure = fail(Err::StateUnsafe, root_in_git_dir_text(r, r.substr(0, in_git + 5)));
            return;
        }
        // Below a bare repository whose name is not .git (--writable
        // ~/bare.git/hooks): git's own test on each directory above.
        for (std::string up = dir_of(r); up != r; up = dir_of(up)) {
            if (bare_layout(up)) {
                if (!failure) return;
                failure = fail(Err::StateUnsafe, root_in_git_dir_text(r, up));
                return;
            }
            if (up == "/") break;
        }
        // git's own test (setup.c, is_git_directory): HEAD, objects/ and refs/.
        const auto inner = subdirs(r);
        const auto has = [&](const char* n) { return std::find(inner.begin(), inner.end(), n) != inner.end(); };
        const WritableRoot* root = root_of(p, r);
        struct stat head {};
        const bool bare = has("objects") && has("refs") && root && root->fd >= 0 &&
                          ::fstatat(root->fd, "HEAD", &head, AT_SYMLINK_NOFOLLOW) == 0;
        if (bare || (r.size() > 5 && r.compare(r.size() - 5, 5, "/.git") == 0)) {
            gitdir(r, 0);
            repo_configs(r, {r + "/config", r + "/config.worktree"});
        }
        const std::string dotgit = r + "/.git";
        const int fd = add(dotgit, "default", "git", true);
        if (!failure) return;
        const auto it = std::find_if(out.begin(), out.end(), [&](const ProtectedPath& e) { return e.path == dotgit; });
        if (fd < 0 || it == out.end()) return;
        // git takes a directory holding HEAD, objects/ and refs/ for a bare
        // repository when its .git is no longer one (HEAD moved or broken):
        // a HEAD made at the top would hand git a config of the command's
        // (core.fsmonitor, core.worktree). Without HEAD there is no such
        // layout; objects/ and refs/ are ordinary names in many projects.
        absent_only(r + "/HEAD");
        if (it->directory) {
            gitdir(dotgit, 0);
            repo_configs(r, {dotgit + "/config", dotgit + "/config.worktree"});
        } else {
            gitfile(dotgit);
        }
        // Submodule checkouts: each one's .git file (the pointer).
        {
            // Read as git reads it (keys in any case, quoted values, comments):
            // a line-by-line match of "path =" missed "PATH = x" (attack pass).
            for (const std::string& sub : git_config_keys(read_file(r + "/.gitmodules")).submodule_paths) {
                if (sub.empty() || sub[0] == '/') continue;
                const std::string sp = lexically_normal(r + "/" + sub);
                if (!path_under(sp, r) || sp == r) continue;
                const int sfd = add(sp + "/.git", "default", "git");
                if (sfd >= 0 && !out.back().directory) gitfile(sp + "/.git");
            }
        }
    }

    // A path from a git config: "~/" is $HOME's (a root may hold
    // $HOME), "~user/" that user's home as /etc/passwd gives it (a user it
    // does not hold fails the run: git may find one elsewhere), a relative
    // one is from `base`; "" for "".
    std::string expand(std::string v, const std::string& base) {
        if (v == "~" || v.rfind("~/", 0) == 0) {
            if (home.empty()) return {};
            v = home + v.substr(1);
        } else if (!v.empty() && v[0] == '~') {
            const size_t slash = v.find('/');
            const std::string user = v.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
            const std::string dir = passwd_home(user);
            if (dir.empty() || dir[0] != '/') {
                failure = fail(Err::StateUnsafe, git_config_user_text(v, user));
                return {};
            }
            v = dir + v.substr(1 + user.size());
        }
        if (v.empty()) return {};
        return absolute(v, base);
    }

    // `user`'s home directory from the passwd file ("name:pw:uid:gid:gecos:home:shell"), or "".
    std::string passwd_home(const std::string& user) const {
        if (user.empty()) return {};
        return dsh::passwd_home(read_open(::open(passwd.c_str(), kReadFlags), kConfigLimit), 0, user);
    }

    // Where git's open() of `path` (absolute, normal) lands, as far as that
    // is settled before the run: outside every root (read-only for the
    // command) symlinks are followed (a ~/.gitconfig linked into a dotfiles
    // checkout inside a root); from the first name inside a root on, names
    // are kept as written for add()'s walk, which refuses a link, and a ".."
    // there steps back only over directories walked without following links.
    // "" when git would find nothing there (a name absent outside the roots,
    // a loop), and for a path --unprotect'ed.
    std::string follow(const std::string& path) {
        if (path.empty()) return {};
        for (const auto& d : drop)
            if (path_under(path, d)) return {};
        if (root_of(p, path)) return path;
        std::vector<std::string> rest;  // the names still to walk, the next one last
        for (const auto n : path_names(path)) rest.emplace_back(n);
        std::reverse(rest.begin(), rest.end());
        std::string cur = "/";
        int links = 0;
        while (!rest.empty()) {
            const std::string name = std::move(rest.back());
            rest.pop_back();
            if (name == ".") continue;
            const WritableRoot* root = root_of(p, cur);
            if (name == "..") {
                if (root && cur != root->path) {
                    int fd = -1, error = 0;
                    std::string at;
                    const Walk found = w.dir(*root, cur, fd, at, error);
                    if (found == Walk::Symlink) {
                        failure = fail(Err::StateUnsafe, protected_symlink_text(path, at));
                        return {};
                    }
                    if (found != Walk::Found) return {};
                }
                cur = dir_of(cur);
                continue;
            }
            const std::string next = (cur == "/" ? "" : cur) + "/" + name;
            if (root || root_of(p, next) || real_dirs.count(next)) {
                cur = next;
                continue;
            }
            char buf[PATH_MAX];
            const ssize_t n = ::readlink(next.c_str(), buf, sizeof buf);
            if (n < 0) {
                if (errno != EINVAL) return {};  // absent (or unreadable): git reads nothing there
                if (!rest.empty()) real_dirs.insert(next);
                cur = next;
                continue;
            }
            if (n == 0 || static_cast<size_t>(n) >= sizeof buf || ++links > 40) return {};
            const std::string target(buf, static_cast<size_t>(n));
            if (target[0] == '/') cur = "/";
            const auto names = path_names(target);
            for (auto it = names.rbegin(); it != names.rend(); ++it) rest.emplace_back(*it);
        }
        return cur;
    }

    // A git config file and the files it includes (include.path and every
    // includeIf.*.path, whatever the condition), as git reads them: each
    // included file inside a root is protected (a command that edits it
    // could set core.fsmonitor, core.pager, core.hooksPath), and each
    // core.hooksPath value goes to `hooks`. `file` is the path git opens
    // (its relative includes are from its directory), `real` where that
    // lands (follow()). git refuses a config whose includes nest deeper than
    // 10, so that is the bound here; `seen` holds each file read with the
    // depth it was read at: it is read again only when reached less deep,
    // so a cycle ends and a file included twice costs one read.
    void git_config(const std::string& file, const std::string& real, int depth, std::vector<std::string>& hooks,
                    std::map<std::string, int>& seen) {
        if (!failure || real.empty()) return;
        const auto [it, fresh] = seen.emplace(real, depth);
        if (!fresh) {
            if (it->second <= depth) return;
            it->second = depth;
        }
        // One byte more than is parsed: a longer file fails the run rather
        // than having what lies past the bound go unseen.
        const std::string text = read_file(real, kConfigLimit + 1);
        if (text.size() > kConfigLimit) {
            failure = fail(Err::StateUnsafe, git_config_too_large_text(real, kConfigLimit));
            return;
        }
        const GitConfigKeys keys = git_config_keys(text);
        hooks.insert(hooks.end(), keys.hooks_paths.begin(), keys.hooks_paths.end());
        if (depth >= kIncludeDepth) return;
        for (const auto& v : keys.includes) {
            const std::string named = expand(v, dir_of(file));
            const std::string to = follow(named);
            if (to.empty()) continue;
            if (root_of(p, to)) add(to, "default", "git");
            git_config(named, to, depth + 1, hooks, seen);
        }
    }

    // core.hooksPath values for the working tree at `top` (git takes a
    // relative one from there): a target inside a root is protected like
    // .git/hooks.
    void hooks_at(const std::string& top, const std::vector<std::string>& values) {
        for (const auto& v : values) {
            const std::string t = follow(expand(v, top));
            if (!t.empty() && root_of(p, t)) add(t, "default", "git");
        }
    }

    // The configs git reads for the working tree at `top` (read as they are
    // now; inside a root they are protected themselves), wherever they lie,
    // with their includes; then their core.hooksPath and the global ones.
    void repo_configs(const std::string& top, const std::vector<std::string>& configs) {
        std::vector<std::string> hooks;
        std::map<std::string, int> seen;
        for (const auto& c : configs) git_config(c, follow(c), 0, hooks, seen);
        hooks.insert(hooks.end(), global_hooks.begin(), global_hooks.end());
        hooks_at(top, hooks);
    }

    // The global and system configs (any of them: the next git run's
    // environment may differ from this one's), read once: each that lies
    // inside a root, and each file they include that does, is protected; an
    // absolute core.hooksPath there is protected now, a relative one for
    // each working tree found (repo_configs()).
    void globals(const Input& in, const std::string& cwd) {
        std::vector<std::string> files;
        if (!home.empty()) files = {home + "/.gitconfig", home + "/.config/git/config"};
        if (!in.xdg_config_home.empty() && in.xdg_config_home[0] == '/')
            files.push_back(lexically_normal(in.xdg_config_home) + "/git/config");
        if (!in.git_config_global.empty()) files.push_back(absolute(in.git_config_global, cwd));
        if (!in.system_gitconfig.empty()) files.push_back(absolute(in.system_gitconfig, cwd));
        if (!in.git_config_system.empty()) files.push_back(absolute(in.git_config_system, cwd));
        std::vector<std::string> hooks;
        std::map<std::string, int> seen;
        for (const auto& f : files) {
            const std::string real = follow(f);
            if (real.empty()) continue;
            if (root_of(p, real)) add(real, "default", "git");
            git_config(f, real, 0, hooks, seen);
        }
        for (const auto& v : hooks) {
            if (v.empty()) continue;
            if (v[0] == '/' || v[0] == '~') hooks_at("/", {v});
            else global_hooks.push_back(v);
        }
    }

    // dsh-confine's own state under a root: its directory made when absent
    // (0700, 0755 under /etc; one name at a time from the root's descriptor, never through a
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
                // The system's directory (/etc/dsh-confine, made when a root
                // run may write /etc) is every caller's to read: 0700 there
                // made every later unprivileged run fail on its config.
                const mode_t mode = std::string_view(cur).rfind("/etc/", 0) == 0 ? 0755 : 0700;
                if (found == Walk::Absent && w.dir(*root, parent, pfd, at, error) == Walk::Found &&
                    ::mkdirat(pfd, std::string(name).c_str(), mode) == 0) {
                    w.forget(cur);
                    listed.erase(parent);
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

    // Every directory between a protected path's root and the path becomes
    // a mount point of its own, writable inside (pinned, as .git is): in the
    // mount namespace that holds a mount point, rename(2), renameat2
    // (RENAME_EXCHANGE included) and rmdir(2) of it fail with EBUSY, and a
    // directory cannot be hard-linked, so no directory on the way can be
    // moved aside and replaced by a fresh one whose files the next git or
    // dsh-confine run would read (a nested repository's directory, ~/.config
    // above dsh-confine's own config). A read-only bind pins only its leaf.
    // For an absent path, the directories that exist on the way are pinned.
    // Ancestors are added after their descendants; carve_binds() binds by
    // depth, so each is a mount point before anything below it is bound.
    void ancestors() {
        const size_t n = out.size();
        for (size_t i = 0; i < n && failure; ++i) {
            if (out[i].why_not == kProtectedOutsideText) continue;
            const std::string path = out[i].path;  // copies: add() grows `out`
            const std::string source = out[i].source;
            const WritableRoot* root = root_of(p, path);
            if (!root || root->path == path) continue;
            std::string cur = root->path == "/" ? "" : root->path;
            const auto names = path_names(std::string_view(path).substr(cur.size()));
            for (size_t k = 0; k + 1 < names.size() && failure; ++k) {
                cur += "/" + std::string(names[k]);
                if (add(cur, source.c_str(), "ancestor", true) < 0) break;  // absent from here down
            }
        }
    }

    // The repositories directly below root `r` (subdirectories, not links,
    // holding a .git) not already covered (a submodule, a worktree seen from
    // its repository): the root's list for each.
    void nested(const std::string& r) {
        for (const auto& name : subdirs(r)) {
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
            listing(sub);
            repo(sub);
            for (const auto& n : agent_names()) add(sub + "/" + n, "default", "agent");
        }
    }

    // The text of a small file, or "": outside every root (read-only for the
    // command) by its path; inside a root by one openat from its parent's
    // descriptor (walked without following links), never through a link, and
    // only once the lookup has seen a regular file there (opening a device
    // node for reading can have effects; git opens these files itself). It is
    // read only while it is that inode; a protected one that was replaced
    // since is read through its own descriptor (a /proc reopen, which alone
    // cost about as much as the rest of the lookup).
    std::string read_file(const std::string& path, size_t limit = kSmall) {
        const WritableRoot* root = root_of(p, path);
        if (!root) return read_open(::open(path.c_str(), kReadFlags), limit);
        if (root->path == path || not_listed(path)) return {};
        int parent = -1, error = 0;
        std::string at;
        const bool walked = w.dir(*root, dir_of(path), parent, at, error) == Walk::Found;
        const std::string name = path.substr(path.rfind('/') + 1);
        std::pair<uint64_t, uint64_t> id;
        const auto known = std::find_if(out.begin(), out.end(), [&](const ProtectedPath& e) { return e.path == path; });
        if (known != out.end()) {
            if (!regular.count(path)) return {};
            if (!walked) return read_small(known->fd, limit);
            id = {known->dev, known->ino};
        } else {
            struct stat st {};
            if (!walked || ::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
                return {};
            id = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
        }
        bool same = false;
        std::string text = read_open(::openat(parent, name.c_str(), kReadFlags | O_NOFOLLOW), limit, &id, &same);
        if (same || known == out.end()) return text;
        return read_small(known->fd, limit);
    }
};

}  // namespace

Outcome protect(Policy& p, const Input& in) {
    hide(p, in);
    return walk(p, in);
}

namespace {

// The names directly in a hidden ~/.ssh that stay readable: regular files
// with one link (a hard link is the same file under another name, so a
// "x.pub" linked to a private key would show the key), opened without
// following a link, bound through the descriptor.
std::vector<std::pair<std::string, int>> shown_parts(const std::string& dir) {
    std::vector<std::pair<std::string, int>> out;
    const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0) return out;
    DIR* listing = ::fdopendir(d);
    if (!listing) {
        ::close(d);
        return out;
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(listing))
        if (ssh_public_name(e->d_name)) names.emplace_back(e->d_name);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        const int fd = ::openat(::dirfd(listing), n.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st {};
        if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) out.emplace_back(n, fd);
        else if (fd >= 0) ::close(fd);
    }
    ::closedir(listing);
    return out;
}

}  // namespace

void hide(Policy& p, const Input& in) {
    for (auto& h : p.hidden_paths)
        for (auto& s : h.shown) ::close(s.second);
    p.hidden_paths.clear();
    if (p.mode == Mode::DangerFullAccess) return;
    // Read-deny, every confined mode: the canonical path (a link's target).
    std::vector<std::string> defaults;
    if (in.hide_secrets) defaults = secrets(in.home, in.env, in.secret_extra);
    std::string ssh;  // ~/.ssh as found (canonical): hidden whole, its public parts shown
    std::string home;
    if (in.hide_secrets && !in.home.empty() && in.home[0] == '/') {
        ssh = canonical_path(in.home + "/.ssh", in.cwd);
        home = canonical_path(in.home, in.cwd);
    }
    for (const std::vector<std::string>* list : {static_cast<const std::vector<std::string>*>(&defaults), &in.deny_config, &in.deny_flag})
        for (const auto& s : *list) {
            ProtectedPath e;
            e.path = canonical_path(s, in.cwd);
            e.source = list == &in.deny_flag ? "flag" : list == &defaults ? "hide-secrets" : "config";
            e.what = "secret";
            // From the secrets list: what lies below the hidden ~/.ssh is
            // hidden with it (a link there to its own tree); a link there to
            // $HOME or above is no key store, and hiding it would hide the
            // home the command works in.
            if (list == &defaults && !ssh.empty() &&
                ((e.path != ssh && path_under(e.path, ssh)) || path_under(home, e.path)))
                continue;
            struct stat st {};
            if (::lstat(e.path.c_str(), &st) == 0) {
                e.exists = true;
                e.directory = S_ISDIR(st.st_mode);
            }
            if (std::none_of(p.hidden_paths.begin(), p.hidden_paths.end(),
                             [&](const ProtectedPath& h) { return h.path == e.path; }))
                p.hidden_paths.push_back(std::move(e));
        }
    // ~/.ssh's public parts, unless a path below it is hidden by name too
    // (an IdentityFile called config: hidden wins).
    for (auto& h : p.hidden_paths)
        if (!ssh.empty() && h.path == ssh && h.exists && h.directory) {
            h.shown = shown_parts(ssh);
            for (auto it = h.shown.begin(); it != h.shown.end();)
                if (std::any_of(p.hidden_paths.begin(), p.hidden_paths.end(),
                                [&](const ProtectedPath& o) { return o.path == ssh + "/" + it->first; })) {
                    ::close(it->second);
                    it = h.shown.erase(it);
                } else {
                    ++it;
                }
        }
}

Outcome walk(Policy& p, const Input& in) {
    p.protected_paths.clear();
    p.unprotected.clear();
    if (p.mode != Mode::WorkspaceWrite) return Outcome::success();
    Builder b(p);
    std::vector<std::string> drop;
    for (const auto& s : in.unprotect_config) drop.push_back(absolute(s, in.cwd));
    for (const auto& s : in.unprotect_flag) drop.push_back(absolute(s, in.cwd));
    b.drop = drop;
    if (!in.home.empty() && in.home[0] == '/') b.home = lexically_normal(in.home);
    b.passwd = in.passwd;
    b.globals(in, in.cwd);
    std::vector<std::string> named;
    for (const auto& r : p.writable_roots)
        // A root explain or check only says would be made (issue 42) is empty: nothing to protect in it yet.
        if (caller_named(r.source) && r.persists && !(r.created && r.fd < 0)) named.push_back(r.path);
    for (const auto& r : named) {
        b.listing(r);  // the names looked up below it, in one listing
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
            if (path_under(home, r)) {
                for (const auto& n : home_names()) b.add(home + "/" + n, "default", "home");
                break;
            }
    }
    for (const auto& o : in.own) b.own(o);
    for (const auto& s : in.protect_config) b.add(absolute(s, in.cwd), "config", "named");
    for (const auto& s : in.protect_flag) b.add(absolute(s, in.cwd), "flag", "named");
    b.ancestors();
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

const std::vector<Secret>& secret_table() {
    // Directories are hidden whole: their layout (subfolders, links, names
    // created during the run) does not matter. A store that is one file in
    // a directory shared with other tools (~/.docker, ~/.m2, $HOME) is
    // named as the file.
    static const std::vector<Secret> table = {
        {"~", ".ssh", true, "ssh private keys, in any layout (*.pub, known_hosts*, config stay readable)"},
        {"SSH_AUTH_SOCK", "", false, "the ssh agent's socket: it signs with every key it holds"},
        {"~", ".gnupg", true, "gpg private keys and the gpg agent's sockets (S.*)"},
        {"GNUPGHOME", "", true, "gpg's home when moved"},
        {"XDG_RUNTIME_DIR", "gnupg", true, "the gpg agent's sockets (its ssh and extra sockets too)"},
        {"XDG_RUNTIME_DIR", "keyring", true, "gnome-keyring's control and ssh agent sockets"},
        {"XDG_RUNTIME_DIR", "gcr", true, "gcr's ssh agent socket"},
        {"XDG_RUNTIME_DIR", "bus", false, "the session bus: its Secret Service hands out stored passwords"},
        {"~", ".1password", true, "the 1Password ssh agent's socket"},
        {"~", ".local/share/keyrings", true, "gnome-keyring's stored passwords"},
        {"~", ".password-store", true, "pass's passwords"},
        {"PASSWORD_STORE_DIR", "", true, "pass's passwords when moved"},
        {"~", ".config/op", true, "the 1Password CLI's session"},
        {"~", ".aws", true, "AWS keys, the SSO and CLI token caches (sso/cache, cli/cache)"},
        {"AWS_SHARED_CREDENTIALS_FILE", "", false, "AWS keys when moved"},
        {"~", ".config/gcloud", true, "Google Cloud tokens and keys"},
        {"CLOUDSDK_CONFIG", "", true, "Google Cloud tokens when moved"},
        {"~", ".azure", true, "Azure CLI tokens"},
        {"AZURE_CONFIG_DIR", "", true, "Azure CLI tokens when moved"},
        {"~", ".oci", true, "Oracle Cloud API keys"},
        {"~", ".config/doctl", true, "DigitalOcean tokens"},
        {"~", ".kube", true, "Kubernetes configs: cluster credentials and tokens"},
        {"KUBECONFIG", "", false, "Kubernetes configs when moved (each of the list)"},
        {"~", ".docker/config.json", false, "container registry logins"},
        {"DOCKER_CONFIG", "config.json", false, "container registry logins when moved"},
        {"~", ".config/containers/auth.json", false, "podman registry logins"},
        {"XDG_RUNTIME_DIR", "containers/auth.json", false, "podman registry logins"},
        {"~", ".netrc", false, "passwords for any host (curl, git, ftp)"},
        {"~", ".authinfo", false, "passwords for any host (Emacs)"},
        {"~", ".authinfo.gpg", false, "passwords for any host (Emacs)"},
        {"~", ".git-credentials", false, "git's stored passwords and tokens"},
        {"~", ".config/git/credentials", false, "git's stored passwords and tokens"},
        {"~", ".git-credential-cache", true, "git's credential cache daemon's socket"},
        {"~", ".cache/git/credential", true, "git's credential cache daemon's socket"},
        {"~", ".config/gh", true, "GitHub CLI tokens (hosts.yml)"},
        {"GH_CONFIG_DIR", "", true, "GitHub CLI tokens when moved"},
        {"~", ".config/hub", false, "hub's GitHub token"},
        {"~", ".config/glab-cli", true, "GitLab CLI tokens"},
        {"~", ".npmrc", false, "npm registry tokens"},
        {"~", ".yarnrc.yml", false, "yarn registry tokens"},
        {"~", ".pypirc", false, "PyPI upload tokens"},
        {"~", ".cargo/credentials", false, "crates.io tokens"},
        {"~", ".cargo/credentials.toml", false, "crates.io tokens"},
        {"CARGO_HOME", "credentials", false, "crates.io tokens when CARGO_HOME moves them"},
        {"CARGO_HOME", "credentials.toml", false, "crates.io tokens when CARGO_HOME moves them"},
        {"NPM_CONFIG_USERCONFIG", "", false, "npm registry tokens when moved"},
        {"npm_config_userconfig", "", false, "npm registry tokens when moved"},
        {"~", ".gem/credentials", false, "RubyGems API keys"},
        {"~", ".m2/settings.xml", false, "Maven repository passwords"},
        {"~", ".m2/settings-security.xml", false, "Maven's master password"},
        {"~", ".gradle/gradle.properties", false, "Gradle repository and signing passwords"},
        {"~", ".composer/auth.json", false, "Composer repository tokens"},
        {"~", ".config/composer/auth.json", false, "Composer repository tokens"},
        {"~", ".terraform.d/credentials.tfrc.json", false, "Terraform Cloud tokens"},
        {"~", ".terraformrc", false, "Terraform Cloud tokens"},
        {"~", ".vault-token", false, "a HashiCorp Vault token"},
        {"~", ".pgpass", false, "PostgreSQL passwords"},
        {"~", ".my.cnf", false, "MySQL passwords"},
        {"~", ".s3cfg", false, "s3cmd's keys"},
        {"~", ".boto", false, "gsutil's and boto's keys"},
        {"~", ".config/rclone/rclone.conf", false, "rclone's remote credentials"},
        {"~", ".config/sops/age/keys.txt", false, "sops's age private keys"},
        {"~", ".pki/nssdb", true, "client certificates and their keys (NSS)"},
        {"~", ".codex/auth.json", false, "Codex's login"},
        {"~", ".claude/.credentials.json", false, "Claude Code's login"},
        {"~", ".mozilla", true, "Firefox profiles: session cookies and saved passwords"},
        {"~", ".config/google-chrome", true, "Chrome profiles: session cookies and saved passwords"},
        {"~", ".config/chromium", true, "Chromium profiles: session cookies and saved passwords"},
    };
    return table;
}

bool ssh_public_name(std::string_view n) {
    const bool pub = n.size() > 4 && n.compare(n.size() - 4, 4, ".pub") == 0;
    return pub || n.rfind("known_hosts", 0) == 0 || n == "config";
}

namespace {

// The entries of the directory at `dirfd` (not . and ..), in name order,
// each with its lstat and the directory's own descriptor (to open what lies
// below it). With a budget, at most that many names, counted off it.
template <class F>
void each_entry(int dirfd, size_t* budget, F f) {
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
        if (n == "." || n == ".." || (budget && *budget == 0)) continue;
        names.push_back(n);
        if (budget) --*budget;
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        struct stat st {};
        if (::fstatat(::dirfd(dir), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) f(::dirfd(dir), n, st);
    }
    ::closedir(dir);
}

// The targets of the links below a hidden ~/.ssh (a key kept elsewhere and
// linked there), but the public names directly in it. Bounded: 8 deep,
// 4096 entries (a tree that large is not a key store).
void link_targets(std::vector<std::string>& out, int dirfd, const std::string& path, int depth, size_t& budget) {
    each_entry(dirfd, &budget, [&](int dir, const std::string& n, const struct stat& st) {
        if (S_ISLNK(st.st_mode) && !(depth == 0 && ssh_public_name(n))) {
            out.push_back(path + "/" + n);  // hide() hides its canonical path: the target
        } else if (S_ISDIR(st.st_mode) && depth < 8) {
            const int sub = ::openat(dir, n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                link_targets(out, sub, path + "/" + n, depth + 1, budget);
                ::close(sub);
            }
        }
    });
}

// One path of an ssh config, expanded as ssh expands it: a leading "~/", %d
// (the home), %u (the user, from $USER), %% and ${VAR}. A token that depends
// on the host being reached (%h, %r, %n, %C, ...) is not known before the
// run: the path then stops at the directory before it, hidden whole when that
// lies below $HOME (more is hidden, never less); "" when nothing below $HOME
// is left, or the path is not absolute.
std::string ssh_path(std::string v, const std::string& home, Lookup env) {
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    if (v == "~" || v.rfind("~/", 0) == 0) v = home + v.substr(1);
    const auto var = [&](const std::string& name) -> std::string {
        const char* x = env ? env(name.c_str()) : nullptr;
        return x ? x : "";
    };
    std::string r;
    bool cut = false;
    for (size_t i = 0; i < v.size() && !cut; ++i) {
        const size_t close = v.compare(i, 2, "${") == 0 ? v.find('}', i) : std::string::npos;
        if (close != std::string::npos) {
            const std::string x = var(v.substr(i + 2, close - i - 2));
            cut = x.empty();
            r += x;
            i = close;
        } else if (v[i] == '%') {
            const char t = i + 1 < v.size() ? v[++i] : '\0';
            const std::string x = t == '%' ? "%" : t == 'd' ? home : t == 'u' ? var("USER") : "";
            cut = x.empty();
            r += x;
        } else {
            r += v[i];
        }
    }
    if (r.empty() || r[0] != '/') return {};
    if (!cut) return r;
    r = lexically_normal(r.substr(0, r.rfind('/') + 1));
    return r.size() > home.size() && path_under(r, home) ? r : std::string();
}

// What an ssh config names that holds a key or reaches one: each
// IdentityFile and each IdentityAgent socket, through its Include lines
// (glob patterns, relative to `dir`: ~/.ssh for the user's config, /etc/ssh
// for the system's), as deep as ssh follows them (16). Any Host or Match
// block counts: which applies depends on the host reached. Read only where
// a regular file is found (through an O_PATH descriptor: a FIFO planted
// there is never opened, so it neither hangs the start nor wakes its
// writer); at most `budget` files in all.
void ssh_config(const std::string& file, const std::string& dir, const std::string& home, Lookup env, int depth,
                int& budget, std::vector<std::string>& out) {
    if (depth > 16 || budget <= 0) return;
    --budget;
    const int fd = ::open(file.c_str(), O_PATH | O_CLOEXEC);
    struct stat st {};
    const std::string text = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read_small(fd) : std::string();
    if (fd >= 0) ::close(fd);
    for_each_line(text, [&](std::string_view line) {
        const std::string l = trim(std::string(line));
        std::string key = l.substr(0, l.find_first_of(" \t="));
        for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        std::string v = trim(l.substr(key.size()));
        if (!v.empty() && v[0] == '=') v = trim(v.substr(1));
        // A blank then '#' starts a comment, as ssh reads it.
        for (size_t i = 1; i < v.size(); ++i)
            if (v[i] == '#' && (v[i - 1] == ' ' || v[i - 1] == '\t')) {
                v = trim(v.substr(0, i));
                break;
            }
        // Only what can be a key or an agent: a file, a socket, or the
        // directory before a host token (ssh_path). A planted config naming
        // /usr, /proc or the workspace must not hide it (the run would break).
        const auto kind_ok = [&](const std::string& path, bool socket) {
            struct stat st {};
            if (path.empty() || path[0] != '/' || ::stat(path.c_str(), &st) != 0) return !path.empty() && path[0] == '/';
            return S_ISREG(st.st_mode) || (socket && S_ISSOCK(st.st_mode)) ||
                   (S_ISDIR(st.st_mode) && path.size() > home.size() && path_under(path, home));
        };
        if (key == "identityfile") {
            const std::string path = ssh_path(v, home, env);
            if (kind_ok(path, false)) out.push_back(path);
        } else if (key == "identityagent" && v != "none" && v != "SSH_AUTH_SOCK") {
            const char* x = v.size() > 1 && v[0] == '$' && v[1] != '{' && env ? env(v.c_str() + 1) : nullptr;
            const std::string path = x ? std::string(x) : ssh_path(v, home, env);
            if (kind_ok(path, true)) out.push_back(path);
        } else if (key == "include") {
            for (size_t i = 0; i < v.size();) {
                const size_t j = std::min(v.find_first_of(" \t", i), v.size());
                std::string pat = v.substr(i, j - i);
                i = v.find_first_not_of(" \t", j);
                if (i == std::string::npos) i = v.size();
                if (pat.rfind("~/", 0) == 0) pat = home + pat.substr(1);
                else if (!pat.empty() && pat[0] != '/') pat = dir + "/" + pat;
                // A wildcard above the last name would walk whole trees (a
                // planted "Include /*/*/*/*/*/x" held the start for minutes).
                const size_t slash = pat.rfind('/');
                if (slash != std::string::npos && pat.find_first_of("*?[", 0) < slash) continue;
                // The last name may hold wildcards: matched in its directory
                // (fnmatch, as glob(3) would, without glob's user lookups).
                const std::string parent = slash == std::string::npos || slash == 0 ? "/" : pat.substr(0, slash);
                const std::string leaf = slash == std::string::npos ? pat : pat.substr(slash + 1);
                const int pd = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (pd < 0) continue;
                size_t names = 4096;
                std::vector<std::string> found;
                each_entry(pd, &names, [&](int, const std::string& n, const struct stat&) {
                    if (::fnmatch(leaf.c_str(), n.c_str(), FNM_PERIOD) == 0) found.push_back(parent + "/" + n);
                });
                ::close(pd);
                for (const auto& f : found) ssh_config(f, dir, home, env, depth + 1, budget, out);
            }
        }
        return true;
    });
}

}  // namespace

std::vector<std::string> secrets(const std::string& home, Lookup env, const std::vector<std::string>& extra) {
    std::vector<std::string> out;
    const bool have_home = !home.empty() && home[0] == '/';
    const auto var = [&](const char* name) -> std::string {
        const char* v = env ? env(name) : nullptr;
        if (v && *v == '/') return v;
        if (std::strcmp(name, "XDG_RUNTIME_DIR") == 0) return fmt::format("/run/user/{}", ::getuid());
        return {};
    };
    for (const auto& t : secret_table()) {
        std::string base = std::strcmp(t.base, "~") == 0 ? (have_home ? home : std::string()) : var(t.base);
        if (base.empty()) continue;
        if (std::strcmp(t.base, "KUBECONFIG") == 0) {
            for (size_t i = 0; i <= base.size();) {
                const size_t j = std::min(base.find(':', i), base.size());
                if (j > i && base[i] == '/') out.push_back(base.substr(i, j - i));
                i = j + 1;
            }
            continue;
        }
        out.push_back(*t.rel ? base + "/" + t.rel : base);
        // A store under ~/.config, ~/.local/share or ~/.cache is where the
        // XDG variables say when they are set: hidden there too.
        static constexpr std::pair<std::string_view, const char*> kXdg[] = {
            {".config/", "XDG_CONFIG_HOME"}, {".local/share/", "XDG_DATA_HOME"}, {".cache/", "XDG_CACHE_HOME"}};
        for (const auto& [dir, name] : kXdg) {
            const std::string x = var(name);
            if (std::strcmp(t.base, "~") == 0 && std::string_view(t.rel).rfind(dir, 0) == 0 && !x.empty())
                out.push_back(x + "/" + std::string(std::string_view(t.rel).substr(dir.size())));
        }
    }
    if (have_home) {
        const std::string ssh = home + "/.ssh";
        // Keys kept elsewhere and the agents ssh is told to use, by the
        // user's config and the system's (each Include followed).
        int budget = 64;
        ssh_config(ssh + "/config", ssh, home, env, 0, budget, out);
        ssh_config("/etc/ssh/ssh_config", "/etc/ssh", home, env, 0, budget, out);
        const int d = ::open(ssh.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d >= 0) {
            size_t budget = 4096;
            link_targets(out, d, ssh, 0, budget);
            ::close(d);
        }
    }
    for (const auto& x : extra)
        if (x.rfind("~/", 0) == 0) {
            if (have_home) out.push_back(home + x.substr(1));
        } else if (!x.empty() && x[0] == '/') {
            out.push_back(x);
        }
    return out;
}

namespace {

// How a protected file or directory entry stands, as the next program that
// reads it finds it: for a regular file of up to 64 KiB (`node` its O_PATH
// descriptor) its type, mode and bytes, so that a file rewritten unchanged
// through a new inode (git does so with a config it did not change) is no
// change; for anything else its mode, size, inode, mtime and links, and
// for a larger regular file its ctime too: a file rewritten in place at the
// same size with its mtime put back (utimensat) is still a change, and no
// call of the command's can set a ctime (an attack pass of session 21).
void stat_line(std::vector<std::string>& out, const std::string& name, const struct stat& st, int node = -1) {
    if (node >= 0 && S_ISREG(st.st_mode) && st.st_size <= static_cast<off_t>(kSmall)) {
        const int r = ::open(fmt::format("/proc/self/fd/{}", node).c_str(), kReadFlags);
        if (r >= 0) {
            out.push_back(fmt::format("{} {:o} {}", name, static_cast<unsigned>(st.st_mode),
                                      static_cast<long long>(st.st_size)));
            out.push_back(read_open(r, kSmall + 1));
            return;
        }
    }
#if defined(__APPLE__)
    const struct timespec& mt = st.st_mtimespec;
    const struct timespec& ct = st.st_ctimespec;
#else
    const struct timespec& mt = st.st_mtim;
    const struct timespec& ct = st.st_ctim;
#endif
    std::string line = fmt::format("{} {:o} {} {} {}.{} {}", name, static_cast<unsigned>(st.st_mode),
                                   static_cast<long long>(st.st_size), static_cast<unsigned long long>(st.st_ino),
                                   static_cast<long long>(mt.tv_sec), static_cast<long>(mt.tv_nsec),
                                   static_cast<unsigned long>(st.st_nlink));
    if (S_ISREG(st.st_mode)) line += fmt::format(" c{}.{}", static_cast<long long>(ct.tv_sec), static_cast<long>(ct.tv_nsec));
    out.push_back(std::move(line));
}

void tree(std::vector<std::string>& out, int dirfd, const std::string& prefix, int depth) {
    each_entry(dirfd, nullptr, [&](int dir, const std::string& n, const struct stat& st) {
        const int node = S_ISREG(st.st_mode) ? ::openat(dir, n.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
        struct stat now {};
        // Its own bytes only while the name is still the file looked at.
        const bool same = node >= 0 && ::fstat(node, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev;
        stat_line(out, prefix + "/" + n, st, same ? node : -1);
        if (node >= 0) ::close(node);
        if (S_ISDIR(st.st_mode) && depth < 8) {
            const int sub = ::openat(dir, n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                tree(out, sub, prefix + "/" + n, depth + 1);
                ::close(sub);
            }
        }
    });
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
                stat_line(out, e.path, st, fd);
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

nlohmann::ordered_json quarantine_created(const Policy& p, std::string_view tag) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    Walker w;
    std::set<std::string> done;
    for (const auto& e : p.protected_paths) {
        // A .git where there was none is a repository the command made, its
        // own content like any file it writes (docs/SECURITY.md): kept.
        if (e.exists || e.pin || e.why_not != kProtectedAbsentText) continue;
        const WritableRoot* root = root_of(p, e.path);
        if (!root) continue;
        int fd = -1, error = 0;
        struct stat st {};
        std::string at;
        const Walk found = w.lookup(*root, e.path, fd, st, at, error);
        if (found == Walk::Found) {
            ::close(fd);
            at = e.path;
        } else if (found != Walk::Symlink) {
            continue;
        }
        if (!done.insert(at).second) continue;
        int parent = -1;
        std::string link;
        const std::string name = at.substr(at.rfind('/') + 1);
        const std::string moved = fmt::format("{}.dsh-confine-quarantine-{}", name, tag);
        struct stat taken {};
        const bool ok = w.dir(*root, dir_of(at), parent, link, error) == Walk::Found &&
                        ::fstatat(parent, moved.c_str(), &taken, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT &&
                        ::renameat(parent, name.c_str(), parent, moved.c_str()) == 0;
        nlohmann::ordered_json q;
        q["path"] = at;
        q["movedTo"] = ok ? nlohmann::ordered_json(dir_of(at) + "/" + moved) : nlohmann::ordered_json(nullptr);
        out.push_back(std::move(q));
        w.forget(at);
    }
    return out;
}

nlohmann::ordered_json violations(const Fingerprint& before, const Fingerprint& after) {
    nlohmann::ordered_json v = nlohmann::ordered_json::array();
    for (size_t i = 0; i < before.size() && i < after.size(); ++i)
        if (before[i] != after[i])
            v.push_back({{"type", "protected-path-changed"}, {"path", before[i].first}});
    return v;
}

}  // namespace dsh::carveouts
