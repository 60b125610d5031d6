#include <catch2/catch.hpp>

#include <cerrno>
#include <set>

#include "../../src/errors.hpp"

using namespace dsh;

TEST_CASE("error table: stable codes, exit statuses, one per enumerator") {
    const Err all[] = {Err::Usage, Err::InvalidRoot, Err::InvalidPath, Err::ReportFd, Err::ReportWrite,
                       Err::SandboxUnavailable, Err::CommandNotFound, Err::CommandNotExecutable, Err::ConfigInvalid,
                       Err::SessionInvalid, Err::EscalationInvalid, Err::EscalationNotWider,
                       Err::EscalationNoApprover, Err::EscalationRejected, Err::EscalationCancelled,
                       Err::EscalationUnavailable, Err::Internal};
    std::set<std::string_view> codes;
    for (Err e : all) {
        codes.insert(info(e).code);
        const int st = info(e).exit_status;
        if (e == Err::CommandNotFound) CHECK(st == 127);
        else if (e == Err::CommandNotExecutable) CHECK(st == 126);
        else CHECK(st == 125);
    }
    CHECK(codes.size() == sizeof all / sizeof all[0]);
    CHECK(info(Err::SandboxUnavailable).code == "SANDBOX_UNAVAILABLE");
}

TEST_CASE("the seed's fail-closed text, exactly") {
    CHECK(sandbox_unavailable_text("workspace-write") ==
          "sandbox mode \"workspace-write\" is requested but no sandbox backend is usable on this host; refusing to "
          "run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel (Linux), ensure "
          "sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start (Windows) \xE2\x80\x94 "
          "otherwise switch the consumer to danger-full-access.");
}

TEST_CASE("Outcome: success and failure") {
    Outcome ok = Outcome::success();
    CHECK(ok);
    CHECK(ok.exit_status() == 0);
    Outcome f = failf(Err::InvalidRoot, "root {} bad", "/x");
    CHECK_FALSE(f);
    CHECK(f.message == "root /x bad");
    CHECK(f.code() == "INVALID_WORKSPACE_ROOT");
    CHECK(f.exit_status() == 125);
}

TEST_CASE("one_line: control characters are escaped, UTF-8 is kept") {
    CHECK(one_line("plain text") == "plain text");
    CHECK(one_line("a\nb") == "a\\nb");
    CHECK(one_line("tab\there\r") == "tab\\there\\r");
    CHECK(one_line("\x1b[31mred") == "\\x1b[31mred");
    CHECK(one_line(std::string_view("nul\0x", 5)) == "nul\\x00x");
    CHECK(one_line("del\x7f") == "del\\x7f");
    CHECK(one_line("em \xE2\x80\x94 dash") == "em \xE2\x80\x94 dash");
}

TEST_CASE("the Landlock runner's own network namespace: its steps' texts and the loopback reason") {
    using namespace dsh;
    CHECK(fault_outcome(Fault{Step::NetNamespace, EPERM, 1}).message ==
          "unshare(CLONE_NEWUSER|CLONE_NEWNET): Operation not permitted");
    CHECK(fault_outcome(Fault{Step::NetNamespace, EPERM, 0}).message == "unshare(CLONE_NEWNET): Operation not permitted");
    CHECK(fault_outcome(Fault{Step::NetIdMap, EPERM, 2}).message ==
          "cannot write /proc/self/gid_map of the new user namespace: Operation not permitted");
    CHECK(fault_code(Fault{Step::LoopbackUp, EPERM, -1}) == Err::SandboxUnavailable);
    CHECK(fault_code(Fault{Step::RelayHandOut, EPIPE, -1}) == Err::SandboxUnavailable);
    CHECK(fault_outcome(Fault{Step::RelayHandOut, EPIPE, -1}).message ==
          "cannot hand the allow-list's listener to dsh-confine: Broken pipe");
    CHECK(loopback_unavailable_text("Landlock", "") ==
          "--net loopback needs a network namespace of its own, which the Landlock runner does not make: use the "
          "bwrap runner (--runner bwrap), or --net off");
    const std::string t = loopback_unavailable_text("Landlock", "unshare(CLONE_NEWNET): Operation not permitted");
    CHECK(t.find("this host refused the Landlock runner one (unshare(CLONE_NEWNET): Operation not permitted)") !=
          std::string::npos);
    CHECK(t.find('\n') == std::string::npos);
}
