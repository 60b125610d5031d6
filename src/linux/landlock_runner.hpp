// The native Landlock runner: dsh-confine restricts itself, then execs the
// command. No extra process, nothing left behind. Its in-process layers are
// also what bwrap's stage applies inside the sandbox.
#pragma once

#include "../runner.hpp"
#include "harden.hpp"
#include "landlock.hpp"
#include "netns.hpp"

namespace dsh::landlock {

// Fds, the network namespace (if any) and the allow-list's listener in it, no_new_privs, the ruleset, capabilities, seccomp: in that order. Fds
// first (Landlock does not govern fds opened before it), then no_new_privs
// (required by both restrict_self and seccomp for an unprivileged caller),
// then the ruleset, then capabilities, then seccomp last, so that its filter
// does not get in the way of the calls above. The ruleset is built by
// prepare(), in the launcher (as root, opening rule paths may need
// capabilities; it confines nobody until restrict_self). A plan with ABI 0
// (the bwrap stage on a kernel without Landlock) applies the rest alone.
// Landlock and seccomp are each checked to have taken before the exec
// (issue 38): a layer that did not is a runner failure, never "full".
class Layers final : public InProcess {
public:
    // The ruleset alone: the layer's record (Plan::layer) is the report's.
    // ns: the command's own network namespace (--net loopback on the Landlock
    // runner), entered after the fd cleanup and before everything else.
    // relay_fd (--net allow=, issue 19): the child's end of the socketpair
    // the listener on 127.0.0.1:relay_port, made in that namespace, goes out
    // over (net_relay.hpp); closed once it has.
    // allow_userns: --allow-userns (the seccomp program without its
    // user-namespace block).
    Layers(Ruleset plan, bool read_only, bool allow_userns, netns::Plan ns = {}, int relay_fd = -1,
           uint16_t relay_port = 0)
        : plan_(std::move(plan)), read_only_(read_only), allow_userns_(allow_userns), ns_(ns), relay_fd_(relay_fd),
          relay_port_(relay_port) {}
    Outcome prepare(Confinement& c, const std::vector<int>& open_fds) override;
    bool apply(Fault& f) const noexcept override;
    void allow_terminal(const std::string& path) override {
        plan_.rules.push_back({path, (READ_FILE | WRITE_FILE | IOCTL_DEV) & plan_.handled_fs, false});
    }
    std::string name() const override { return "landlock"; }
    nlohmann::ordered_json explain() const override;
    std::vector<std::pair<std::string, std::string>> explain_lines() const override;

private:
    Ruleset plan_;
    bool read_only_;
    bool allow_userns_;
    bool verify_landlock_ = false;  // the ruleset denies kDeniedProbe (prepare)
    netns::Plan ns_;
    int relay_fd_;
    uint16_t relay_port_;
    harden::FdCleanup fds_;
    Fd ruleset_;
};

// The runner (registry entry).
const dsh::Runner& runner();

}  // namespace dsh::landlock
