/* Test helper: an LD_PRELOAD library standing for hostile code in the
 * environment. Its constructor runs in every dynamically linked process that
 * loads it and tries to leave a marker in each directory listed in
 * $DSH_MARK_DIRS (colon-separated), named after the process's executable and
 * pid. The fault tests read the markers from outside: a marker outside the
 * writable roots written by anything but the caller's own dsh-confine process
 * would be code that ran unconfined. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void) {
    const char *dirs = getenv("DSH_MARK_DIRS");
    if (!dirs) return;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) n = 0;
    exe[n] = '\0';
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    char *copy = strdup(dirs);
    for (char *d = strtok(copy, ":"); d; d = strtok(NULL, ":")) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s.%d", d, base, (int)getpid());
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            (void)!write(fd, exe, strlen(exe));
            close(fd);
        }
    }
    free(copy);
}
