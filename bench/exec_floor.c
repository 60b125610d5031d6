/* The floor for a launcher that execs once: a static program that does
 * nothing but exec its arguments (bench/run.sh builds it with cc -static).
 * dsh-confine's rows minus this row's are what dsh-confine itself costs. */
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    execv(argv[1], argv + 1);
    return 127;
}
