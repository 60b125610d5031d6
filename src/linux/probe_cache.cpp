#include "probe_cache.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include "../version.hpp"

namespace dsh::probe_cache {

namespace {

constexpr const char* kHeader = "dsh-confine bwrap probe cache v1";
constexpr const char* kFile = "bwrap-probe-v1";

std::string read_small(const char* path) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "-";
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n < 0) return "-";
    std::string s(buf, static_cast<size_t>(n));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

std::string status_field(const std::string& status, const char* name) {
    const std::string tag = std::string(name) + ":";
    auto at = status.find("\n" + tag);
    if (at == std::string::npos) return "-";
    at += tag.size() + 1;
    auto end = status.find('\n', at);
    std::string v = status.substr(at, end == std::string::npos ? std::string::npos : end - at);
    auto b = v.find_first_not_of(" \t");
    return b == std::string::npos ? "" : v.substr(b);
}

// A directory we own, not a symlink, writable by nobody else.
bool safe_dir(const std::string& d) {
    struct stat st {};
    return ::lstat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
           (st.st_mode & 022) == 0;
}

bool ensure_dir(const std::string& d, bool create) {
    if (safe_dir(d)) return true;
    if (!create) return false;
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return false;
    return safe_dir(d);
}

}  // namespace

std::string render(const std::string& key) { return fmt::format("{}\nkey={}\nverdict=usable\n", kHeader, key); }

bool says_usable(const std::string& text, const std::string& key) { return !key.empty() && text == render(key); }

std::string key_for(const std::string& bwrap_path) {
    struct stat st {};
    if (::stat(bwrap_path.c_str(), &st) != 0) return {};
    struct utsname u {};
    ::uname(&u);
    char ns[64] = {};
    ssize_t n = ::readlink("/proc/self/ns/user", ns, sizeof ns - 1);
    if (n < 0) n = 0;
    const std::string status = "\n" + read_small("/proc/self/status");
    std::string key = fmt::format(
        "dsh={} bwrap={} dev={} ino={} size={} mtime={}.{} ctime={}.{} mode={:o} owner={} kernel={} {} uid={} "
        "euid={} userns={}",
        kVersion, bwrap_path, st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
        st.st_ctim.tv_sec, st.st_ctim.tv_nsec, st.st_mode, st.st_uid, u.release, u.version, ::getuid(),
        ::geteuid(), std::string(ns, static_cast<size_t>(n)));
    // The sysctls that gate user namespaces (Debian, upstream, Ubuntu's
    // AppArmor restriction) and the namespace limits bwrap needs.
    for (const char* s : {"/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces",
                          "/proc/sys/user/max_mnt_namespaces", "/proc/sys/user/max_pid_namespaces",
                          "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"})
        key += fmt::format(" {}={}", s + 10, read_small(s));
    // A seccomp filter inherited from our caller (a container) can refuse
    // clone(CLONE_NEW*) without any sysctl saying so.
    for (const char* f : {"NoNewPrivs", "Seccomp", "Seccomp_filters"})
        key += fmt::format(" {}={}", f, status_field(status, f));
    for (char& ch : key)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return key;
}

std::string state_path() {
    const char* rt = std::getenv("XDG_RUNTIME_DIR");
    const char* xc = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    std::string base;
    if (rt && rt[0] == '/' && safe_dir(rt)) base = rt;
    else if (xc && xc[0] == '/') base = xc;
    else if (home && home[0] == '/') base = std::string(home) + "/.cache";
    else return {};
    return base + "/dsh-confine/" + kFile;
}

std::string file_path(bool create_dir) {
    // $XDG_RUNTIME_DIR first: per user, 0700, a tmpfs that is rarely a
    // writable root of anybody's sandbox.
    std::string base;
    const char* rt = std::getenv("XDG_RUNTIME_DIR");
    const char* xc = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (rt && rt[0] == '/' && safe_dir(rt)) {
        base = rt;
    } else if (xc && xc[0] == '/') {
        base = xc;
    } else if (home && home[0] == '/') {
        base = std::string(home) + "/.cache";
        if (create_dir && ::mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) return {};
    } else {
        return {};
    }
    const std::string dir = base + "/dsh-confine";
    if (!ensure_dir(dir, create_dir)) return {};
    return dir + "/" + kFile;
}

bool lookup(const std::string& key) {
    if (key.empty()) return false;
    // A seccomp filter from our caller (a container, a test harness) may
    // refuse what bwrap needs, and its rules cannot be read back: under one,
    // every run probes.
    if (key.find(" Seccomp_filters=0") == std::string::npos) return false;
    const std::string path = file_path(false);
    if (path.empty()) return false;
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st {};
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
              (st.st_mode & 022) == 0 && st.st_size > 0 && st.st_size < 8192;
    std::string text;
    if (ok) {
        text.resize(static_cast<size_t>(st.st_size));
        ok = ::read(fd, text.data(), text.size()) == st.st_size;
    }
    ::close(fd);
    return ok && says_usable(text, key);
}

void store(const std::string& key) {
    if (key.empty() || key.find(" Seccomp_filters=0") == std::string::npos) return;
    const std::string path = file_path(true);
    if (path.empty()) return;
    std::string tmp = path + ".XXXXXX";
    int fd = ::mkstemp(tmp.data());
    if (fd < 0) return;
    const std::string text = render(key);
    bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = ::close(fd) == 0 && ok;
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

void forget() {
    const std::string path = file_path(false);
    if (!path.empty()) ::unlink(path.c_str());
}

}  // namespace dsh::probe_cache
