// A static test program for the minimal-root test: no libc.so, no /bin/sh
// needed. `static-probe PATH...` writes "x" to each PATH and prints
// "PATH ok" or "PATH errno=N"; the exit status is the number of failures.
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char** argv) {
    int failures = 0;
    for (int i = 1; i < argc; ++i) {
        int fd = ::open(argv[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0 && ::write(fd, "x", 1) == 1 && ::close(fd) == 0) {
            std::printf("%s ok\n", argv[i]);
        } else {
            std::printf("%s errno=%d\n", argv[i], errno);
            ++failures;
        }
    }
    return failures;
}
