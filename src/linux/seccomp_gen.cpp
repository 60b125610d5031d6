// seccomp-gen: writes seccomp_filters.h, the BPF of seccomp_build::program
// for every variant, for dsh-confine to load without libseccomp at run time.
// Run by the build (meson custom_target); prints the header on stdout.
#include <cstdio>
#include <cstring>

#include "seccomp_build.hpp"

namespace {

using dsh::seccomp_build::kVariants;
using dsh::seccomp_build::kVariantCount;

bool emit(size_t i, size_t& len) {
    std::vector<sock_filter> prog;
    std::string step;
    if (int rc = dsh::seccomp_build::program(kVariants[i], prog, step); rc != 0) {
        std::fprintf(stderr, "seccomp-gen: %s: %s\n", step.c_str(), std::strerror(-rc));
        return false;
    }
    std::printf("// block_metadata=%d host_namespaces=%d net=%d refuse_unix=%d\n", kVariants[i].block_metadata,
                kVariants[i].host_namespaces, kVariants[i].net, kVariants[i].refuse_unix);
    std::printf("inline constexpr sock_filter kFilter%zu[] = {\n", i);
    for (const sock_filter& f : prog)
        std::printf("    {0x%04x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
    std::printf("};\n");
    len = prog.size();
    return true;
}

}  // namespace

int main() {
    std::printf("// Generated at build time by seccomp-gen (src/linux/seccomp_gen.cpp) from\n"
                "// src/linux/seccomp_build.cpp with libseccomp. Do not edit.\n"
                "#pragma once\n\n#include <linux/filter.h>\n\nnamespace dsh::harden::generated {\n\n");
    // Every program starts with the user-namespace block; --allow-userns
    // skips it (harden.cpp).
    std::vector<sock_filter> block;
    if (int rc = dsh::seccomp_build::userns_block(block); rc != 0) {
        std::fprintf(stderr, "seccomp-gen: user-namespace block: %s\n", std::strerror(-rc));
        return 1;
    }
    std::printf("inline constexpr unsigned short kUsernsBlockLen = %zu;\n\n", block.size());
    size_t len[kVariantCount] = {};
    for (size_t i = 0; i < kVariantCount; ++i)
        if (!emit(i, len[i])) return 1;
    // Indexed by seccomp_build::index(variant).
    std::printf("\nstruct Program {\n    const sock_filter* filter;\n    unsigned short len;\n};\n"
                "inline constexpr Program kPrograms[] = {\n");
    for (size_t i = 0; i < kVariantCount; ++i) std::printf("    {kFilter%zu, %zu},\n", i, len[i]);
    std::printf("};\n\n}  // namespace dsh::harden::generated\n");
    return std::fflush(stdout) == 0 ? 0 : 1;
}
