/* The cost of issue 38's checks that each layer took, measured on the system
 * calls they make (src/linux/harden.cpp seccomp_took, src/linux/landlock_apply.cpp
 * probe_ready/verify_restricted), in a process with a seccomp filter (one that
 * refuses TIOCSTI) and a Landlock domain (read everywhere, write nowhere) of its own.
 *
 *   cc -O2 -o verify_cost bench/verify_cost.c && ./verify_cost [ROUNDS]
 *
 * Prints the median and the mean per check, in microseconds: the Landlock check
 * (faccessat + open) and the seccomp check (a random mark, the program copied with
 * it, the mark's ioctl and TIOCSTI's), the same with or without an earlier filter. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += t[i];
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("%-52s median %6.2f us  mean %6.2f us  p90 %6.2f us\n", what, t[n / 2], sum / n, t[n * 9 / 10]);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20000;
    double *t = calloc((size_t)rounds, sizeof *t);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return perror("nnp"), 1;
    /* Landlock: write and make rights handled, read granted on / (ABI 1 rights). */
    struct landlock_ruleset_attr ra = {.handled_access_fs = (1ULL << 13) - 1};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
    if (rs < 0) return perror("landlock_create_ruleset"), 1;
    struct landlock_path_beneath_attr pb = {.allowed_access = LANDLOCK_ACCESS_FS_EXECUTE |
        LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, .parent_fd = open("/", O_PATH)};
    if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) ||
        syscall(SYS_landlock_restrict_self, rs, 0))
        return perror("landlock"), 1;
    for (int i = 0; i < rounds; ++i) {
        double a = now_us();
        int ok = faccessat(AT_FDCWD, "/proc/self/comm", W_OK, AT_EACCESS) == 0;
        int fd = open("/proc/self/comm", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        t[i] = now_us() - a;
        if (!ok || fd >= 0 || errno != EACCES) return fprintf(stderr, "landlock probe: not denied\n"), 1;
    }
    report("Landlock check (faccessat + open, EACCES)", t, rounds);
    /* A filter as dsh-confine's: TIOCSTI refused with EPERM, the process's own mark
     * (a random ioctl command) with EXFULL, the rest allowed. */
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x64730c5e, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EXFULL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) return perror("seccomp"), 1;
    /* The program dsh-confine copies and marks: its longest variant is 192 instructions. */
    static struct sock_filter big[192], copy[192];
    big[100].code = BPF_JMP | BPF_JEQ | BPF_K;
    big[100].k = 0x64730c5e;
    for (int i = 0; i < rounds; ++i) {
        double a = now_us();
        unsigned mark = 0;
        if (syscall(SYS_getrandom, &mark, sizeof mark, 1) != sizeof mark) return perror("getrandom"), 1;
        for (int k = 0; k < 192; ++k) {
            copy[k] = big[k];
            if (copy[k].code == (BPF_JMP | BPF_JEQ | BPF_K) && copy[k].k == 0x64730c5e) copy[k].k = mark;
        }
        int rc1 = ioctl(-1, 0x64730c5e, NULL);
        int e1 = errno;
        int rc2 = ioctl(-1, TIOCSTI, NULL);
        int e2 = errno;
        t[i] = now_us() - a;
        if (rc1 != -1 || e1 != EXFULL || rc2 != -1 || e2 != EPERM || copy[100].k != mark)
            return fprintf(stderr, "seccomp probe\n"), 1;
    }
    report("seccomp check (getrandom + mark a copy + 2 ioctls)", t, rounds);
    return 0;
}
