/* Test helper: run a command on a kernel whose Landlock looks older.
 *
 *   landlock-abi N -- COMMAND [ARG...]
 *
 * Answers the Landlock ABI version query, landlock_create_ruleset(NULL, 0,
 * LANDLOCK_CREATE_RULESET_VERSION), with N for COMMAND and everything it
 * starts (bwrap and its stage included: seccomp filters are inherited across
 * fork and exec). Every other call, the real ruleset creation among them,
 * goes to the kernel, so what COMMAND then asks of Landlock is enforced by
 * the real kernel: a dsh-confine told "ABI N" handles only ABI N's rights,
 * and the test can check that the report's gaps and the world agree.
 *
 * How: a seccomp filter that sends the version query to this process
 * (SECCOMP_RET_USER_NOTIF), installed before the fork; this process answers
 * each such call with N until COMMAND ends, then exits with its status
 * (128 + n when it died by signal n). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR_LANDLOCK_CREATE_RULESET 444 /* the same number on every architecture */
#define CREATE_RULESET_VERSION 1

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: landlock-abi N -- COMMAND [ARG...]\n");
        return 2;
    }
    const int abi = atoi(argv[1]);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return 2;
    int rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, NR_LANDLOCK_CREATE_RULESET, 3, SCMP_A0(SCMP_CMP_EQ, 0),
                              SCMP_A1(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, CREATE_RULESET_VERSION));
    if (rc) {
        fprintf(stderr, "landlock-abi: rule: %s\n", strerror(-rc));
        return 2;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || (rc = seccomp_load(ctx)) != 0) {
        fprintf(stderr, "landlock-abi: seccomp: %s\n", strerror(rc ? -rc : errno));
        return 2;
    }
    const int listener = seccomp_notify_fd(ctx);
    if (listener < 0) {
        fprintf(stderr, "landlock-abi: no notification fd\n");
        return 2;
    }
    const pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        close(listener);
        execvp(argv[3], argv + 3);
        fprintf(stderr, "landlock-abi: %s: %s\n", argv[3], strerror(errno));
        _exit(127);
    }
    const int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) return 2;
    struct seccomp_notif *req = NULL;
    struct seccomp_notif_resp *resp = NULL;
    if (seccomp_notify_alloc(&req, &resp)) return 2;
    for (;;) {
        struct pollfd p[2] = {{listener, POLLIN, 0}, {pidfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return 2;
        }
        if (p[0].revents & POLLIN) {
            memset(req, 0, sizeof *req);
            if (seccomp_notify_receive(listener, req) == 0) {
                memset(resp, 0, sizeof *resp);
                resp->id = req->id;
                resp->val = abi;
                resp->error = 0;
                resp->flags = 0;
                (void)seccomp_notify_respond(listener, resp); /* the caller may be gone: fine */
            }
            continue;
        }
        if (p[1].revents & POLLIN) break;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return 2;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
