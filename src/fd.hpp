// The one owning file-descriptor type: closes what it holds when it goes.
#pragma once

#if !defined(_WIN32)
#include <fcntl.h>
#endif
#if defined(__linux__)
#include <dirent.h>
#endif
#include <unistd.h>

#include <string>
#include <utility>

namespace dsh {

class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) reset(o.release());
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

#if defined(__linux__)
// Calls f(name, d_type) for each entry of the open directory `dir`, listed
// with getdents64 into a buffer on the stack (opendir's 32 KiB buffer cost a
// brk up and one down per listing, besides its fstat and fcntls). False when
// the listing failed part way.
template <class F>
bool each_entry(int dir, F&& f) {
    alignas(8) char buf[8192];
    ssize_t n = 0;
    while ((n = ::getdents64(dir, buf, sizeof buf)) > 0)
        for (ssize_t at = 0; at < n;) {
            const auto* e = reinterpret_cast<const dirent64*>(buf + at);
            at += e->d_reclen;
            f(e->d_name, e->d_type);
        }
    return n == 0;
}
#endif

#if !defined(_WIN32)
// Reads a small file (a /proc or /sys entry) whole, up to about 1 MiB.
inline bool read_small(const std::string& path, std::string& out) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    out.clear();
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && out.size() < (1 << 20)) out.append(buf, static_cast<size_t>(n));
    return n >= 0;
}
#endif

}  // namespace dsh
