/* Test helper: try to push a character into the terminal on fd 0 with TIOCSTI,
 * once with the plain request and once with garbage in the upper 32 bits (the
 * kernel reads the low 32 bits: CVE-2019-10063), and TIOCLINUX likewise.
 * Prints what happened; the exit status is the number of attempts that worked. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int attempt(const char *name, unsigned long req, void *arg) {
    long rc = syscall(SYS_ioctl, 0, req, arg);
    printf("%s=%s\n", name, rc == 0 ? "ok" : strerror(errno));
    return rc == 0;
}

int main(void) {
    char c = '\n';
    char linux_arg[2] = {11 /* TIOCL_GETKMSGREDIRECT: harmless read */, 0};
    int worked = 0;
    worked += attempt("tiocsti", TIOCSTI, &c);
    worked += attempt("tiocsti-high-bits", 0xffffffff00000000UL | TIOCSTI, &c);
    worked += attempt("tioclinux", TIOCLINUX, linux_arg);
    worked += attempt("tioclinux-high-bits", 0xffffffff00000000UL | TIOCLINUX, linux_arg);
    fflush(stdout);
    return worked;
}
