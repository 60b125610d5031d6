// The one owning file-descriptor type: closes what it holds when it goes.
#pragma once

#if !defined(_WIN32)
#include <fcntl.h>
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
