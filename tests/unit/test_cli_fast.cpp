// The exec-mode fast path must give exactly what CLI11 gives, or decline.
#include <catch2/catch.hpp>

#include "../../src/cli_fast.hpp"

using namespace dsh;

namespace {

using Args = std::vector<const char*>;

Outcome full(Args args, Request& r) {
    args.insert(args.begin(), "dsh-confine");
    return parse_cli_cli11(static_cast<int>(args.size()), args.data(), r);
}

Outcome normal(Args args, Request& r) {
    args.insert(args.begin(), "dsh-confine");
    return parse_cli(static_cast<int>(args.size()), args.data(), r);
}

// The fast path alone, split at the first "--" as parse_cli does.
bool fast(const Args& args, Request& r) {
    std::vector<std::string> ours, command;
    bool dashdash = false;
    for (const char* a : args) {
        if (!dashdash && std::string(a) == "--") {
            dashdash = true;
            continue;
        }
        (dashdash ? command : ours).emplace_back(a);
    }
    return parse_cli_fast(ours, dashdash, command, r);
}

void same_request(const Request& a, const Request& b) {
    CHECK(a.action == b.action);
    CHECK(a.mode == b.mode);
    CHECK(a.root == b.root);
    CHECK(a.runner == b.runner);
    CHECK(a.writable == b.writable);
    CHECK(a.keep_fds == b.keep_fds);
    CHECK(a.report_fd == b.report_fd);
    CHECK(a.probe_timeout_ms == b.probe_timeout_ms);
    CHECK(a.config == b.config);
    CHECK(a.session == b.session);
    CHECK(a.escalate == b.escalate);
    CHECK(a.justification == b.justification);
    CHECK(a.approver == b.approver);
    CHECK(a.supervise == b.supervise);
    CHECK(a.markers == b.markers);
    CHECK(a.dry_run == b.dry_run);
    CHECK(a.clearenv == b.clearenv);
    CHECK(a.setenv == b.setenv);
    CHECK(a.unsetenv == b.unsetenv);
    CHECK(a.scrub_secrets == b.scrub_secrets);
    CHECK(a.json == b.json);
    CHECK(a.context == b.context);
    CHECK(a.platform == b.platform);
    CHECK(a.check_write == b.check_write);
    CHECK(a.session_file == b.session_file);
    CHECK(a.session_mode == b.session_mode);
    CHECK(a.argv == b.argv);
    CHECK(a.text == b.text);
}

// Lines the fast path takes.
const std::vector<Args> kTaken = {
    {"--", "/bin/true"},
    {"--", "sh", "-c", "x --mode y", "--", "--help"},
    {"--runner", "landlock", "--", "/bin/true"},
    {"--mode", "workspace-write", "--root", "/w", "--", "true"},
    {"--mode=workspace-write", "--root=/w", "--runner=auto", "--", "true"},
    {"--mode", "read-only", "--writable", "/a", "--writable", "/b", "--", "true"},
    {"--writable=/a", "--writable", "b=c", "--", "true"},
    {"--report-fd", "3", "--keep-fd", "4", "--keep-fd", "0", "--", "true"},
    {"--report-fd=0", "--", "true"},
    {"--supervise", "--markers", "--runner", "bwrap", "--", "true", "a"},
    {"--clearenv", "--scrub-secrets", "--", "env"},
    {"--mode", "no-such-mode", "--runner", "bogus", "--", "x"},  // values are checked later, not here
    {"--root", "relative/dir", "--", "true"},
    {"--report-fd", "123456789", "--", "true"},
};

// Lines it leaves to CLI11 (which then parses them or reports the error).
const std::vector<Args> kDeclined = {
    {},
    {"--"},
    {"--", ""},
    {"true"},
    {"--runner", "landlock", "true"},
    {"--mode", "a", "--mode", "b", "--", "true"},
    {"--mode", "--", "true"},
    {"--mode", "-x", "--", "true"},
    {"--mode=", "--", "true"},
    {"--root", "probe", "--", "true"},
    {"--supervise", "--supervise", "--", "true"},
    {"--supervise=true", "--", "true"},
    {"--report-fd", "010", "--", "true"},
    {"--report-fd", "0x3", "--", "true"},
    {"--report-fd", "+3", "--", "true"},
    {"--report-fd", "-1", "--", "true"},
    {"--report-fd", "3", "--report-fd", "4", "--", "true"},
    {"--report-fd", "1234567890", "--", "true"},
    {"--report-fd", "x", "--", "true"},
    {"--keep-fd", "-4", "--", "true"},
    {"--probe-timeout", "100", "--", "true"},
    {"--config", "/c.json", "--", "true"},
    {"--session", "/s", "--", "true"},
    {"--setenv", "A", "B", "--", "true"},
    {"--unsetenv", "A", "--", "true"},
    {"--escalate", "workspace-write", "--justification", "j", "--", "true"},
    {"--dry-run", "--", "true"},
    {"-h"},
    {"--help", "--", "true"},
    {"--version", "--", "true"},
    {"--bogus", "--", "true"},
    {"-m", "x", "--", "true"},
    {"probe"},
    {"explain", "--", "true"},
    {"--writable", "/a", "/b", "--", "true"},
};

}  // namespace

TEST_CASE("fast path: what it takes, CLI11 parses to the same request") {
    for (const auto& args : kTaken) {
        INFO(Catch::Detail::stringify(std::vector<std::string>(args.begin(), args.end())));
        Request f;
        REQUIRE(fast(args, f));
        Request c;
        REQUIRE(full(args, c));
        same_request(f, c);
    }
}

TEST_CASE("fast path: what it declines is left untouched") {
    for (const auto& args : kDeclined) {
        INFO(Catch::Detail::stringify(std::vector<std::string>(args.begin(), args.end())));
        Request f;
        CHECK_FALSE(fast(args, f));
        same_request(f, Request{});
    }
}

TEST_CASE("fast path: parse_cli gives CLI11's outcome and request on every line") {
    std::vector<Args> all = kTaken;
    all.insert(all.end(), kDeclined.begin(), kDeclined.end());
    for (const auto& args : all) {
        INFO(Catch::Detail::stringify(std::vector<std::string>(args.begin(), args.end())));
        Request n, c;
        Outcome on = normal(args, n);
        Outcome oc = full(args, c);
        CHECK(on.ok == oc.ok);
        CHECK(on.err == oc.err);
        CHECK(on.message == oc.message);
        if (on && oc) same_request(n, c);
    }
}
