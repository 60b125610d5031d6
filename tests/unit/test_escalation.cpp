#include <catch2/catch.hpp>

#include <sys/wait.h>

#include "../../src/escalation.hpp"

using namespace dsh;

namespace {
struct Fake : Approver {
    Approval answer;
    int asked = 0;
    EscalationRequest seen;
    explicit Fake(Approval a) : answer(a) {}
    Approval ask(const EscalationRequest& r) override {
        ++asked;
        seen = r;
        return answer;
    }
};
EscalationRequest req(Mode target, Mode current) {
    EscalationRequest r;
    r.target = target;
    r.current = current;
    r.justification = "the build writes its output";
    r.argv = {"make", "all"};
    r.root = "/ws";
    return r;
}
}  // namespace

TEST_CASE("escalation: the ladder is strictly wider only") {
    CHECK(wider_modes(Mode::ReadOnly) == std::vector<Mode>{Mode::WorkspaceWrite, Mode::DangerFullAccess});
    CHECK(wider_modes(Mode::WorkspaceWrite) == std::vector<Mode>{Mode::DangerFullAccess});
    CHECK(wider_modes(Mode::DangerFullAccess).empty());
}

TEST_CASE("escalation: argument validation in the seed's order, with its texts") {
    Mode m = Mode::ReadOnly;
    auto check = [&m](std::optional<std::string> t, std::optional<std::string> j) {
        Outcome o = validate_escalation_args(t, j, m);
        if (!o) {
            CHECK(o.err == Err::EscalationInvalid);
            CHECK(o.exit_status() == 125);
        }
        return o.ok ? std::string() : o.message;
    };
    CHECK(check(std::nullopt, std::nullopt).empty());
    CHECK(check(std::string("workspace-write"), std::nullopt) ==
          "invalid escalation: sandbox_permissions requires a justification");
    CHECK(check(std::nullopt, std::string("because")) ==
          "invalid escalation: justification is only valid together with sandbox_permissions");
    // Blank after trimming, as JavaScript's trim() sees it: NBSP, the ideographic
    // space, the Zs spaces, LS/PS and the BOM are white space too.
    for (const char* j : {"", " ", "\t\n  ", "\xc2\xa0", "\xe3\x80\x80", " \xe2\x80\x83\xe2\x80\xa8\xef\xbb\xbf\v\f"})
        CHECK(check(std::string("workspace-write"), std::string(j)) ==
              "invalid justification: expected a non-empty sentence");
    // The pairing is checked before the blank test, and both before the mode name.
    CHECK(check(std::string("nonsense"), std::nullopt) ==
          "invalid escalation: sandbox_permissions requires a justification");
    CHECK(check(std::string("nonsense"), std::string(" ")) == "invalid justification: expected a non-empty sentence");
    CHECK(check(std::string("nonsense"), std::string("why")) ==
          "invalid escalation: unknown mode \"nonsense\" (workspace-write or danger-full-access)");
    CHECK(check(std::string("danger-full-access"), std::string("why")).empty());
    // Not blank: a visible character, a zero-width joiner (not white space in
    // JavaScript), bytes that are not UTF-8.
    for (const char* j : {"\xc2\xa0x", "\xe2\x80\x8d", "\xff", "\xc2"})
        CHECK(check(std::string("danger-full-access"), std::string(j)).empty());
    CHECK(m == Mode::DangerFullAccess);
}

TEST_CASE("escalation: same or narrower is refused without asking anyone") {
    const Mode all[] = {Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess};
    for (Mode cur : all)
        for (Mode target : all) {
            if (is_strictly_wider(target, cur)) continue;
            Fake f(Approval::AllowedOnce);
            Mode granted = cur;
            Outcome o = approve_escalation(req(target, cur), &f, granted);
            REQUIRE_FALSE(o);
            CHECK(o.err == Err::EscalationNotWider);
            CHECK(o.message == fmt::format("sandbox escalation to \"{}\" is not strictly wider than this call's "
                                           "current \"{}\" mode",
                                           to_string(target), to_string(cur)));
            CHECK(f.asked == 0);
            CHECK(granted == cur);
        }
    // Not wider is checked before "no approver".
    Mode g = Mode::ReadOnly;
    CHECK(approve_escalation(req(Mode::ReadOnly, Mode::ReadOnly), nullptr, g).err == Err::EscalationNotWider);
}

TEST_CASE("escalation: no approver composed") {
    Mode g = Mode::ReadOnly;
    Outcome o = approve_escalation(req(Mode::WorkspaceWrite, Mode::ReadOnly), nullptr, g);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::EscalationNoApprover);
    CHECK(o.message == "sandbox escalation to \"workspace-write\" requires approval, but no approval service is composed");
    CHECK(g == Mode::ReadOnly);
}

TEST_CASE("escalation: each outcome maps to its own error") {
    struct Case {
        Approval a;
        Err e;
        const char* text;
    };
    const Case cases[] = {
        {Approval::Rejected, Err::EscalationRejected, "the user rejected escalating this command to \"danger-full-access\""},
        {Approval::Cancelled, Err::EscalationCancelled, "approval for escalating to \"danger-full-access\" was cancelled"},
        {Approval::Unavailable, Err::EscalationUnavailable,
         "sandbox escalation to \"danger-full-access\" requires approval, but no approval channel is available"},
    };
    for (const auto& c : cases) {
        Fake f(c.a);
        Mode g = Mode::WorkspaceWrite;
        Outcome o = approve_escalation(req(Mode::DangerFullAccess, Mode::WorkspaceWrite), &f, g);
        REQUIRE_FALSE(o);
        CHECK(o.err == c.e);
        CHECK(o.message == c.text);
        CHECK(o.exit_status() == 125);
        CHECK(f.asked == 1);
        CHECK(g == Mode::WorkspaceWrite);
    }
    Fake f(Approval::AllowedOnce);
    Mode g = Mode::ReadOnly;
    REQUIRE(approve_escalation(req(Mode::WorkspaceWrite, Mode::ReadOnly), &f, g));
    CHECK(g == Mode::WorkspaceWrite);
    CHECK(f.seen.justification == "the build writes its output");
}

TEST_CASE("escalation: the subject appears in the rejection") {
    auto r = req(Mode::WorkspaceWrite, Mode::ReadOnly);
    r.subject = "operation";
    CHECK(approval_error(Approval::Rejected, r).message ==
          "the user rejected escalating this operation to \"workspace-write\"");
}

TEST_CASE("escalation: the request an approver command reads") {
    auto r = req(Mode::WorkspaceWrite, Mode::ReadOnly);
    CHECK(escalation_reason(r) == "escalate sandbox to workspace-write: the build writes its output");
    CHECK(approval_request_json(r).dump() ==
          "{\"type\":\"escalation-request\",\"version\":1,\"mode\":\"workspace-write\",\"currentMode\":\"read-only\",\"network\":\"host\",\"currentNetwork\":\"host\","
          "\"justification\":\"the build writes its output\",\"reason\":\"escalate sandbox to workspace-write: the "
          "build writes its output\",\"subject\":\"command\",\"argv\":[\"make\",\"all\"],\"root\":\"/ws\"}");
}

TEST_CASE("escalation: an approver command's status") {
    auto exited = [](int code) { return code << 8; };  // W_EXITCODE
    CHECK(approval_from_status(exited(0)) == Approval::AllowedOnce);
    CHECK(approval_from_status(exited(1)) == Approval::Rejected);
    CHECK(approval_from_status(exited(2)) == Approval::Cancelled);
    // It ran and gave no answer: failed, not "no channel".
    CHECK(approval_from_status(exited(3)) == Approval::Failed);
    CHECK(approval_from_status(exited(127)) == Approval::Failed);
    CHECK(approval_from_status(SIGKILL) == Approval::Failed);  // killed by a signal
    CHECK(approver_status_text(exited(5)) == "it exited with status 5 (0 allows once, 1 rejects, 2 cancels)");
    CHECK(approver_status_text(exited(127)) == "it exited with status 127 (its program was not found)");
    CHECK(approver_status_text(exited(126)) == "it exited with status 126 (its program could not be executed)");
    CHECK(approver_status_text(SIGKILL) == "it was killed by signal 9 (SIGKILL)");
    CHECK(approver_status_text(SIGTERM) == "it was killed by signal 15 (SIGTERM)");
}

TEST_CASE("escalation: a failed approver is reported as such, with its status") {
    struct Failing : Approver {
        Approval ask(const EscalationRequest&) override { return Approval::Failed; }
        std::string failure() const override { return "it exited with status 5 (0 allows once, 1 rejects, 2 cancels)"; }
    } f;
    Mode g = Mode::ReadOnly;
    Outcome o = approve_escalation(req(Mode::WorkspaceWrite, Mode::ReadOnly), &f, g);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::EscalationUnavailable);
    CHECK(o.text() == "sandbox escalation to \"workspace-write\" requires approval, but the approver failed: it "
                      "exited with status 5 (0 allows once, 1 rejects, 2 cancels)");
    CHECK(o.stderr_text() == o.text());
    CHECK(g == Mode::ReadOnly);
}

TEST_CASE("escalation: the report keeps the seed's texts; stderr adds the command line's spelling") {
    Mode t = Mode::ReadOnly;
    Outcome a = validate_escalation_args(std::string("workspace-write"), std::nullopt, t);
    CHECK(a.text() == "invalid escalation: sandbox_permissions requires a justification");
    // stderr says it in the command line's words: never the harness's field names.
    CHECK(a.stderr_text() == "--escalate needs --justification TEXT, saying in words why the wider mode is needed");
    Outcome b = validate_escalation_args(std::nullopt, std::string("why"), t);
    CHECK(b.text() == "invalid escalation: justification is only valid together with sandbox_permissions");
    CHECK(b.stderr_text() == "--justification goes with --escalate MODE or --escalate-net NET: add one, or drop "
                             "--justification");
    Outcome c = validate_escalation_args(std::string("workspace-write"), std::string(" \t"), t);
    CHECK(c.text() == "invalid justification: expected a non-empty sentence");
    CHECK(c.stderr_text() == "--justification is blank: say in words why the wider mode is needed");
    Mode g = Mode::ReadOnly;
    Outcome d = approve_escalation(req(Mode::ReadOnly, Mode::WorkspaceWrite), nullptr, g);
    CHECK(d.text() == "sandbox escalation to \"read-only\" is not strictly wider than this call's current "
                      "\"workspace-write\" mode");
    CHECK(d.stderr_text() == d.text() + "; --escalate takes a mode wider than the call's \"workspace-write\" "
                                        "(read-only < workspace-write < danger-full-access)");
    Outcome e = approve_escalation(req(Mode::WorkspaceWrite, Mode::ReadOnly), nullptr, g);
    CHECK(e.text() == "sandbox escalation to \"workspace-write\" requires approval, but no approval service is "
                      "composed");
    CHECK(e.stderr_text() == "escalating to \"workspace-write\" needs someone to approve it, and none is set: give "
                             "--approver tty (asks on the terminal) or --approver COMMAND, or \"approver\" in the config");
    for (const Outcome* o : {&a, &b, &c, &e})
        for (const char* word : {"sandbox_permissions", "approval service", "composed"})
            CHECK(o->stderr_text().find(word) == std::string::npos);
    // Unavailable: the contract's text exactly; the cause on stderr only.
    Outcome u = approval_error(Approval::Unavailable, req(Mode::WorkspaceWrite, Mode::ReadOnly), "no terminal");
    CHECK(u.text() == "sandbox escalation to \"workspace-write\" requires approval, but no approval channel is "
                      "available");
    CHECK(u.stderr_text() == u.text() + "; no terminal");
}

TEST_CASE("escalation: a real approver command") {
    auto r = req(Mode::WorkspaceWrite, Mode::ReadOnly);
    auto cmd = [](const std::string& text) {
        ApproverCommand c;
        REQUIRE(parse_approver(text, "/", "/usr/bin:/bin", c));
        return CommandApprover(c);
    };
    CHECK(cmd("true").ask(r) == Approval::AllowedOnce);
    CHECK(cmd("false").ask(r) == Approval::Rejected);
    CommandApprover missing = cmd("/nonexistent/approver");
    CHECK(missing.ask(r) == Approval::Failed);
    CHECK(missing.failure().rfind("approver /nonexistent/approver: cannot open", 0) == 0);
    // It reads the request on stdin.
    CHECK(cmd("grep -q workspace-write").ask(r) == Approval::AllowedOnce);
    CHECK(cmd("grep -q danger-full-access").ask(r) == Approval::Rejected);
}

TEST_CASE("escalation: each tty answer word") {
    for (const char* w : {"a", "allow", "allow once", "y", "yes"})
        CHECK(approval_from_answer(w) == Approval::AllowedOnce);
    for (const char* w : {"r", "reject", "n", "no"}) CHECK(approval_from_answer(w) == Approval::Rejected);
    for (const char* w : {"c", "cancel"}) CHECK(approval_from_answer(w) == Approval::Cancelled);
}

TEST_CASE("escalation: a tty answer is trimmed and lowered") {
    CHECK(approval_from_answer("  A\t") == Approval::AllowedOnce);
    CHECK(approval_from_answer("Allow Once\r") == Approval::AllowedOnce);  // a terminal in raw mode sends \r
    CHECK(approval_from_answer("\t YES \r") == Approval::AllowedOnce);
    CHECK(approval_from_answer("REJECT") == Approval::Rejected);
    CHECK(approval_from_answer(" No") == Approval::Rejected);
    CHECK(approval_from_answer("Cancel ") == Approval::Cancelled);
}

TEST_CASE("escalation: an unclear tty answer asks again") {
    for (const char* w : {"", " ", "\t\r", "aa", "allowonce", "allow  once", "allow-once", "yes please", "ok",
                          "nope", "x", "a\x0b", "\x0c" "a", "y\xc3\xa9s"})
        CHECK_FALSE(approval_from_answer(w).has_value());
    CHECK_FALSE(approval_from_answer(std::string_view("a\0", 2)).has_value());  // NUL is not trimmed
    // Only spaces, tabs and '\r' are trimmed, and only at the ends.
    CHECK_FALSE(approval_from_answer("a b").has_value());
    CHECK_FALSE(approval_from_answer("\na").has_value());
}

namespace {
// The conversation fed from `typed`; counts the questions asked.
struct Typed {
    std::string typed;
    size_t at = 0;
    int asked = 0;
    bool can_write = true;
    Approval run() {
        return tty_conversation(
            [this](std::string_view s) {
                CHECK(s == "Allow once, reject, or cancel? [a/r/c] ");
                ++asked;
                return can_write;
            },
            [this]() -> int { return at < typed.size() ? static_cast<unsigned char>(typed[at++]) : -1; });
    }
};
}  // namespace

TEST_CASE("escalation: the tty conversation, three tries, EOF cancels") {
    struct Case {
        std::string typed;
        Approval want;
        int asked;
        size_t consumed;  // bytes read: nothing after the deciding '\n'
    };
    const Case cases[] = {
        {"a\n", Approval::AllowedOnce, 1, 2},
        {"r\n", Approval::Rejected, 1, 2},
        {"c\n", Approval::Cancelled, 1, 2},
        {"a\nr\n", Approval::AllowedOnce, 1, 2},               // the first clear answer decides
        {"huh\nr\na\n", Approval::Rejected, 2, 6},
        {"x\ny\n", Approval::AllowedOnce, 2, 4},
        {"x\n\nyes\n", Approval::AllowedOnce, 3, 7},            // a third try still counts
        {"x\nq\nz\n", Approval::Cancelled, 3, 6},              // three unclear answers
        {"x\nq\nz\na\n", Approval::Cancelled, 3, 6},           // ... and a fourth is never read
        {"", Approval::Cancelled, 1, 0},                       // Ctrl-D at once
        {"x\n", Approval::Cancelled, 2, 2},                    // EOF on the second try
        {"a", Approval::Cancelled, 1, 1},                      // EOF before the line ends
        {"x\nq\na", Approval::Cancelled, 3, 5},
    };
    for (const auto& c : cases) {
        CAPTURE(c.typed);
        Typed t{c.typed};
        CHECK(t.run() == c.want);
        CHECK(t.asked == c.asked);
        CHECK(t.at == c.consumed);
    }
}

TEST_CASE("escalation: a long tty answer keeps its first 256 bytes") {
    Typed t{std::string(255, ' ') + "a" + std::string(1000, 'x') + "\n"};
    CHECK(t.run() == Approval::AllowedOnce);  // the x's past the cap are dropped
    Typed u{std::string(256, ' ') + "a\n" + "r\n"};
    CHECK(u.run() == Approval::Rejected);  // the 'a' is byte 257: blank, ask again
    CHECK(u.asked == 2);
}

TEST_CASE("escalation: a terminal that cannot be written is unavailable") {
    Typed t{"a\n"};
    t.can_write = false;
    CHECK(t.run() == Approval::Unavailable);
    CHECK(t.at == 0);
}

TEST_CASE("escalation: the files an approver command names") {
    CHECK(approver_files("tty", "/cwd", "/bin").empty());
    CHECK(approver_files("", "/cwd", "/bin").empty());
    CHECK(approver_files("/opt/approve --quiet", "/cwd", "/bin") == std::vector<std::string>{"/opt/approve"});
    // A bare name: PATH's candidates up to the first executable file (the one run).
    CHECK(approver_files("sh -x", "/cwd", "/nonexistent-a:/bin:/usr/bin") ==
          std::vector<std::string>{"/nonexistent-a/sh", "/bin/sh"});
    CHECK(approver_files("sh", "/cwd", "/nonexistent-a:/nonexistent-b") ==
          std::vector<std::string>{"/nonexistent-a/sh", "/nonexistent-b/sh"});
    // An interpreter's script, named absolute or relative to the cwd, is a file it runs.
    CHECK(approver_files("sh passwd", "/etc", "/bin") == std::vector<std::string>{"/bin/sh", "/etc/passwd"});
    CHECK(approver_files("./x/../passwd -q", "/etc", "/bin") == std::vector<std::string>{"/etc/passwd"});
    // Root-owned programs pass; a missing file runs nothing and is not an error here.
    CHECK(check_approver_files({"/bin/sh", "/nonexistent/approve"}));
}

TEST_CASE("escalation: an approver command is parsed as it is run, never by a shell (issue 37)") {
    ApproverCommand c;
    REQUIRE(parse_approver("  /bin/sh\t /etc/passwd  -x ", "/cwd", "/bin", c));
    CHECK(c.argv == std::vector<std::string>{"/bin/sh", "/etc/passwd", "-x"});
    REQUIRE(parse_approver("sh", "/cwd", "/nonexistent:/bin", c));
    CHECK(c.argv == std::vector<std::string>{"/bin/sh"});
    // Everything a shell would read otherwise is refused, naming the first.
    for (const char* bad : {"'/opt/a b'", "\"/opt/a b\"", "/opt/a\\ b", "~/approve", "$HOME/approve", "${X}/a",
                            "`id`", "a;b", "cd /x && ./approve", "a|b", "a >log", "a <in", "a*", "a?", "a[1]",
                            "(a)", "{a,b}", "a # c", "!a", "X=1 approve", "a\nb", "exit 0; true"}) {
        CAPTURE(bad);
        const Outcome o = parse_approver(bad, "/cwd", "/bin", c);
        CHECK(o.err == Err::Usage);
        CHECK(o.message.find("but it is run directly, not by a shell") != std::string::npos);
    }
    CHECK(parse_approver("cd /x && ./approve", "/cwd", "/bin", c).message ==
          "approver \"cd /x && ./approve\": holds '&', but it is run directly, not by a shell; give a program and "
          "plain arguments (such as /usr/local/bin/approve --quiet), and put anything else in a script");
    CHECK(parse_approver("   ", "/cwd", "/bin", c).err == Err::Usage);
}

TEST_CASE("escalation: the tty prompt escapes controls, C1 and bidi (issue 37)") {
    CHECK(escape_for_terminal("plain text, \xc3\xbcn\xc3\xaf" "code") == "plain text, \xc3\xbcn\xc3\xaf" "code");
    CHECK(escape_for_terminal("a\x1b[2Jb\x7f") == "a\\x1b[2Jb\\x7f");
    CHECK(escape_for_terminal("\xc2\x9b" "31m") == "\\u{009b}31m");                          // C1 CSI
    CHECK(escape_for_terminal("\xe2\x80\xae" "evil") == "\\u{202e}evil");                   // RLO
    CHECK(escape_for_terminal("\xe2\x81\xa6x\xe2\x81\xa9") == "\\u{2066}x\\u{2069}");         // LRI .. PDI
    CHECK(escape_for_terminal("\xe2\x80\x8f\xd8\x9c") == "\\u{200f}\\u{061c}");               // RLM, ALM
    CHECK(escape_for_terminal("\xff\xc2") == "\\xff\\xc2");                                  // not UTF-8
}

TEST_CASE("escalation: the network's ladder and its own request (issue 17)") {
    CHECK(wider_networks(Network::Off) == std::vector<Network>{Network::Loopback, Network::Host});
    CHECK(wider_networks(Network::Loopback) == std::vector<Network>{Network::Host});
    CHECK(wider_networks(Network::Host).empty());
    Network n = Network::Off;
    REQUIRE(parse_network_escalation("host", n));
    CHECK(n == Network::Host);
    const Outcome off = parse_network_escalation("off", n);
    CHECK(off.err == Err::EscalationInvalid);
    CHECK(off.message == "invalid escalation: unknown network \"off\" for --escalate-net (loopback or host)");

    // The network alone: the mode stays, the approver is asked about the network.
    EscalationRequest r = req(Mode::ReadOnly, Mode::ReadOnly);
    r.mode_asked = false;
    r.current_network = Network::Off;
    r.target_network = Network::Host;
    CHECK(escalation_reason(r) == "escalate sandbox network to host: the build writes its output");
    const auto j = approval_request_json(r);
    CHECK(j["network"] == "host");
    CHECK(j["currentNetwork"] == "off");
    CHECK(j["mode"] == "read-only");
    Fake yes(Approval::AllowedOnce);
    Mode granted = Mode::ReadOnly;
    REQUIRE(approve_escalation(r, &yes, granted));
    CHECK(yes.asked == 1);
    CHECK(granted == Mode::ReadOnly);
    Fake no(Approval::Rejected);
    CHECK(approve_escalation(r, &no, granted).message == "the user rejected escalating this command to network \"host\"");
    CHECK(approve_escalation(r, nullptr, granted).message ==
          "sandbox escalation to network \"host\" requires approval, but no approval service is composed");

    // Not wider: refused before anyone is asked, with the network's ladder as the hint.
    r.current_network = Network::Host;
    Fake never(Approval::AllowedOnce);
    const Outcome same = approve_escalation(r, &never, granted);
    CHECK(same.err == Err::EscalationNotWider);
    CHECK(same.message == "sandbox escalation to network \"host\" is not strictly wider than this call's current "
                          "\"host\" network");
    // The stderr line: the message, then the fix.
    CHECK(same.hint == same.message + "; --escalate-net takes a network wider than the call's \"host\" (off < loopback < host)");
    CHECK(never.asked == 0);

    // Both: one approval for the mode and the network; each must be wider.
    r = req(Mode::WorkspaceWrite, Mode::ReadOnly);
    r.current_network = Network::Off;
    r.target_network = Network::Loopback;
    CHECK(escalation_reason(r) == "escalate sandbox to workspace-write with network loopback: the build writes its output");
    CHECK(approve_escalation(r, &no, granted).message ==
          "the user rejected escalating this command to \"workspace-write\" with network \"loopback\"");
    r.current_network = Network::Loopback;
    CHECK(approve_escalation(r, &never, granted).err == Err::EscalationNotWider);
    // Without a network escalation the seed's texts are unchanged; the request names the call's network.
    r = req(Mode::WorkspaceWrite, Mode::ReadOnly);
    r.current_network = Network::Off;
    CHECK(escalation_reason(r) == "escalate sandbox to workspace-write: the build writes its output");
    CHECK(approval_request_json(r)["network"] == "off");
    CHECK(approve_escalation(r, &no, granted).message == "the user rejected escalating this command to \"workspace-write\"");
}
