#include "harden.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

namespace dsh::harden {

Outcome close_inherited_fds(const std::vector<int>& keep, int report_fd, int status_fd) {
    std::vector<int> spare(keep);
    if (report_fd > 2) spare.push_back(report_fd);
    if (status_fd > 2) spare.push_back(status_fd);
    std::sort(spare.begin(), spare.end());
    unsigned first = 3;
    for (int fd : spare) {
        if (fd < 3) continue;
        if (static_cast<unsigned>(fd) > first &&
            ::syscall(SYS_close_range, first, static_cast<unsigned>(fd) - 1, 0U) != 0)
            return failf(Err::Internal, "close_range: {}", std::strerror(errno));
        first = static_cast<unsigned>(fd) + 1;
    }
    if (::syscall(SYS_close_range, first, ~0U, 0U) != 0)
        return failf(Err::Internal, "close_range: {}", std::strerror(errno));
    for (int fd : keep) {
        int flags = ::fcntl(fd, F_GETFD);
        if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0)
            return failf(Err::Usage, "--keep-fd {}: {}", fd, std::strerror(errno));
    }
    return Outcome::success();
}

Outcome set_no_new_privs() {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return failf(Err::SandboxUnavailable, "prctl(PR_SET_NO_NEW_PRIVS): {}", std::strerror(errno));
    return Outcome::success();
}

// Capability numbers run from 0 to the kernel's last one; past it the
// bounding-set prctls fail with EINVAL (cap_valid() in security/commoncap.c
// and kernel/sys.c). Walking until EINVAL finds the kernel's last capability
// without reading /proc/sys/kernel/cap_last_cap (a file open on every launch),
// and also covers capabilities newer than our headers' CAP_LAST_CAP.
constexpr int kCapLimit = 1024;  // a bound for the walk, far above any kernel's

Outcome drop_capabilities() {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return failf(Err::Internal, "capget: {}", std::strerror(errno));
    const bool have_setpcap = (data[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP)) != 0;
    if (have_setpcap) {
        // An exec as uid 0 would otherwise refill the permitted set from the
        // bounding set; SECBIT_NOROOT turns that off, and the bounding set is
        // emptied as well so that neither rule alone is load-bearing.
        const unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
        if (::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0)
            return failf(Err::SandboxUnavailable, "prctl(PR_SET_SECUREBITS): {}", std::strerror(errno));
        // Every drop up to EINVAL succeeded, or we fail here: a successful
        // PR_CAPBSET_DROP is the kernel clearing that bit, so the bounding
        // set is then known to be empty without reading it back.
        int cap = 0;
        for (; cap < kCapLimit; ++cap) {
            if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
            if (errno == EINVAL && cap > 0) break;
            return failf(Err::SandboxUnavailable, "prctl(PR_CAPBSET_DROP, {}): {}", cap, std::strerror(errno));
        }
        if (cap == kCapLimit)
            return fail(Err::SandboxUnavailable, "prctl(PR_CAPBSET_DROP): no end to the capabilities");
    }
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return failf(Err::SandboxUnavailable, "prctl(PR_CAP_AMBIENT_CLEAR_ALL): {}", std::strerror(errno));
    __user_cap_data_struct zero[2] = {};
    if (::syscall(SYS_capset, &hdr, zero) != 0)
        return failf(Err::SandboxUnavailable, "capset: {}", std::strerror(errno));
    // Verify: nothing permitted, effective or inheritable is left; and where
    // the bounding set could matter (uid 0) and was not emptied above, it is
    // empty.
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return failf(Err::Internal, "capget: {}", std::strerror(errno));
    for (const auto& d : data)
        if (d.effective || d.permitted || d.inheritable)
            return fail(Err::SandboxUnavailable, "capabilities remain after dropping them");
    if (!have_setpcap && (::getuid() == 0 || ::geteuid() == 0)) {
        for (int cap = 0; cap < kCapLimit; ++cap) {
            const int in_set = ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
            if (in_set < 0) break;  // EINVAL: past the kernel's last capability
            if (in_set == 1)
                return failf(Err::SandboxUnavailable,
                             "running as uid 0 without CAP_SETPCAP: capability {} stays in the bounding set",
                             cap);
        }
    }
    return Outcome::success();
}

namespace {

struct Ctx {
    scmp_filter_ctx ctx = nullptr;
    ~Ctx() {
        if (ctx) seccomp_release(ctx);
    }
};

// Syscalls that change metadata. Newer ones are given by number: their numbers
// are shared by every architecture (>= 424), and older libseccomp may not know
// their names.
constexpr const char* kMetadataCalls[] = {
    "chmod",    "fchmod",    "fchmodat",    "chown",     "fchown",       "lchown",
    "fchownat", "utime",     "utimes",      "futimesat", "utimensat",    "setxattr",
    "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"};
constexpr int kFchmodat2 = 452;
constexpr int kSetxattrat = 463;
constexpr int kRemovexattrat = 466;

}  // namespace

Outcome install_seccomp(const SeccompOptions& opts) {
    Ctx c;
    c.ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!c.ctx) return fail(Err::SandboxUnavailable, "seccomp_init failed");
#if defined(__x86_64__)
    if (opts.block_metadata) {
        // libseccomp cannot name the newest metadata calls (setxattrat,
        // removexattrat) for the i386 and x32 ABIs, so a filter that lists
        // them cannot be complete there: those ABIs are refused (ENOSYS)
        // instead of being half filtered.
        int rc = seccomp_attr_set(c.ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
        if (rc != 0) return failf(Err::SandboxUnavailable, "seccomp_attr_set: {}", std::strerror(-rc));
    } else {
        // Filter the compat ABIs too: a 64-bit process can enter them, and
        // the ioctl rule must hold there as well.
        for (uint32_t arch : {SCMP_ARCH_X86, SCMP_ARCH_X32}) {
            int rc = seccomp_arch_add(c.ctx, arch);
            if (rc != 0 && rc != -EEXIST)
                return failf(Err::SandboxUnavailable, "seccomp_arch_add: {}", std::strerror(-rc));
        }
    }
#endif
    const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
    for (unsigned long cmd : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
        int rc = seccomp_rule_add(c.ctx, deny, SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, cmd));
        if (rc != 0) return failf(Err::SandboxUnavailable, "seccomp ioctl rule: {}", std::strerror(-rc));
    }
    if (opts.block_metadata) {
        for (const char* name : kMetadataCalls) {
            int nr = seccomp_syscall_resolve_name(name);
            if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
            int rc = seccomp_rule_add(c.ctx, deny, nr, 0);
            if (rc != 0) return failf(Err::SandboxUnavailable, "seccomp rule {}: {}", name, std::strerror(-rc));
        }
        for (int nr : {kFchmodat2, kSetxattrat, kRemovexattrat}) {
            int rc = seccomp_rule_add(c.ctx, deny, nr, 0);
            if (rc != 0)
                return failf(Err::SandboxUnavailable, "seccomp rule {}: {}", nr, std::strerror(-rc));
        }
    }
    int rc = seccomp_load(c.ctx);
    if (rc != 0) return failf(Err::SandboxUnavailable, "seccomp_load: {}", std::strerror(-rc));
    return Outcome::success();
}

}  // namespace dsh::harden
