#include "harden.hpp"

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_build.hpp"  // the variants only (header-only parts)
#include "seccomp_filters.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

namespace dsh::harden {

namespace {
bool failed(Fault& f, Step step, int err = 0, int arg = -1) noexcept {
    f = Fault{step, err, arg};
    return false;
}
}  // namespace

[[gnu::hot]] FdCleanup FdCleanup::make(const std::vector<int>& keep, const std::vector<int>& open_fds,
                          const std::vector<int>& transient) {
    FdCleanup c;
    c.keep = keep;
    for (int fd : transient)
        if (fd > 2) c.transient.push_back(fd);
    c.spare = keep;
    c.spare.insert(c.spare.end(), open_fds.begin(), open_fds.end());
    c.spare.insert(c.spare.end(), c.transient.begin(), c.transient.end());
    c.spare.erase(std::remove_if(c.spare.begin(), c.spare.end(), [](int fd) { return fd <= 2; }), c.spare.end());
    std::sort(c.spare.begin(), c.spare.end());
    c.spare.erase(std::unique(c.spare.begin(), c.spare.end()), c.spare.end());
    return c;
}

[[gnu::hot]] bool close_inherited_fds(const FdCleanup& c, Fault& f) noexcept {
    for (int fd : c.transient) {
        int flags = ::fcntl(fd, F_GETFD);
        if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) return failed(f, Step::RootFd, errno, fd);
    }
    unsigned first = 3;
    for (int fd : c.spare) {
        if (static_cast<unsigned>(fd) > first &&
            ::syscall(SYS_close_range, first, static_cast<unsigned>(fd) - 1, 0U) != 0)
            return failed(f, Step::CloseRange, errno);
        first = static_cast<unsigned>(fd) + 1;
    }
    if (::syscall(SYS_close_range, first, ~0U, 0U) != 0) return failed(f, Step::CloseRange, errno);
    for (int fd : c.keep) {
        int flags = ::fcntl(fd, F_GETFD);
        if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) return failed(f, Step::KeepFd, errno, fd);
    }
    return true;
}

[[gnu::hot]] bool set_no_new_privs(Fault& f) noexcept {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return failed(f, Step::NoNewPrivs, errno);
    return true;
}

// Capability numbers run from 0 to the kernel's last one; past it the
// bounding-set prctls fail with EINVAL (cap_valid() in security/commoncap.c
// and kernel/sys.c). Walking until EINVAL finds the kernel's last capability
// without reading /proc/sys/kernel/cap_last_cap (a file open on every launch),
// and also covers capabilities newer than our headers' CAP_LAST_CAP.
constexpr int kCapLimit = 1024;  // a bound for the walk, far above any kernel's

[[gnu::hot]] bool drop_capabilities(Fault& f) noexcept {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return failed(f, Step::CapGet, errno);
    const bool have_setpcap = (data[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP)) != 0;
    if (have_setpcap) {
        // An exec as uid 0 would otherwise refill the permitted set from the
        // bounding set; SECBIT_NOROOT turns that off, and the bounding set is
        // emptied as well so that neither rule alone is load-bearing.
        const unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
        if (::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0)
            return failed(f, Step::SecureBits, errno);
        // Every drop up to EINVAL succeeded, or we fail here: a successful
        // PR_CAPBSET_DROP is the kernel clearing that bit, so the bounding
        // set is then known to be empty without reading it back.
        int cap = 0;
        for (; cap < kCapLimit; ++cap) {
            if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
            if (errno == EINVAL && cap > 0) break;
            return failed(f, Step::CapBsetDrop, errno, cap);
        }
        if (cap == kCapLimit)
            return failed(f, Step::CapBsetEndless);
    }
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return failed(f, Step::AmbientClear, errno);
    __user_cap_data_struct zero[2] = {};
    if (::syscall(SYS_capset, &hdr, zero) != 0)
        return failed(f, Step::CapSet, errno);
    // Verify: nothing permitted, effective or inheritable is left; and where
    // the bounding set could matter (uid 0) and was not emptied above, it is
    // empty.
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return failed(f, Step::CapGet, errno);
    for (const auto& d : data)
        if (d.effective || d.permitted || d.inheritable)
            return failed(f, Step::CapsRemain);
    if (!have_setpcap && (::getuid() == 0 || ::geteuid() == 0)) {
        for (int cap = 0; cap < kCapLimit; ++cap) {
            const int in_set = ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
            if (in_set < 0) break;  // EINVAL: past the kernel's last capability
            if (in_set == 1)
                return failed(f, Step::RootBoundingSet, 0, cap);
        }
    }
    return true;
}

namespace {
// A mark of this process's own: 32 random bits (never the placeholder, nor
// a command the programs name).
uint32_t new_mark() noexcept {
    uint32_t m = 0;
    if (::syscall(SYS_getrandom, &m, sizeof m, 1U /* GRND_NONBLOCK */) != static_cast<long>(sizeof m)) {
        timespec ts{};
        ::clock_gettime(CLOCK_MONOTONIC, &ts);
        m = static_cast<uint32_t>(ts.tv_nsec) ^ (static_cast<uint32_t>(::getpid()) << 16);
    }
    if (m == seccomp_build::kMarkPlaceholder || m == TIOCSTI || m == TIOCLINUX) m ^= 0x5a5a0000U;
    return m;
}

// Did the filter just loaded take (issue 38)? Its mark, which only it
// answers, must come back EXFULL, and a call every program refuses,
// ioctl(-1, TIOCSTI), EPERM (the kernel's own answer to both is EBADF: no
// side effect either way).
bool seccomp_took(uint32_t mark, Fault& f) noexcept {
    errno = 0;
    int rc = ::ioctl(-1, static_cast<unsigned long>(mark), nullptr);
    if (rc != -1 || errno != seccomp_build::kMarkErrno) return failed(f, Step::SeccompUnverified, rc == 0 ? 0 : errno, 1);
    errno = 0;
    rc = ::ioctl(-1, TIOCSTI, nullptr);
    if (rc != -1 || errno != EPERM) return failed(f, Step::SeccompUnverified, rc == 0 ? 0 : errno, 0);
    return true;
}
}  // namespace

[[gnu::hot]] bool install_seccomp(const SeccompOptions& opts, Fault& f) noexcept {
    // The BPF libseccomp made at build time (seccomp_filters.h); loaded as
    // libseccomp's seccomp_load would: seccomp(2) without flags, and
    // prctl(PR_SET_SECCOMP) where the kernel has no seccomp(2). Every program
    // starts with the user-namespace block; --allow-userns starts after it.
    const auto& p = generated::kPrograms[seccomp_build::index({opts.block_metadata, opts.host_namespaces, opts.net, opts.refuse_unix})];
    const unsigned short skip = opts.allow_userns ? generated::kUsernsBlockLen : 0;
    const size_t len = p.len - skip;
    if (len > seccomp_build::kMaxProgramLen) return failed(f, Step::Seccomp, E2BIG);
    // A copy on this stack (the child may share its parent's memory), with
    // this process's mark in place of the placeholder.
    sock_filter copy[seccomp_build::kMaxProgramLen];
    const uint32_t mark = new_mark();
    for (size_t i = 0; i < len; ++i) {
        copy[i] = p.filter[skip + i];
        if (copy[i].code == (BPF_JMP | BPF_JEQ | BPF_K) && copy[i].k == seccomp_build::kMarkPlaceholder) copy[i].k = mark;
    }
    sock_fprog prog{};
    prog.len = static_cast<unsigned short>(len);
    prog.filter = copy;
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &prog) == 0) return seccomp_took(mark, f);
    if (errno != ENOSYS) return failed(f, Step::Seccomp, errno);
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0) return seccomp_took(mark, f);
    return failed(f, Step::SeccompPrctl, errno);
}

}  // namespace dsh::harden
