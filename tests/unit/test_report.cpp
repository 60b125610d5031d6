#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "../../src/report.hpp"

using namespace dsh;

TEST_CASE("confinement record: type first, version 1, camelCase, exact shape") {
    Confinement c;
    c.policy.mode = Mode::WorkspaceWrite;
    c.policy.mode_source = ModeSource::Flag;
    c.policy.workspace_root = "/ws";
    c.policy.root_source = RootSource::Flag;
    c.policy.writable_roots = {{"/ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, false}};
    c.policy.writable_files = {"/dev/null"};
    c.policy.private_tmp = true;
    c.policy.keep_fds = {5};
    c.runner = RunnerKind::Landlock;
    Layer l;
    l.name = "landlock";
    l.enforcement = Enforcement::Partial;
    l.gaps = {{"network", "n", false}, {"metadata", "m", true}};
    l.details["abi"] = 4;
    c.layers = {l};
    c.denial_signatures = {"permission denied"};
    c.command_path = "/bin/echo";
    c.argv = {"echo", "hi"};
    c.hardening = {"no-new-privs"};
    c.descendants = {true, "subreaper", ""};
    const std::string line = confinement_record(c).dump();
    CHECK(line ==
          R"({"type":"confinement","version":1,"mode":"workspace-write","modeSource":"flag","workspaceRoot":"/ws",)"
          R"("rootSource":"flag","runner":"landlock","enforcement":"partial","gaps":[{"effect":"metadata","detail":"m",)"
          R"("ownEffect":true},{"effect":"network","detail":"n","ownEffect":false}],)" R"("network":{"mode":"host","source":"default","enforcement":"none","enforced":[],"gaps":[{"effect":"network","detail":"network access is not governed: --net host (the default) leaves TCP, UDP and unix sockets as the host has them","ownEffect":false}]},"layers":[{"name":"landlock",)"
          R"("enforcement":"partial","gaps":[{"effect":"network","detail":"n","ownEffect":false},{"effect":"metadata",)"
          R"("detail":"m","ownEffect":true}],"abi":4}],"writableRoots":[{"path":"/ws","source":"workspace",)"
          R"("persists":true},{"path":"/tmp","source":"tmp","persists":false}],"writableFiles":["/dev/null"],"protectedPaths":[],"unprotected":[],"hiddenPaths":[],)"
          R"("privateTmp":true,"descendants":{"atExit":"killed","by":"subreaper","why":null},"notGranted":[],"skippedRunners":[],"denialSignatures":["permission denied"],"runnerFailureRules":[],)"
          R"("landlockAbi":4,"hardening":["no-new-privs"],"limits":{"required":false,"enforced":[]},"keptFds":[5],"environment":{"cleared":false,"set":[],"unset":[],"scrubbed":[]},)"
          R"("command":"/bin/echo","argv":["echo","hi"],"execArgv":["echo","hi"]})");
}

TEST_CASE("stacked layers: a gap is open only where every layer has it") {
    Confinement c;
    Layer a, b;
    a.name = "bwrap";
    a.gaps = {{"unix-sockets", "", false}, {"fifo", "", true}};
    b.name = "landlock";
    b.gaps = {{"metadata", "", true}, {"unix-sockets", "", false}};
    c.layers = {a, b};
    auto g = c.gaps();
    REQUIRE(g.size() == 1);
    CHECK(g[0].effect == "unix-sockets");
    CHECK(c.enforcement() == Enforcement::Full);
    c.layers = {b};
    CHECK(c.enforcement() == Enforcement::Partial);
    c.layers.clear();
    CHECK(c.enforcement() == Enforcement::None);
}

TEST_CASE("error record") {
    auto o = fail(Err::CommandNotFound, "x: command not found");
    CHECK(error_record(o).dump() ==
          R"({"type":"error","version":1,"code":"COMMAND_NOT_FOUND","message":"x: command not found","exitStatus":127})");
}

TEST_CASE("report fd validation and close-on-exec") {
    Report r;
    CHECK(r.open(-1));
    CHECK_FALSE(r.enabled());
    CHECK(Report().open(0).err == Err::ReportFd);
    CHECK(Report().open(987).err == Err::ReportFd);
    int p[2];
    REQUIRE(::pipe(p) == 0);
    CHECK(Report().open(p[0]).err == Err::ReportFd);  // read end
    Report w;
    REQUIRE(w.open(p[1]));
    CHECK((::fcntl(p[1], F_GETFD) & FD_CLOEXEC) != 0);
    REQUIRE(w.write(error_record(fail(Err::Usage, "u"))));
    char buf[256] = {};
    auto n = ::read(p[0], buf, sizeof buf - 1);
    CHECK(std::string(buf, static_cast<size_t>(n)) ==
          "{\"type\":\"error\",\"version\":1,\"code\":\"USAGE\",\"message\":\"u\",\"exitStatus\":125}\n");
    ::close(p[0]);
    // The reader is gone: a failed write (EPIPE), not a death by SIGPIPE.
    auto o = w.write(error_record(fail(Err::Usage, "u")));
    CHECK(o.err == Err::ReportWrite);
    ::close(p[1]);
}
