#include "policy.hpp"
#include "bytes.hpp"

#ifndef _WIN32
#include "roots.hpp"
#endif

#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <cstdlib>
#include <sys/stat.h>
#include <optional>

namespace dsh {

std::string_view to_string(ModeSource s) noexcept {
    switch (s) {
        case ModeSource::Default: return "default";
        case ModeSource::Flag: return "flag";
        case ModeSource::Session: return "session";
        case ModeSource::Config: return "config";
        case ModeSource::Escalation: return "escalation";
    }
    return "default";
}

std::string_view to_string(Grant g) noexcept {
    switch (g) {
        case Grant::Workspace: return "workspace";
        case Grant::Tmp: return "tmp";
        case Grant::Tmpdir: return "tmpdir";
        case Grant::Flag: return "flag";
        case Grant::Config: return "config";
        case Grant::Shm: return "shm";
        case Grant::Cache: return "cache";
    }
    return "workspace";
}

std::optional<Grant> parse_grant(std::string_view s) noexcept {
    for (Grant g : {Grant::Workspace, Grant::Tmp, Grant::Tmpdir, Grant::Flag, Grant::Config, Grant::Shm, Grant::Cache})
        if (to_string(g) == s) return g;
    return std::nullopt;
}

std::string_view to_string(RootSource s) noexcept {
    switch (s) {
        case RootSource::Cwd: return "cwd";
        case RootSource::Flag: return "flag";
        case RootSource::Session: return "session";
        case RootSource::Config: return "config";
    }
    return "cwd";
}

[[gnu::hot]] std::string_view to_string(Mode m) noexcept {
    switch (m) {
        case Mode::ReadOnly: return "read-only";
        case Mode::WorkspaceWrite: return "workspace-write";
        case Mode::DangerFullAccess: return "danger-full-access";
    }
    return "read-only";
}

[[gnu::hot]] std::optional<Mode> parse_mode(std::string_view s) noexcept {
    if (s == "read-only") return Mode::ReadOnly;
    if (s == "workspace-write") return Mode::WorkspaceWrite;
    if (s == "danger-full-access") return Mode::DangerFullAccess;
    return std::nullopt;
}

bool is_strictly_wider(Mode target, Mode current) noexcept {
    return static_cast<int>(target) > static_cast<int>(current);
}

std::string_view to_string(Network n) noexcept {
    switch (n) {
        case Network::Host: return "host";
        case Network::Loopback: return "loopback";
        case Network::Off: return "off";
    }
    return "host";
}

std::string_view to_string(NetworkSource s) noexcept {
    switch (s) {
        case NetworkSource::Default: return "default";
        case NetworkSource::Flag: return "flag";
        case NetworkSource::Config: return "config";
        case NetworkSource::Session: return "session";
        case NetworkSource::Escalation: return "escalation";
    }
    return "default";
}

std::optional<Network> parse_network(std::string_view s) noexcept {
    for (auto n : {Network::Off, Network::Loopback, Network::Host})
        if (s == to_string(n)) return n;
    return std::nullopt;
}

std::string_view to_string(Enforcement e) noexcept {
    switch (e) {
        case Enforcement::Full: return "full";
        case Enforcement::Partial: return "partial";
        case Enforcement::None: return "none";
    }
    return "none";
}

std::vector<std::string_view> path_names(std::string_view path) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < path.size()) {
        while (i < path.size() && path[i] == '/') ++i;
        size_t j = i;
        while (j < path.size() && path[j] != '/') ++j;
        if (j > i) out.push_back(path.substr(i, j - i));
        i = j;
    }
    return out;
}

std::string lexically_normal(std::string_view path) {
    std::vector<std::string_view> parts;
    for (std::string_view part : path_names(path)) {
        if (part == ".") {
        } else if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else {
            parts.push_back(part);
        }
    }
    std::string out;
    for (auto p : parts) {
        out += '/';
        out += p;
    }
    return out.empty() ? "/" : out;
}

#ifndef _WIN32  // Windows: src/windows/platform_win.cpp (GetFinalPathNameByHandleW)
static std::string absolute(std::string_view path, std::string_view cwd) {
    if (!path.empty() && path[0] == '/') return std::string(path);
    std::string out(cwd);
    out += '/';
    out += path;
    return out;
}

static std::optional<std::string> real(const std::string& p) {
    char buf[PATH_MAX];
    if (::realpath(p.c_str(), buf) == nullptr) return std::nullopt;
    return std::string(buf);
}

// depth bounds dangling-link chains as the kernel does (ELOOP after 40).
static std::string canonical_path_at(const std::string& abs, int depth) {
    if (auto r = real(abs)) return *r;
    // Walk up until an ancestor resolves; append the missing tail lexically.
    std::string head = abs;
    std::string tail;
    while (true) {
        const auto slash = head.find_last_of('/');
        if (slash == std::string::npos || head.size() <= 1) break;
        tail = head.substr(slash) + tail;
        head = slash == 0 ? "/" : head.substr(0, slash);
        auto r = real(head);
        if (!r) continue;
        // The first missing component may still exist as a dangling symlink:
        // a write through it (open O_CREAT follows the link) creates the
        // link's target, so the target is where the write lands.
        const auto end = tail.find('/', 1);
        const std::string first = tail.substr(1, end == std::string::npos ? std::string::npos : end - 1);
        const std::string rest = end == std::string::npos ? "" : tail.substr(end);
        const std::string link = (*r == "/" ? "" : *r) + "/" + first;
        struct stat st {};
        if (depth < 40 && first != ".." && first != "." && ::lstat(link.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
            char buf[PATH_MAX];
            const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
            if (n > 0) {
                const std::string target(buf, static_cast<size_t>(n));
                const std::string next = target[0] == '/' ? target : (*r == "/" ? "" : *r) + "/" + target;
                return canonical_path_at(next + rest, depth + 1);
            }
        }
        // The other missing components are not symlinks (they do not exist).
        return lexically_normal(*r + tail);
    }
    return lexically_normal(abs);
}

std::string canonical_path(std::string_view path, std::string_view cwd) {
    return canonical_path_at(absolute(path, cwd), 0);
}
#endif

#ifndef _WIN32
namespace {

enum class Need { Required, Optional };

// Opens `given` (absolute, not yet resolved) as a writable root and adds it
// (src/roots.hpp). A required root (the workspace, --writable, config
// writableRoots) that cannot be granted is an error naming `what`; an
// optional one (/tmp, $TMPDIR) is left out and listed in not_granted.
Outcome grant(Policy& out, const std::string& given, Grant source, Need need, Err err,
              std::string_view what) {
    // The path as given first: its magic links (/proc/self/cwd) lead anywhere.
    if (std::string k = roots::kernel_prefix(lexically_normal(given)); !k.empty()) {
        if (need == Need::Optional) {
            out.not_granted.push_back({given, "not granted: " + k});
            return Outcome::success();
        }
        const std::string norm = lexically_normal(given);
        if (norm == "/dev/shm" || norm.rfind("/dev/shm/", 0) == 0) return fail(err, shm_root_text(what, given));
        return failf(err, "{} {} cannot be granted: {}; choose another path", what, given, k);
    }
    roots::Opened r;
    std::string why;
    roots::Refusal refusal = roots::Refusal::System;
    int error = 0;
    if (!roots::open_root(given, r, why, refusal, error)) {
        // Out of descriptors or memory: the sandbox cannot be set up, whatever the root.
        if (refusal == roots::Refusal::System && (error == EMFILE || error == ENFILE || error == ENOMEM))
            return unavailable(to_string(out.mode), fmt::format("cannot open {}: {}", given, why));
        const bool system = refusal == roots::Refusal::System;
        if (need == Need::Optional) {
            out.not_granted.push_back({given, (system ? "not granted: " : "not granted: it ") + why});
            return Outcome::success();
        }
        if (!system) return failf(err, "{} {} {}", what, given, why);
        return failf(err, "{} {} cannot be opened: {}", what, given, why);
    }
    std::string bad = roots::forbidden(r);
    if (!bad.empty()) {
        ::close(r.fd);
        if (need == Need::Optional) {
            out.not_granted.push_back({given, "not granted: " + bad});
            return Outcome::success();
        }
        return failf(err, "{} {} cannot be granted: {}; choose another path",
                     what, r.path, bad);
    }
    for (const auto& w : out.writable_roots)
        if (w.path == r.path) {  // first occurrence wins
            ::close(r.fd);
            // The private /tmp is not the host's: a write meant to last there
            // would be discarded without a word.
            if (!w.persists && need == Need::Required)
                return failf(err, "{} {} is the private /tmp of --private-tmp, whose writes are discarded at exit; "
                                  "drop one of the two", what, r.path);
            return Outcome::success();
        }
    WritableRoot w{r.path, source, true};
    w.fd = r.fd;
    w.dev = r.dev;
    w.ino = r.ino;
    out.writable_roots.push_back(std::move(w));
    return Outcome::success();
}

// A --writable (or config writableRoots) path that does not exist (issue 42):
// made below the caller's home (roots::make_below), then granted as any
// other; anything else is an error naming the mkdir that fixes it. `home`
// is opened once, on the first such path.
[[gnu::cold]] Outcome grant_missing(Policy& out, const PolicyInput& in, const std::string& given, Grant source,
                      std::optional<roots::Opened>& home) {
    const std::string shown = lexically_normal(given);
    const auto missing = [&](std::string why) {
        return fail(Err::InvalidPath, root_text(RootText::WritableMissing, shown, why));
    };
    if (!home) {
        if (in.home.empty() || in.home[0] != '/') return missing("no home directory is known for your user");
        roots::Opened h;
        std::string why;
        roots::Refusal refusal = roots::Refusal::System;
        int error = 0;
        if (!roots::open_root(in.home, h, why, refusal, error))
            return missing(fmt::format("your home directory {} cannot be opened: {}{}", in.home,
                                       refusal == roots::Refusal::System ? "" : "it ", why));
        struct stat st {};
        const bool own = ::fstat(h.fd, &st) == 0 && st.st_uid == ::getuid();
        if (!own || !h.directory || h.path == "/") {
            ::close(h.fd);
            return missing(fmt::format("your home directory {} is not a directory of yours", h.path));
        }
        home = h;
    }
    roots::Made made;
    std::string why;
    int error = 0;
    switch (roots::make_below(given, *home, in.never_made, !in.create_missing, made, why, error)) {
        case roots::Make::Refused: return missing(why);
        case roots::Make::Failed:
            if (error == EMFILE || error == ENFILE || error == ENOMEM)
                return unavailable(to_string(out.mode), fmt::format("cannot make {}: {}", shown, why));
            return fail(Err::InvalidPath, root_text(RootText::WritableNotMade, shown, why));
        case roots::Make::Exists: return grant(out, given, source, Need::Required, Err::InvalidPath, "writable path");
        case roots::Make::Made: break;
    }
    if (!in.create_missing) {
        // explain, check: shown as it would be, granted by path; nothing runs.
        for (const auto& w : out.writable_roots)
            if (w.path == made.path) return Outcome::success();
        WritableRoot w{made.path, source, true};
        w.created = true;
        out.writable_roots.push_back(std::move(w));
        return Outcome::success();
    }
    const size_t before = out.writable_roots.size();
    if (auto o = grant(out, given, source, Need::Required, Err::InvalidPath, "writable path"); !o) return o;
    if (out.writable_roots.size() == before) return Outcome::success();  // already granted
    WritableRoot& w = out.writable_roots.back();
    // What was opened must be what was made (not a link or a directory put there meanwhile).
    if (w.dev != made.dev || w.ino != made.ino)
        return missing(fmt::format("{} was replaced while it was made", made.path));
    w.created = true;
    return Outcome::success();
}

}  // namespace
#endif

// The workspace root must be a directory that exists, in every mode where
// the caller named it (issue 42): a mistyped --root is never silently used.
[[gnu::cold]] static Outcome check_root_dir(const std::string& root) {
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return fail(Err::InvalidRoot, root_text(RootText::RootMissing, root));
        return fail(Err::InvalidRoot, root_text(RootText::RootUnreachable, root, std::strerror(errno)));
    }
    if (!S_ISDIR(st.st_mode)) return fail(Err::InvalidRoot, root_text(RootText::RootNotDirectory, root));
    return Outcome::success();
}

// An absolute current directory: "/..." on POSIX; on Windows, where getcwd
// says "C:\dir" (or "\\server\share"): a drive-letter or UNC path.
static bool absolute_cwd(const std::string& cwd) {
#ifdef _WIN32
    const auto sep = [](char c) { return c == '\\' || c == '/'; };
    const bool drive = cwd.size() >= 3 && ((cwd[0] >= 'A' && cwd[0] <= 'Z') || (cwd[0] >= 'a' && cwd[0] <= 'z')) &&
                       cwd[1] == ':' && sep(cwd[2]);
    return drive || (cwd.size() >= 3 && sep(cwd[0]) && sep(cwd[1]) && !sep(cwd[2]));
#else
    return !cwd.empty() && cwd[0] == '/';
#endif
}

Outcome build_policy(const PolicyInput& in, Policy& out) {
    out = Policy{};
    out.mode = in.mode;
    out.mode_source = in.mode_source;
    out.root_source = in.root ? in.root_source : RootSource::Cwd;
    // Never "/" in its place: a relative --root would silently become one
    // under / (issue 13: --root etc became /etc).
    if (!absolute_cwd(in.cwd))
        return fail(Err::InvalidRoot, "the current directory cannot be determined (deleted, or deeper than the "
                                      "system allows); change to an existing directory and run again");
    out.workspace_root = canonical_path(in.root ? *in.root : in.cwd, in.cwd);
    out.keep_fds = in.keep_fds;
    out.jobserver = in.jobserver;
    // A --root that does not exist or is not a directory, in every mode
    // (read-only names it in the report, and a runner may take it as the
    // workspace): say so rather than carry a typo.
    if (in.root && in.root_source == RootSource::Flag && in.mode != Mode::WorkspaceWrite)
        if (auto o = check_root_dir(out.workspace_root); !o) return o;
    if (in.mode == Mode::DangerFullAccess) return Outcome::success();
    out.private_tmp = in.private_tmp;
    out.keep_descendants = in.keep_descendants;
    out.allow_userns = in.allow_userns;
    out.writable_files.push_back("/dev/null");
    // The command's own controlling terminal (a pty of its own unless
    // --no-pty): less, vi and read -s open it, and set its modes through the
    // descriptor they opened. TIOCSTI/TIOCLINUX stay refused (seccomp).
    out.writable_files.push_back("/dev/tty");
#ifndef _WIN32
    // Before any root is opened: a run short of descriptors fails closed here.
    if (auto o = roots::check_fd_headroom(); !o) return unavailable(to_string(in.mode), o.message);
#endif
    if (in.mode == Mode::ReadOnly) return Outcome::success();
    const std::string& root = out.workspace_root;
    if (root == "/")
        return fail(Err::InvalidRoot,
                    "workspace root is / : that would make every path writable; say "
                    "--mode danger-full-access if that is what you mean");
    if (auto o = check_root_dir(root); !o) return o;
#ifndef _WIN32
    // The root as given, resolved once more by open_root: the descriptor, not
    // the name, is what is granted; its walk refuses planted symlinks.
    const std::string given = in.root ? absolute(*in.root, in.cwd) : in.cwd;
    if (auto o = grant(out, given, Grant::Workspace, Need::Required, Err::InvalidRoot, "workspace root"); !o) return o;
    out.workspace_root = out.writable_roots.front().path;
    // A root the caller cannot open (e.g. mode 000, not its owner) would be
    // granted yet refuse every write by plain DAC: a silent narrowing to
    // nothing. It is an error instead, as DESIGN.md says.
    if (int fd = ::openat(out.writable_roots.front().fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
        ::close(fd);
    } else {
        return failf(Err::InvalidRoot, "workspace root {} cannot be opened: {}", out.workspace_root,
                     std::strerror(errno));
    }
    // The host's /tmp, like any root; a private one is not the host's, so
    // nothing is opened: the runner mounts a fresh one there.
    if (in.private_tmp) {
        if (out.workspace_root == "/tmp")
            return fail(Err::InvalidRoot, "workspace root /tmp cannot be kept with --private-tmp, which puts an "
                                          "empty /tmp over it; choose another --root or drop --private-tmp");
        out.writable_roots.push_back(WritableRoot{"/tmp", Grant::Tmp, false});
    } else {
        (void)grant(out, "/tmp", Grant::Tmp, Need::Optional, Err::InvalidPath, "");
    }
    // $TMPDIR is the environment's, which the command's parent controls: it
    // is only ever an optional grant, under every rule a root obeys.
    if (in.tmpdir && !in.tmpdir->empty()) {
        if ((*in.tmpdir)[0] == '/')
            (void)grant(out, *in.tmpdir, Grant::Tmpdir, Need::Optional, Err::InvalidPath, "");
        else
            out.not_granted.push_back({*in.tmpdir, "not granted: $TMPDIR is not an absolute path"});
    }
    std::optional<roots::Opened> home;  // opened for the first missing path
    struct CloseHome {
        std::optional<roots::Opened>& h;
        ~CloseHome() {
            if (h) ::close(h->fd);
        }
    } close_home{home};
    auto add_extra = [&](const std::vector<std::string>& paths, Grant source) -> Outcome {
        for (const auto& w : paths) {
            std::string c = canonical_path(w, in.cwd);
            if (c == "/")
                return fail(Err::InvalidPath,
                            "writable path / would make every path writable; say --mode "
                            "danger-full-access if that is what you mean");
            struct stat ws {};
            if (::stat(c.c_str(), &ws) != 0) {
                if (auto o = grant_missing(out, in, absolute(w, in.cwd), source, home); !o) return o;
                continue;
            }
            if (auto o = grant(out, absolute(w, in.cwd), source, Need::Required, Err::InvalidPath, "writable path");
                !o)
                return o;
        }
        return Outcome::success();
    };
    if (auto o = add_extra(in.config_writable, Grant::Config); !o) return o;
    if (auto o = add_extra(in.writable, Grant::Flag); !o) return o;
    // The tools' caches (issue 42): granted as --writable paths are, each
    // marked with its tool. A directory already granted (a --writable of the
    // same path) keeps its first source.
    for (const auto& [path, tool] : in.cache) {
        const size_t before = out.writable_roots.size();
        if (auto o = add_extra({path}, Grant::Cache); !o) return o;
        for (size_t i = before; i < out.writable_roots.size(); ++i) out.writable_roots[i].tool = tool;
    }
#else  // Windows: the ACL helper re-checks the root; paths as before
    auto add_root = [&](std::string path, Grant source) {
        for (const auto& r : out.writable_roots)
            if (r.path == path) return;
        out.writable_roots.push_back(WritableRoot{std::move(path), source, true});
    };
    add_root(root, Grant::Workspace);
    add_root(canonical_path("/tmp", "/"), Grant::Tmp);
    for (auto& r : out.writable_roots)
        if (r.source == Grant::Tmp && in.private_tmp) r.persists = false;
    if (in.tmpdir && !in.tmpdir->empty() && (*in.tmpdir)[0] == '/') add_root(canonical_path(*in.tmpdir, "/"), Grant::Tmpdir);
    for (const auto& w : in.config_writable) add_root(canonical_path(w, in.cwd), Grant::Config);
    for (const auto& w : in.writable) add_root(canonical_path(w, in.cwd), Grant::Flag);
    for (const auto& [path, tool] : in.cache) {
        const size_t before = out.writable_roots.size();
        add_root(canonical_path(path, in.cwd), Grant::Cache);
        if (out.writable_roots.size() > before) out.writable_roots.back().tool = tool;
    }
#endif
    return Outcome::success();
}

bool write_allowed(const Policy& p, std::string_view path, std::string_view cwd) {
    if (p.mode == Mode::DangerFullAccess) return true;
    const std::string c = canonical_path(path, cwd);
    for (const auto& f : p.writable_files)
        if (c == f) return true;
    for (const auto& r : p.writable_roots)
        if (path_under(c, r.path)) return true;
    return false;
}

}  // namespace dsh
