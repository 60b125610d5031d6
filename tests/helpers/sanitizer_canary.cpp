// A deliberate bug, compiled with the project's own flags: in the sanitizer
// build (tests/run's `sanitize` stage) it must be caught. If it ever runs to
// the end there, the stage would not catch a real bug either.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <climits>
#include <string>

#include "policy.hpp"

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "heap") {
        // One byte past a heap buffer, through the project's own code path.
        char* buf = static_cast<char*>(std::malloc(8));
        std::memcpy(buf, "/a/b/../", 8);
        std::string_view view(buf, 9);  // one too many
        std::printf("%s\n", dsh::lexically_normal(view).c_str());
        std::free(buf);
    } else if (what == "ub") {
        volatile int big = INT_MAX;
        int r = big + argc;  // signed overflow
        std::printf("%d\n", r);
    } else if (what == "use-after-free") {
        char* p = new char[16];
        std::strcpy(p, "read-only");
        delete[] p;
        volatile char c = p[argc];  // read after free
        std::printf("%d\n", c);
    } else {
        return 2;
    }
    return 0;
}
