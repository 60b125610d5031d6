// The seed's bash-sandbox classification (upstream contract §7), case by case.
#include <catch2/catch.hpp>

#include "../../src/classify.hpp"
#include "../../src/errors.hpp"

using namespace dsh;

namespace {

const std::string kNotice = "landlock-run: partial enforcement (older Landlock ABI)";

std::vector<FailureRule> landlock_run_rules() {
    FailureRule r;
    r.allowed_exit_codes = std::vector<int>{125};
    r.fatal_signatures = {"landlock-run: "};
    r.informational_lines = {kNotice};
    return {r};
}

std::vector<FailureRule> bwrap_rules() {
    FailureRule r;
    r.fatal_signatures = {"bwrap: "};
    return {r};
}

const std::vector<std::string> kBwrapDenial = {"read-only file system"};
const std::vector<std::string> kCustomDenial = {"read-only file system", "permission denied"};

}  // namespace

TEST_CASE("a run that exited 0 or died by a signal is never a runner failure") {
    CHECK_FALSE(match_runner_failure(bwrap_rules(), 0, "bwrap: oops\n"));
    CHECK_FALSE(match_runner_failure(bwrap_rules(), std::nullopt, "bwrap: oops\n"));
}

TEST_CASE("bwrap's own line is a runner failure, and outranks the denial it also matches") {
    const std::string line = "bwrap: Can't mkdir parents for /nope/x: Read-only file system";
    auto c = classify(bwrap_rules(), kBwrapDenial, 1, "some noise\n" + line + "\n");
    CHECK(c.runner_failed);
    REQUIRE(c.runner_failure);
    CHECK(*c.runner_failure == line);
    CHECK_FALSE(c.denied);
    // The same line is a denial by the dialect alone: only the order saves it.
    CHECK(is_denial(1, line, kBwrapDenial));
}

TEST_CASE("the first matching line is the detail, matched case-insensitively") {
    auto m = match_runner_failure(bwrap_rules(), 1, "hello\nBWRAP: first\nbwrap: second\n");
    REQUIRE(m);
    CHECK(*m == "BWRAP: first");
}

TEST_CASE("lines split on \\r?\\n; the \\r is not part of the detail") {
    auto m = match_runner_failure(bwrap_rules(), 1, "x\r\nbwrap: execvp nope: No such file\r\n");
    REQUIRE(m);
    CHECK(*m == "bwrap: execvp nope: No such file");
}

TEST_CASE("postmortem 0004: the partial-ABI notice with a non-zero exit is an ordinary result") {
    for (int code : {1, 2, 125, 126, 127}) {
        INFO(code);
        auto c = classify(landlock_run_rules(), {"permission denied"}, code, kNotice + "\n");
        CHECK_FALSE(c.runner_failed);
        CHECK_FALSE(c.denied);
    }
}

TEST_CASE("landlock-run failure needs exit 125 and a launcher line other than the notice") {
    const std::string err = kNotice + "\nlandlock-run: cannot open rule path: /nope: No such file or directory\n";
    auto m = match_runner_failure(landlock_run_rules(), 125, err);
    REQUIRE(m);
    CHECK(*m == "landlock-run: cannot open rule path: /nope: No such file or directory");
    CHECK_FALSE(match_runner_failure(landlock_run_rules(), 1, err));  // exit gate
    CHECK_FALSE(match_runner_failure(landlock_run_rules(), 127, err));
}

TEST_CASE("the informational exclusion is whole-line, untrimmed and case-insensitive") {
    CHECK_FALSE(match_runner_failure(landlock_run_rules(), 125,
                                     "LANDLOCK-RUN: Partial Enforcement (Older Landlock ABI)\n"));
    // Not the whole line: a trailing space, a prefix, a suffix.
    CHECK(match_runner_failure(landlock_run_rules(), 125, kNotice + " \n"));
    CHECK(match_runner_failure(landlock_run_rules(), 125, "x" + kNotice));
    CHECK(match_runner_failure(landlock_run_rules(), 125, kNotice + "!"));
}

TEST_CASE("blank fatal signatures are dropped; a rule left with none matches nothing") {
    FailureRule r;
    r.fatal_signatures = {"", "   "};
    CHECK_FALSE(match_runner_failure({r}, 1, "anything\n\n   \n"));
    r.fatal_signatures = {"", "my-runner: "};
    CHECK(match_runner_failure({r}, 1, "my-runner: boom"));
}

TEST_CASE("every rule is tried in order; an exit gate skips only its own rule") {
    FailureRule gated;
    gated.allowed_exit_codes = std::vector<int>{127};
    gated.fatal_signatures = {"windows-acl-run: "};
    auto rules = std::vector<FailureRule>{gated, bwrap_rules().front()};
    CHECK_FALSE(match_runner_failure(rules, 1, "windows-acl-run: x\n"));
    CHECK(match_runner_failure(rules, 127, "windows-acl-run: x\n"));
    CHECK(match_runner_failure(rules, 1, "bwrap: y\n"));
}

TEST_CASE("denial: non-zero exit and a signature anywhere in stderr, case-insensitive") {
    CHECK(is_denial(1, "sh: 1: cannot create /x: Permission denied\n", {"permission denied"}));
    CHECK(is_denial(2, "touch: cannot touch 'x': Read-only file system", kCustomDenial));
    CHECK_FALSE(is_denial(0, "Permission denied\n", {"permission denied"}));          // printed, exit 0
    CHECK_FALSE(is_denial(std::nullopt, "Permission denied\n", {"permission denied"}));  // killed
    CHECK_FALSE(is_denial(1, "operation not permitted\n", kCustomDenial));  // EPERM is Seatbelt's alone
    CHECK_FALSE(is_denial(1, "Permission denied\n", {}));
}

TEST_CASE("a custom runner: its fatal line is a runner failure even with denial words") {
    FailureRule r;
    r.fatal_signatures = {"bwrap: "};
    auto c = classify({r}, kCustomDenial, 1, "bwrap: setting up uid map: Permission denied\n");
    CHECK(c.runner_failed);
    CHECK_FALSE(c.denied);
    auto d = classify({r}, kCustomDenial, 1, "touch: cannot touch '/x': Read-only file system\n");
    CHECK_FALSE(d.runner_failed);
    CHECK(d.denied);
}

TEST_CASE("rules come from the report's runnerFailureRules JSON") {
    auto j = nlohmann::json::parse(R"JSON([
        {"allowedExitCodes":[125],"fatalSignatures":["landlock-run: "],
         "informationalLines":["landlock-run: partial enforcement (older Landlock ABI)"]},
        {"fatalSignatures":["bwrap: ", 7]},
        "junk"
    ])JSON");
    auto rules = rules_from_json(j);
    REQUIRE(rules.size() == 2);
    REQUIRE(rules[0].allowed_exit_codes);
    CHECK(*rules[0].allowed_exit_codes == std::vector<int>{125});
    CHECK(rules[0].informational_lines == std::vector<std::string>{kNotice});
    CHECK_FALSE(rules[1].allowed_exit_codes);
    CHECK(rules[1].fatal_signatures == std::vector<std::string>{"bwrap: "});
    CHECK(rules_from_json(nlohmann::json::object()).empty());
}

TEST_CASE("marker texts are the seed's, exactly") {
    CHECK(denial_marker("read-only") == "[sandbox: file access denied under read-only mode]");
    CHECK(escalation_hint("command") ==
          "[sandbox: escalation available \xE2\x80\x94 retry this exact command once with sandbox_permissions "
          "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]");
    CHECK(runner_failure_marker("workspace-write") ==
          "[sandbox: the sandbox runner itself failed under workspace-write mode \xE2\x80\x94 the command did "
          "not run; this is a sandbox problem, not a command failure]");
}

TEST_CASE("read-only: EPERM is no file denial; the network's refusal is its own (issue 38)") {
    // Every Linux runner's read-only file dialects: EROFS (the mount view, and
    // the seccomp layer's metadata refusals), EACCES (Landlock).
    const std::vector<std::string> file = {"read-only file system", "permission denied"};
    CHECK_FALSE(is_denial(1, "sh: 1: kill: Operation not permitted\n", file));  // kill -TERM 1 as a user
    CHECK_FALSE(is_denial(1, "keyctl: Operation not permitted\n", file));
    CHECK(is_denial(1, "chmod: changing permissions of '/x': Read-only file system\n", file));
    // The socket filter's ENETUNREACH, and a namespace without a route.
    const std::vector<std::string> net = {kNetworkDenialSignature};
    const std::string refused = "OSError: [Errno 101] Network is unreachable\n";
    CHECK(is_denial(1, refused, net));
    CHECK_FALSE(is_denial(1, refused, file));
    CHECK_FALSE(is_denial(1, "sh: 1: cannot create /x: Permission denied\n", net));
    CHECK_FALSE(is_denial(0, refused, net));
}

TEST_CASE("network marker and hint: --escalate-net with an approver, --net without") {
    CHECK(network_denial_marker("off") == "[sandbox: network access refused under --net off]");
    CHECK(network_hint("off", true) ==
          "[sandbox: network escalation available \xE2\x80\x94 retry this exact command once with --escalate-net "
          "loopback or host + --justification; the approval prompt asks the user]");
    CHECK(network_hint("loopback", false) ==
          "[sandbox: the command ran with --net loopback; run it again with --net host if it needs the network]");
    CHECK(network_hint("allow", false) ==
          "[sandbox: the command ran with --net allow; run it again with --net host if it needs the network]");
}

TEST_CASE("a refusal naming a protected path is found, relative or absolute (issue 42)") {
    const std::vector<std::string> bound = {"/w/r/.git/config", "/w/r/.vscode"};
    const std::string git = "error: could not write config file .git/config: Device or resource busy\n"
                            "fatal: could not set 'remote.o.url' to '/tmp'\n";
    CHECK(protected_refusal(bound, "/w/r", git) == std::optional<std::string>("/w/r/.git/config"));
    CHECK(protected_refusal(bound, "/w/r/", git) == std::optional<std::string>("/w/r/.git/config"));
    CHECK(protected_refusal(bound, "/elsewhere",
                            "error: could not write config file /w/r/.git/config: Device or resource busy") ==
          std::optional<std::string>("/w/r/.git/config"));
    CHECK(protected_refusal(bound, "/w/r", "sh: 1: cannot create ./.vscode: Read-only file system") ==
          std::optional<std::string>("/w/r/.vscode"));
    CHECK(protected_refusal(bound, "/w/r", "sh: 1: cannot create .vscode/settings.json: Read-only file system") ==
          std::optional<std::string>("/w/r/.vscode"));
    CHECK_FALSE(protected_refusal(bound, "/w/r", "sh: 1: cannot create .vscodex/s: Read-only file system"));
    // The path alone, or the words alone, are nothing.
    CHECK_FALSE(protected_refusal(bound, "/w/r", "reading .git/config\n"));
    CHECK_FALSE(protected_refusal(bound, "/w/r", "x: Device or resource busy\n"));
    // A longer name that ends or starts with it is another file.
    CHECK_FALSE(protected_refusal(bound, "/w/r", "sub/.git/config: Device or resource busy\n"));
    CHECK_FALSE(protected_refusal(bound, "/w/r", ".git/config.lock: Permission denied\n"));
    // A path not passed in (not bound read-only) is never named.
    CHECK_FALSE(protected_refusal({}, "/w/r", git));
}

TEST_CASE("the protected refusal's text names the path and the flag (issue 42)") {
    const std::string t = protected_refused_text("/w/r/.git/config");
    CHECK(t.find("/w/r/.git/config is protected") == 0);
    CHECK(t.find("--unprotect /w/r/.git/config") != std::string::npos);
    CHECK(t.find('\n') == std::string::npos);
}
