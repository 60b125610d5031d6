// The Windows ACL runner's pure parts: SHA-256 against published vectors,
// SID derivation against vectors computed independently with Python's
// hashlib, the helper's argv per mode, its argument validation (exact error
// lines), and command-line quoting. Regenerate the SID vectors with:
//   python3 -c 'import hashlib,struct,sys; M=(1<<30)-1; d=hashlib.sha256(sys.argv[1].encode()).digest();
//               a,b=struct.unpack("<II",d[:8]); print(f"S-1-4-{a%M+1}-{b%M+1}")' 'C:\Users\dev\project'
// (temp SIDs: hash b"temp\0" + dir and append "-1").
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "windows/acl_plan.hpp"
#include "windows/sha256.hpp"

using namespace dsh;

TEST_CASE("sha256: FIPS 180-4 / NIST vectors and padding boundaries") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    CHECK(sha256_hex(std::string(1000, 'a')) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST_CASE("windows-acl: workspace and temp SIDs match independently computed vectors") {
    CHECK(acl::workspace_sid("C:\\Users\\dev\\project") == "S-1-4-386738084-617713224");
    CHECK(acl::temp_sid("C:\\Users\\dev\\project") == "S-1-4-678844861-842721855-1");
    CHECK(acl::workspace_sid("C:\\work\\r\xc3\xa9pertoire \xc3\xa9t\xc3\xa9") == "S-1-4-915355896-670788019");
    CHECK(acl::temp_sid("C:\\work\\r\xc3\xa9pertoire \xc3\xa9t\xc3\xa9") == "S-1-4-799326501-34924551-1");
    CHECK(acl::workspace_sid("D:\\a \"quoted\" dir\\x") == "S-1-4-287917184-214264171");
    CHECK(acl::temp_sid("D:\\a \"quoted\" dir\\x") == "S-1-4-433597507-148038703-1");
    CHECK(acl::workspace_sid("/home/dev/ws") == "S-1-4-81485092-583765810");
    CHECK(acl::temp_sid("/home/dev/ws") == "S-1-4-984821618-543963127-1");
}

TEST_CASE("windows-acl: the helper's argv in each mode") {
    const std::vector<std::string> cmd = {"bash", "-c", "echo hi"};
    CHECK(acl::helper_argv("C:\\dsh\\dsh-confine-acl-run.exe", Mode::ReadOnly, "C:\\ws", "C:\\Temp", std::nullopt,
                           cmd) ==
          std::vector<std::string>{"C:\\dsh\\dsh-confine-acl-run.exe", "--workspace", "C:\\ws", "--temp", "C:\\Temp",
                                   "--mode", "read-only", "--", "bash", "-c", "echo hi"});
    // Agentless workspace-write: no SIDs; the helper makes its own temp dir.
    CHECK(acl::helper_argv("h.exe", Mode::WorkspaceWrite, "C:\\ws", "C:\\Temp", std::nullopt, cmd) ==
          std::vector<std::string>{"h.exe", "--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode",
                                   "workspace-write", "--", "bash", "-c", "echo hi"});
    // With a session: the private temp dir and both SIDs.
    acl::Sids s{acl::workspace_sid("C:\\ws"), acl::temp_sid("C:\\Temp\\dsh-ab12cd")};
    CHECK(acl::helper_argv("h.exe", Mode::WorkspaceWrite, "C:\\ws", "C:\\Temp\\dsh-ab12cd", s, cmd) ==
          std::vector<std::string>{"h.exe", "--workspace", "C:\\ws", "--temp", "C:\\Temp\\dsh-ab12cd", "--mode",
                                   "workspace-write", "--write-sid", s.write_sid, "--temp-write-sid",
                                   s.temp_write_sid, "--", "bash", "-c", "echo hi"});
    // Read-only never carries SIDs, even when some are at hand.
    CHECK(acl::helper_argv("h.exe", Mode::ReadOnly, "C:\\ws", "C:\\Temp", s, {"x"}) ==
          std::vector<std::string>{"h.exe", "--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "read-only",
                                   "--", "x"});
    CHECK(acl::probe_argv("h.exe", "C:\\Temp") ==
          std::vector<std::string>{"h.exe", "--workspace", "C:\\Temp", "--temp", "C:\\Temp", "--mode", "read-only",
                                   "--", "cmd", "/c", "exit 0"});
}

namespace {

const std::set<std::string> DIRS = {"C:\\ws", "C:\\Temp", "C:\\ws\\tmp", "C:\\Temp\\dsh-ab12cd"};
auto is_dir = [](const std::string& p) { return DIRS.count(p) > 0; };

std::string error_of(std::vector<std::string> args) {
    auto r = acl::parse_helper_args(args, is_dir);
    CHECK(!r.args);
    return r.error;
}

}  // namespace

TEST_CASE("windows-acl: helper argument validation, exact error lines") {
    using V = std::vector<std::string>;
    const std::string ws_sid = acl::workspace_sid("C:\\ws");
    const std::string tmp_sid = acl::temp_sid("C:\\Temp\\dsh-ab12cd");
    CHECK(error_of({"--temp", "C:\\Temp", "--mode", "read-only", "--", "x"}) == "windows-acl-run: missing --workspace");
    CHECK(error_of({"--workspace", "C:\\ws", "--mode", "read-only", "--", "x"}) == "windows-acl-run: missing --temp");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--", "x"}) == "windows-acl-run: missing --mode");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "read-only"}) ==
          "windows-acl-run: missing -- <command>");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "read-only", "--"}) ==
          "windows-acl-run: missing -- <command>");
    CHECK(error_of({"--bogus"}) == "windows-acl-run: unknown argument: --bogus");
    CHECK(error_of({"--workspace"}) == "windows-acl-run: --workspace requires a value");
    CHECK(error_of({"--workspace", "C:\\ws", "--workspace", "C:\\ws"}) ==
          "windows-acl-run: --workspace given more than once");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "danger-full-access", "--", "x"}) ==
          "windows-acl-run: unknown mode: danger-full-access");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "read-only", "--write-sid", ws_sid, "--",
                    "x"}) == "windows-acl-run: read-only does not accept --write-sid or --temp-write-sid");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "workspace-write", "--write-sid", ws_sid,
                    "--", "x"}) == "windows-acl-run: workspace-write requires --write-sid and --temp-write-sid together");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode", "workspace-write", "--temp-write-sid",
                    tmp_sid, "--", "x"}) ==
          "windows-acl-run: workspace-write requires --write-sid and --temp-write-sid together");
    CHECK(error_of({"--workspace", "C:\\nope", "--temp", "C:\\Temp", "--mode", "read-only", "--", "x"}) ==
          "windows-acl-run: --workspace is not an existing directory: C:\\nope");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\nope", "--mode", "read-only", "--", "x"}) ==
          "windows-acl-run: --temp is not an existing directory: C:\\nope");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp\\dsh-ab12cd", "--mode", "workspace-write",
                    "--write-sid", acl::workspace_sid("C:\\other"), "--temp-write-sid", tmp_sid, "--", "x"}) ==
          "windows-acl-run: --write-sid does not match --workspace");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\Temp\\dsh-ab12cd", "--mode", "workspace-write",
                    "--write-sid", ws_sid, "--temp-write-sid", acl::temp_sid("C:\\Temp"), "--", "x"}) ==
          "windows-acl-run: --temp-write-sid does not match --temp");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\ws\\tmp", "--mode", "workspace-write", "--", "x"}) ==
          "windows-acl-run: Windows ACL temp root must be outside the workspace: workspace=C:\\ws; temp=C:\\ws\\tmp");
    CHECK(error_of({"--workspace", "C:\\ws", "--temp", "C:\\ws", "--mode", "workspace-write", "--", "x"}) ==
          "windows-acl-run: Windows ACL temp root must be outside the workspace: workspace=C:\\ws; temp=C:\\ws");

    // Accepted: read-only (the probe's shape, one dir as both), agentless and session workspace-write.
    auto ro = acl::parse_helper_args({"--workspace", "C:\\Temp", "--temp", "C:\\Temp", "--mode", "read-only", "--",
                                      "cmd", "/c", "exit 0"},
                                     is_dir);
    REQUIRE(ro.args);
    CHECK(ro.error.empty());
    CHECK(ro.args->mode == Mode::ReadOnly);
    CHECK(!ro.args->sids);
    CHECK(ro.args->command == V{"cmd", "/c", "exit 0"});
    auto ww = acl::parse_helper_args({"--mode", "workspace-write", "--temp", "C:\\Temp\\dsh-ab12cd", "--workspace",
                                      "C:\\ws", "--write-sid", ws_sid, "--temp-write-sid", tmp_sid, "--", "--mode",
                                      "--"},
                                     is_dir);
    REQUIRE(ww.args);
    CHECK(ww.args->workspace == "C:\\ws");
    CHECK(ww.args->temp == "C:\\Temp\\dsh-ab12cd");
    REQUIRE(ww.args->sids);
    CHECK(ww.args->sids->write_sid == ws_sid);
    CHECK(ww.args->command == V{"--mode", "--"});  // after "--", everything is the command's
    auto flagval = acl::parse_helper_args({"--workspace", "C:\\ws", "--temp", "C:\\Temp", "--mode",
                                           "workspace-write", "--", "x"},
                                          is_dir);
    REQUIRE(flagval.args);
    CHECK(!flagval.args->sids);
}

TEST_CASE("windows-acl: Windows path containment") {
    CHECK(acl::windows_path_within("C:\\ws\\tmp", "C:\\ws"));
    CHECK(acl::windows_path_within("c:/WS/tmp/", "C:\\ws\\"));
    CHECK(acl::windows_path_within("C:\\ws", "C:\\ws"));
    CHECK(!acl::windows_path_within("C:\\wsx", "C:\\ws"));
    CHECK(!acl::windows_path_within("C:\\Temp", "C:\\ws"));
    CHECK(acl::windows_path_within("C:\\anything", "C:\\"));
}

TEST_CASE("windows-acl: command-line quoting round-trips through CommandLineToArgvW's rules") {
    CHECK(acl::quote_windows_arg("plain") == "plain");
    CHECK(acl::quote_windows_arg("") == "\"\"");
    CHECK(acl::quote_windows_arg("with space") == "\"with space\"");
    CHECK(acl::quote_windows_arg("C:\\Program Files\\") == "\"C:\\Program Files\\\\\"");
    CHECK(acl::quote_windows_arg("say \"hi\"") == "\"say \\\"hi\\\"\"");
    CHECK(acl::quote_windows_arg("a\\\\\"b") == "\"a\\\\\\\\\\\"b\"");  // a\\"b -> "a\\\\\"b"
    CHECK(acl::quote_windows_arg("C:\\no\\space") == "C:\\no\\space");  // backslashes alone stay
    CHECK(acl::windows_command_line({"h.exe", "--workspace", "C:\\my ws", "--", "cmd", "/c", "exit 0"}) ==
          "h.exe --workspace \"C:\\my ws\" -- cmd /c \"exit 0\"");
}

TEST_CASE("windows-acl: enforcement is partial with the gaps named; rules as the seed") {
    auto l = acl::layer();
    CHECK(l.enforcement == Enforcement::Partial);
    std::vector<std::string> own;
    for (const auto& g : l.gaps)
        if (g.own_effect) own.push_back(g.effect);
    CHECK(own == std::vector<std::string>{"everyone-writable-objects", "hard-links", "fat-volumes"});
    CHECK(acl::denial_signatures() == std::vector<std::string>{"access is denied", "access to the path", "permission denied"});
    CHECK(acl::runner_failure_rules().dump() == R"([{"allowedExitCodes":[127],"fatalSignatures":["windows-acl-run: "]}])");
    CHECK(acl::GRANT_MASK == 0x00110156u);
}

TEST_CASE("windows-acl: render_windows_plan") {
    Policy p;
    p.mode = Mode::WorkspaceWrite;
    p.workspace_root = "C:\\ws";
    auto agentless = acl::render_windows_plan(p, {"make"}, "C:\\Temp", false);
    CHECK(agentless.find("command line: dsh-confine-acl-run.exe --workspace C:\\ws --temp C:\\Temp --mode "
                         "workspace-write -- make\n") != std::string::npos);
    CHECK(agentless.find("enforcement: partial\n") != std::string::npos);
    auto session = acl::render_windows_plan(p, {"make"}, "C:\\Temp", true);
    CHECK(session.find("  \"--write-sid\"\n  \"" + acl::workspace_sid("C:\\ws") + "\"\n") != std::string::npos);
}
