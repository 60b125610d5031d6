// The thin part: Landlock system calls, read like the kernel's sandboxer.
// Every call is checked; a rule that cannot be added fails the whole run.
#include <cerrno>
#include <cstring>
#include <string_view>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock.hpp"

// Syscall numbers are shared by every architecture since 5.13.
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

namespace dsh::landlock {
namespace {

constexpr uint32_t CREATE_RULESET_VERSION = 1U << 0;
constexpr int RULE_PATH_BENEATH = 1;

// struct landlock_ruleset_attr as of ABI 6. The kernel copies it with
// copy_struct_from_user, so a larger struct whose tail is zero is accepted by
// older kernels; fields are zeroed for ABIs that do not know them.
struct RulesetAttr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct __attribute__((packed)) PathBeneathAttr {
    uint64_t allowed_access;
    int32_t parent_fd;
};

}  // namespace

[[gnu::hot]] int query_abi() noexcept {
    // Asked once per process: auto's chain asks for bwrap's stage and again
    // for Landlock alone, and the answer cannot change.
    static int known = 0;
    if (known == 0) {
        const long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, CREATE_RULESET_VERSION);
        known = v < 0 ? -errno : static_cast<int>(v);
    }
    return known;
}

std::string describe_unavailable(int negative_errno) {
    switch (-negative_errno) {
        case ENOSYS: return "Landlock is not available: the kernel has no landlock system calls (ENOSYS)";
        case EOPNOTSUPP:
            return "Landlock is not available: it is built into the kernel but not enabled (EOPNOTSUPP; "
                   "add landlock to the lsm= boot parameter)";
        default: return fmt::format("Landlock is not available: {}", std::strerror(-negative_errno));
    }
}

[[gnu::hot]] Outcome build_ruleset(const Ruleset& plan, int& fd, std::vector<Skipped>& skipped) {
    RulesetAttr attr{plan.handled_fs, plan.handled_net, plan.scoped};
    long rs = ::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
    if (rs < 0)
        return failf(Err::SandboxUnavailable, "landlock_create_ruleset: {}", std::strerror(errno));
    fd = static_cast<int>(rs);
    for (const auto& rule : plan.rules) {
        // A root's descriptor, opened once when the policy was built, is used
        // as it is: re-opening its path would grant whatever is there now.
        const bool owned = rule.fd < 0;
        int pfd = owned ? ::open(rule.path.c_str(), O_PATH | O_CLOEXEC) : rule.fd;
        if (pfd < 0) {
            const int e = errno;
            if (rule.required) {
                ::close(fd);
                return failf(Err::SandboxUnavailable, "cannot open rule path {}: {}", rule.path, std::strerror(e));
            }
            skipped.push_back({rule.path, fmt::format("not granted: {}", std::strerror(e))});
            continue;
        }
        auto done = [&] {
            if (owned) ::close(pfd);
        };
        struct stat st {};
        if (::fstat(pfd, &st) != 0) {
            const int e = errno;
            done();
            ::close(fd);
            return failf(Err::SandboxUnavailable, "cannot stat rule path {}: {}", rule.path, std::strerror(e));
        }
        PathBeneathAttr pb{rule.access, pfd};
        if (!S_ISDIR(st.st_mode)) pb.allowed_access &= FILE_RIGHTS;
        if (pb.allowed_access != 0 &&
            ::syscall(SYS_landlock_add_rule, fd, RULE_PATH_BENEATH, &pb, 0U) != 0) {
            const int e = errno;
            done();
            ::close(fd);
            return failf(Err::SandboxUnavailable, "landlock_add_rule {}: {}", rule.path, std::strerror(e));
        }
        done();
    }
    return Outcome::success();
}

[[gnu::hot]] bool restrict_self(int ruleset_fd, Fault& f) noexcept {
    if (::syscall(SYS_landlock_restrict_self, ruleset_fd, 0U) != 0) {
        f = Fault{Step::RestrictSelf, errno, -1};
        return false;
    }
    return true;
}

bool probe_is_denied(const Ruleset& plan) noexcept {
    for (const auto& r : plan.rules) {
        if (!(r.access & WRITE_FILE)) continue;
        const std::string_view p = r.path;
        if (p == "/" || p == "/proc" || p.substr(0, 6) == "/proc/") return false;
    }
    return true;
}

[[gnu::hot]] bool probe_ready(Fault& f) noexcept {
    if (::faccessat(AT_FDCWD, kDeniedProbe, W_OK, AT_EACCESS) == 0) return true;
    f = Fault{Step::LandlockUnverified, errno, 2};
    return false;
}

[[gnu::hot]] bool verify_restricted(Fault& f) noexcept {
    const int fd = ::open(kDeniedProbe, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) {
        ::close(fd);
        f = Fault{Step::LandlockUnverified, 0, 0};
        return false;
    }
    if (errno == EACCES) return true;
    f = Fault{Step::LandlockUnverified, errno, 1};
    return false;
}

}  // namespace dsh::landlock
