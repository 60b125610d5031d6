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
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

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
constexpr unsigned kIoprioWhoProcess = 1;  // IOPRIO_WHO_PROCESS (linux/ioprio.h, not in every libc)
constexpr unsigned kIoprioWhoPgrp = 2;     // IOPRIO_WHO_PGRP

int add_named(scmp_filter_ctx ctx, uint32_t action, const char* name, unsigned count = 0,
              const scmp_arg_cmp* cmp = nullptr) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return 0;  // not on this architecture
    return seccomp_rule_add_array(ctx, action, nr, count, cmp);
}

// The network axis (see Variant::net): the sockets each mode lets the command
// make, by socket() and by socketpair(). Whatever is not a row here is refused.
// A row: a family, a type (the low 4 bits the kernel reads as the type,
// SOCK_TYPE_MASK; SOCK_NONBLOCK and SOCK_CLOEXEC may be added to it) and the
// protocols allowed with that pair, a bit per protocol number.
enum class When : uint8_t {
    Never,
    Always,
    Governed,  // only where Landlock governs pathname unix sockets by path (!Variant::refuse_unix)
};
constexpr uint32_t bit(unsigned n) { return 1U << n; }
struct SocketKind {
    int family, type;
    uint32_t protocols;
    When off, loopback, pair;  // socket() under kNetOff, under kNetLoopback; socketpair() under both
};
constexpr SocketKind kSocketKinds[] = {
    // AF_UNIX: socket() can connect() or sendto() any pathname socket of the
    // host, so only where Landlock decides by path. A socketpair is connected
    // to itself and has no address to reach, except a datagram pair, which
    // can sendto() any named socket. SOCK_RAW is not a row: unix_create makes
    // it a datagram socket.
    // family    type            protocols                                    off             loopback        socketpair
    {AF_UNIX,    SOCK_STREAM,    bit(0),                                  When::Governed,   When::Governed,   When::Always},
    {AF_UNIX,    SOCK_SEQPACKET, bit(0),                                  When::Governed,   When::Governed,   When::Always},
    {AF_UNIX,    SOCK_DGRAM,     bit(0),                                  When::Governed,   When::Governed,   When::Governed},
    // loopback (and allow=, which is loopback plus the proxy): TCP and UDP in
    // the command's own network namespace. No raw or packet sockets, no
    // ICMP, SCTP, MPTCP or UDP-Lite.
    {AF_INET,    SOCK_STREAM,    bit(0) | bit(IPPROTO_TCP),               When::Never,      When::Always,     When::Never},
    {AF_INET,    SOCK_DGRAM,     bit(0) | bit(IPPROTO_UDP),               When::Never,      When::Always,     When::Never},
    {AF_INET6,   SOCK_STREAM,    bit(0) | bit(IPPROTO_TCP),               When::Never,      When::Always,     When::Never},
    {AF_INET6,   SOCK_DGRAM,     bit(0) | bit(IPPROTO_UDP),               When::Never,      When::Always,     When::Never},
    // The namespace's routes, links and addresses (getifaddrs, getaddrinfo's
    // AI_ADDRCONFIG, ip) and its sockets (ss); netlink reads SOCK_RAW and
    // SOCK_DGRAM alike. No other netlink protocol (uevents, audit, generic...).
    {AF_NETLINK, SOCK_RAW,       bit(NETLINK_ROUTE) | bit(NETLINK_SOCK_DIAG), When::Never,  When::Always,     When::Never},
    {AF_NETLINK, SOCK_DGRAM,     bit(NETLINK_ROUTE) | bit(NETLINK_SOCK_DIAG), When::Never,  When::Always,     When::Never},
};
constexpr uint32_t kTypeFlags = SOCK_NONBLOCK | SOCK_CLOEXEC;
static_assert((kTypeFlags & 0xfU) == 0, "SOCK_NONBLOCK and SOCK_CLOEXEC lie above SOCK_TYPE_MASK");

// The rows socket() (pair false) or socketpair() may make under a network
// variant (socket_block does not ask for socket() under kNetHost).
std::vector<SocketKind> allowed_kinds(const Variant& v, bool pair) {
    std::vector<SocketKind> out;
    for (const auto& k : kSocketKinds) {
        const When w = pair ? k.pair : v.net == kNetOff ? k.off : k.loopback;
        if (w == When::Always || (w == When::Governed && !v.refuse_unix)) out.push_back(k);
    }
    return out;
}

// libseccomp's part of the network axis: the multiplexer that carries socket
// calls in memory, where no filter can read the family, on the architectures
// that have one natively (s390x, ppc64le; on x86_64 it is i386's, refused
// with the whole ABI).
int net_rules(scmp_filter_ctx ctx, const Variant& v) {
    if (v.net == kNetHost && !v.refuse_unix) return 0;
    return add_named(ctx, SCMP_ACT_ERRNO(ENOSYS), "socketcall");
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
    // Read-only's file-metadata refusals say what a read-only mount says
    // (EROFS): the errno names a refused file operation, which is what
    // --supervise counts as a file denial ("read-only file system"); an EPERM
    // (a signal, a keyring, another process) is never one (issue 38).
    const uint32_t read_only = SCMP_ACT_ERRNO(EROFS);
    auto ioctl_rule = [&](unsigned long cmd, uint32_t action) {
        const scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, cmd);
        return seccomp_rule_add_array(ctx, action, SCMP_SYS(ioctl), 1, &c);
    };
    step = "seccomp ioctl rule";
    for (unsigned long cmd : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)})
        if (int rc = ioctl_rule(cmd, deny); rc != 0) return rc;
    // setpriority(PRIO_PGRP, 0, ...) and ioprio_set(IOPRIO_WHO_PGRP, 0, ...)
    // mean "my process group", which for a command left in the caller's
    // group (bwrap without a pty) is the caller's, on the host: the PID
    // namespace does not cover a group made outside it (an attack pass of
    // session 25 reniced the caller's shell). A group named by its number is
    // looked up in the command's PID namespace, so that stays allowed;
    // PRIO_USER reaches only processes the namespace shows. (host_namespaces
    // below refuses every target but the process itself.)
    // The console's own ioctls (linux/kd.h 0x4Bxx: keyboard mode and map,
    // fonts, console mode; linux/vt.h 0x56xx: switching and locking
    // virtual terminals), in their old-style numbers (no size or direction
    // bits, so V4L2's 'V' commands are not among them). The kernel lets the
    // process whose controlling terminal a console is use them, and under
    // Landlock a command can take a console no session holds as its
    // controlling terminal (setsid, then an open for reading) and reach it
    // through /dev/tty (an attack pass of session 25): a keymap outlives the
    // run and rewrites what the console's next user types. No command run
    // in a sandbox has a use for them (loadkeys, setfont and chvt are the
    // administrator's).
    step = "seccomp console ioctl rule";
    for (uint32_t range : {0x4b00U, 0x5600U}) {
        const scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffff00UL, range);
        if (int rc = seccomp_rule_add_array(ctx, deny, SCMP_SYS(ioctl), 1, &c); rc != 0) return rc;
    }
    step = "seccomp process group rule";
    for (auto [name, pgrp] : {std::pair<const char*, unsigned>{"setpriority", PRIO_PGRP},
                              std::pair<const char*, unsigned>{"ioprio_set", kIoprioWhoPgrp}}) {
        // Both are ints: compared in the 32 bits the kernel reads (a second
        // attack pass set the high bits and got past a 64-bit compare).
        const scmp_arg_cmp own_group[] = {SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, pgrp),
                                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, 0)};
        if (int rc = add_named(ctx, deny, name, 2, own_group); rc != 0) return rc;
    }
    step = "seccomp mark rule";
    if (int rc = ioctl_rule(kMarkPlaceholder, SCMP_ACT_ERRNO(kMarkErrno)); rc != 0) return rc;
    for (unsigned long cmd : kSubvolumeIoctls)
        if (int rc = ioctl_rule(cmd, deny); rc != 0) return rc;
    step = "seccomp io_uring rule";
    for (const char* name : kIoUringCalls)
        if (int rc = add_named(ctx, SCMP_ACT_ERRNO(ENOSYS), name); rc != 0) return rc;
    step = "seccomp keyring rule";
    for (const char* name : kKeyCalls)
        if (int rc = add_named(ctx, deny, name); rc != 0) return rc;
    if (v.block_metadata) {
        step = "seccomp metadata rule";
        for (const char* name : kMetadataCalls)
            if (int rc = add_named(ctx, read_only, name); rc != 0) return rc;
        for (int nr : {kFchmodat2, kSetxattrat, kRemovexattrat, kFileSetattr})
            if (int rc = seccomp_rule_add(ctx, read_only, nr, 0); rc != 0) return rc;
        step = "seccomp inode ioctl rule";
        for (unsigned long cmd : kInodeIoctls)
            if (int rc = ioctl_rule(cmd, read_only); rc != 0) return rc;
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

// A few classic BPF instructions whose jumps name labels, resolved at the end
// (classic BPF jumps are relative and forward only).
class Code {
  public:
    static constexpr int kNext = -1;
    int label() {
        at_.push_back(SIZE_MAX);
        return static_cast<int>(at_.size()) - 1;
    }
    void here(int l) { at_[static_cast<size_t>(l)] = insn_.size(); }
    void stmt(uint16_t code, uint32_t k) { insn_.push_back({code, 0, 0, k}); }
    void jump(uint16_t code, uint32_t k, int jt, int jf = kNext) {
        fixes_.push_back({insn_.size(), jt, jf});
        insn_.push_back({code, 0, 0, k});
    }
    // Appends the code to `out`; fails where a jump goes back or too far.
    int emit(std::vector<sock_filter>& out) {
        for (const Fix& f : fixes_) {
            for (auto [l, field] : {std::pair{f.jt, &sock_filter::jt}, std::pair{f.jf, &sock_filter::jf}}) {
                if (l == kNext) continue;
                const size_t to = at_[static_cast<size_t>(l)];
                if (to == SIZE_MAX || to <= f.at || to - f.at - 1 > 255) return -EINVAL;
                insn_[f.at].*field = static_cast<uint8_t>(to - f.at - 1);
            }
        }
        out.insert(out.end(), insn_.begin(), insn_.end());
        return 0;
    }

  private:
    struct Fix {
        size_t at;
        int jt, jf;
    };
    std::vector<sock_filter> insn_;
    std::vector<Fix> fixes_;
    std::vector<size_t> at_;
};

#if defined(__x86_64__)
constexpr uint32_t kNativeArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kNativeArch = AUDIT_ARCH_AARCH64;
#elif defined(__i386__)
constexpr uint32_t kNativeArch = AUDIT_ARCH_I386;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr uint32_t kNativeArch = AUDIT_ARCH_RISCV64;
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr uint32_t kNativeArch = AUDIT_ARCH_PPC64LE;
#elif defined(__s390x__)
constexpr uint32_t kNativeArch = AUDIT_ARCH_S390X;
#else
constexpr uint32_t kNativeArch = 0;  // not reviewed: unknown_syscall_guard fails first
#endif

// The 32 bits of argument i the kernel reads as an int.
constexpr uint32_t low_half(unsigned i) {
    return static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * i) +
           (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0U : 4U);
}

// The network axis's allow-list, as a block between the guard and
// libseccomp's program. A socket() or socketpair() of the native ABI whose
// family, type and protocol (the low 32 bits of each, as the kernel reads
// them) make a row of allowed_kinds() goes on to libseccomp's program, which
// has no rule for either call; every other one is answered kSocketRefused. The
// compat ABIs never reach this block's calls: libseccomp's program refuses
// them (ENOSYS) in every variant with a network filter.
//
// Written by hand, not as libseccomp rules: libseccomp 2.5 takes one
// comparison per argument in a rule and no allow rule in a default-allow
// filter, so the complement would have to be spelled out in the 32 bits of
// each argument (about 700 instructions more per variant, 75 KB of the
// static binary; see DECISIONS, "The socket allow-list").
// A refused socket says ENETUNREACH ("Network is unreachable"): no socket()
// or socketpair() of the kernel's own ever answers it, so it is this filter's
// and nothing else's, and its text is what --supervise reads as a network
// refusal (the record's network.denialSignatures), never as a file denial
// (EACCES, "permission denied", is Landlock's file dialect; issue 38).
constexpr uint32_t kSocketRefused = ENETUNREACH;

int socket_block(const Variant& v, std::vector<sock_filter>& out) {
    if (v.net == kNetHost && !v.refuse_unix) return 0;
    constexpr uint16_t kLd = BPF_LD | BPF_W | BPF_ABS, kJeq = BPF_JMP | BPF_JEQ | BPF_K;
    Code c;
    const int allow = c.label(), deny = c.label(), socket = c.label(), pair = c.label();
    c.stmt(kLd, offsetof(seccomp_data, arch));
    c.jump(kJeq, kNativeArch, Code::kNext, allow);
    c.stmt(kLd, offsetof(seccomp_data, nr));
    c.jump(kJeq, static_cast<uint32_t>(__NR_socket), socket);
    c.jump(kJeq, static_cast<uint32_t>(__NR_socketpair), pair, allow);
    for (const bool is_pair : {false, true}) {
        c.here(is_pair ? pair : socket);
        if (!is_pair && v.net == kNetHost) {
            // The host's network with unix sockets refused: no plan makes it
            // (kept consistent): socket(AF_UNIX) refused, every other allowed.
            c.stmt(kLd, low_half(0));
            c.jump(kJeq, AF_UNIX, deny, allow);
            continue;
        }
        // A type flag other than SOCK_NONBLOCK and SOCK_CLOEXEC: the kernel
        // refuses it today and may give it a meaning tomorrow.
        c.stmt(kLd, low_half(1));
        c.jump(BPF_JMP | BPF_JSET | BPF_K, ~(0xfU | kTypeFlags), deny);
        c.stmt(BPF_ALU | BPF_AND | BPF_K, 0xfU);  // SOCK_TYPE_MASK
        c.stmt(BPF_ST, 0);
        c.stmt(kLd, low_half(2));
        c.stmt(BPF_ST, 1);
        // A row: its family, its type, then each of its protocols.
        for (const SocketKind& k : allowed_kinds(v, is_pair)) {
            const int next = c.label();
            c.stmt(kLd, low_half(0));
            c.jump(kJeq, static_cast<uint32_t>(k.family), Code::kNext, next);
            c.stmt(BPF_LD | BPF_MEM, 0);
            c.jump(kJeq, static_cast<uint32_t>(k.type), Code::kNext, next);
            c.stmt(BPF_LD | BPF_MEM, 1);
            for (unsigned proto = 0; proto < 32; ++proto)
                if (k.protocols & bit(proto)) c.jump(kJeq, proto, allow);
            c.here(next);
        }
        if (is_pair) c.here(deny);  // the last section's refusal serves the whole block
        c.stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | kSocketRefused);  // no row: refused
    }
    c.here(allow);
    return c.emit(out);
}

// The user-namespace block (issue 38): first in every program, so that
// --allow-userns loads the program from the instruction after it
// (kUsernsBlockLen, emitted by seccomp-gen) and no variant is doubled. A new
// user namespace is made by clone(CLONE_NEWUSER), unshare(CLONE_NEWUSER) or
// clone3, and one made by another process of the same uid is entered by
// setns (its owner holds every capability in it). Refused:
//   clone, unshare: CLONE_NEWUSER set in the low 32 bits of the flags, all
//     the kernel reads of them (clone: lower_32_bits into kernel_clone_args;
//     unshare: no CLONE_ flag lies in the upper half), EPERM, as a kernel
//     that does not let the caller make one answers;
//   setns: nstype 0 (any kind, a user namespace included) or with
//     CLONE_NEWUSER (a pidfd's set of kinds), EPERM;
//   clone3: always, ENOSYS: its flags are in memory no filter can read, and
//     glibc (2.34 on, __clone_internal) and Go fall back to clone on ENOSYS.
// The flags are the first argument except on s390x (CLONE_BACKWARDS2:
// clone(newsp, flags, ...)). On x86_64 the i386 ABI and x32 (the native
// numbers with kX32Bit) are covered too: the variants that keep them allowed
// would otherwise let them through.
struct NsCalls {
    uint32_t clone, unshare, setns, clone3;
};
#if defined(__s390x__)
constexpr unsigned kCloneFlagsArg = 1;
#else
constexpr unsigned kCloneFlagsArg = 0;
#endif
constexpr uint32_t kCloneNewUser = 0x10000000U;  // CLONE_NEWUSER (<sched.h> would bring glibc's clone())
constexpr uint32_t kClone3 = 435;                // shared by every architecture (>= 424)

int userns_block_impl(std::vector<sock_filter>& out) {
    if constexpr (kNativeArch == 0) return -EOPNOTSUPP;
    constexpr uint16_t kLd = BPF_LD | BPF_W | BPF_ABS, kJeq = BPF_JMP | BPF_JEQ | BPF_K,
                       kJset = BPF_JMP | BPF_JSET | BPF_K;
    Code c;
    const int allow = c.label(), eperm = c.label(), enosys = c.label(), clone_flags = c.label(),
              unshare_flags = c.label(), setns_type = c.label();
    // One ABI's four numbers; the last comparison's miss goes to `miss`.
    auto calls = [&](const NsCalls& n, int miss) {
        c.jump(kJeq, n.clone, clone_flags);
        c.jump(kJeq, n.unshare, unshare_flags);
        c.jump(kJeq, n.setns, setns_type);
        c.jump(kJeq, n.clone3, enosys, miss);
    };
    const NsCalls native{static_cast<uint32_t>(__NR_clone), static_cast<uint32_t>(__NR_unshare),
                         static_cast<uint32_t>(__NR_setns), kClone3};
    c.stmt(kLd, offsetof(seccomp_data, arch));
#if defined(__x86_64__)
    const int compat32 = c.label(), x32 = c.label();
    c.jump(kJeq, kNativeArch, Code::kNext, compat32);
    c.stmt(kLd, offsetof(seccomp_data, nr));
    calls(native, x32);
    c.here(x32);
    calls({native.clone | kX32Bit, native.unshare | kX32Bit, native.setns | kX32Bit, kClone3 | kX32Bit}, allow);
    c.here(compat32);
    c.jump(kJeq, AUDIT_ARCH_I386, Code::kNext, allow);
    c.stmt(kLd, offsetof(seccomp_data, nr));
    calls({120, 310, 346, kClone3}, allow);  // i386's clone, unshare, setns (its clone: CLONE_BACKWARDS, flags first)
#else
    c.jump(kJeq, kNativeArch, Code::kNext, allow);
    c.stmt(kLd, offsetof(seccomp_data, nr));
    calls(native, allow);
#endif
    c.here(clone_flags);
    c.stmt(kLd, low_half(kCloneFlagsArg));
    c.jump(kJset, kCloneNewUser, eperm, allow);
    c.here(unshare_flags);
    c.stmt(kLd, low_half(0));
    c.jump(kJset, kCloneNewUser, eperm, allow);
    c.here(setns_type);
    c.stmt(kLd, low_half(1));
    c.jump(kJeq, 0, eperm);
    c.jump(kJset, kCloneNewUser, eperm, allow);
    c.here(eperm);
    c.stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    c.here(enosys);
    c.stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    c.here(allow);
    return c.emit(out);
}

}  // namespace

int userns_block(std::vector<sock_filter>& out) { return userns_block_impl(out); }

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
    if constexpr (kNativeArch == 0) {
        // Another numbering (mips, alpha, 32-bit arm's private calls): review
        // its table before building there; seccomp-gen fails until then.
        (void)kArch, (void)kNr, (void)kEnosys;
        out.clear();
        return -EOPNOTSUPP;
    }
    constexpr uint32_t native = kNativeArch;
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
    step = "user-namespace block";
    out.clear();
    if (int rc = userns_block(out); rc != 0) return rc;
    step = "unknown-syscall guard";
    std::vector<sock_filter> known;
    if (int rc = unknown_syscall_guard(known); rc != 0) return rc;
    out.insert(out.end(), known.begin(), known.end());
    step = "socket allow-list";
    if (int rc = socket_block(v, out); rc != 0) return rc;
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
