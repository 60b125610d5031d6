// The filters dsh-confine embeds (seccomp_filters.h, exported by seccomp-gen at
// build time) are exactly what libseccomp builds now, instruction for
// instruction; and they say what harden promises. The e2e tests show the
// kernel enforcing them (TIOCSTI, metadata calls, the i386/x32 ABIs).
#include <catch2/catch.hpp>

#include <cerrno>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "linux/seccomp_build.hpp"
#include "seccomp_filters.h"

namespace {

template <size_t N>
std::vector<sock_filter> embedded(const sock_filter (&f)[N]) {
    return std::vector<sock_filter>(f, f + N);
}

bool same(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].code != b[i].code || a[i].jt != b[i].jt || a[i].jf != b[i].jf || a[i].k != b[i].k) return false;
    return true;
}

bool has_k(const std::vector<sock_filter>& p, uint32_t k) {
    for (const auto& f : p)
        if (f.k == k) return true;
    return false;
}

}  // namespace

TEST_CASE("embedded seccomp filters are what libseccomp builds") {
    for (bool metadata : {false, true}) {
        std::vector<sock_filter> now;
        std::string step;
        REQUIRE(dsh::seccomp_build::program(metadata, now, step) == 0);
        const auto built = metadata ? embedded(dsh::harden::generated::kBlockMetadata)
                                    : embedded(dsh::harden::generated::kBase);
        CAPTURE(metadata, now.size(), built.size());
        CHECK(same(now, built));
    }
}

TEST_CASE("seccomp filters name what they refuse") {
    const auto base = embedded(dsh::harden::generated::kBase);
    const auto meta = embedded(dsh::harden::generated::kBlockMetadata);
    // Both compare the ioctl command in its low 32 bits against TIOCSTI and
    // TIOCLINUX and answer EPERM; only the read-only one names chmod & co.
    for (const auto* p : {&base, &meta}) {
        CHECK(has_k(*p, SYS_ioctl));
        CHECK(has_k(*p, TIOCSTI));
        CHECK(has_k(*p, TIOCLINUX));
        CHECK(has_k(*p, SECCOMP_RET_ERRNO | EPERM));
        CHECK(has_k(*p, SECCOMP_RET_ALLOW));
    }
    for (long nr : std::initializer_list<long>{SYS_chmod, SYS_fchmodat, SYS_chown, SYS_utimensat, SYS_setxattr,
                                               SYS_removexattr, 452, 463, 466})
        CHECK(has_k(meta, static_cast<uint32_t>(nr)));
    CHECK_FALSE(has_k(base, SYS_fchmodat));
#if defined(__x86_64__)
    // Read-only refuses the other ABIs outright; the base filter covers them.
    CHECK(has_k(base, AUDIT_ARCH_X86_64));
    CHECK(has_k(meta, AUDIT_ARCH_X86_64));
    CHECK(has_k(meta, SECCOMP_RET_ERRNO | ENOSYS));
    CHECK(has_k(base, AUDIT_ARCH_I386));
#endif
}
