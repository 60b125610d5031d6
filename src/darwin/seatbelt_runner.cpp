// Built for darwin hosts only. This project's CI (Linux) unit-tests its pure
// half (seatbelt_plan.cpp) and cross-compiles and links this file into the
// macOS dsh-confine (tests/cross/build-macos.sh); it has never run on a Mac.
#include "seatbelt_runner.hpp"

#include <climits>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "seatbelt_plan.hpp"

namespace dsh::seatbelt {

namespace {

Outcome plan_sandbox_exec(dsh::Plan& l) {
    Confinement& c = l.c;
    // The network axis is not governed here (docs/PLATFORMS.md): refused, never ignored.
    if (c.policy.network != Network::Host)
        return failf(Err::SandboxUnavailable, "seatbelt does not govern the network yet: --net {} cannot hold; "
                     "use --net host", to_string(c.policy.network));
    const std::string exe(SANDBOX_EXEC);
    struct stat st {};
    if (::stat(exe.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(exe.c_str(), X_OK) != 0)
        return failf(Err::SandboxUnavailable, "{} is missing or not executable", exe);
    // macOS's own view: realpath(3) resolves /tmp -> /private/tmp and
    // $TMPDIR (/var/folders/...) -> /private/var/folders/..., which is what
    // Seatbelt matches against.
    RealpathView host = [](const std::string& p) -> std::optional<std::string> {
        char buf[PATH_MAX];
        if (::realpath(p.c_str(), buf) == nullptr) return std::nullopt;
        return std::string(buf);
    };
    Plan p = plan(c.policy, c.argv, host);
    // sandbox-exec execs the command itself: the confined process keeps
    // dsh-confine's pid and parent, so it dies or is waited on as before.
    l.exec_path = exe;
    l.exec_is_runner = true;  // sandbox-exec missing or unusable: a runner failure
    l.exec_argv = p.argv;
    c.exec_argv = p.argv;
    c.runner = RunnerKind::Seatbelt;
    c.layers = {p.layer};
    c.denial_signatures = p.denial_signatures;
    c.runner_failure_rules = p.runner_failure_rules;
    c.hardening = {};
    // The record shows the roots as Seatbelt matches them (canonical,
    // deduplicated), each keeping the source of its first spelling.
    std::vector<WritableRoot> roots;
    for (const auto& r : c.policy.writable_roots) {
        const std::string canon = canonical(r.path, host);
        bool seen = false;
        for (const auto& x : roots) seen = seen || x.path == canon;
        if (!seen) roots.push_back({canon, r.source, true});
    }
    c.policy.writable_roots = std::move(roots);
    return Outcome::success();
}

class Runner final : public dsh::Runner {
public:
    RunnerKind kind() const noexcept override { return RunnerKind::Seatbelt; }
    // A chain of one, taken without a probe: sandbox-exec's own start is the test.
    Verdict probe(const RunnerEnv&) const override { return {Verdict::Usable, {}, {}}; }
    Outcome plan(const RunnerEnv&, const Verdict&, dsh::Plan& p) const override { return plan_sandbox_exec(p); }
    nlohmann::ordered_json describe(const RunnerEnv&) const override {
        const std::string exe(SANDBOX_EXEC);
        struct stat st {};
        const bool usable = ::stat(exe.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(exe.c_str(), X_OK) == 0;
        return {{"runner", "seatbelt"}, {"usable", usable}, {"summary", exe},
                {"reason", usable ? nlohmann::ordered_json(nullptr)
                                  : nlohmann::ordered_json(exe + " is missing or not executable")}};
    }
};

}  // namespace

const dsh::Runner& runner() {
    static const Runner r;
    return r;
}

}  // namespace dsh::seatbelt
