// The seccomp filters, built with libseccomp. Not linked into dsh-confine:
// seccomp-gen runs this at build time and dsh-confine embeds the BPF it
// exported (seccomp_filters.h), because generating a filter at run time cost
// 0.2-0.4 ms of every confined start (issue 8). The unit tests run it again
// and compare the programs instruction for instruction.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsh::seccomp_build {

// The highest system call number the filters were written for: file_setattr
// (469, Linux 6.17; 6.18 adds none). Every call up to it was reviewed; every
// number above it is answered ENOSYS before the rules run, so the next
// kernel's new calls (a new way to change metadata, to reach a shared object)
// are refused until someone reviews them and raises this number (Docker's
// profile does the same). From 424 on, every architecture dsh-confine builds
// for shares the numbers, so one constant serves the native ABI, i386 and x32
// (whose numbers carry kX32Bit; its own compat calls sit at 512..547).
inline constexpr uint32_t kMaxKnownSyscall = 469;
inline constexpr uint32_t kX32Bit = 0x40000000;
inline constexpr uint32_t kX32FirstCompat = 512;
inline constexpr uint32_t kX32LastCompat = 547;

// What a filter refuses beyond the rules of every run. Every run refuses:
// ioctl TIOCSTI and TIOCLINUX (EPERM; the command compared in its low 32 bits
// as the kernel reads it, CVE-2019-10063); io_uring (ENOSYS: it performs
// xattr, open and socket operations the other rules never see); the key
// management calls (EPERM: the user keyring is shared with the host even
// under bwrap); btrfs subvolume creation and deletion ioctls (directories
// Landlock does not see); unknown system call numbers (ENOSYS, above); and,
// unless --allow-userns, new user namespaces (clone/unshare with
// CLONE_NEWUSER and setns into one: EPERM; clone3: ENOSYS; userns_block).
struct Variant {
    // Read-only mode: chmod/chown/utimes/xattr calls and the inode-changing
    // ioctls (inode flags, fsxattr, versions, encryption, verity, clones,
    // labels) refused; on x86_64 the i386 and x32 ABIs refused with ENOSYS,
    // because libseccomp cannot name the newest metadata calls there.
    bool block_metadata = false;
    // The command shares the host's IPC and PID namespaces (the Landlock
    // runner; bwrap gives it its own): SysV IPC and POSIX message queues
    // refused, and the calls that change another process (prlimit64 with a
    // new limit, setpriority, sched_set*, ioprio_set, migrate/move_pages)
    // allowed only on the caller itself (pid 0).
    bool host_namespaces = false;
    // The network axis (issues 17 and 38), refusals with EACCES (Landlock's
    // own errno, so "permission denied" is the denial signature under every
    // runner). An allow-list: socket() and socketpair() make only the
    // (family, type, protocol) rows of kSocketKinds (seccomp_build.cpp) the
    // mode names, compared in the 32 bits the kernel reads of each; the type
    // may carry SOCK_NONBLOCK and SOCK_CLOEXEC and no other flag.
    //   kNetHost: nothing.
    //   kNetLoopback: socket() for AF_INET/AF_INET6 SOCK_STREAM (protocol 0
    //     or IPPROTO_TCP) and SOCK_DGRAM (0 or IPPROTO_UDP), AF_NETLINK
    //     SOCK_RAW/SOCK_DGRAM (NETLINK_ROUTE, NETLINK_SOCK_DIAG), and AF_UNIX
    //     stream, datagram and seqpacket (protocol 0) unless refuse_unix.
    //   kNetOff: socket() for AF_UNIX stream, datagram and seqpacket only,
    //     none at all with refuse_unix.
    // Either way socketpair() for AF_UNIX SOCK_STREAM and SOCK_SEQPACKET
    // (protocol 0), and SOCK_DGRAM unless refuse_unix; the i386/x32 ABIs are
    // refused with ENOSYS (i386's socketcall multiplexer hides the family in
    // memory, where seccomp cannot read it), and so is a native socketcall.
    uint8_t net = 0;
    // Pathname unix sockets cannot be governed by path below Landlock ABI 9:
    // no AF_UNIX socket() of any type (each can connect() or sendto() a host
    // listener), and no datagram socketpair (an unconnected datagram socket
    // can sendto() any named socket; AF_UNIX SOCK_RAW is one too, and is not
    // on the list either).
    bool refuse_unix = false;
};

inline constexpr uint8_t kNetHost = 0, kNetLoopback = 1, kNetOff = 2;

// Every program's mark (issue 38): ioctl with this command (its low 32 bits)
// is answered EXFULL, an errno nothing else gives for it (the kernel's own
// answer to ioctl(-1, ...) is EBADF). The value here is a placeholder: the
// process that loads the program replaces it in a copy with a random one of
// its own (harden::install_seccomp), so that finding its mark answered
// proves that its own filter took, not an outer one with the same program
// (an outer dsh-confine's). Every `jeq #kMarkPlaceholder` of a program is
// that comparison; the unit tests check there is one per architecture.
inline constexpr uint32_t kMarkPlaceholder = 0x64730c5eU;
inline constexpr int kMarkErrno = 54;  // EXFULL
// The longest program harden copies to mark (BPF's own limit is 4096).
inline constexpr size_t kMaxProgramLen = 1024;

// Every variant, in index() order: what seccomp-gen emits and harden loads.
constexpr size_t index(const Variant& v) noexcept {
    return ((static_cast<size_t>(v.net) * 2U + (v.refuse_unix ? 1U : 0U)) * 2U + (v.block_metadata ? 1U : 0U)) * 2U +
           (v.host_namespaces ? 1U : 0U);
}
inline constexpr size_t kVariantCount = 3 * 2 * 2 * 2;
struct VariantTable {
    Variant v[kVariantCount];
    constexpr VariantTable() : v{} {
        for (size_t i = 0; i < kVariantCount; ++i)
            v[i] = Variant{((i >> 1) & 1U) != 0, (i & 1U) != 0, static_cast<uint8_t>(i >> 3), ((i >> 2) & 1U) != 0};
    }
};
inline constexpr VariantTable kVariantTable{};
inline constexpr const Variant (&kVariants)[kVariantCount] = kVariantTable.v;

// The unknown-syscall guard alone (hand-written: libseccomp has no rule for
// "every number above N"). It falls through to the instruction after it.
// Returns 0, or a negative errno for an architecture whose table was not reviewed.
int unknown_syscall_guard(std::vector<sock_filter>& out);

// The user-namespace block alone (issue 38; seccomp_build.cpp says what it
// refuses). It falls through to the instruction after it, and every program
// starts with it: --allow-userns loads a program from the instruction after
// the block (harden.cpp, kUsernsBlockLen in seccomp_filters.h).
int userns_block(std::vector<sock_filter>& out);

// The whole filter of a variant: the user-namespace block, the guard, the
// socket allow-list (a network variant only), then libseccomp's program.
// Returns 0, or a negative errno with `step` naming what failed.
int program(const Variant& v, std::vector<sock_filter>& out, std::string& step);

}  // namespace dsh::seccomp_build
