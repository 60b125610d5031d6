#include <catch2/catch.hpp>
#include <algorithm>

#include "../../src/linux/landlock.hpp"

using namespace dsh;
using namespace dsh::landlock;

namespace {
Policy ws_policy() {
    Policy p;
    p.mode = Mode::WorkspaceWrite;
    p.workspace_root = "/ws";
    p.writable_roots = {{"/ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, true}, {"/var/tmp/t", Grant::Tmpdir, true}};
    p.writable_files = {"/dev/null"};
    return p;
}
constexpr uint64_t ABI1 = EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR |
                          MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM;
std::vector<std::string> effects(const Layer& l, bool own) {
    std::vector<std::string> out;
    for (const auto& g : l.gaps)
        if (g.own_effect == own) out.push_back(g.effect);
    return out;
}
}  // namespace

TEST_CASE("handled rights per ABI 1..7, capped above the known ABI") {
    CHECK(handled_fs(0) == 0);
    CHECK(handled_fs(-38) == 0);
    CHECK(handled_fs(1) == ABI1);
    CHECK(handled_fs(2) == (ABI1 | REFER));
    CHECK(handled_fs(3) == (ABI1 | REFER | TRUNCATE));
    CHECK(handled_fs(4) == (ABI1 | REFER | TRUNCATE));
    CHECK(handled_fs(5) == (ABI1 | REFER | TRUNCATE | IOCTL_DEV));
    CHECK(handled_fs(6) == handled_fs(5));
    CHECK(handled_fs(7) == handled_fs(5));
    CHECK(handled_fs(42) == handled_fs(5));
    CHECK(handled_scopes(5) == 0);
    CHECK(handled_scopes(6) == (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL));
    CHECK(handled_scopes(7) == handled_scopes(6));
}

TEST_CASE("rules: read on /, file rights on /dev/null, all but devices on roots") {
    for (int abi = 1; abi <= 7; ++abi) {
        CAPTURE(abi);
        const Plan p = plan(ws_policy(), abi, false);
        const uint64_t h = handled_fs(abi);
        REQUIRE(p.rules.size() == 5);
        CHECK(p.rules[0].path == "/");
        CHECK(p.rules[0].access == (EXECUTE | READ_FILE | READ_DIR));
        CHECK(p.rules[1].path == "/dev/null");
        CHECK(p.rules[1].access == ((WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV) & h));
        CHECK((p.rules[1].access & ~FILE_RIGHTS) == 0);
        CHECK_FALSE(p.rules[1].required);
        for (int i = 2; i < 5; ++i) {
            CHECK(p.rules[i].access == (h & ~(MAKE_CHAR | MAKE_BLOCK)));
            CHECK((p.rules[i].access & (MAKE_CHAR | MAKE_BLOCK)) == 0);
        }
        CHECK(p.rules[2].path == "/ws");
        CHECK(p.rules[2].required);      // the workspace must exist
        CHECK_FALSE(p.rules[3].required);  // /tmp missing grants nothing
        CHECK_FALSE(p.rules[4].required);
        CHECK(p.handled_fs == h);
    }
}

TEST_CASE("read-only plan has no writable directory") {
    Policy p;
    p.writable_files = {"/dev/null"};
    const Plan pl = plan(p, 7, true);
    REQUIRE(pl.rules.size() == 2);
    CHECK(pl.rules[0].path == "/");
    CHECK(pl.rules[1].path == "/dev/null");
}

TEST_CASE("enforcement and gaps per ABI") {
    using V = std::vector<std::string>;
    const Policy ro = [] { Policy p; p.writable_files = {"/dev/null"}; return p; }();
    CHECK(effects(plan(ro, 1, true).layer, true) == V{"refer", "truncate", "ioctl-dev"});
    CHECK(effects(plan(ro, 2, true).layer, true) == V{"truncate", "ioctl-dev"});
    CHECK(effects(plan(ro, 3, true).layer, true) == V{"ioctl-dev"});
    CHECK(effects(plan(ro, 4, true).layer, true) == V{"ioctl-dev"});
    CHECK(effects(plan(ro, 5, true).layer, true).empty());
    CHECK(effects(plan(ro, 7, true).layer, true).empty());
    for (int abi = 1; abi <= 4; ++abi) CHECK(plan(ro, abi, true).layer.enforcement == Enforcement::Partial);
    CHECK(plan(ro, 5, true).layer.enforcement == Enforcement::Full);
    CHECK(plan(ro, 7, true).layer.enforcement == Enforcement::Full);
    // Not the command's own file effects: listed, never partial by themselves.
    CHECK(effects(plan(ro, 5, true).layer, false) == V{"signals", "abstract-unix-sockets", "unix-sockets", "file-locks",
                                                                 "other-terminals", "network"});
    CHECK(effects(plan(ro, 6, true).layer, false) == V{"unix-sockets", "file-locks", "other-terminals", "network"});
    // Metadata is open unless another layer closes it.
    const Plan ws = plan(ws_policy(), 7, false);
    CHECK(effects(ws.layer, true) == V{"metadata"});
    CHECK(ws.layer.enforcement == Enforcement::Partial);
    CHECK(ws.layer.details["abi"] == 7);
    CHECK(ws.layer.details["scoped"] == nlohmann::json::array({"abstract_unix_socket", "signal"}));
}

TEST_CASE("right names") {
    CHECK(right_names(EXECUTE | REFER | IOCTL_DEV) == std::vector<std::string>{"execute", "refer", "ioctl_dev"});
    CHECK(right_names(0).empty());
}

TEST_CASE("plan_rules (the bwrap stage's) gives exactly plan's rights and rules") {
    Policy ro;
    ro.mode = Mode::ReadOnly;
    ro.writable_files = {"/dev/null"};
    Policy ws = ws_policy();
    ws.writable_roots.push_back({"/srv/flag", Grant::Flag, true});
    ws.writable_roots.back().fd = 7;
    for (const Policy* p : {&ro, &ws}) {
        for (int abi = 1; abi <= KNOWN_ABI + 1; ++abi) {
            for (bool closed : {false, true}) {
                const Plan full = plan(*p, abi, closed);
                const Ruleset rules = plan_rules(*p, abi);
                CHECK(rules.abi == full.abi);
                CHECK(rules.handled_fs == full.handled_fs);
                CHECK(rules.scoped == full.scoped);
                CHECK(rules.host_namespaces == full.host_namespaces);
                REQUIRE(rules.rules.size() == full.rules.size());
                for (size_t i = 0; i < rules.rules.size(); ++i) {
                    CHECK(rules.rules[i].path == full.rules[i].path);
                    CHECK(rules.rules[i].access == full.rules[i].access);
                    CHECK(rules.rules[i].required == full.rules[i].required);
                    CHECK(rules.rules[i].fd == full.rules[i].fd);
                }
            }
        }
    }
}

TEST_CASE("network axis: the Landlock and seccomp parts per ABI and mode (issue 17)") {
    Policy p = ws_policy();
    SECTION("host: nothing handled, the network and unix-socket gaps stay on the layer") {
        for (int abi : {1, 4, 6, 7, 9, 10}) {
            CAPTURE(abi);
            const Plan pl = plan(p, abi, false);
            CHECK(pl.handled_net == 0);
            CHECK(pl.seccomp_net == 0);
            CHECK_FALSE(pl.refuse_unix);
            CHECK((pl.handled_fs & RESOLVE_UNIX) == 0);
            const auto g = effects(pl.layer, false);
            CHECK(std::find(g.begin(), g.end(), "network") != g.end());
            CHECK(std::find(g.begin(), g.end(), "unix-sockets") != g.end());
            const auto a = network_axis(Network::Host, abi, false);
            CHECK(a.failure.empty());
            CHECK(a.axis.enforced.empty());
            CHECK(a.axis.denial_signatures.empty());  // nothing refused, nothing to read (issue 38)
            REQUIRE(a.axis.gaps.size() == 1);
            CHECK(a.axis.gaps[0].effect == "network");
        }
    }
    SECTION("off: TCP handled from ABI 4, socket(AF_UNIX) refused below ABI 9, RESOLVE_UNIX from 9") {
        p.network = Network::Off;
        for (int abi : {1, 3, 4, 5, 6, 7, 8, 9, 10}) {
            CAPTURE(abi);
            const Plan pl = plan(p, abi, false);
            CHECK(pl.seccomp_net == 2);
            CHECK(pl.handled_net == (abi >= 4 ? (NET_BIND_TCP | NET_CONNECT_TCP) : 0));
            CHECK(pl.refuse_unix == (abi < 9));
            CHECK(((pl.handled_fs & RESOLVE_UNIX) != 0) == (abi >= 9));
            // RESOLVE_UNIX granted in the writable roots only, never on "/".
            for (const auto& r : pl.rules) {
                CAPTURE(r.path);
                const bool writable = r.path == "/ws" || r.path == "/tmp" || r.path == "/var/tmp/t";
                CHECK(((r.access & RESOLVE_UNIX) != 0) == (abi >= 9 && writable));
            }
            const auto g = effects(pl.layer, false);
            for (const char* e : {"network", "unix-sockets", "abstract-unix-sockets"})
                CHECK(std::find(g.begin(), g.end(), e) == g.end());
            for (bool ns : {false, true}) {
                const auto a = network_axis(Network::Off, abi, ns);
                CHECK(a.failure.empty());
                CHECK(a.axis.gaps.empty());  // every missing piece is closed by another layer
                // The socket filter's ENETUNREACH: a network refusal, not a file denial (issue 38).
                CHECK(a.axis.denial_signatures == std::vector<std::string>{"network is unreachable"});
                auto has = [&](const char* e) {
                    return std::find(a.axis.enforced.begin(), a.axis.enforced.end(), e) != a.axis.enforced.end();
                };
                CHECK(has("seccomp-socket-families"));
                CHECK(has("landlock-tcp") == (abi >= 4));
                CHECK(has("unix-socket-refused") == (abi < 9));
                CHECK(has("landlock-resolve-unix") == (abi >= 9));
                CHECK(has("landlock-scope-abstract-unix") == (abi >= 6));
                CHECK(has("net-namespace") == ns);
            }
        }
    }
    SECTION("loopback: no TCP rights (the namespace's own loopback works), a failure without a namespace") {
        p.network = Network::Loopback;
        for (int abi : {0, 4, 7, 9}) {
            CAPTURE(abi);
            Ruleset r;
            plan_network(r, Network::Loopback, abi);
            CHECK(r.seccomp_net == 1);
            CHECK(r.handled_net == 0);
            CHECK(r.refuse_unix == (abi < 9));
            CHECK_THAT(network_axis(Network::Loopback, abi, false).failure, Catch::Contains("use the bwrap runner"));
            const auto a = network_axis(Network::Loopback, abi, true);
            CHECK(a.failure.empty());
            CHECK(a.axis.enforced.front() == "net-namespace");
            CHECK(std::find(a.axis.enforced.begin(), a.axis.enforced.end(), "landlock-tcp") == a.axis.enforced.end());
        }
    }
    CHECK(right_names(RESOLVE_UNIX) == std::vector<std::string>{"resolve_unix"});
}

TEST_CASE("probe's network modes: what holds per runner, and why not") {
    // The Landlock runner with its own namespace allowed: every mode; off without one.
    auto d = describe_network(7, "", false, "");
    CHECK(d["off"]["usable"] == true);
    CHECK(d["off"]["enforcement"] == "full");
    CHECK(d["off"]["enforced"][0] == "seccomp-socket-families");
    CHECK(d["loopback"]["usable"] == true);
    CHECK(d["loopback"]["enforced"][0] == "net-namespace");
    CHECK(d["host"]["usable"] == true);
    CHECK(d["host"]["enforcement"] == "none");
    CHECK(d["host"]["gaps"].dump() == R"(["network"])");
    // The namespace refused: loopback cannot hold, with the reason; off still does.
    d = describe_network(7, "", false, "no namespace here");
    CHECK(d["loopback"]["usable"] == false);
    CHECK(d["loopback"]["reason"] == "no namespace here");
    CHECK(d["off"]["usable"] == true);
    // bwrap: the namespace is always there (off lists it too).
    d = describe_network(3, "", true, "");
    CHECK(d["off"]["enforced"][0] == "net-namespace");
    // A runner that cannot run holds no mode.
    d = describe_network(0, "unusable", false, "");
    for (const char* m : {"off", "loopback", "host"}) {
        CHECK(d[m]["usable"] == false);
        CHECK(d[m]["reason"] == "unusable");
    }
}
