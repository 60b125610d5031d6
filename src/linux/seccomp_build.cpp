#include "seccomp_build.hpp"

#include <cerrno>
#include <linux/audit.h>
#include <linux/btrfs.h>
#include <linux/fs.h>
#include <linux/fscrypt.h>
#include <linux/fsverity.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <initializer_list>

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
constexpr int kFileSetattr = 469;  // sets the fsxattr of a path (FS_IOC_FSSETXATTR without an fd)

// ioctls that change an inode or a file system's state through an fd opened
// only for reading (the kernel checks ownership, not the open mode), refused
// in read-only mode. Not in the uapi headers: ext4's own version ioctls.
constexpr unsigned long kExt4SetVersion = _IOW('f', 4, long);
constexpr unsigned long kExt4SetVersion32 = _IOW('f', 4, int);
struct Ext4FsUuid {  // struct fsuuid of fs/ext4: two u32 before the flexible uuid
    __u32 len, flags;
};
constexpr unsigned long kExt4SetFsUuid = _IOW('f', 44, Ext4FsUuid);
constexpr unsigned long kExt4Migrate = _IO('f', 9);        // rewrites the block map as extents (owner only)
constexpr unsigned long kExt4AllocDaBlocks = _IO('f', 12);  // forces delayed allocation (owner only)
constexpr unsigned long kExt4SwapBoot = _IO('f', 17);
constexpr unsigned long kExt4Checkpoint = _IOW('f', 43, __u32);
constexpr unsigned long kExt4Shutdown = _IOR('X', 125, __u32);  // also XFS_IOC_GOINGDOWN
constexpr unsigned long kInodeIoctls[] = {
    FS_IOC_SETFLAGS,        FS_IOC32_SETFLAGS,  // chattr: append-only, nodump, nocow...
    FS_IOC_FSSETXATTR,                          // xflags, project id, extent size
    FS_IOC_SETVERSION,      FS_IOC32_SETVERSION, kExt4SetVersion, kExt4SetVersion32,
    FS_IOC_SET_ENCRYPTION_POLICY, FS_IOC_GET_ENCRYPTION_PWSALT,  // the latter may write the salt
    FS_IOC_ADD_ENCRYPTION_KEY, FS_IOC_REMOVE_ENCRYPTION_KEY, FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS,
    FS_IOC_ENABLE_VERITY,                       // makes a file one owns immutable
    FICLONE, FICLONERANGE, FIDEDUPERANGE,       // dedupe needs only ownership of the target
    FS_IOC_SETFSLABEL,      kExt4SetFsUuid,
    kExt4Migrate, kExt4AllocDaBlocks, kExt4SwapBoot, kExt4Checkpoint, kExt4Shutdown,
    BTRFS_IOC_SUBVOL_SETFLAGS, BTRFS_IOC_SET_RECEIVED_SUBVOL, BTRFS_IOC_DEFAULT_SUBVOL,
    BTRFS_IOC_DEFRAG, BTRFS_IOC_DEFRAG_RANGE};  // defrag needs write permission, not a writable fd

// btrfs subvolume creation and deletion: directories made or removed by an
// ioctl on a directory fd, which Landlock does not see. Every mode.
constexpr unsigned long kSubvolumeIoctls[] = {
    BTRFS_IOC_SNAP_CREATE,    BTRFS_IOC_SUBVOL_CREATE,    BTRFS_IOC_SNAP_DESTROY,
    BTRFS_IOC_SNAP_CREATE_V2, BTRFS_IOC_SUBVOL_CREATE_V2, BTRFS_IOC_SNAP_DESTROY_V2};

// Kernel objects shared through the IPC namespace (host_namespaces only).
// On i386 libseccomp also covers the ipc(2) multiplexer for each SysV call;
// "ipc" is named as well so that no multiplexed call is left out.
constexpr const char* kIpcCalls[] = {
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl", "semtimedop_time64", "ipc",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "mq_timedsend_time64", "mq_timedreceive_time64"};

// The key management calls: the user and session keyrings are the host's
// under both runners (bwrap's namespaces do not separate them for root).
constexpr const char* kKeyCalls[] = {"add_key", "request_key", "keyctl"};

// io_uring performs open, xattr, socket and other operations from a kernel
// worker, where none of the other rules applies.
constexpr const char* kIoUringCalls[] = {"io_uring_setup", "io_uring_enter", "io_uring_register"};

// Calls whose first argument names a process (0 = the caller); allowed only
// for 0 under the host's PID namespace. A thread id of the caller's own is
// refused too: seccomp cannot tell it from a host pid.
constexpr const char* kPidFirstCalls[] = {"sched_setaffinity", "sched_setscheduler", "sched_setparam",
                                          "sched_setattr", "migrate_pages", "move_pages"};
constexpr unsigned kIoprioWhoProcess = 1;
constexpr uint64_t kIpprotoMptcp = 262;  // IPPROTO_MPTCP (not in every libc's headers)
constexpr uint64_t kIpprotoSctp = 132;  // IOPRIO_WHO_PROCESS (linux/ioprio.h, not in every libc)

int add_named(scmp_filter_ctx ctx, uint32_t action, const char* name, unsigned count = 0,
              const scmp_arg_cmp* cmp = nullptr) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return 0;  // not on this architecture
    return seccomp_rule_add_array(ctx, action, nr, count, cmp);
}

// The network axis (see Variant::net). Families, types and protocols are
// compared in their low 32 bits, as the kernel reads an int: a value with
// junk in the upper half is matched as the kernel will see it.
int net_rules(scmp_filter_ctx ctx, const Variant& v) {
    const uint32_t deny = SCMP_ACT_ERRNO(EACCES);
    constexpr uint64_t kLow = 0xffffffffULL;
    auto rule = [&](int nr, std::initializer_list<scmp_arg_cmp> cmp) {
        return seccomp_rule_add_array(ctx, deny, nr, static_cast<unsigned>(cmp.size()), cmp.begin());
    };
    if (v.net == kNetOff) {
        if (v.refuse_unix) {
            if (int rc = rule(SCMP_SYS(socket), {}); rc != 0) return rc;
        } else {
            // Full 64 bits: AF_UNIX with junk above is refused too (closed, not open).
            if (int rc = rule(SCMP_SYS(socket), {SCMP_A0(SCMP_CMP_NE, AF_UNIX)}); rc != 0) return rc;
        }
    } else if (v.net == kNetLoopback) {
        // Every family number the kernel accepts (it refuses >= AF_MAX, 46
        // today; 64 leaves room) except the ones a private loopback needs.
        for (int fam = 0; fam < 64; ++fam) {
            if (fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK || (fam == AF_UNIX && !v.refuse_unix)) continue;
            if (int rc = rule(SCMP_SYS(socket), {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow, static_cast<uint64_t>(fam))}); rc != 0)
                return rc;
        }
        for (int fam : {AF_INET, AF_INET6}) {
            const scmp_arg_cmp f = SCMP_A0(SCMP_CMP_MASKED_EQ, kLow, static_cast<uint64_t>(fam));
            // The type's low 4 bits (SOCK_TYPE_MASK): SOCK_RAW, SOCK_PACKET
            // (AF_INET + SOCK_PACKET becomes AF_PACKET), SOCK_SEQPACKET (SCTP)...
            for (int type = 0; type < 16; ++type) {
                if (type == SOCK_STREAM || type == SOCK_DGRAM) continue;
                if (int rc = rule(SCMP_SYS(socket), {f, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfULL, static_cast<uint64_t>(type))});
                    rc != 0)
                    return rc;
            }
            for (uint64_t proto : {kIpprotoMptcp, kIpprotoSctp})
                if (int rc = rule(SCMP_SYS(socket), {f, SCMP_A2(SCMP_CMP_MASKED_EQ, kLow, proto)}); rc != 0) return rc;
        }
    } else if (v.refuse_unix) {  // not made by any plan; kept consistent
        if (int rc = rule(SCMP_SYS(socket), {SCMP_A0(SCMP_CMP_MASKED_EQ, kLow, AF_UNIX)}); rc != 0) return rc;
    }
    if (v.net != kNetHost || v.refuse_unix) {
        if (int rc = rule(SCMP_SYS(socketpair), {SCMP_A0(SCMP_CMP_NE, AF_UNIX)}); rc != 0) return rc;
    }
    if (v.refuse_unix) {
        if (int rc = rule(SCMP_SYS(socketpair), {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfULL, SOCK_DGRAM)}); rc != 0) return rc;
    }
    return 0;
}

int rules(scmp_filter_ctx ctx, const Variant& v, std::string& step) {
#if defined(__x86_64__)
    if (v.block_metadata || v.net != kNetHost || v.refuse_unix) {
        step = "seccomp_attr_set";
        if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS)); rc != 0) return rc;
    } else {
        // Filter the compat ABIs too: a 64-bit process can enter them, and
        // every rule must hold there as well.
        step = "seccomp_arch_add";
        for (uint32_t arch : {SCMP_ARCH_X86, SCMP_ARCH_X32})
            if (int rc = seccomp_arch_add(ctx, arch); rc != 0 && rc != -EEXIST) return rc;
    }
#endif
    const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
    auto ioctl_rule = [&](unsigned long cmd) {
        const scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, cmd);
        return seccomp_rule_add_array(ctx, deny, SCMP_SYS(ioctl), 1, &c);
    };
    step = "seccomp ioctl rule";
    for (unsigned long cmd : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)})
        if (int rc = ioctl_rule(cmd); rc != 0) return rc;
    for (unsigned long cmd : kSubvolumeIoctls)
        if (int rc = ioctl_rule(cmd); rc != 0) return rc;
    step = "seccomp io_uring rule";
    for (const char* name : kIoUringCalls)
        if (int rc = add_named(ctx, SCMP_ACT_ERRNO(ENOSYS), name); rc != 0) return rc;
    step = "seccomp keyring rule";
    for (const char* name : kKeyCalls)
        if (int rc = add_named(ctx, deny, name); rc != 0) return rc;
    if (v.block_metadata) {
        step = "seccomp metadata rule";
        for (const char* name : kMetadataCalls)
            if (int rc = add_named(ctx, deny, name); rc != 0) return rc;
        for (int nr : {kFchmodat2, kSetxattrat, kRemovexattrat, kFileSetattr})
            if (int rc = seccomp_rule_add(ctx, deny, nr, 0); rc != 0) return rc;
        step = "seccomp inode ioctl rule";
        for (unsigned long cmd : kInodeIoctls)
            if (int rc = ioctl_rule(cmd); rc != 0) return rc;
    }
    if (v.host_namespaces) {
        step = "seccomp ipc rule";
        for (const char* name : kIpcCalls)
            if (int rc = add_named(ctx, deny, name); rc != 0) return rc;
        step = "seccomp process rule";
        for (const char* name : kPidFirstCalls) {
            const scmp_arg_cmp other = SCMP_A0(SCMP_CMP_NE, 0);
            if (int rc = add_named(ctx, deny, name, 1, &other); rc != 0) return rc;
        }
        // prlimit64(pid, resource, new, old): reading another process's
        // limits is harmless; setting them is refused. glibc's setrlimit is
        // prlimit64(0, ...).
        const scmp_arg_cmp prlimit_set[] = {SCMP_A0(SCMP_CMP_NE, 0), SCMP_A2(SCMP_CMP_NE, 0)};
        if (int rc = add_named(ctx, deny, "prlimit64", 2, prlimit_set); rc != 0) return rc;
        // setpriority(which, who, prio) and ioprio_set(which, who, prio):
        // only "this process"; PRIO_PGRP and PRIO_USER reach host processes
        // even with who 0 (the caller's group, every process of its uid).
        for (auto [name, self] : {std::pair<const char*, unsigned>{"setpriority", PRIO_PROCESS},
                                  std::pair<const char*, unsigned>{"ioprio_set", kIoprioWhoProcess}}) {
            const scmp_arg_cmp which = SCMP_A0(SCMP_CMP_NE, self);
            const scmp_arg_cmp who = SCMP_A1(SCMP_CMP_NE, 0);
            if (int rc = add_named(ctx, deny, name, 1, &which); rc != 0) return rc;
            if (int rc = add_named(ctx, deny, name, 1, &who); rc != 0) return rc;
        }
    }
    step = "seccomp network rule";
    if (int rc = net_rules(ctx, v); rc != 0) return rc;
    return 0;
}

constexpr sock_filter stmt(uint16_t code, uint32_t k) { return {code, 0, 0, k}; }
constexpr sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return {code, jt, jf, k}; }

}  // namespace

int unknown_syscall_guard(std::vector<sock_filter>& out) {
    constexpr uint32_t kArch = offsetof(seccomp_data, arch);
    constexpr uint32_t kNr = offsetof(seccomp_data, nr);
    constexpr uint32_t kEnosys = SECCOMP_RET_ERRNO | ENOSYS;
    constexpr uint16_t kLd = BPF_LD | BPF_W | BPF_ABS;
    constexpr uint16_t kJeq = BPF_JMP | BPF_JEQ | BPF_K, kJgt = BPF_JMP | BPF_JGT | BPF_K,
                       kJge = BPF_JMP | BPF_JGE | BPF_K;
    // Jump offsets count from the next instruction; E = the ENOSYS return,
    // B = the first instruction after the guard (libseccomp's program, which
    // decides for every other architecture).
#if defined(__x86_64__)
    out = {
        stmt(kLd, kArch),                                       // 0
        jump(kJeq, AUDIT_ARCH_X86_64, 0, 6),                    // 1: else 8
        stmt(kLd, kNr),                                         // 2
        jump(kJge, kX32Bit, 1, 0),                              // 3: x32 at 5
        jump(kJgt, kMaxKnownSyscall, 6, 7),                     // 4: E / B
        jump(kJgt, kX32Bit | kX32LastCompat, 5, 0),             // 5: E
        jump(kJge, kX32Bit | kX32FirstCompat, 5, 0),            // 6: B
        jump(kJgt, kX32Bit | kMaxKnownSyscall, 3, 4),           // 7: E / B
        jump(kJeq, AUDIT_ARCH_I386, 0, 3),                      // 8: else B
        stmt(kLd, kNr),                                         // 9
        jump(kJgt, kMaxKnownSyscall, 0, 1),                     // 10: E / B
        stmt(BPF_RET | BPF_K, kEnosys),                         // 11: E
    };
    return 0;
#else
#if defined(__aarch64__)
    constexpr uint32_t native = AUDIT_ARCH_AARCH64;
#elif defined(__i386__)
    constexpr uint32_t native = AUDIT_ARCH_I386;
#elif defined(__riscv) && __riscv_xlen == 64
    constexpr uint32_t native = AUDIT_ARCH_RISCV64;
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    constexpr uint32_t native = AUDIT_ARCH_PPC64LE;
#elif defined(__s390x__)
    constexpr uint32_t native = AUDIT_ARCH_S390X;
#else
    // Another numbering (mips, alpha, 32-bit arm's private calls): review
    // its table before building there; seccomp-gen fails until then.
    (void)kArch, (void)kNr, (void)kEnosys;
    out.clear();
    return -EOPNOTSUPP;
#endif
    out = {
        stmt(kLd, kArch),
        jump(kJeq, native, 0, 3),                // else B
        stmt(kLd, kNr),
        jump(kJgt, kMaxKnownSyscall, 0, 1),      // E / B
        stmt(BPF_RET | BPF_K, kEnosys),
    };
    (void)kJge;
    return 0;
#endif
}

int program(const Variant& v, std::vector<sock_filter>& out, std::string& step) {
    step = "unknown-syscall guard";
    if (int rc = unknown_syscall_guard(out); rc != 0) return rc;
    const size_t guard = out.size();
    Ctx c;
    step = "seccomp_init";
    c.ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!c.ctx) return -ENOMEM;
    if (int rc = rules(c.ctx, v, step); rc != 0) return rc;
    // libseccomp 2.5 exports to an fd only.
    step = "seccomp_export_bpf";
    const int fd = ::memfd_create("dsh-confine-bpf", MFD_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = seccomp_export_bpf(c.ctx, fd);
    const off_t size = rc == 0 ? ::lseek(fd, 0, SEEK_END) : -1;
    if (rc == 0 && (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)) rc = -EINVAL;
    if (rc == 0) {
        out.resize(guard + static_cast<size_t>(size) / sizeof(sock_filter), sock_filter{});
        if (::pread(fd, out.data() + guard, static_cast<size_t>(size), 0) != size) rc = -EIO;
    }
    ::close(fd);
    // Classic BPF jumps are relative, so libseccomp's program runs unchanged
    // after the guard; the kernel takes at most BPF_MAXINSNS instructions.
    if (rc == 0 && out.size() > BPF_MAXINSNS) rc = -E2BIG;
    return rc;
}

}  // namespace dsh::seccomp_build
