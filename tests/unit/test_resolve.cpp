// resolve(): the precedence of every source, with a real config file and a
// real session log (issue 16: "resolve() has no unit test").
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/cli.hpp"
#include "../../src/resolve.hpp"

using namespace dsh;

namespace {

// Two directories under /var/tmp: `ws` (the cwd, and the root) and `state`
// (config file and session log, outside every root).
struct Scene {
    std::string base, ws, state, config, session;
    Scene() {
        char tmpl[] = "/var/tmp/dsh-unit-resolve-XXXXXX";
        base = ::mkdtemp(tmpl);
        ws = base + "/ws";
        state = base + "/state";
        ::mkdir(ws.c_str(), 0755);
        ::mkdir((base + "/other").c_str(), 0755);
        ::mkdir(state.c_str(), 0755);
        config = state + "/config.json";
        session = state + "/session.jsonl";
    }
    ~Scene() { (void)!std::system(("rm -rf '" + base + "'").c_str()); }
    void write(const std::string& path, const std::string& text) const {
        std::ofstream(path) << text;
        ::chmod(path.c_str(), 0644);
    }
    ResolveEnv env() const { return ResolveEnv{ws, std::nullopt}; }
};

Request run_request(const Scene& s) {
    Request r;
    r.config = s.config;
    r.argv = {"true"};
    return r;
}

}  // namespace

TEST_CASE("resolve: mode is flag > session > config > read-only, and says which") {
    Scene s;
    s.write(s.config, R"({"mode": "workspace-write"})");
    s.write(s.session, mode_event_line(Mode::WorkspaceWrite, 1, 1000, Network::Off));
    Request req = run_request(s);
    Resolution res;

    // config only
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.mode == Mode::WorkspaceWrite);
    CHECK(to_string(res.policy.mode_source) == "config");

    // the session beats the config
    req.session = s.session;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.mode == Mode::WorkspaceWrite);
    CHECK(to_string(res.policy.mode_source) == "session");

    // ... but never with danger-full-access from a log a confined run could have written (issue 37)
    s.write(s.session, mode_event_line(Mode::DangerFullAccess, 1, 1000));
    Outcome danger = resolve(req.policy_request(), s.env(), AskApprover::No, res);
    CHECK(danger.err == Err::StateUnsafe);
    CHECK(danger.message.find("a sandbox/mode event \"danger-full-access\" is taken only from the command line") !=
          std::string::npos);

    // the flag beats both
    req.mode = "read-only";
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.mode == Mode::ReadOnly);
    CHECK(to_string(res.policy.mode_source) == "flag");

    // nothing at all: read-only, "default"
    Request bare;
    bare.config = s.state + "/none.json";
    s.write(bare.config.value(), "{}");
    bare.argv = {"true"};
    REQUIRE(resolve(bare.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.mode == Mode::ReadOnly);
    CHECK(to_string(res.policy.mode_source) == "default");
}

TEST_CASE("resolve: root is --root > config workspaceRoot > cwd") {
    Scene s;
    s.write(s.config, R"({"mode": "workspace-write", "workspaceRoot": ")" + s.base + R"(/other"})");
    Request req = run_request(s);
    Resolution res;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.workspace_root == s.base + "/other");
    CHECK(to_string(res.policy.root_source) == "config");
    req.root = s.ws;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.workspace_root == s.ws);
    CHECK(to_string(res.policy.root_source) == "flag");
    s.write(s.config, R"({"mode": "workspace-write"})");
    req.root.reset();
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.workspace_root == s.ws);
    CHECK(to_string(res.policy.root_source) == "cwd");
}

TEST_CASE("resolve: root is --root > the session header's cwd > config workspaceRoot > cwd") {
    // The seed: "The workspace-write root is the session's immutable cwd; a
    // configured root is the fallback for agentless calls."
    Scene s;
    ::mkdir((s.base + "/sess").c_str(), 0755);
    s.write(s.config, R"({"mode": "workspace-write", "workspaceRoot": ")" + s.base + R"(/other"})");
    s.write(s.session, R"({"type":"session","id":"x","cwd":")" + s.base + "/sess\"}\n" +
                           mode_event_line(Mode::WorkspaceWrite, 1, 1000));
    Request req = run_request(s);
    req.session = s.session;
    Resolution res;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.workspace_root == s.base + "/sess");
    CHECK(to_string(res.policy.root_source) == "session");
    req.root = s.ws;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.workspace_root == s.ws);
    CHECK(to_string(res.policy.root_source) == "flag");
    // A log without a header: the config's root, as for a call without a session.
    s.write(s.session, mode_event_line(Mode::WorkspaceWrite, 1, 1000));
    req.root.reset();
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.workspace_root == s.base + "/other");
    CHECK(to_string(res.policy.root_source) == "config");
}

TEST_CASE("resolve: probe timeout is flag > config > 5000 ms") {
    Scene s;
    s.write(s.config, "{}");
    Request req = run_request(s);
    Resolution res;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.settings.probe_timeout_ms == 5000);
    CHECK(res.probe_timeout_source == "default");
    s.write(s.config, R"({"probeTimeoutMs": 250})");
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.settings.probe_timeout_ms == 250);
    CHECK(res.probe_timeout_source == "config");
    req.probe_timeout_ms = 40;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.settings.probe_timeout_ms == 40);
    CHECK(res.probe_timeout_source == "flag");
}

TEST_CASE("resolve: an unknown --mode is a usage error naming the valid modes") {
    Scene s;
    s.write(s.config, "{}");
    Request req = run_request(s);
    req.mode = "workspace";
    Resolution res;
    Outcome o = resolve(req.policy_request(), s.env(), AskApprover::No, res);
    CHECK(o.err == Err::Usage);
    CHECK(o.message == "unknown mode \"workspace\" (read-only, workspace-write or danger-full-access)");
}

TEST_CASE("resolve: escalation starts from the session's or the config's mode") {
    Scene s;
    s.write(s.config, R"({"mode": "workspace-write"})");
    s.write(s.session, mode_event_line(Mode::ReadOnly, 1, 1000));
    Request req = run_request(s);
    req.approver = "/bin/false";  // a command: from the command line (issue 37)
    req.escalate = "workspace-write";
    req.justification = "build the docs";
    Resolution res;

    // Base from the session (read-only): workspace-write is wider; validated, not asked.
    req.session = s.session;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.base_mode == Mode::ReadOnly);
    CHECK(to_string(res.base_source) == "session");
    CHECK(res.escalation == EscalationState::Pending);
    CHECK(res.policy.mode == Mode::WorkspaceWrite);
    CHECK(to_string(res.policy.mode_source) == "escalation");

    // Base from the config (workspace-write): the same target is not strictly wider.
    req.session.reset();
    Outcome o = resolve(req.policy_request(), s.env(), AskApprover::No, res);
    CHECK(o.err == Err::EscalationNotWider);
    CHECK(o.message == "sandbox escalation to \"workspace-write\" is not strictly wider than this call's current "
                       "\"workspace-write\" mode");
}

TEST_CASE("resolve: --net allow= and the config's allow list are checked and kept; the namespace is loopback's") {
    Scene s;
    s.write(s.config, "{}");
    Request req = run_request(s);
    Resolution res;
    req.net = "allow=registry.npmjs.org:443";
    req.net_deny = {"10.0.0.0/8,[fd00::/8]"};
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.network == Network::Loopback);
    CHECK(res.policy.network_source == NetworkSource::Flag);
    REQUIRE(res.policy.net_allow);
    REQUIRE(res.policy.net_allow->allow.size() == 1);
    CHECK(res.policy.net_allow->allow[0].text == "registry.npmjs.org:443");
    CHECK(res.policy.net_allow->deny.size() == 2);

    req.net_deny.clear();
    req.net = "allow=a.org,*";
    CHECK_THAT(resolve(req.policy_request(), s.env(), AskApprover::No, res).text(),
               Catch::Contains("bad network rule \"*\""));
    req.net = "allow=";
    CHECK_THAT(resolve(req.policy_request(), s.env(), AskApprover::No, res).text(),
               Catch::Contains("the list is empty"));

    req.net = "allow=a.org";
    req.net_deny = {"b.org:99999"};
    CHECK_THAT(resolve(req.policy_request(), s.env(), AskApprover::No, res).text(),
               Catch::Contains("bad network rule \"b.org:99999\""));

    // --net-deny narrows an allow list: alone it is a usage error, never ignored.
    req.net = "off";
    req.net_deny = {"b.org"};
    CHECK_THAT(resolve(req.policy_request(), s.env(), AskApprover::No, res).text(),
               Catch::Contains("--net-deny narrows an allow list and needs one"));

    // Under danger-full-access it cannot hold: refused, as --net off is.
    req.net = "allow=a.org";
    req.net_deny.clear();
    req.mode = "danger-full-access";
    CHECK_THAT(resolve(req.policy_request(), s.env(), AskApprover::No, res).text(),
               Catch::Contains("--net allow=a.org cannot hold under danger-full-access"));
    req.mode.reset();

    // The config's list, the same; a --net flag overrides it.
    s.write(s.config, R"({"network":{"allow":["a.org"],"deny":["b.a.org"]}})");
    req.net.reset();
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    REQUIRE(res.policy.net_allow);
    CHECK(res.policy.network_source == NetworkSource::Config);
    CHECK(res.policy.net_allow->deny.size() == 1);
    req.net = "loopback";
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.network == Network::Loopback);
    CHECK_FALSE(res.policy.net_allow);
}

TEST_CASE("resolve: --escalate-net host from an allow list drops the list with the namespace") {
    Scene s;
    s.write(s.config, "{}");
    Request req = run_request(s);
    req.approver = "/bin/false";  // a command: from the command line (issue 37)
    req.net = "allow=a.org";
    req.escalate_net = "host";
    req.justification = "fetch from anywhere";
    Resolution res;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.escalation == EscalationState::Pending);
    CHECK(res.policy.network == Network::Host);
    CHECK(res.policy.network_source == NetworkSource::Escalation);
    CHECK_FALSE(res.policy.net_allow);
}

TEST_CASE("resolve: the session log's allow-list is the policy's when no --net is given") {
    Scene s;
    s.write(s.config, R"({"network": {"allow": ["config.test"]}})");
    s.write(s.session, mode_event_line(Mode::ReadOnly, 1, 1000, Network::Loopback, {"session.test"}, {"evil.test"}));
    Request req = run_request(s);
    req.session = s.session;
    Resolution res;
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.network == Network::Loopback);
    CHECK(res.policy.network_source == NetworkSource::Session);
    REQUIRE(res.policy.net_allow);
    REQUIRE(res.policy.net_allow->allow.size() == 1);
    CHECK(res.policy.net_allow->allow[0].text == "session.test");
    REQUIRE(res.policy.net_allow->deny.size() == 1);
    // --net wins over it.
    req.net = "allow=flag.test";
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.net_allow->allow[0].text == "flag.test");
    CHECK(res.policy.net_allow->deny.empty());
    req.net = "off";
    REQUIRE(resolve(req.policy_request(), s.env(), AskApprover::No, res));
    CHECK(res.policy.network == Network::Off);
    CHECK_FALSE(res.policy.net_allow);
}
