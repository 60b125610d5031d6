// The system calls of the bwrap stage and nothing else (bench/stage.sh): what
// the stage's own work would cost with no C++, no allocation and no page of
// dsh-confine's text. Built static against the build's seccomp_filters.h.
//
//   stage-floor [M][F][L][C][S] COMMAND ARGS...
//
// M: the read-only root check and the device nodes remounted read-only (as
// root); F: close_range; L: a Landlock ruleset with the read-only mode's two
// rules; C: the capability drops (securebits, the bounding-set walk, capset);
// S: the read-only mode's seccomp filter under bwrap. Then execs COMMAND.
// Errors are ignored: this measures, it does not confine.
#include <cstring>
#include <fcntl.h>
#include <initializer_list>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "linux/seccomp_build.hpp"  // index(): header-only
#include "seccomp_filters.h"

extern char** environ;

int main(int argc, char** argv) {
    if (argc < 3) return 2;
    const char* what = argv[1];
    auto has = [&](char c) { return std::strchr(what, c) != nullptr; };
    if (has('M')) {
        struct statvfs st {};
        statvfs("/", &st);
        if (geteuid() == 0)
            for (const char* n : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
                                  "/dev/console"})
                if (statvfs(n, &st) == 0) mount(nullptr, n, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, nullptr);
    }
    syscall(444, nullptr, 0, 1U);  // landlock_create_ruleset: the ABI
    if (has('F')) syscall(SYS_close_range, 3U, ~0U, 0U);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (has('L')) {
        struct { unsigned long long fs, net, scoped; } attr{0xffff, 0, 3};
        const int rs = static_cast<int>(syscall(444, &attr, sizeof attr, 0U));
        for (const char* p : {"/", "/dev/null"}) {
            const int fd = open(p, O_PATH | O_CLOEXEC);
            struct stat st {};
            fstat(fd, &st);
            struct __attribute__((packed)) { unsigned long long access; int fd; } rule{
                S_ISDIR(st.st_mode) ? 0xdULL : 0xc006ULL, fd};
            syscall(445, rs, 1, &rule, 0U);
            close(fd);
        }
        syscall(446, rs, 0U);
        close(rs);
    }
    if (has('C')) {
        __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct d[2] = {};
        syscall(SYS_capget, &h, d);
        if (d[0].effective & (1U << CAP_SETPCAP)) {
            prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED, 0, 0, 0);
            for (int c = 0; c < 1024; ++c)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) break;
        }
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        __user_cap_data_struct zero[2] = {};
        syscall(SYS_capset, &h, zero);
        syscall(SYS_capget, &h, d);
    }
    if (has('S')) {
        // Read-only under bwrap: metadata calls refused, bwrap's own IPC and PID namespaces.
        const auto& p = dsh::harden::generated::kPrograms[dsh::seccomp_build::index({true, false})];
        sock_fprog prog{p.len, const_cast<sock_filter*>(p.filter)};
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, &prog);
    }
    execve(argv[2], argv + 2, environ);
    return 127;
}
