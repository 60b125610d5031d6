#include "test_runner.hpp"

#include <cerrno>
#include <unistd.h>

namespace dsh::testrunner {

namespace {

class Layer final : public InProcess {
public:
    explicit Layer(const Script& s) : s_(s) {}
    Outcome prepare(Confinement&, const std::vector<int>&) override {
        prepared_ = true;
        return Outcome::success();
    }
    bool apply(Fault& f) const noexcept override {
        if (!prepared_) return f = Fault{Step::CapsRemain, 0, -1}, false;
        if (s_.apply_fails) return f = Fault{Step::RestrictSelf, EPERM, -1}, false;
        if (s_.apply_marker_fd >= 0) (void)!::write(s_.apply_marker_fd, "L", 1);
        return true;
    }
    std::string name() const override { return "test"; }
    nlohmann::ordered_json explain() const override { return {{"layer", "test"}}; }
    std::vector<std::pair<std::string, std::string>> explain_lines() const override {
        return {{"test:", "a test layer"}};
    }

private:
    const Script& s_;
    bool prepared_ = false;
};

class Fake final : public Runner {
public:
    Fake(RunnerKind kind, Script& s, std::string sh) : kind_(kind), s_(s), sh_(std::move(sh)) {}
    RunnerKind kind() const noexcept override { return kind_; }
    bool candidate(const Config&) const noexcept override { return s_.candidate; }
    bool private_tmp() const noexcept override { return s_.private_tmp; }
    bool egress_proxy() const noexcept override { return s_.egress_proxy; }
    bool protects_paths() const noexcept override { return s_.protects_paths; }
    std::string_view ends_descendants() const noexcept override { return s_.ends_descendants; }
    Verdict probe(const RunnerEnv&) const override {
        ++s_.probes;
        if (s_.probe == Verdict::Unusable) return {Verdict::Unusable, s_.unusable_reason, {}};
        return {s_.probe, {}, "ran"};
    }
    Outcome plan(const RunnerEnv&, const Verdict& v, Plan& p) const override {
        if (s_.plan_fails) return fail(Err::SandboxUnavailable, "the fake cannot plan");
        if (s_.plan_ends_run) return unavailable(to_string(p.c.policy.mode), "the fake broke");
        dsh::Layer l;
        l.name = "test";
        l.details["probe"] = v.how;
        p.c.runner = kind_;
        p.c.layers = {l};
        p.c.denial_signatures = {"permission denied"};
        p.in_process = std::make_unique<Layer>(s_);
        p.exec_path = "/bin/sh";
        p.exec_argv = {"sh", "-c", sh_};
        p.c.exec_argv = p.exec_argv;
        return Outcome::success();
    }
    nlohmann::ordered_json describe(const RunnerEnv&) const override {
        return {{"runner", std::string(to_string(kind_))}, {"usable", s_.probe == Verdict::Usable}, {"reason", nullptr}};
    }

private:
    RunnerKind kind_;
    Script& s_;
    std::string sh_;
};

}  // namespace

std::unique_ptr<Runner> make(RunnerKind kind, Script& script, std::string sh_script) {
    return std::make_unique<Fake>(kind, script, std::move(sh_script));
}

}  // namespace dsh::testrunner
