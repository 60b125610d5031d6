// The filters dsh-confine embeds (seccomp_filters.h, exported by seccomp-gen at
// build time) are exactly what libseccomp builds now, instruction for
// instruction; and they do what harden promises: each variant is run here on
// synthetic system calls by a small classic-BPF interpreter, per architecture,
// and installed in a child to see the kernel agree. The e2e tests show the
// same from outside (tests/e2e/test_attack_kernel.py).
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>
#include <cstring>
#include <linux/audit.h>
#include <linux/btrfs.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linux/seccomp_build.hpp"
#include "seccomp_filters.h"

namespace sb = dsh::seccomp_build;

namespace {

std::vector<sock_filter> embedded(size_t i) {
    const auto& p = dsh::harden::generated::kPrograms[i];
    return std::vector<sock_filter>(p.filter, p.filter + p.len);
}

bool same(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].code != b[i].code || a[i].jt != b[i].jt || a[i].jf != b[i].jf || a[i].k != b[i].k) return false;
    return true;
}

// Classic BPF as the kernel runs a seccomp filter: A, X, 16 scratch words,
// 32-bit loads from seccomp_data. Anything it does not know fails the test.
constexpr uint32_t kBad = 0xdeadbeef;
uint32_t run(const std::vector<sock_filter>& prog, const seccomp_data& d) {
    uint32_t a = 0, x = 0, mem[16] = {};
    for (size_t pc = 0; pc < prog.size(); ++pc) {
        const sock_filter& f = prog[pc];
        const uint32_t src = BPF_SRC(f.code) == BPF_X ? x : f.k;
        switch (BPF_CLASS(f.code)) {
            case BPF_LD:
                if (f.code == (BPF_LD | BPF_W | BPF_ABS)) {
                    if (f.k % 4 != 0 || f.k + 4 > sizeof d) return kBad;
                    std::memcpy(&a, reinterpret_cast<const char*>(&d) + f.k, 4);
                } else if (f.code == (BPF_LD | BPF_IMM)) a = f.k;
                else if (f.code == (BPF_LD | BPF_MEM) && f.k < 16) a = mem[f.k];
                else return kBad;
                break;
            case BPF_LDX:
                if (f.code == (BPF_LDX | BPF_IMM)) x = f.k;
                else if (f.code == (BPF_LDX | BPF_MEM) && f.k < 16) x = mem[f.k];
                else return kBad;
                break;
            case BPF_ST: if (f.k >= 16) return kBad; mem[f.k] = a; break;
            case BPF_STX: if (f.k >= 16) return kBad; mem[f.k] = x; break;
            case BPF_ALU:
                switch (BPF_OP(f.code)) {
                    case BPF_ADD: a += src; break;
                    case BPF_SUB: a -= src; break;
                    case BPF_AND: a &= src; break;
                    case BPF_OR: a |= src; break;
                    case BPF_XOR: a ^= src; break;
                    case BPF_LSH: a <<= src; break;
                    case BPF_RSH: a >>= src; break;
                    case BPF_NEG: a = 0 - a; break;
                    default: return kBad;
                }
                break;
            case BPF_JMP: {
                if (BPF_OP(f.code) == BPF_JA) {
                    pc += f.k;
                    break;
                }
                bool t = false;
                switch (BPF_OP(f.code)) {
                    case BPF_JEQ: t = a == src; break;
                    case BPF_JGT: t = a > src; break;
                    case BPF_JGE: t = a >= src; break;
                    case BPF_JSET: t = (a & src) != 0; break;
                    default: return kBad;
                }
                pc += t ? f.jt : f.jf;
                break;
            }
            case BPF_RET: return BPF_RVAL(f.code) == BPF_A ? a : f.k;
            case BPF_MISC:
                if (f.code == (BPF_MISC | BPF_TAX)) x = a;
                else if (f.code == (BPF_MISC | BPF_TXA)) a = x;
                else return kBad;
                break;
            default: return kBad;
        }
    }
    return kBad;  // fell off the end: the kernel would refuse to load it
}

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kEperm = SECCOMP_RET_ERRNO | EPERM;
constexpr uint32_t kErofs = SECCOMP_RET_ERRNO | EROFS;  // read-only's file-metadata refusals (issue 38)
constexpr uint32_t kEnosys = SECCOMP_RET_ERRNO | ENOSYS;

struct Call {
    uint32_t arch;
    uint32_t nr;
    std::initializer_list<uint64_t> args;
};

uint32_t verdict(const std::vector<sock_filter>& prog, const Call& c) {
    seccomp_data d{};
    d.arch = c.arch;
    d.nr = static_cast<int>(c.nr);
    size_t i = 0;
    for (uint64_t v : c.args) d.args[i++] = v;
    return run(prog, d);
}

std::string name(const sb::Variant& v) {
    static const char* const net[] = {"", "/net-loopback", "/net-off"};
    return std::string(v.block_metadata ? "read-only" : "workspace-write") +
           (v.host_namespaces ? "/landlock" : "/bwrap") + net[v.net] + (v.refuse_unix ? "/no-unix-socket" : "");
}

// What each network variant lets socket() (pair false) and socketpair() make
// (issues 17 and 38), written here apart from seccomp_build.cpp's table: in
// the 32 bits the kernel reads of each argument, the type's low 4 bits with
// SOCK_NONBLOCK and SOCK_CLOEXEC and no other flag.
bool expect_allowed(const sb::Variant& v, bool pair, uint64_t fam64, uint64_t type64, uint64_t proto64) {
    const auto fam = static_cast<uint32_t>(fam64), type = static_cast<uint32_t>(type64),
               proto = static_cast<uint32_t>(proto64);
    if (v.net == sb::kNetHost && !v.refuse_unix) return true;
    if (v.net == sb::kNetHost && !pair) return fam != AF_UNIX;  // no plan makes this one
    if ((type & ~(0xfU | SOCK_NONBLOCK | SOCK_CLOEXEC)) != 0) return false;
    const uint32_t t = type & 0xfU;
    const bool unix_ok = !v.refuse_unix;  // Landlock governs pathname unix sockets
    if (pair)  // connected to itself: no address to reach, but for a datagram pair
        return fam == AF_UNIX && proto == 0 &&
               (t == SOCK_STREAM || t == SOCK_SEQPACKET || (t == SOCK_DGRAM && unix_ok));
    if (fam == AF_UNIX) return unix_ok && proto == 0 && (t == SOCK_STREAM || t == SOCK_DGRAM || t == SOCK_SEQPACKET);
    if (v.net == sb::kNetOff) return false;
    if (fam == AF_INET || fam == AF_INET6)
        return (t == SOCK_STREAM && (proto == 0 || proto == IPPROTO_TCP)) ||
               (t == SOCK_DGRAM && (proto == 0 || proto == IPPROTO_UDP));
    if (fam == AF_NETLINK)
        return (t == SOCK_RAW || t == SOCK_DGRAM) && (proto == NETLINK_ROUTE || proto == NETLINK_SOCK_DIAG);
    return false;
}

}  // namespace

TEST_CASE("embedded seccomp filters are what libseccomp builds") {
    for (size_t i = 0; i < sb::kVariantCount; ++i) {
        CHECK(sb::index(sb::kVariants[i]) == i);
        std::vector<sock_filter> now;
        std::string step;
        REQUIRE(sb::program(sb::kVariants[i], now, step) == 0);
        const auto built = embedded(i);
        CAPTURE(name(sb::kVariants[i]), now.size(), built.size());
        CHECK(same(now, built));
        CHECK(built.size() <= BPF_MAXINSNS);
    }
}

#if defined(__x86_64__)

TEST_CASE("the newest system call the filters know is named, and numbers above it are ENOSYS") {
    // Linux 6.17's file_setattr. Raising it means reviewing every call
    // added since, per architecture (seccomp_build.hpp).
    CHECK(sb::kMaxKnownSyscall == 469);
    std::vector<sock_filter> guard;
    REQUIRE(sb::unknown_syscall_guard(guard) == 0);
    guard.push_back({BPF_RET | BPF_K, 0, 0, kAllow});  // what follows the guard
    constexpr uint32_t X32 = sb::kX32Bit;
    const uint32_t max = sb::kMaxKnownSyscall;
    CHECK(verdict(guard, {AUDIT_ARCH_X86_64, max, {}}) == kAllow);
    CHECK(verdict(guard, {AUDIT_ARCH_X86_64, 0, {}}) == kAllow);
    for (uint32_t nr : {max + 1, 470u, 512u, 547u, 1000u, 0x3fffffffu, 0xffffffffu})
        CHECK(verdict(guard, {AUDIT_ARCH_X86_64, nr, {}}) == kEnosys);
    CHECK(verdict(guard, {AUDIT_ARCH_X86_64, X32 | max, {}}) == kAllow);
    CHECK(verdict(guard, {AUDIT_ARCH_X86_64, X32 | 512, {}}) == kAllow);  // x32's own compat calls
    CHECK(verdict(guard, {AUDIT_ARCH_X86_64, X32 | 547, {}}) == kAllow);
    for (uint32_t nr : {X32 | (max + 1), X32 | 511, X32 | 548, X32 | 1000, 0x7fffffffu})
        CHECK(verdict(guard, {AUDIT_ARCH_X86_64, nr, {}}) == kEnosys);
    CHECK(verdict(guard, {AUDIT_ARCH_I386, max, {}}) == kAllow);
    for (uint32_t nr : {max + 1, 1000u, X32 | 1})
        CHECK(verdict(guard, {AUDIT_ARCH_I386, nr, {}}) == kEnosys);
    // Another architecture is left to libseccomp's program (bad arch).
    CHECK(verdict(guard, {AUDIT_ARCH_AARCH64, 1000, {}}) == kAllow);
}

TEST_CASE("seccomp variants: what each refuses, per ABI") {
    constexpr uint32_t X64 = AUDIT_ARCH_X86_64, I386 = AUDIT_ARCH_I386, X32 = sb::kX32Bit;
    const uint64_t hi = 0xffffffff00000000ULL;  // the kernel reads the ioctl command in 32 bits
    for (const auto& v : sb::kVariants) {
        const auto p = embedded(sb::index(v));
        const bool host = v.host_namespaces;
        // read-only and every network filter refuse the i386/x32 ABIs
        const bool ro = v.block_metadata || v.net != sb::kNetHost || v.refuse_unix;
        const uint32_t compat = ro ? kEnosys : kAllow;
        const uint32_t ipc = host ? kEperm : kAllow;
        CAPTURE(name(v));

        // Every variant: ordinary calls, TIOCSTI, io_uring, keyrings, unknown numbers.
        CHECK(verdict(p, {X64, SYS_getpid, {}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_openat, {}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_ioctl, {1, TIOCGWINSZ}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_ioctl, {0, TIOCSTI}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_ioctl, {0, hi | TIOCSTI}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_ioctl, {0, TIOCLINUX}}) == kEperm);
        // The console's keyboard, font, mode and VT ioctls; not V4L2's 'V' (size and direction bits).
        for (unsigned long cmd : {0x4b47UL /* KDSKBENT */, 0x4b45UL /* KDSKBMODE */, 0x4b3aUL /* KDSETMODE */,
                                  0x4b61UL /* PIO_FONT */, 0x4b72UL /* KDFONTOP */, 0x5606UL /* VT_ACTIVATE */,
                                  0x560bUL /* VT_LOCKSWITCH */, 0xffffffff00004b4dUL /* KDSKBMETA, high bits */})
            CHECK(verdict(p, {X64, SYS_ioctl, {3, cmd}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_ioctl, {3, 0xc0585609UL /* VIDIOC_QUERYBUF */}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_ioctl, {3, 0x5413UL /* TIOCGWINSZ */}}) == kAllow);
        // The mark (issue 38): EXFULL for the placeholder, on every ABI that has ioctl; harden
        // replaces each comparison with the placeholder by a mark of its own, and then that
        // value is the one answered, on every ABI, and the placeholder no longer is.
        const uint32_t mark = SECCOMP_RET_ERRNO | static_cast<uint32_t>(sb::kMarkErrno);
        CHECK(verdict(p, {X64, SYS_ioctl, {-1ULL, sb::kMarkPlaceholder}}) == mark);
        CHECK(verdict(p, {X64, SYS_ioctl, {0, hi | sb::kMarkPlaceholder}}) == mark);
        CHECK(verdict(p, {I386, 54, {0, sb::kMarkPlaceholder}}) == (ro ? kEnosys : mark));
        size_t places = 0;
        auto marked = p;
        for (auto& f : marked)
            if (f.code == (BPF_JMP | BPF_JEQ | BPF_K) && f.k == sb::kMarkPlaceholder) {
                ++places;
                f.k = 0x1234abcdU;
            }
        CHECK(places >= 1);  // libseccomp shares one comparison between the ABIs
        CHECK(verdict(marked, {X64, SYS_ioctl, {0, 0x1234abcdU}}) == mark);
        CHECK(verdict(marked, {I386, 54, {0, 0x1234abcdU}}) == (ro ? kEnosys : mark));
        CHECK(verdict(marked, {X64, X32 | 514, {0, 0x1234abcdU}}) == (ro ? kEnosys : mark));
        CHECK(verdict(marked, {X64, SYS_ioctl, {0, sb::kMarkPlaceholder}}) == kAllow);
        for (uint32_t nr : {425u, 426u, 427u}) {
            CHECK(verdict(p, {X64, nr, {}}) == kEnosys);
            CHECK(verdict(p, {I386, nr, {}}) == kEnosys);
            CHECK(verdict(p, {X64, X32 | nr, {}}) == kEnosys);
        }
        for (uint32_t nr : {SYS_add_key, SYS_request_key, SYS_keyctl}) {
            CHECK(verdict(p, {X64, nr, {}}) == kEperm);
            CHECK(verdict(p, {X64, X32 | nr, {}}) == (ro ? kEnosys : kEperm));
        }
        for (uint32_t nr : {286u, 287u, 288u}) CHECK(verdict(p, {I386, nr, {}}) == (ro ? kEnosys : kEperm));
        for (uint32_t nr : {sb::kMaxKnownSyscall + 1, 1000u, 0x3fffffffu}) {
            CHECK(verdict(p, {X64, nr, {}}) == kEnosys);
            CHECK(verdict(p, {I386, nr, {}}) == kEnosys);
            CHECK(verdict(p, {X64, X32 | nr, {}}) == kEnosys);
        }
        CHECK(verdict(p, {X64, 468, {}}) == kAllow);  // file_getattr: a read
        for (unsigned long cmd : {BTRFS_IOC_SUBVOL_CREATE, BTRFS_IOC_SNAP_CREATE_V2, BTRFS_IOC_SNAP_DESTROY_V2})
            CHECK(verdict(p, {X64, SYS_ioctl, {3, cmd}}) == kEperm);

        // The compat ABIs: refused outright in read-only, filtered otherwise.
        CHECK(verdict(p, {I386, 20, {}}) == compat);  // getpid
        CHECK(verdict(p, {I386, 54, {0, TIOCSTI}}) == (ro ? kEnosys : kEperm));
        CHECK(verdict(p, {X64, X32 | SYS_getpid, {}}) == compat);
        CHECK(verdict(p, {X64, X32 | 514, {0, TIOCSTI}}) == (ro ? kEnosys : kEperm));  // x32 ioctl
        CHECK(verdict(p, {X64, X32 | 514, {1, TIOCGWINSZ}}) == compat);

        // Metadata calls and inode ioctls: read-only only, answered as a
        // read-only mount would (EROFS), never EPERM.
        const uint32_t meta = v.block_metadata ? kErofs : kAllow;
        for (uint32_t nr : std::initializer_list<uint32_t>{SYS_chmod, SYS_fchmod, SYS_fchmodat, SYS_chown, SYS_utimensat, SYS_setxattr,
                            SYS_fsetxattr, SYS_removexattr, 452u, 463u, 466u, 469u})
            CHECK(verdict(p, {X64, nr, {}}) == meta);
        for (unsigned long cmd :
             {FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_SETVERSION, FS_IOC32_SETVERSION,
              FS_IOC_ENABLE_VERITY, FICLONE, FICLONERANGE, FIDEDUPERANGE, FS_IOC_SETFSLABEL,
              BTRFS_IOC_SUBVOL_SETFLAGS, BTRFS_IOC_DEFRAG, static_cast<unsigned long>(_IOW('f', 4, long)),
              static_cast<unsigned long>(_IO('f', 9))}) {
            CAPTURE(cmd);
            CHECK(verdict(p, {X64, SYS_ioctl, {3, cmd}}) == meta);
            CHECK(verdict(p, {X64, SYS_ioctl, {3, hi | cmd}}) == meta);
        }
        CHECK(verdict(p, {X64, SYS_ioctl, {3, FS_IOC_GETFLAGS}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_ioctl, {3, FS_IOC_FSGETXATTR}}) == kAllow);

        // Shared IPC: refused where the command shares the host's namespace.
        for (uint32_t nr : {SYS_shmget, SYS_shmat, SYS_shmctl, SYS_shmdt, SYS_msgget, SYS_msgsnd, SYS_msgrcv,
                            SYS_msgctl, SYS_semget, SYS_semop, SYS_semtimedop, SYS_semctl, SYS_mq_open,
                            SYS_mq_unlink, SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify,
                            SYS_mq_getsetattr})
            CHECK(verdict(p, {X64, nr, {}}) == ipc);
        // i386: the ipc(2) multiplexer, the direct SysV calls, the time64 ones.
        for (uint32_t nr : {117u, 393u, 394u, 395u, 396u, 397u, 398u, 399u, 400u, 401u, 402u, 420u, 277u, 418u})
            CHECK(verdict(p, {I386, nr, {}}) == (ro ? kEnosys : ipc));
        CHECK(verdict(p, {X64, X32 | SYS_shmget, {}}) == (ro ? kEnosys : ipc));

        // Other processes: pid 0 (the caller) always works.
        const uint32_t other = host ? kEperm : kAllow;
        CHECK(verdict(p, {X64, SYS_prlimit64, {0, RLIMIT_NOFILE, 0x1000, 0}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_prlimit64, {0, RLIMIT_NOFILE, 0, 0x1000}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_prlimit64, {4242, RLIMIT_NOFILE, 0, 0x1000}}) == kAllow);  // read only
        CHECK(verdict(p, {X64, SYS_prlimit64, {4242, RLIMIT_NOFILE, 0x1000, 0}}) == other);
        CHECK(verdict(p, {X64, SYS_prlimit64, {1ULL << 32, RLIMIT_NOFILE, 0x1000, 0}}) == other);
        CHECK(verdict(p, {X64, SYS_setpriority, {PRIO_PROCESS, 0, 5}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_setpriority, {PRIO_PROCESS, 4242, 5}}) == other);
        CHECK(verdict(p, {X64, SYS_setpriority, {PRIO_USER, 0, 5}}) == other);
        // "My process group" is the caller's where bwrap leaves the command in it: refused in
        // every variant; a group named by number is looked up in the command's PID namespace.
        CHECK(verdict(p, {X64, SYS_setpriority, {PRIO_PGRP, 0, 5}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_ioprio_set, {2, 0, 0}}) == kEperm);  // IOPRIO_WHO_PGRP
        // ints: the kernel reads 32 bits, and so does the filter
        CHECK(verdict(p, {X64, SYS_setpriority, {PRIO_PGRP, 1ULL << 32, 5}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_setpriority, {(1ULL << 32) | PRIO_PGRP, 0, 5}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_ioprio_set, {(1ULL << 32) | 2, 1ULL << 32, 0}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_setpriority, {PRIO_PGRP, 7, 5}}) == other);
        CHECK(verdict(p, {X64, SYS_ioprio_set, {2, 7, 0}}) == other);
        CHECK(verdict(p, {X64, SYS_ioprio_set, {1, 0, 0}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_ioprio_set, {1, 4242, 0}}) == other);
        CHECK(verdict(p, {X64, SYS_ioprio_set, {3, 0, 0}}) == other);  // IOPRIO_WHO_USER
        for (uint32_t nr : {SYS_sched_setaffinity, SYS_sched_setscheduler, SYS_sched_setparam, SYS_sched_setattr,
                            SYS_migrate_pages, SYS_move_pages}) {
            CHECK(verdict(p, {X64, nr, {0}}) == kAllow);
            CHECK(verdict(p, {X64, nr, {4242}}) == other);
        }
        CHECK(verdict(p, {X64, SYS_sched_getaffinity, {4242}}) == kAllow);
        CHECK(verdict(p, {I386, 340, {4242, RLIMIT_NOFILE, 0x1000, 0}}) == (ro ? kEnosys : other));  // prlimit64
        CHECK(verdict(p, {I386, 97, {PRIO_USER, 0, 5}}) == (ro ? kEnosys : other));  // setpriority
    }
}

#endif  // __x86_64__

namespace {

// In a child: install the variant, then ask the kernel. Returns the number
// of the first failed expectation (0 = all held).
int probe_in_child(const sb::Variant& v) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        const auto& prog = dsh::harden::generated::kPrograms[sb::index(v)];
        sock_fprog fp{prog.len, const_cast<sock_filter*>(prog.filter)};
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &fp) != 0)
            ::_exit(100);
        int bad = 0;  // the number of the first expectation that failed
        auto expect = [&](long rc, int err, int n) {
            if ((err == 0 ? rc != 0 : (rc != -1 || errno != err)) && bad == 0) bad = n;
        };
        errno = 0;
        expect(::syscall(425, 1, nullptr), ENOSYS, 13);
        expect(::syscall(sb::kMaxKnownSyscall + 1, 0), ENOSYS, 1);
        expect(::syscall(1000, 0), ENOSYS, 2);
        rlimit r{};
        expect(::getrlimit(RLIMIT_NOFILE, &r), 0, 3);
        // Lowered (the filter must let a process lower its own limit), but
        // above the fds this test process already holds: earlier test cases
        // leave policies' root fds open, as a launcher does until its exec.
        int highest = 0;
        for (int fd = 0; fd < 4096; ++fd)
            if (::fcntl(fd, F_GETFD) >= 0) highest = fd;
        const rlim_t want = static_cast<rlim_t>(highest) + 64;
        r.rlim_cur = r.rlim_cur > want ? want : r.rlim_cur;
        expect(::setrlimit(RLIMIT_NOFILE, &r), 0, 4);   // glibc: prlimit64(0, ...)
        expect(::setpriority(PRIO_PROCESS, 0, 5), 0, 5);  // what nice(1) does
        expect(::syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0), EPERM, 6);
        // Where these are allowed they would act on the test runner's
        // processes: asked only where they must be refused.
        if (v.host_namespaces) {
            expect(::setpriority(PRIO_USER, 0, 6), EPERM, 7);
            expect(::syscall(SYS_prlimit64, ::getppid(), RLIMIT_NOFILE, &r, nullptr), EPERM, 8);
            expect(::syscall(SYS_sched_setaffinity, ::getppid(), 0, nullptr), EPERM, 10);
        }
        // An inode ioctl: the filter's EROFS in read-only, the kernel's own
        // answer (a bad pointer) otherwise.
        errno = 0;
        const int io = ::ioctl(0, FS_IOC_SETFLAGS, nullptr);
        if ((v.block_metadata ? (io != -1 || errno != EROFS) : errno == EROFS) && bad == 0) bad = 11;
        if (v.block_metadata) expect(::syscall(SYS_fchmod, 0, 0600), EROFS, 12);
        const long shm = ::syscall(SYS_shmget, 0 /* IPC_PRIVATE */, 4096, 0600);
        if ((v.host_namespaces ? (shm != -1 || errno != EPERM) : shm < 0) && bad == 0) bad = 9;
        if (shm >= 0) ::syscall(SYS_shmctl, shm, 0 /* IPC_RMID */, nullptr);
        // The network filter as the kernel runs it (nothing is connected).
        auto sock_rc = [](int fam, int type, int proto) {
            const int fd = ::socket(fam, type, proto);
            const int e = fd < 0 ? errno : 0;
            if (fd >= 0) ::close(fd);
            return e;
        };
        const int inet = sock_rc(AF_INET, SOCK_STREAM, 0);
        if ((v.net == sb::kNetOff ? inet != ENETUNREACH : inet != 0) && bad == 0) bad = 14;
        const int unix_s = sock_rc(AF_UNIX, SOCK_STREAM, 0);
        if ((v.refuse_unix ? unix_s != ENETUNREACH : unix_s != 0) && bad == 0) bad = 15;
        if (v.net != sb::kNetHost && sock_rc(40 /* AF_VSOCK */, SOCK_STREAM, 0) != ENETUNREACH && bad == 0) bad = 16;
        if (v.net != sb::kNetHost && sock_rc(AF_INET, SOCK_STREAM, 262) != ENETUNREACH && bad == 0) bad = 17;
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 && bad == 0) bad = 18;
        ::_exit(bad);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

}  // namespace

#if defined(__x86_64__)

TEST_CASE("seccomp network filter: socket() and socketpair() make exactly the allow-list, in the bits the kernel reads") {
    constexpr uint32_t X64 = AUDIT_ARCH_X86_64, I386 = AUDIT_ARCH_I386, X32 = sb::kX32Bit;
    constexpr uint32_t kRefused = SECCOMP_RET_ERRNO | ENETUNREACH;  // the socket filter's own (issue 38)
    const uint64_t hi = 0xffffffff00000000ULL;  // junk the kernel ignores in an int argument
    for (const auto& v : sb::kVariants) {
        const auto p = embedded(sb::index(v));
        CAPTURE(name(v));
        const bool host = v.net == sb::kNetHost;
        // Every family the kernel can take (it refuses >= AF_MAX, 46 today) and
        // beyond, every type with and without flags, the protocols that matter.
        std::vector<uint64_t> families;
        for (uint64_t f = 0; f < 64; ++f) families.push_back(f);
        for (uint64_t f : {uint64_t(64), uint64_t(0x21), uint64_t(0x7fffffff), uint64_t(0x80000002), uint64_t(0xffffffff),
                           hi | AF_UNIX, hi | AF_INET, hi | AF_NETLINK, hi | 40})
            families.push_back(f);
        const uint64_t flags[] = {0, SOCK_NONBLOCK, SOCK_CLOEXEC, SOCK_NONBLOCK | SOCK_CLOEXEC, 1U << 4, 1U << 10,
                                  1U << 20, 0x80000000U, hi};
        const uint64_t protocols[] = {0, 1, 4, 6, 17, 58, 132, 136, 262, 1U << 16, hi, hi | 6};
        size_t allowed = 0;
        for (const bool pair : {false, true}) {
            const uint32_t nr = pair ? SYS_socketpair : SYS_socket;
            auto check = [&](uint64_t fam, uint64_t type, uint64_t proto) {
                const bool want = expect_allowed(v, pair, fam, type, proto);
                allowed += want ? 1 : 0;
                const uint32_t got = verdict(p, {X64, nr, {fam, type, proto, 0}});
                if (got != (want ? kAllow : kRefused)) {
                    CAPTURE(pair, fam, type, proto, want, got);
                    CHECK(false);
                }
            };
            // The whole grid of families and types, for the protocols that decide.
            for (uint64_t fam : families)
                for (uint64_t type = 0; type < 16; ++type)
                    for (uint64_t proto : {uint64_t(0), uint64_t(1), uint64_t(4), uint64_t(6), uint64_t(17)})
                        check(fam, type, proto);
            // Flags and junk on the families that have rows.
            for (uint64_t fam : {uint64_t(AF_UNIX), uint64_t(AF_INET), uint64_t(AF_INET6), uint64_t(AF_NETLINK),
                                 uint64_t(AF_PACKET), hi | AF_UNIX, hi | AF_INET})
                for (uint64_t type = 0; type < 16; ++type)
                    for (uint64_t flag : flags)
                        for (uint64_t proto : protocols) check(fam, type | flag, proto);
        }
        if (!host) CHECK(allowed > 0);
        // What the rows are, named (the grid above checks the rest).
        auto sock = [&](uint64_t fam, uint64_t type, uint64_t proto) { return verdict(p, {X64, SYS_socket, {fam, type, proto}}); };
        auto pair = [&](uint64_t fam, uint64_t type) { return verdict(p, {X64, SYS_socketpair, {fam, type, 0, 0}}); };
        const uint32_t lo = v.net == sb::kNetLoopback || host ? kAllow : kRefused;
        CHECK(sock(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP) == lo);
        CHECK(sock(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0) == lo);
        CHECK(sock(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */) == lo);
        CHECK(sock(AF_INET, SOCK_STREAM, 262 /* MPTCP */) == (host ? kAllow : kRefused));
        CHECK(sock(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) == (host ? kAllow : kRefused));
        CHECK(sock(AF_UNIX, SOCK_STREAM, 0) == (v.refuse_unix ? kRefused : kAllow));
        CHECK(pair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC) == kAllow);
        CHECK(pair(AF_UNIX, SOCK_SEQPACKET) == kAllow);
        // The attack of issue 38: a datagram pair by another name.
        CHECK(pair(AF_UNIX, SOCK_RAW) == (host && !v.refuse_unix ? kAllow : kRefused));
        CHECK(pair(AF_UNIX, SOCK_DGRAM) == (v.refuse_unix ? kRefused : kAllow));
        // Other calls are untouched; io_uring stays refused.
        CHECK(verdict(p, {X64, 425, {}}) == kEnosys);
        CHECK(verdict(p, {X64, SYS_connect, {3, 0, 0}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_sendto, {3, 0, 0}}) == kAllow);
        // i386's socketcall hides the family in memory: the whole ABI is refused, and x32 too.
        if (!host || v.refuse_unix) {
            CHECK(verdict(p, {I386, 102 /* socketcall */, {1, 0}}) == kEnosys);
            CHECK(verdict(p, {I386, 359 /* socket */, {AF_INET, SOCK_STREAM, 0}}) == kEnosys);
            CHECK(verdict(p, {I386, 360 /* socketpair */, {AF_UNIX, SOCK_RAW, 0}}) == kEnosys);
            CHECK(verdict(p, {X64, X32 | SYS_socket, {AF_INET, SOCK_STREAM, 0}}) == kEnosys);
            CHECK(verdict(p, {X64, X32 | SYS_socketpair, {AF_UNIX, SOCK_RAW, 0}}) == kEnosys);
        }
    }
}

#endif  // __x86_64__

namespace {

// In a child: every family 0..63 (and a few with junk above) x every type
// 0..15 (bare, with SOCK_NONBLOCK|SOCK_CLOEXEC, with a flag the kernel does
// not know, with junk above 32 bits) x a few protocols, through socket() and
// socketpair() as the kernel runs the variant's filter. A combination of the
// allow-list must give what the kernel gives it without the filter (tried
// first: only combinations a confined command may make anyway are made
// unfiltered); every other one must be ENETUNREACH. Returns what differed.
std::string sweep_in_child(const sb::Variant& v) {
    int pipefd[2];
    if (::pipe(pipefd) != 0) return "pipe failed";
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(pipefd[0]);
        const uint64_t hi = 0xffffffff00000000ULL;
        std::vector<uint64_t> families;
        for (uint64_t f = 0; f < 64; ++f) families.push_back(f);
        for (uint64_t f : {uint64_t(64), uint64_t(0xffffffff), hi | AF_UNIX, hi | AF_INET, hi | AF_NETLINK})
            families.push_back(f);
        const uint64_t flags[] = {0, SOCK_NONBLOCK | SOCK_CLOEXEC, 1U << 4, 1U << 20, hi};
        const uint64_t protocols[] = {0, 1, 4, 6, 17};
        // errno of one attempt (0: made, and closed again).
        auto attempt = [](bool pair, uint64_t fam, uint64_t type, uint64_t proto) {
            int sv[2] = {-1, -1};
            const long rc = pair ? ::syscall(SYS_socketpair, fam, type, proto, sv) : ::syscall(SYS_socket, fam, type, proto);
            const int e = rc < 0 ? errno : 0;
            if (!pair && rc >= 0) ::close(static_cast<int>(rc));
            if (pair && rc == 0) ::close(sv[0]), ::close(sv[1]);
            return e;
        };
        struct Try {
            bool pair;
            uint64_t fam, type, proto;
            int bare;
        };
        std::vector<Try> all;
        for (const bool pair : {false, true})
            for (uint64_t fam : families)
                for (uint64_t type = 0; type < 16; ++type)
                    for (uint64_t flag : flags)
                        for (uint64_t proto : protocols) {
                            Try t{pair, fam, type | flag, proto, ENETUNREACH};
                            if (expect_allowed(v, pair, t.fam, t.type, t.proto)) t.bare = attempt(pair, t.fam, t.type, t.proto);
                            all.push_back(t);
                        }
        const auto& prog = dsh::harden::generated::kPrograms[sb::index(v)];
        sock_fprog fp{prog.len, const_cast<sock_filter*>(prog.filter)};
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &fp) != 0)
            ::_exit(100);
        // Sockets made that the list refuses first, then other differences.
        std::string bad[2];
        size_t made = 0, lines[2] = {0, 0};
        for (const Try& t : all) {
            const int e = attempt(t.pair, t.fam, t.type, t.proto);
            made += e == 0 ? 1 : 0;
            const int which = e == 0 ? 0 : 1;
            if (e != t.bare && lines[which]++ < 8) {
                char line[160];
                std::snprintf(line, sizeof line, "%s(%#llx, %#llx, %llu): errno %d, want %d\n",
                              t.pair ? "socketpair" : "socket", static_cast<unsigned long long>(t.fam),
                              static_cast<unsigned long long>(t.type), static_cast<unsigned long long>(t.proto), e, t.bare);
                bad[which] += line;
            }
        }
        // Something of the list is made: unix stream pairs at least.
        if (made == 0) bad[1] += "nothing at all was made\n";
        const std::string all_bad = bad[0] + bad[1];
        if (::write(pipefd[1], all_bad.data(), all_bad.size()) < 0) ::_exit(101);
        ::_exit(0);
    }
    ::close(pipefd[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(pipefd[0]);
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        out += "the child failed, status " + std::to_string(status);
    return out;
}

}  // namespace

TEST_CASE("the kernel makes exactly the allow-list's sockets under each network variant") {
    for (const auto& v : sb::kVariants) {
        // Under kNetHost nothing is refused but (in the variant no plan makes)
        // socket(AF_UNIX): sweeping it would make every family's socket unfiltered.
        if (v.net == sb::kNetHost) continue;
        CAPTURE(name(v));
        const std::string bad = sweep_in_child(v);
        CAPTURE(bad);
        CHECK(bad.empty());
    }
}

TEST_CASE("the kernel enforces each variant as the interpreter says") {
    for (const auto& v : sb::kVariants) {
        CAPTURE(name(v));
        CHECK(probe_in_child(v) == 0);
    }
}

#if defined(__x86_64__)

// Issue 38: every program starts with the user-namespace block, and
// --allow-userns loads the program from the instruction after it.
TEST_CASE("user namespaces: refused by default in the bits the kernel reads, allowed with the block skipped") {
    constexpr uint32_t X64 = AUDIT_ARCH_X86_64, I386 = AUDIT_ARCH_I386, X32 = sb::kX32Bit;
    constexpr uint64_t NEWUSER = 0x10000000, NEWNS = 0x00020000, NEWNET = 0x40000000, NEWPID = 0x20000000,
                       SIGCHLD_ = 17, hi = 0xffffffff00000000ULL;
    std::vector<sock_filter> block;
    REQUIRE(sb::userns_block(block) == 0);
    REQUIRE(block.size() == dsh::harden::generated::kUsernsBlockLen);
    for (const auto& v : sb::kVariants) {
        CAPTURE(name(v));
        const auto p = embedded(sb::index(v));
        // The block is the program's start; the rest is the program --allow-userns loads.
        REQUIRE(p.size() > block.size());
        CHECK(same(std::vector<sock_filter>(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(block.size())), block));
        const std::vector<sock_filter> allowed(p.begin() + static_cast<std::ptrdiff_t>(block.size()), p.end());
        const bool ro = v.block_metadata || v.net != sb::kNetHost || v.refuse_unix;
        const uint32_t compat = ro ? kEnosys : kAllow;

        // Native: clone and unshare on the low 32 bits of the flags; setns of any
        // kind (0) or a user namespace; clone3 whole.
        CHECK(verdict(p, {X64, SYS_clone, {NEWUSER | SIGCHLD_}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_clone, {hi | NEWUSER | SIGCHLD_}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_clone, {NEWUSER | NEWPID | NEWNS | SIGCHLD_}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_clone, {SIGCHLD_}}) == kAllow);                      // fork
        CHECK(verdict(p, {X64, SYS_clone, {0x3d0f00}}) == kAllow);                     // pthread_create's flags
        CHECK(verdict(p, {X64, SYS_clone, {(NEWUSER << 32) | SIGCHLD_}}) == kAllow);  // upper half: not read
        CHECK(verdict(p, {X64, SYS_unshare, {NEWUSER}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_unshare, {hi | NEWUSER | NEWNS}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_unshare, {NEWNS}}) == kAllow);  // needs CAP_SYS_ADMIN: the kernel refuses it
        CHECK(verdict(p, {X64, SYS_setns, {3, 0}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_setns, {3, NEWUSER}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_setns, {3, NEWUSER | NEWNET}}) == kEperm);
        CHECK(verdict(p, {X64, SYS_setns, {3, NEWNET}}) == kAllow);
        CHECK(verdict(p, {X64, SYS_setns, {3, hi}}) == kEperm);  // nstype is an int: 0 as the kernel reads it
        CHECK(verdict(p, {X64, 435, {}}) == kEnosys);
        // x32 and i386: before the variant's own verdict on the ABI.
        CHECK(verdict(p, {X64, X32 | SYS_clone, {NEWUSER | SIGCHLD_}}) == kEperm);
        CHECK(verdict(p, {X64, X32 | SYS_unshare, {NEWUSER}}) == kEperm);
        CHECK(verdict(p, {X64, X32 | SYS_setns, {3, 0}}) == kEperm);
        CHECK(verdict(p, {X64, X32 | 435, {}}) == kEnosys);
        CHECK(verdict(p, {X64, X32 | SYS_clone, {SIGCHLD_}}) == compat);
        CHECK(verdict(p, {I386, 120, {NEWUSER | SIGCHLD_}}) == kEperm);
        CHECK(verdict(p, {I386, 310, {NEWUSER}}) == kEperm);
        CHECK(verdict(p, {I386, 346, {3, 0}}) == kEperm);
        CHECK(verdict(p, {I386, 435, {}}) == kEnosys);
        CHECK(verdict(p, {I386, 120, {SIGCHLD_}}) == compat);
        // The rest of the program is untouched by the block.
        CHECK(verdict(p, {X64, SYS_ioctl, {0, TIOCSTI}}) == kEperm);

        // --allow-userns: the block skipped, the calls are the kernel's to answer.
        CHECK(verdict(allowed, {X64, SYS_clone, {NEWUSER | SIGCHLD_}}) == kAllow);
        CHECK(verdict(allowed, {X64, SYS_unshare, {NEWUSER}}) == kAllow);
        CHECK(verdict(allowed, {X64, SYS_setns, {3, 0}}) == kAllow);
        CHECK(verdict(allowed, {X64, 435, {}}) == kAllow);
        CHECK(verdict(allowed, {I386, 120, {NEWUSER | SIGCHLD_}}) == compat);
        CHECK(verdict(allowed, {X64, SYS_ioctl, {0, TIOCSTI}}) == kEperm);
        CHECK(verdict(allowed, {X64, 1000, {}}) == kEnosys);
    }
}

TEST_CASE("user namespaces: the kernel refuses them under the filter and makes them with the block skipped") {
    for (const bool skip : {false, true}) {
        CAPTURE(skip);
        const pid_t pid = ::fork();
        if (pid == 0) {
            const auto& prog = dsh::harden::generated::kPrograms[sb::index(sb::Variant{})];
            const unsigned short from = skip ? dsh::harden::generated::kUsernsBlockLen : 0;
            sock_fprog fp{static_cast<unsigned short>(prog.len - from), const_cast<sock_filter*>(prog.filter + from)};
            if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &fp) != 0)
                ::_exit(100);
            uint64_t args[8] = {0x10000000, 0, 0, 0, 17, 0, 0, 0};  // struct clone_args: CLONE_NEWUSER, SIGCHLD
            const long c3 = ::syscall(435, args, sizeof args);
            if (c3 == 0) ::_exit(0);
            if (c3 > 0) ::waitpid(static_cast<pid_t>(c3), nullptr, 0);
            if (skip ? c3 <= 0 : (c3 != -1 || errno != ENOSYS)) ::_exit(1);
            const long u = ::syscall(SYS_unshare, 0x10000000);
            if (skip ? u != 0 : (u != -1 || errno != EPERM)) ::_exit(2);
            ::_exit(0);
        }
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
}

#endif  // __x86_64__
