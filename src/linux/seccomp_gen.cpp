// seccomp-gen: writes seccomp_filters.h, the BPF of seccomp_build::program
// for both filters, for dsh-confine to load without libseccomp at run time.
// Run by the build (meson custom_target); prints the header on stdout.
#include <cstdio>
#include <cstring>

#include "seccomp_build.hpp"

namespace {

bool emit(const char* name, bool block_metadata) {
    std::vector<sock_filter> prog;
    std::string step;
    if (int rc = dsh::seccomp_build::program(block_metadata, prog, step); rc != 0) {
        std::fprintf(stderr, "seccomp-gen: %s: %s\n", step.c_str(), std::strerror(-rc));
        return false;
    }
    std::printf("inline constexpr sock_filter %s[] = {\n", name);
    for (const sock_filter& f : prog)
        std::printf("    {0x%04x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
    std::printf("};\n");
    return true;
}

}  // namespace

int main() {
    std::printf("// Generated at build time by seccomp-gen (src/linux/seccomp_gen.cpp) from\n"
                "// src/linux/seccomp_build.cpp with libseccomp. Do not edit.\n"
                "#pragma once\n\n#include <linux/filter.h>\n\nnamespace dsh::harden::generated {\n\n");
    if (!emit("kBase", false) || !emit("kBlockMetadata", true)) return 1;
    std::printf("\n}  // namespace dsh::harden::generated\n");
    return std::fflush(stdout) == 0 ? 0 : 1;
}
