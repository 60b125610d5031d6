/* The floors for a launcher (bench/run.sh builds this with cc -static):
 *
 *   exec-floor CMD ARGS...          execs CMD: the floor for a launcher that
 *                                   execs once (dsh-confine's exec mode);
 *   exec-floor --wait CMD ARGS...   spawns CMD (vfork-style), waits, exits
 *                                   with its status: the floor for one that
 *                                   stays and watches (--supervise).
 *
 * dsh-confine's rows minus these rows' are what dsh-confine itself costs. */
#include <spawn.h>
#include <string.h>
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
    if (argc < 2) return 2;
    execv(argv[1], argv + 1);
    return 127;
}
