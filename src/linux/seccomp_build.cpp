#include "seccomp_build.hpp"

#include <cerrno>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace dsh::seccomp_build {

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

int rules(scmp_filter_ctx ctx, bool block_metadata, std::string& step) {
#if defined(__x86_64__)
    if (block_metadata) {
        step = "seccomp_attr_set";
        if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS)); rc != 0) return rc;
    } else {
        // Filter the compat ABIs too: a 64-bit process can enter them, and
        // the ioctl rule must hold there as well.
        step = "seccomp_arch_add";
        for (uint32_t arch : {SCMP_ARCH_X86, SCMP_ARCH_X32})
            if (int rc = seccomp_arch_add(ctx, arch); rc != 0 && rc != -EEXIST) return rc;
    }
#endif
    const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
    step = "seccomp ioctl rule";
    for (unsigned long cmd : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)})
        if (int rc = seccomp_rule_add(ctx, deny, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, cmd));
            rc != 0)
            return rc;
    if (block_metadata) {
        step = "seccomp metadata rule";
        for (const char* name : kMetadataCalls) {
            const int nr = seccomp_syscall_resolve_name(name);
            if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
            if (int rc = seccomp_rule_add(ctx, deny, nr, 0); rc != 0) return rc;
        }
        for (int nr : {kFchmodat2, kSetxattrat, kRemovexattrat})
            if (int rc = seccomp_rule_add(ctx, deny, nr, 0); rc != 0) return rc;
    }
    return 0;
}

}  // namespace

int program(bool block_metadata, std::vector<sock_filter>& out, std::string& step) {
    Ctx c;
    step = "seccomp_init";
    c.ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!c.ctx) return -ENOMEM;
    if (int rc = rules(c.ctx, block_metadata, step); rc != 0) return rc;
    // libseccomp 2.5 exports to an fd only.
    step = "seccomp_export_bpf";
    const int fd = ::memfd_create("dsh-confine-bpf", MFD_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = seccomp_export_bpf(c.ctx, fd);
    const off_t size = rc == 0 ? ::lseek(fd, 0, SEEK_END) : -1;
    if (rc == 0 && (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)) rc = -EINVAL;
    if (rc == 0) {
        out.assign(static_cast<size_t>(size) / sizeof(sock_filter), sock_filter{});
        if (::pread(fd, out.data(), static_cast<size_t>(size), 0) != size) rc = -EIO;
    }
    ::close(fd);
    return rc;
}

}  // namespace dsh::seccomp_build
