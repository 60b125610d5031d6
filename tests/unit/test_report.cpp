#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
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
    c.user_namespaces = "refused";
    c.descendants = {true, "subreaper", ""};
    const std::string line = confinement_record(c).dump();
    CHECK(line ==
          R"({"type":"confinement","version":1,"mode":"workspace-write","modeSource":"flag","workspaceRoot":"/ws",)"
          R"("rootSource":"flag","runner":"landlock","enforcement":"partial","held":true,"notHeld":[],"gaps":[{"effect":"metadata","detail":"m",)"
          R"("ownEffect":true},{"effect":"network","detail":"n","ownEffect":false}],)" R"("network":{"mode":"host","source":"default","enforcement":"none","enforced":[],"gaps":[{"effect":"network","detail":"network access is not governed: --net host (the default) leaves TCP, UDP and unix sockets as the host has them","ownEffect":false}],"denialSignatures":[]},"layers":[{"name":"landlock",)"
          R"("enforcement":"partial","gaps":[{"effect":"network","detail":"n","ownEffect":false},{"effect":"metadata",)"
          R"("detail":"m","ownEffect":true}],"abi":4}],"writableRoots":[{"path":"/ws","source":"workspace",)"
          R"("persists":true},{"path":"/tmp","source":"tmp","persists":false}],"writableFiles":["/dev/null"],"protectedPaths":[],"unprotected":[],"hiddenPaths":[],"whyNotText":{},)"
          R"("privateTmp":true,"descendants":{"atExit":"killed","by":"subreaper","why":null},"notGranted":[],"skippedRunners":[],"denialSignatures":["permission denied"],"runnerFailureRules":[],)"
          R"("landlockAbi":4,"hardening":["no-new-privs"],"userNamespaces":"refused","limits":{"required":false,"enforced":[]},"keptFds":[5],"jobserver":null,"environment":{"cleared":false,"set":[],"unset":[],"scrubbed":[]},)"
          R"("command":"/bin/echo","argv":["echo","hi"],"execArgv":["echo","hi"]})");
}

TEST_CASE("protectedPaths: whyNot is a code, its text once in whyNotText (issue 42)") {
    Confinement c;
    c.policy.mode = Mode::WorkspaceWrite;
    Layer l;
    l.name = "bwrap";
    c.layers = {l};
    for (int i = 0; i < 3; ++i) {
        ProtectedPath e;
        e.path = "/ws/absent" + std::to_string(i);
        e.source = "flag";
        e.what = "named";
        e.why_not = kProtectedAbsentText;
        c.policy.protected_paths.push_back(e);
    }
    ProtectedPath out;
    out.path = "/etc";
    out.source = "flag";
    out.what = "named";
    out.exists = true;
    out.why_not = kProtectedOutsideText;
    c.policy.protected_paths.push_back(out);
    const auto j = confinement_record(c);
    CHECK(j["protectedPaths"][0]["whyNot"] == "absent");
    CHECK(j["protectedPaths"][3]["whyNot"] == "outside-roots");
    CHECK(j["whyNotText"].size() == 2);
    CHECK(j["whyNotText"]["absent"] == kProtectedAbsentText);
    CHECK(j["whyNotText"]["outside-roots"] == kProtectedOutsideText);
    CHECK(j["held"] == true);
    // Every reason has a code, and no two share one.
    for (const auto& a : kCarveReasons)
        for (const auto& b : kCarveReasons)
            if (&a != &b) CHECK(std::string(a.code) != b.code);
}

TEST_CASE("held: everything asked for, the metadata gap aside (issue 42)") {
    Confinement c;
    c.policy.mode = Mode::WorkspaceWrite;
    Layer l;
    l.name = "landlock";
    l.gaps = {{"metadata", "m", true}, {"network", "n", false}};
    c.layers = {l};
    auto j = confinement_record(c);
    CHECK(j["enforcement"] == "partial");
    CHECK(j["held"] == true);
    CHECK(j["notHeld"].empty());
    c.layers[0].gaps.push_back({"truncate", "t", true});
    j = confinement_record(c);
    CHECK(j["held"] == false);
    CHECK(j["notHeld"] == ordered_json::array({"truncate"}));
    // A limit no backend enforces.
    c.layers[0].gaps.pop_back();
    c.limits.limits.push_back({"pids", 10, "none", "", {}});
    j = confinement_record(c);
    CHECK(j["notHeld"] == ordered_json::array({"limit:pids"}));
    // An existing protected path no layer keeps.
    c.limits.limits.clear();
    ProtectedPath e;
    e.path = "/ws/.git/config";
    e.exists = true;
    e.why_not = kProtectedLandlockText;
    c.policy.protected_paths.push_back(e);
    j = confinement_record(c);
    CHECK(j["notHeld"] == ordered_json::array({"protected-paths"}));
}

TEST_CASE("write_report grows a pipe nobody reads to hold the line (issue 42)") {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    const int before = ::fcntl(p[1], F_GETPIPE_SZ);
    const std::string line(200000, 'x');
    CHECK(write_report(p[1], line) == 0);
    CHECK(::fcntl(p[1], F_GETPIPE_SZ) >= static_cast<int>(line.size()));
    CHECK(::fcntl(p[1], F_GETPIPE_SZ) > before);
    std::string got;
    char buf[65536];
    ::close(p[1]);
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    ::close(p[0]);
    CHECK(got == line);
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

TEST_CASE("the run's nonce: 128 random bits in hex, the last member of every report line") {
    begin_run();
    const std::string a = run_id();
    REQUIRE(a.size() == 32);
    for (char ch : a) CHECK(((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')));
    begin_run();
    CHECK(run_id() != a);
    const std::string id = run_id();
    // Only the report's lines are stamped; the records themselves (explain's plan) are not.
    CHECK(error_record(fail(Err::Usage, "u")).dump() ==
          R"({"type":"error","version":1,"code":"USAGE","message":"u","exitStatus":125})");
    const std::string line = report_line(error_record(fail(Err::Usage, "u")));
    CHECK(line == R"({"type":"error","version":1,"code":"USAGE","message":"u","exitStatus":125,"run":")" + id + "\"}");
    int p[2];
    REQUIRE(::pipe(p) == 0);
    Report w;
    REQUIRE(w.open(p[1]));
    REQUIRE(w.write(error_record(fail(Err::Usage, "u"))));
    char buf[256] = {};
    auto n = ::read(p[0], buf, sizeof buf - 1);
    CHECK(std::string(buf, static_cast<size_t>(n)) == line + "\n");
    // The stage adopts the launcher's from the record it is handed.
    end_run();
    CHECK(run_id().empty());
    CHECK_FALSE(adopt_run_id(R"({"type":"confinement","argv":[",\"run\":\"x"]})"));
    CHECK_FALSE(adopt_run_id(R"({"type":"confinement","run":"0123"})"));
    CHECK(run_id().empty());
    CHECK(adopt_run_id(line));
    CHECK(run_id() == id);
    end_run();
    ::close(p[0]);
    ::close(p[1]);
}

TEST_CASE("the report on fd 1 or 2: written through a close-on-exec copy above 2") {
    Report r;
    REQUIRE(r.open(2));
    CHECK(r.named() == 2);
    CHECK(r.fd() > 2);
    CHECK((::fcntl(r.fd(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK((::fcntl(2, F_GETFD) & FD_CLOEXEC) == 0);
    CHECK(reaches_report(r.fd(), 2));
    ::close(r.fd());
}

TEST_CASE("reaches_report: open files compared, not numbers") {
    int p[2], q[2];
    REQUIRE(::pipe(p) == 0);
    REQUIRE(::pipe(q) == 0);
    const int d = ::dup(p[1]);
    CHECK(reaches_report(p[1], d));        // a dup
    CHECK(reaches_report(p[1], p[1]));
    CHECK_FALSE(reaches_report(p[1], q[1]));  // another pipe
    // The same pipe through another description (its /proc/self/fd link).
    const int again = ::open(("/proc/self/fd/" + std::to_string(p[1])).c_str(), O_WRONLY | O_CLOEXEC);
    if (again >= 0) {
        CHECK(reaches_report(p[1], again));
        ::close(again);
    }
    // Nobody reads /dev/null.
    const int n1 = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    const int n2 = ::dup(n1);
    CHECK_FALSE(reaches_report(n1, n2));
    // A regular file opened twice: both writes land in it.
    char path[] = "/tmp/dsh-report-XXXXXX";
    const int f1 = ::mkstemp(path);
    REQUIRE(f1 >= 0);
    const int f2 = ::open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    ::unlink(path);
    CHECK(reaches_report(f1, f2));
    for (int fd : {p[0], p[1], q[0], q[1], d, n1, n2, f1, f2}) ::close(fd);
}
