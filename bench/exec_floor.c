/* The floors for a launcher (bench/run.sh builds this with cc -static):
 *
 *   exec-floor CMD ARGS...          execs CMD: the floor for a launcher that
 *                                   execs once (dsh-confine's exec mode);
 *   exec-floor --wait CMD ARGS...   spawns CMD (vfork-style), waits, exits
 *                                   with its status: the floor for one that
 *                                   stays and watches (--supervise);
 *   exec-floor --record N CMD ARGS...
 *                                   execs CMD with an empty, sealable memfd named as
 *                                   dsh-confine's launcher names the stage's
 *                                   record (kStageFdName) open as fd N: how
 *                                   bench/run.sh starts bwrap with the Landlock
 *                                   stage without dsh-confine in front (the
 *                                   stage runs only with that memfd).
 *
 * dsh-confine's rows minus these rows' are what dsh-confine itself costs. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--wait") == 0) {
        pid_t pid;
        int status;
        if (posix_spawn(&pid, argv[2], NULL, NULL, argv + 2, environ) != 0) return 127;
        while (waitpid(pid, &status, 0) < 0) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (argc >= 4 && strcmp(argv[1], "--record") == 0) {
        int want = atoi(argv[2]);
        int fd = memfd_create("dsh-confine-stage", MFD_ALLOW_SEALING);
        if (want < 3 || fd < 0) return 126;
        if (fd != want && (dup2(fd, want) != want || close(fd) != 0)) return 126;
        argv += 2;
        argc -= 2;
    }
    if (argc < 2) return 2;
    execv(argv[1], argv + 1);
    return 127;
}
