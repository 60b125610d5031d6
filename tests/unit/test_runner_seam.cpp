// The runner seam, driven by a runner that exists only here
// (test_runner/): the chain picks it, supervise starts it, its layer is
// applied in the child, and its failures come back as data.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "chain.hpp"
#include "report.hpp"
#include "supervise.hpp"
#include "test_runner/test_runner.hpp"

using namespace dsh;

namespace {

Plan ws_plan() {
    Plan p;
    p.c.policy.mode = Mode::WorkspaceWrite;
    p.c.argv = {"true"};
    p.c.command_path = "/bin/true";
    return p;
}

// The report's lines, read back from a pipe.
std::vector<nlohmann::json> drain(int fd) {
    std::string all;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
    std::vector<nlohmann::json> out;
    size_t i = 0;
    while (i < all.size()) {
        size_t j = all.find('\n', i);
        if (j == std::string::npos) j = all.size();
        out.push_back(nlohmann::json::parse(all.substr(i, j - i)));
        i = j + 1;
    }
    return out;
}

}  // namespace

TEST_CASE("seam: auto passes over an unusable runner and records why") {
    testrunner::Script first, second;
    first.probe = Verdict::Unusable;
    first.unusable_reason = "no kernel support";
    auto a = testrunner::make(RunnerKind::Bwrap, first, "exit 0");
    auto b = testrunner::make(RunnerKind::Custom, second, "exit 0");
    Plan p = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get(), b.get()}));
    CHECK(p.c.runner == RunnerKind::Custom);
    REQUIRE(p.c.skipped.size() == 1);
    CHECK(p.c.skipped[0].runner == "bwrap");
    CHECK(p.c.skipped[0].reason == "no kernel support");
    CHECK(p.c.layers.at(0).details["probe"] == "ran");
    CHECK(p.in_process != nullptr);
}

TEST_CASE("seam: a runner that is not a candidate is not listed, and nothing usable fails closed") {
    testrunner::Script quiet, failing;
    quiet.candidate = false;
    quiet.probe = Verdict::Unusable;  // never asked: not a candidate
    failing.plan_fails = true;
    auto a = testrunner::make(RunnerKind::Custom, quiet, "exit 0");
    auto b = testrunner::make(RunnerKind::Landlock, failing, "exit 0");
    Plan p = ws_plan();
    Outcome o = chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get(), b.get()});
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::SandboxUnavailable);
    CHECK(o.runner_failure.empty());
    CHECK(o.text() == sandbox_unavailable_text("workspace-write"));
    REQUIRE(p.c.skipped.size() == 1);
    CHECK(p.c.skipped[0].runner == "landlock");
    CHECK(p.c.skipped[0].reason == "the fake cannot plan");
}

TEST_CASE("seam: a forced runner is planned without a probe; one not built here is refused") {
    testrunner::Script s;
    s.probe = Verdict::Unusable;  // never asked when forced
    auto a = testrunner::make(RunnerKind::Landlock, s, "exit 0");
    Plan p = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Landlock, RunnerEnv{}, p, {a.get()}));
    CHECK(p.c.layers.at(0).details["probe"] == "forced");
    Plan q = ws_plan();
    Outcome o = chain::choose(RunnerKind::Seatbelt, RunnerEnv{}, q, {a.get()});
    REQUIRE_FALSE(o);
    REQUIRE(q.c.skipped.size() == 1);
    CHECK(q.c.skipped[0].reason == "not available on this platform");
}

TEST_CASE("seam: a forced runner that cannot be used gives its reason as the run's") {
    testrunner::Script s;
    s.plan_fails = true;
    auto a = testrunner::make(RunnerKind::Landlock, s, "exit 0");
    Plan p = ws_plan();
    Outcome o = chain::choose(RunnerKind::Landlock, RunnerEnv{}, p, {a.get()});
    REQUIRE_FALSE(o);
    CHECK(o.runner_failure == "the fake cannot plan");
    // Not the seed's "no sandbox backend is usable": a runner was named, and it is the reason.
    CHECK(o.text() == "--runner landlock: the fake cannot plan; nothing else can confine this run here");
    auto b = testrunner::make(RunnerKind::Bwrap, s, "exit 0");
    Plan r = ws_plan();
    o = chain::choose(RunnerKind::Landlock, RunnerEnv{}, r, {b.get(), a.get()});
    CHECK(o.text() == "--runner landlock: the fake cannot plan; use --runner bwrap or auto (which picks a runner "
                      "that can)");
    Plan q = ws_plan();
    o = chain::choose(RunnerKind::Seatbelt, RunnerEnv{}, q, {a.get()});
    CHECK(o.text() == "--runner seatbelt: that runner does not exist on linux; use --runner landlock or auto");
}

TEST_CASE("seam: --private-tmp passes over a runner that cannot mount one; forced, it is the reason") {
    testrunner::Script cannot, can;
    can.private_tmp = true;
    auto a = testrunner::make(RunnerKind::Landlock, cannot, "exit 0");
    auto b = testrunner::make(RunnerKind::Bwrap, can, "exit 0");
    const std::string why = "landlock cannot give the command a private /tmp (--private-tmp): it restricts access "
                            "to the host's files and mounts nothing; use --runner bwrap (or auto), or drop "
                            "--private-tmp";
    // auto: the one that can is taken; the other is listed, and never probed.
    Plan p = ws_plan();
    p.c.policy.private_tmp = true;
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get(), b.get()}));
    CHECK(p.c.runner == RunnerKind::Bwrap);
    REQUIRE(p.c.skipped.size() == 1);
    CHECK(p.c.skipped[0].runner == "landlock");
    CHECK(p.c.skipped[0].reason == why);
    CHECK(cannot.probes == 0);
    // forced: 125 with the reason.
    Plan q = ws_plan();
    q.c.policy.private_tmp = true;
    Outcome o = chain::choose(RunnerKind::Landlock, RunnerEnv{}, q, {a.get(), b.get()});
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::SandboxUnavailable);
    CHECK(o.exit_status() == 125);
    CHECK(o.text() == "--runner landlock: " + why);
    // auto with nothing that can: fails closed, each one listed.
    Plan r = ws_plan();
    r.c.policy.private_tmp = true;
    CHECK_FALSE(chain::choose(RunnerKind::Auto, RunnerEnv{}, r, {a.get()}));
    CHECK(r.c.skipped.size() == 1);
    // Without --private-tmp both are candidates, in order.
    Plan t = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, t, {a.get(), b.get()}));
    CHECK(t.c.runner == RunnerKind::Landlock);
}

TEST_CASE("seam: descendants are killed by the runner's mechanism or a parent that stays; kept only where possible") {
    testrunner::Script own, none;
    own.ends_descendants = "pid-namespace";
    auto a = testrunner::make(RunnerKind::Bwrap, own, "exit 0");
    auto b = testrunner::make(RunnerKind::Landlock, none, "exit 0");
    const chain::Runners both{a.get(), b.get()};
    // Default: the runner's own mechanism, whether or not a parent stays.
    Plan p = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, both));
    chain::settle_descendants(p, false, both);
    CHECK(p.c.descendants.killed);
    CHECK(p.c.descendants.by == "pid-namespace");
    // None of its own: where a parent stays, a runner that becomes the command gets that
    // parent's PID namespace (supervise falls back to the subreaper where the kernel refuses
    // it), a runner's program the parent as subreaper; else left running and why.
    Plan q = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Landlock, RunnerEnv{}, q, both));
    chain::settle_descendants(q, true, both);
    CHECK(q.c.descendants.killed);
    CHECK(q.c.descendants.by == "pid-namespace");
    Plan prog = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Landlock, RunnerEnv{}, prog, both));
    prog.in_process.reset();  // a runner's program (a custom runner), not the command
    chain::settle_descendants(prog, true, both);
    CHECK(prog.c.descendants.by == "subreaper");
    chain::settle_descendants(q, false, both);
    CHECK_FALSE(q.c.descendants.killed);
    CHECK(q.c.descendants.by.empty());
    CHECK(q.c.descendants.why == "exec mode leaves no parent to end them; use --supervise");
    // --keep-descendants: auto passes over the one that always ends them.
    const std::string why = "bwrap cannot leave the command's background processes running (--keep-descendants): "
                            "its PID namespace ends them all with the command; use --runner landlock (or auto), "
                            "or drop --keep-descendants";
    Plan k = ws_plan();
    k.c.policy.keep_descendants = true;
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, k, both));
    CHECK(k.c.runner == RunnerKind::Landlock);
    REQUIRE(k.c.skipped.size() == 1);
    CHECK(k.c.skipped[0].reason == why);
    chain::settle_descendants(k, true, both);
    CHECK_FALSE(k.c.descendants.killed);
    CHECK(k.c.descendants.why == "asked (--keep-descendants)");
    // Forced, it is the run's reason: 125.
    Plan f = ws_plan();
    f.c.policy.keep_descendants = true;
    Outcome o = chain::choose(RunnerKind::Bwrap, RunnerEnv{}, f, both);
    REQUIRE_FALSE(o);
    CHECK(o.exit_status() == 125);
    CHECK(o.text() == "--runner bwrap: " + why);
    // danger-full-access: nothing confined, nothing ended.
    Plan d = ws_plan();
    d.c.policy.mode = Mode::DangerFullAccess;
    chain::settle_descendants(d, true, both);
    CHECK_FALSE(d.c.descendants.killed);
}

TEST_CASE("seam: a plan failure that ends the run is returned as it is, with its cause as data") {
    testrunner::Script s;
    s.plan_ends_run = true;
    auto a = testrunner::make(RunnerKind::Custom, s, "exit 0");
    Plan p = ws_plan();
    Outcome o = chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get()});
    REQUIRE_FALSE(o);
    CHECK(o.runner_failure == "the fake broke");
    CHECK(o.text() == sandbox_unavailable_text("workspace-write") + " Runner failure: the fake broke");
    CHECK(p.c.skipped.empty());
}

TEST_CASE("seam: supervise starts the planned runner, its layer applies in the child, the status is the command's") {
    int marker[2], rep[2];
    REQUIRE(::pipe2(marker, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(rep, O_CLOEXEC) == 0);
    testrunner::Script s;
    s.apply_marker_fd = marker[1];
    auto a = testrunner::make(RunnerKind::Custom, s, "exit 7");
    Plan p = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get()}));
    Report report;
    REQUIRE(report.open(rep[1]));
    CHECK(supervise(p, report, {}) == 7);
    ::close(rep[1]);
    ::close(marker[1]);
    char c = 0;
    CHECK(::read(marker[0], &c, 1) == 1);
    CHECK(c == 'L');
    auto lines = drain(rep[0]);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0]["type"] == "confinement");
    CHECK(lines[1]["type"] == "result");
    CHECK(lines[1]["exitCode"] == 7);
    CHECK(lines[1]["runner"] == "custom");
    CHECK(lines[1]["evidence"] == "exec-pipe");
    CHECK(lines[1]["runnerFailed"] == false);
    ::close(marker[0]);
    ::close(rep[0]);
}

TEST_CASE("seam: a layer that fails in the child comes back as a fault, rendered once, never run") {
    int rep[2];
    REQUIRE(::pipe2(rep, O_CLOEXEC) == 0);
    testrunner::Script s;
    s.apply_fails = true;
    auto a = testrunner::make(RunnerKind::Custom, s, "echo ran; exit 0");
    Plan p = ws_plan();
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get()}));
    Report report;
    REQUIRE(report.open(rep[1]));
    CHECK(supervise(p, report, {}) == 125);
    ::close(rep[1]);
    auto lines = drain(rep[0]);
    REQUIRE(lines.size() == 2);  // no confinement record: the layer never held
    CHECK(lines[0]["type"] == "result");
    CHECK(lines[0]["runnerFailed"] == true);
    CHECK(lines[0]["runnerFailure"] == "landlock_restrict_self: Operation not permitted");
    CHECK(lines[0]["exitCode"] == 125);
    CHECK(lines[1]["type"] == "error");
    CHECK(lines[1]["code"] == "SANDBOX_UNAVAILABLE");
    CHECK(lines[1]["runnerFailure"] == "landlock_restrict_self: Operation not permitted");
    ::close(rep[0]);
}

TEST_CASE("seam: --net allow= passes over a runner that cannot hand out a listener; forced, it is the reason") {
    testrunner::Script cannot, can;
    can.egress_proxy = true;
    auto a = testrunner::make(RunnerKind::Custom, cannot, "exit 0");
    auto b = testrunner::make(RunnerKind::Landlock, can, "exit 0");
    net::Rules rules;
    REQUIRE(net::parse_rules("allowed.test", rules.allow));
    const std::string why = "--net allow= needs the bwrap or Landlock runner: the custom runner cannot hand a "
                            "listener in the command's network namespace to dsh-confine's proxy; use --runner bwrap "
                            "or --runner landlock (or auto)";
    Plan p = ws_plan();
    p.c.policy.network = Network::Loopback;
    p.c.policy.net_allow = rules;
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {a.get(), b.get()}));
    CHECK(p.c.runner == RunnerKind::Landlock);
    REQUIRE(p.c.skipped.size() == 1);
    CHECK(p.c.skipped[0].reason == why);
    CHECK(cannot.probes == 0);
    Plan q = ws_plan();
    q.c.policy.network = Network::Loopback;
    q.c.policy.net_allow = rules;
    Outcome o = chain::choose(RunnerKind::Custom, RunnerEnv{}, q, {a.get(), b.get()});
    REQUIRE_FALSE(o);
    CHECK(o.exit_status() == 125);
    CHECK(o.text() == "--runner custom: " + why);
}

TEST_CASE("seam: a protection is held or nothing runs; auto never takes a runner that drops one (issue 37)") {
    testrunner::Script carves, cannot;
    carves.protects_paths = true;
    carves.ends_descendants = "pid-namespace";
    auto a = testrunner::make(RunnerKind::Bwrap, carves, "exit 0");
    auto b = testrunner::make(RunnerKind::Landlock, cannot, "exit 0");
    const chain::Runners both{a.get(), b.get()};
    const auto with = [](Plan p) {
        ProtectedPath dotgit{"/ws/.git", "default", "git", true, true, true, false, 7};
        ProtectedPath hooks{"/ws/.git/hooks", "default", "git", true, true, false, false, 8};
        ProtectedPath absent{"/ws/.envrc", "default", "agent", false, false, false, false, -1};
        p.c.policy.protected_paths = {dotgit, hooks, absent};
        return p;
    };
    const std::string drop = "or --unprotect /ws/.git to let the command write what is protected below it";
    // Forced: its own code, 125, one line with the first path, the count and both ways out.
    Plan f = with(ws_plan());
    Outcome o = chain::choose(RunnerKind::Landlock, RunnerEnv{}, f, both);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::ProtectionUnavailable);
    CHECK(o.exit_status() == 125);
    CHECK(o.text() == "landlock cannot protect /ws/.git (and 1 more), which this run asks for, and would run "
                      "without it: use --runner bwrap (or auto); " + drop);
    CHECK(cannot.probes == 0);
    // auto takes the one that carves.
    Plan p = with(ws_plan());
    REQUIRE(chain::choose(RunnerKind::Auto, RunnerEnv{}, p, {b.get(), a.get()}));
    CHECK(p.c.runner == RunnerKind::Bwrap);
    // ... and when that one cannot run, refuses with why, never falling back.
    Plan k = with(ws_plan());
    k.c.policy.keep_descendants = true;
    o = chain::choose(RunnerKind::Auto, RunnerEnv{}, k, both);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::ProtectionUnavailable);
    CHECK(o.text() == "landlock cannot protect /ws/.git (and 1 more), which this run asks for, and would run "
                      "without it: --keep-descendants rules out bwrap, whose PID namespace ends the command's "
                      "background processes with it, so drop --keep-descendants; " + drop);
    CHECK(k.c.skipped.size() == 2);
    testrunner::Script broken = carves;
    broken.probe = Verdict::Unusable;
    broken.unusable_reason = "no user namespaces";
    auto c = testrunner::make(RunnerKind::Bwrap, broken, "exit 0");
    Plan u = with(ws_plan());
    o = chain::choose(RunnerKind::Auto, RunnerEnv{}, u, {c.get(), b.get()});
    REQUIRE_FALSE(o);
    CHECK(o.text() == "landlock cannot protect /ws/.git (and 1 more), which this run asks for, and would run "
                      "without it: bwrap, which can, is not usable here (no user namespaces); " + drop);
    // A hidden path, and explicit --protect: each names its own way out.
    Plan h = ws_plan();
    h.c.policy.hidden_paths = {{"/home/u/.ssh/id", "hide-secrets", "secret", true}};
    o = chain::choose(RunnerKind::Landlock, RunnerEnv{}, h, both);
    CHECK(o.text() == "landlock cannot hide /home/u/.ssh/id, which this run asks for, and would run without it: use "
                      "--runner bwrap (or auto); or drop --hide-secrets (config hideSecrets)");
    Plan n = ws_plan();
    n.c.policy.protected_paths = {{"/ws/notes", "flag", "named", true, false, false, false, 9}};
    o = chain::choose(RunnerKind::Landlock, RunnerEnv{}, n, both);
    CHECK(o.text() == "landlock cannot protect /ws/notes, which this run asks for, and would run without it: use "
                      "--runner bwrap (or auto); or drop --protect /ws/notes");
    // Nothing held by any runner (absent, only watched, outside the roots): nothing lost, it runs.
    Plan q = ws_plan();
    ProtectedPath watched{"/ws/.git/modules/s/config", "default", "git", true, false, false, true, 10};
    ProtectedPath outside{"/etc/x", "flag", "named", true, false, false, false, 11};
    outside.why_not = kProtectedOutsideText;
    q.c.policy.protected_paths = {{"/ws/.envrc", "default", "agent", false, false, false, false, -1}, watched, outside};
    q.c.policy.hidden_paths = {{"/nowhere", "flag", "secret", false}};
    REQUIRE(chain::choose(RunnerKind::Landlock, RunnerEnv{}, q, both));
    CHECK(q.c.runner == RunnerKind::Landlock);
}
