#include "custom_runner.hpp"
#include "../own_state.hpp"

#include <cstdlib>
#include <sys/stat.h>

#include "../launch.hpp"
#include "bwrap_plan.hpp"

namespace dsh::custom {

namespace {

using ojson = nlohmann::ordered_json;

class Runner final : public dsh::Runner {
public:
    RunnerKind kind() const noexcept override { return RunnerKind::Custom; }
    // Its command gets bwrap's profile, --tmpfs /tmp included.
    bool private_tmp() const noexcept override { return true; }

    // Configured: auto takes it, without a probe; otherwise auto never asks.
    bool candidate(const Config& config) const noexcept override { return config.custom_runner(); }
    Verdict probe(const RunnerEnv&) const override { return {Verdict::Usable, {}, {}}; }

    Outcome plan(const RunnerEnv& env, const Verdict&, dsh::Plan& p) const override {
        Confinement& c = p.c;
        const auto& command = env.config.runner_command;
        if (command.empty())
            return fail(Err::Usage,
                        "--runner custom needs runnerCommand (and runnerFailureSignatures) in the config file");
        std::string resolved;
        // The seed: a runner that cannot be spawned is SANDBOX_UNAVAILABLE with
        // the runner failure.
        if (auto o = resolve_command(command.front(), std::getenv("PATH"), resolved); !o)
            return unavailable(to_string(c.policy.mode), "cannot start the runner " + o.message);
        // It runs outside any sandbox (issue 37): refused unless the caller
        // or root owns it and nobody else may rewrite it or a directory above.
        int program = -1;
        if (auto o = open_trusted_program(resolved, Err::StateUnsafe, "custom runner", program); !o) return o;
        p.owned.emplace_back(program);
        p.exec_fd = program;
        // The runner binds each root by its path (custom_argv): refuse a path
        // that no longer names the directory the policy opened. What is left
        // is the window between this check and the runner's mount, open only
        // to whoever can write in a root's parent directories meanwhile.
        for (const auto& r : c.policy.writable_roots) {
            struct stat st {};
            if (r.fd >= 0 && (::stat(r.path.c_str(), &st) != 0 || st.st_dev != r.dev || st.st_ino != r.ino))
                return unavailable(to_string(c.policy.mode), custom_root_moved_text(r.path));
        }
        auto argv = bwrap::custom_argv(command, c.policy, c.argv);
        Layer layer;
        layer.name = "custom";
        layer.enforcement = Enforcement::Full;  // asserted by the operator (seed: runnerCommand)
        layer.details["asserted"] = true;
        for (auto& h : c.policy.hidden_paths) h.why_not = kProtectedCustomText;
        for (auto& e : c.policy.protected_paths)
            if (e.why_not.empty()) e.why_not = kProtectedCustomText;
        c.runner = RunnerKind::Custom;
        c.layers = {layer};
        // Off and loopback: the runner's profile carries --unshare-net; no
        // socket filter of ours runs inside it, so unix sockets are as it leaves them.
        if (c.policy.network != Network::Host) {
            c.network.enforced = {"net-namespace-asserted"};
            c.network.denial_signatures = {kNetworkDenialSignature};  // a namespace without a route
            c.network.gaps = {{"unix-pathname", "the custom runner is given --unshare-net; dsh-confine applies no "
                                                "socket filter inside it, so host pathname unix sockets are as the "
                                                "runner leaves them", false}};
        }
        c.denial_signatures = {"read-only file system", "permission denied"};
        c.runner_failure_rules =
            nlohmann::json::array({{{"fatalSignatures", env.config.runner_failure_signatures}}});
        c.hardening.clear();
        c.exec_argv = argv;
        p.in_process.reset();
        p.exec_path = resolved;
        p.exec_argv = std::move(argv);
        p.exec_is_runner = true;
        return Outcome::success();
    }

    ojson describe(const RunnerEnv& env) const override {
        const auto& command = env.config.runner_command;
        ojson cu;
        cu["runner"] = "custom";
        cu["usable"] = !command.empty();
        // As a run does: a configured runnerCommand is what auto takes.
        cu["selectedBy"] = command.empty() ? "--runner custom" : "auto (runnerCommand is configured)";
        if (command.empty()) {
            cu["reason"] = "not configured (runnerCommand in the config file)";
        } else {
            cu["runnerCommand"] = command;
            cu["enforcement"] = "full";
            cu["note"] = "asserted by the operator; not probed";
            cu["reason"] = nullptr;
        }
        return cu;
    }
};

}  // namespace

const dsh::Runner& runner() {
    static const Runner r;
    return r;
}

}  // namespace dsh::custom
