#include "roots.hpp"
#include "bytes.hpp"
#include "fd.hpp"

#include "policy.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#ifdef __linux__
#include <dirent.h>
#include <sys/vfs.h>

#include <cstdlib>
#endif

namespace dsh::roots {

namespace {

#ifdef O_PATH
constexpr int kOpenFlags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
#else  // macOS: no O_PATH; a directory opened for reading serves the same
constexpr int kOpenFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
#endif

std::vector<std::string> split(const std::string& path) {
    std::vector<std::string> out;
    for (std::string_view name : path_names(path)) out.emplace_back(name);
    return out;
}

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += "/" + p;
    return out.empty() ? "/" : out;
}

struct Fds {
    std::vector<int> fds;
    ~Fds() {
        for (int fd : fds) ::close(fd);
    }
    int top() const { return fds.back(); }
    void pop() {
        ::close(fds.back());
        fds.pop_back();
    }
    int release_top() {
        int fd = fds.back();
        fds.pop_back();
        return fd;
    }
};

// A symlink met on a walk, by its O_PATH descriptor `fd` (closed here): its
// target read through that descriptor (never by name again), its names put
// on `todo`, and an absolute target starts the walk again at /. False with
// errno set when it cannot be read or the walk met more than 40 links.
bool follow_link(int fd, int& links, std::vector<std::string>& walked, Fds& stack, std::vector<std::string>& todo) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlinkat(fd, "", buf, sizeof buf - 1);
    const int e = errno;
    ::close(fd);
    errno = e;
    if (n <= 0) return false;
    if (++links > 40) {
        errno = ELOOP;
        return false;
    }
    std::vector<std::string> target = split(std::string(buf, static_cast<size_t>(n)));
    if (buf[0] == '/') {
        while (!walked.empty()) {
            walked.pop_back();
            stack.pop();
        }
    }
    for (auto it = target.rbegin(); it != target.rend(); ++it) todo.push_back(*it);
    return true;
}

}  // namespace

bool open_root(const std::string& abs, Opened& out, std::string& why, Refusal& refusal, int& error) {
    refusal = Refusal::System;
    error = 0;
    auto system = [&] {
        error = errno;
        why = std::strerror(error);
        return false;
    };
    if (abs.empty() || abs[0] != '/') {
        refusal = Refusal::Shape;
        why = "is not an absolute path";
        return false;
    }
    Fds stack;
    int root = ::open("/", kOpenFlags | O_DIRECTORY);
    if (root < 0) return system();
    stack.fds.push_back(root);
    std::vector<std::string> walked;
    std::vector<std::string> todo = split(abs);
    std::reverse(todo.begin(), todo.end());  // a stack: the next component at the back
    int links = 0;
    while (!todo.empty()) {
        const std::string name = std::move(todo.back());
        todo.pop_back();
        if (name == ".") continue;
        if (name == "..") {
            // As the kernel does: ".." of / is /; otherwise the parent we came through.
            if (!walked.empty()) {
                walked.pop_back();
                stack.pop();
            }
            continue;
        }
        const int fd = ::openat(stack.top(), name.c_str(), kOpenFlags);
        if (fd < 0) return system();
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            system();
            ::close(fd);
            return false;
        }
        if (!S_ISLNK(st.st_mode)) {
            if (!S_ISDIR(st.st_mode) && !todo.empty()) {
                ::close(fd);
                refusal = Refusal::Shape;
                why = fmt::format("has a file where a directory belongs: {}", join(walked) + "/" + name);
                return false;
            }
            stack.fds.push_back(fd);
            walked.push_back(name);
            continue;
        }
        // A symlink: followed only where the caller cannot write (a system
        // link such as /lib -> usr/lib, or /home on another volume).
        const std::string holder = join(walked);
        const std::string link = holder == "/" ? "/" + name : holder + "/" + name;
        if (::access(holder.c_str(), W_OK) == 0) {
            ::close(fd);
            refusal = Refusal::Planted;
            why = fmt::format("passes through the symlink {}, in a directory the caller can write (an earlier "
                              "confined run could have planted it); give the path it points to instead",
                              link);
            return false;
        }
        if (!follow_link(fd, links, walked, stack, todo)) return system();
    }
    struct stat st {};
    if (::fstat(stack.top(), &st) != 0) return system();
    out.path = join(walked);
    out.dev = static_cast<uint64_t>(st.st_dev);
    out.ino = static_cast<uint64_t>(st.st_ino);
    out.directory = S_ISDIR(st.st_mode);
    out.fd = stack.release_top();
    return true;
}

namespace {
// make_below's, in the order made. Function-local: the bwrap stage runs
// before dynamic initialisers (bwrap_stage.cpp early_entry).
std::vector<Made>& made_list() {
    static std::vector<Made> made;
    return made;
}
}  // namespace

void undo_made() noexcept {
    auto& made = made_list();
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
        struct stat st {};
        if (::lstat(it->path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && static_cast<uint64_t>(st.st_dev) == it->dev &&
            static_cast<uint64_t>(st.st_ino) == it->ino)
            (void)::rmdir(it->path.c_str());
    }
    made.clear();
}

void keep_made() noexcept { made_list().clear(); }

Make make_below(const std::string& abs, const Opened& home, const NeverMade& never, bool dry, Made& made,
                std::string& why, int& error) {
    error = 0;
    auto system = [&] {
        error = errno;
        why = std::strerror(error);
        return Make::Failed;
    };
    auto refuse = [&](std::string clause) {
        why = std::move(clause);
        return Make::Refused;
    };
    if (abs.empty() || abs[0] != '/') return refuse("it is not an absolute path");
    if (home.path == "/" || !home.directory) return refuse(fmt::format("your home directory {} is not one", home.path));
    Fds stack;
    int root = ::open("/", kOpenFlags | O_DIRECTORY);
    if (root < 0) return system();
    stack.fds.push_back(root);
    std::vector<std::string> walked;
    std::vector<std::string> todo = split(abs);
    std::reverse(todo.begin(), todo.end());  // a stack: the next component at the back
    int links = 0;
    // 1. The part that exists, walked as open_root walks it; but at or below
    // the home no symlink is followed at all.
    while (!todo.empty()) {
        const std::string name = todo.back();
        if (name == ".") {
            todo.pop_back();
            continue;
        }
        if (name == "..") {
            todo.pop_back();
            if (!walked.empty()) {
                walked.pop_back();
                stack.pop();
            }
            continue;
        }
        const int fd = ::openat(stack.top(), name.c_str(), kOpenFlags);
        if (fd < 0) {
            if (errno == ENOENT) break;  // the first missing name: made below
            return system();
        }
        todo.pop_back();
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            system();
            ::close(fd);
            return Make::Failed;
        }
        const std::string holder = join(walked);
        const std::string here = holder == "/" ? "/" + name : holder + "/" + name;
        if (!S_ISLNK(st.st_mode)) {
            if (!S_ISDIR(st.st_mode)) {
                ::close(fd);
                return refuse(fmt::format("{} is not a directory", here));
            }
            stack.fds.push_back(fd);
            walked.push_back(name);
            continue;
        }
        if (path_under(holder, home.path) || ::access(holder.c_str(), W_OK) == 0) {
            ::close(fd);
            return refuse(fmt::format("it passes through the symlink {}", here));
        }
        if (!follow_link(fd, links, walked, stack, todo)) return system();
    }
    if (todo.empty()) return Make::Exists;
    // 2. Where the walk stopped must be the home or below it: the same
    // directory as the one opened for it, not just the same name.
    const std::string at = join(walked);
    if (!path_under(at, home.path))
        return refuse(fmt::format("its first missing part is in {}, outside your home directory {}", at, home.path));
    {
        // The home's own component on the stack: walked.size() - depth(home) from the top.
        const size_t depth = split(home.path).size();
        const int home_fd = stack.fds[depth];
        struct stat a {};
        if (::fstat(home_fd, &a) != 0) return system();
        if (static_cast<uint64_t>(a.st_dev) != home.dev || static_cast<uint64_t>(a.st_ino) != home.ino)
            return refuse(fmt::format("{} is not the home directory it was when dsh-confine opened it", home.path));
    }
    // Made by this process, so owned by its effective ids: those must be the
    // caller's (a set-uid or set-gid dsh-confine would make them another's).
    if (::geteuid() != ::getuid() || ::getegid() != ::getgid())
        return refuse("dsh-confine runs with another user's or group's rights");
    // 3. The names to make: plain names only. Nothing is made in or below a
    // protected name, whether that name exists already (~/repo/.git/hooks
    // made would be run by git) or is to be made; and no directory is made
    // that would hold a protected home path (~/.local made, the command then
    // makes ~/.local/bin, which login shells put on PATH).
    std::vector<std::string> names;
    for (auto it = todo.rbegin(); it != todo.rend(); ++it) {
        if (*it == ".") continue;
        if (*it == "..") return refuse("it has .. after a name that does not exist yet");
        names.push_back(*it);
    }
    // Below the home: the names that exist, then those to make (from made_from on).
    std::vector<std::string> parts = split(at.substr(home.path.size()));
    const size_t made_from = parts.size();
    parts.insert(parts.end(), names.begin(), names.end());
    std::string rel;
    for (size_t i = 0; i < parts.size(); ++i) {
        const std::string& name = parts[i];
        rel = rel.empty() ? name : rel + "/" + name;
        for (const auto& p : never.anywhere)
            if (name == p) return refuse(fmt::format("{} is a protected name, nothing is made in it", name));
        for (const auto& p : never.home) {
            if (path_under(rel, p)) return refuse(fmt::format("~/{} is protected, nothing is made in it", p));
            if (i >= made_from && path_under(p, rel))
                return refuse(fmt::format("~/{} would hold ~/{}, which is protected", rel, p));
        }
    }
    if (dry) {
        made.path = at;
        for (const auto& name : names) made.path += (made.path == "/" ? "" : "/") + name;
        return Make::Made;
    }
    // 4. Made one by one from the parent's descriptor: a name swapped for a
    // link meanwhile is never followed (O_NOFOLLOW, O_DIRECTORY).
    const mode_t old_mask = ::umask(077);
    for (const auto& name : names) {
        const bool new_dir = ::mkdirat(stack.top(), name.c_str(), 0700) == 0;
        if (!new_dir && errno != EEXIST) {
            const int e = errno;
            ::umask(old_mask);
            errno = e;
            return system();
        }
        const int fd = ::openat(stack.top(), name.c_str(), kOpenFlags | O_DIRECTORY);
        struct stat st {};
        if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
            const int e = fd < 0 ? errno : ENOTDIR;
            if (fd >= 0) ::close(fd);
            ::umask(old_mask);
            if (e == ELOOP || e == ENOTDIR)
                return refuse(fmt::format("{}/{} is not a directory (a link or a file put there meanwhile)",
                                          join(walked), name));
            errno = e;
            return system();
        }
        stack.fds.push_back(fd);
        walked.push_back(name);
        if (new_dir) made_list().push_back({join(walked), static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
    }
    ::umask(old_mask);
    struct stat st {};
    if (::fstat(stack.top(), &st) != 0) return system();
    made.path = join(walked);
    made.dev = static_cast<uint64_t>(st.st_dev);
    made.ino = static_cast<uint64_t>(st.st_ino);
    return Make::Made;
}

#ifdef __linux__
namespace {

// Kernel interface file systems: writing there configures the kernel or the
// host, not files (statfs(2) f_type; include/uapi/linux/magic.h).
struct Magic {
    unsigned long magic;
    const char* name;
};
constexpr Magic kKernelFs[] = {
    {0x9fa0, "proc"},           {0x62656572, "sysfs"},    {0x1cd1, "devpts"},
    {0x64626720, "debugfs"},    {0x74726163, "tracefs"},  {0x73636673, "securityfs"},
    {0xcafe4a11, "bpf"},        {0x27e0eb, "cgroup"},     {0x63677270, "cgroup2"},
    {0x62656570, "configfs"},   {0xde5e81e4, "efivarfs"}, {0x42494e4d, "binfmt_misc"},
    {0x6165676c, "pstore"},     {0xf97cff8c, "selinuxfs"}, {0x43415d53, "smackfs"},
    {0x65735543, "fusectl"},    {0x19800202, "mqueue"},   {0x6e736673, "nsfs"},
};
// The same, as /proc/self/mountinfo names them, plus devtmpfs (whose statfs
// type is tmpfs's, so it is found by its device instead).
constexpr const char* kKernelFsNames[] = {
    "proc",   "sysfs",    "devpts",      "debugfs", "tracefs",   "securityfs", "bpf",
    "cgroup", "cgroup2",  "configfs",    "efivarfs", "binfmt_misc", "pstore",  "selinuxfs",
    "smackfs", "fusectl", "mqueue",      "nsfs",    "devtmpfs",  "rpc_pipefs", "hugetlbfs"};

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(const char* s, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3') {
            out += static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
            i += 3;
            continue;
        }
        out += s[i];
    }
    return out;
}

struct KernelMount {
    std::string type, point;
};

// The kernel interfaces in our mount table, read once for every root.
const std::vector<KernelMount>& kernel_mounts() {
    static const std::vector<KernelMount> mounts = [] {
        std::vector<KernelMount> out;
        // Read whole (stdio reads /proc in 1 KiB pieces).
        std::string text;
        if (!read_small("/proc/self/mountinfo", text)) return out;
        for_each_line(text, [&](std::string_view l) {
            const std::string line(l);
            // id parent major:minor root mountpoint options... - fstype source super
            const char* p = line.c_str();
            const char* fields[5] = {};
            size_t lens[5] = {};
            for (int k = 0; k < 5 && *p; ++k) {
                fields[k] = p;
                while (*p && *p != ' ') ++p;
                lens[k] = static_cast<size_t>(p - fields[k]);
                while (*p == ' ') ++p;
            }
            const char* dash = std::strstr(p, " - ");
            if (!fields[4] || !dash) return true;
            const char* fs = dash + 3;
            const std::string type(fs, std::strcspn(fs, " \n"));
            bool kernel = false;
            for (const char* k : kKernelFsNames) kernel = kernel || type == k;
            if (kernel) out.push_back({type, unescape(fields[4], lens[4])});
            return true;
        });
        return out;
    }();
    return mounts;
}

// A kernel interface mounted at or under `root`, or empty.
std::string kernel_mount_under(const std::string& root) {
    for (const auto& m : kernel_mounts())
        if (path_under(m.point, root)) return fmt::format("{} file system is mounted at {}", m.type, m.point);
    return {};
}

}  // namespace
#endif

std::string kernel_prefix(const std::string& path) {
    for (const char* dir : {"/proc", "/sys", "/dev"})
        if (path_under(path, dir)) return fmt::format("it is under {}, a kernel interface", dir);
    return {};
}

std::string forbidden(const Opened& r) {
    if (r.path == "/") return "it is / (that would make every path writable)";
    if (std::string k = kernel_prefix(r.path); !k.empty()) return k;
#ifdef __linux__
    struct statfs fs {};
    if (::fstatfs(r.fd, &fs) != 0) return fmt::format("statfs: {}", std::strerror(errno));
    for (const auto& m : kKernelFs)
        if (static_cast<unsigned long>(fs.f_type) == m.magic)
            return fmt::format("it is on the {} file system, a kernel interface", m.name);
    // The devtmpfs behind /dev, wherever else it is mounted: chmod of its nodes
    // would change the host's devices. Only when /dev is a mount of its own.
    struct stat dev {}, slash {};
    if (::stat("/dev", &dev) == 0 && ::stat("/", &slash) == 0 && dev.st_dev != slash.st_dev &&
        static_cast<uint64_t>(dev.st_dev) == r.dev)
        return "it is on the file system of /dev";
    if (r.directory) {
        std::string under = kernel_mount_under(r.path);
        if (!under.empty()) return "a " + under;
    }
#endif
    return {};
}

namespace {

// Descriptors a confined start needs besides what is open: our pipes, bwrap's
// own (eventfds, namespace fds, its libraries while loading), the stage's and
// Landlock's rule fds. bwrap that runs out half way leaves its sandboxed child
// waiting for ever (an orphan outside our process group), and the loader's
// failure is an exit 127 that reads as the command's: so the floor is checked
// before anything starts. 32 is several times what was seen to be needed.
constexpr int kFdHeadroom = 32;

#ifdef __linux__
// How many descriptors below `limit` are open, from one listing of
// /proc/self/fd (the listing's own descriptor not counted), or -1 when it
// cannot be listed.
long open_below(unsigned long long limit) {
    const int own = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (own < 0) return -1;
    long used = 0;
    const bool whole = each_entry(own, [&](const char* name, unsigned char) {
        if (name[0] < '0' || name[0] > '9') return;
        const unsigned long long fd = std::strtoull(name, nullptr, 10);
        if (fd < limit && static_cast<int>(fd) != own) ++used;
    });
    ::close(own);
    return whole ? used : -1;
}
#endif

}  // namespace

Outcome check_fd_headroom() {
    struct rlimit rl {};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    auto too_few = [&](unsigned long long free) {
        return failf(Err::SandboxUnavailable,
                     "{} of the {} file descriptors the open-file limit allows are free, and setting up the "
                     "sandbox needs {}; raise the limit (ulimit -n 1024) or close inherited descriptors",
                     free, static_cast<unsigned long long>(rl.rlim_cur), kFdHeadroom);
    };
#ifdef __linux__
    // Counted in one listing where /proc is there (32 dup and close calls otherwise).
    if (const long used = open_below(rl.rlim_cur); used >= 0) {
        const unsigned long long free = rl.rlim_cur > static_cast<unsigned long long>(used)
                                            ? rl.rlim_cur - static_cast<unsigned long long>(used)
                                            : 0;
        return free >= kFdHeadroom ? Outcome::success() : too_few(free);
    }
#endif
    std::vector<int> fds;
    fds.reserve(kFdHeadroom);
    int e = 0;
    const int base = ::open("/", kOpenFlags);  // O_PATH where there is one
    if (base < 0) e = errno;
    else fds.push_back(base);
    while (e == 0 && static_cast<int>(fds.size()) < kFdHeadroom) {
        const int fd = ::fcntl(base, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) e = errno;
        else fds.push_back(fd);
    }
    for (int fd : fds) ::close(fd);
    if (e == 0) return Outcome::success();
    if (e == EMFILE || e == ENFILE) return too_few(fds.size());
    return failf(Err::Internal, "cannot check the free file descriptors: {}", std::strerror(e));
}

}  // namespace dsh::roots
