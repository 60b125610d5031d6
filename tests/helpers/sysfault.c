/* Test helper: make system calls fail, then exec a command.
 *
 *   sysfault ERRNO NR[@ARG=VALUE][,NR...] -- COMMAND [ARG...]
 *
 * Installs a seccomp filter (libseccomp) answering ERRNO (a number or ENOSYS,
 * EPERM, EOPNOTSUPP, EINVAL, ENOMEM, EMFILE) for each listed syscall number, then
 * execs COMMAND. With @ARG=VALUE only calls whose argument number ARG (0-5)
 * equals VALUE fail: e.g. 444@2=0 fails landlock_create_ruleset when it builds
 * a ruleset but not when it is asked for the ABI version (flags = 1), so a
 * later step of the setup can be made to fail alone. Used to show that dsh-confine fails closed when Landlock is missing
 * or refused at any step. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int parse_errno(const char *s) {
    if (!strcmp(s, "ENOSYS")) return ENOSYS;
    if (!strcmp(s, "EPERM")) return EPERM;
    if (!strcmp(s, "EOPNOTSUPP")) return EOPNOTSUPP;
    if (!strcmp(s, "EINVAL")) return EINVAL;
    if (!strcmp(s, "ENOMEM")) return ENOMEM;
    if (!strcmp(s, "EMFILE")) return EMFILE;
    return atoi(s);
}

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: sysfault ERRNO NR[,NR...] -- COMMAND [ARG...]\n");
        return 2;
    }
    int err = parse_errno(argv[1]);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return 2;
    char *list = strdup(argv[2]);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        char *at = strchr(tok, '@');
        int rc;
        if (at) {
            unsigned arg = 0;
            unsigned long long value = 0;
            if (sscanf(at + 1, "%u=%llu", &arg, &value) != 2 || arg > 5) {
                fprintf(stderr, "sysfault: bad filter %s\n", tok);
                return 2;
            }
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), atoi(tok), 1, SCMP_CMP(arg, SCMP_CMP_EQ, value));
        } else {
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), atoi(tok), 0);
        }
        if (rc) {
            fprintf(stderr, "sysfault: rule %s: %s\n", tok, strerror(-rc));
            return 2;
        }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || seccomp_load(ctx)) {
        perror("sysfault: seccomp");
        return 2;
    }
    execvp(argv[4], argv + 4);
    perror("sysfault: exec");
    return 127;
}
