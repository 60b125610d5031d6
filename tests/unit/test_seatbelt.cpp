// Seatbelt's pure builder, byte for byte: the SBPL profile per mode, the
// sandbox-exec argv, canonicalisation as macOS resolves paths, and paths that
// would break a profile if they were pasted into it (they never are).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <climits>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "darwin/seatbelt_plan.hpp"
#include "policy.hpp"

using namespace dsh;

namespace {

Policy policy(Mode mode, std::string root, std::vector<std::string> roots) {
    Policy p;
    p.mode = mode;
    p.workspace_root = std::move(root);
    p.writable_files = {"/dev/null"};
    if (mode == Mode::WorkspaceWrite)
        for (auto& r : roots) p.writable_roots.push_back(WritableRoot{r, Grant::Flag, true});
    return p;
}

const std::string RO_PROFILE =
    "(version 1) (allow default) (deny file-write*) (allow file-write* (literal \"/dev/null\"))";

}  // namespace

TEST_CASE("seatbelt: read-only profile and argv are the seed's, with no parameters, for /dev/null alone") {
    auto p = seatbelt::plan(policy(Mode::ReadOnly, "/Users/dev/ws", {}), {"bash", "-c", "echo hi"},
                            seatbelt::macos_view());
    CHECK(p.profile == RO_PROFILE);
    CHECK(p.params.empty());
    CHECK(p.argv == std::vector<std::string>{"/usr/bin/sandbox-exec", "-p", RO_PROFILE, "--", "bash", "-c", "echo hi"});
    CHECK(p.writable_roots.empty());
    CHECK(p.layer.enforcement == Enforcement::Full);
    CHECK(p.denial_signatures == std::vector<std::string>{"operation not permitted"});
    CHECK(p.runner_failure_rules.dump() == R"([{"fatalSignatures":["sandbox-exec: "]}])");
}

TEST_CASE("seatbelt: a policy as the runner builds it: the seed's profile plus the command's /dev/tty; the probe's is the seed's") {
    // build_policy, as a run makes it: /dev/null and /dev/tty are its writable
    // files in every confined mode (the hand-made policy above has only the
    // first). The difference is one form, documented (DECISIONS, issue 38).
    PolicyInput in;
    in.mode = Mode::ReadOnly;
    in.cwd = "/Users/dev/ws";
    Policy pol;
    REQUIRE(build_policy(in, pol));
    REQUIRE(pol.writable_files == std::vector<std::string>{"/dev/null", "/dev/tty"});
    auto p = seatbelt::plan(pol, {"true"}, seatbelt::macos_view());
    const std::string profile = RO_PROFILE + " (allow file-write* (literal \"/dev/tty\"))";
    CHECK(p.profile == profile);
    CHECK(p.params.empty());
    CHECK(p.argv == std::vector<std::string>{"/usr/bin/sandbox-exec", "-p", profile, "--", "true"});
    // The probe runs the seed's read-only profile, byte for byte.
    CHECK(seatbelt::probe_argv() == std::vector<std::string>{"/usr/bin/sandbox-exec", "-p", RO_PROFILE, "--", "/usr/bin/true"});
}

TEST_CASE("seatbelt: workspace-write allows each canonical root as a (param) subpath") {
    auto p = seatbelt::plan(
        policy(Mode::WorkspaceWrite, "/Users/dev/ws", {"/Users/dev/ws", "/tmp", "/var/folders/xy/abc123/T"}),
        {"true"}, seatbelt::macos_view());
    const std::string profile =
        RO_PROFILE +
        " (allow file-write* (subpath (param \"WRITABLE_ROOT_0\")) (subpath (param \"WRITABLE_ROOT_1\"))"
        " (subpath (param \"WRITABLE_ROOT_2\")))";
    CHECK(p.profile == profile);
    CHECK(p.argv == std::vector<std::string>{"/usr/bin/sandbox-exec", "-p", profile,
                                             "-DWRITABLE_ROOT_0=/Users/dev/ws", "-DWRITABLE_ROOT_1=/private/tmp",
                                             "-DWRITABLE_ROOT_2=/private/var/folders/xy/abc123/T", "--", "true"});
    CHECK(p.writable_roots ==
          std::vector<std::string>{"/Users/dev/ws", "/private/tmp", "/private/var/folders/xy/abc123/T"});
}

TEST_CASE("seatbelt: roots that resolve to the same place are deduplicated, first wins") {
    // $TMPDIR=/tmp/ and /private/tmp are /tmp; a workspace under /tmp stays.
    auto p = seatbelt::plan(policy(Mode::WorkspaceWrite, "/tmp/ws",
                                   {"/tmp/ws", "/tmp", "/tmp/", "/private/tmp", "/private/tmp/ws/"}),
                            {"true"}, seatbelt::macos_view());
    CHECK(p.writable_roots == std::vector<std::string>{"/private/tmp/ws", "/private/tmp"});
    CHECK(p.params.size() == 2);
}

TEST_CASE("seatbelt: awkward paths travel as -D values and never reach the profile text") {
    const std::vector<std::string> awkward = {
        "/Users/dev/a \"quoted\" dir",   // quotes
        "/Users/dev/back\\slash\\",      // backslashes (a trailing one too)
        "/Users/dev/with space/and\ttab",
        "/Users/dev/r\xc3\xa9pertoire/\xe6\x97\xa5\xe6\x9c\xac",  // non-ASCII (UTF-8)
        "/Users/dev/paren) (allow file-write* (subpath \"/\"))",  // an SBPL injection attempt
    };
    auto p = seatbelt::plan(policy(Mode::WorkspaceWrite, awkward[0], awkward), {"true"}, seatbelt::macos_view());
    CHECK(p.profile ==
          RO_PROFILE +
              " (allow file-write* (subpath (param \"WRITABLE_ROOT_0\")) (subpath (param \"WRITABLE_ROOT_1\"))"
              " (subpath (param \"WRITABLE_ROOT_2\")) (subpath (param \"WRITABLE_ROOT_3\"))"
              " (subpath (param \"WRITABLE_ROOT_4\")))");
    REQUIRE(p.argv.size() == 3 + 5 + 2);
    CHECK(p.argv[3] == "-DWRITABLE_ROOT_0=/Users/dev/a \"quoted\" dir");
    CHECK(p.argv[4] == "-DWRITABLE_ROOT_1=/Users/dev/back\\slash\\");
    CHECK(p.argv[5] == "-DWRITABLE_ROOT_2=/Users/dev/with space/and\ttab");
    CHECK(p.argv[6] == "-DWRITABLE_ROOT_3=/Users/dev/r\xc3\xa9pertoire/\xe6\x97\xa5\xe6\x9c\xac");
    CHECK(p.argv[7] == "-DWRITABLE_ROOT_4=/Users/dev/paren) (allow file-write* (subpath \"/\"))");
    CHECK(p.argv[8] == "--");
    for (const auto& a : awkward) CHECK(p.profile.find(a) == std::string::npos);
}

TEST_CASE("seatbelt: SBPL quoting escapes backslash first, then the quote") {
    CHECK(seatbelt::sbpl_quote("/dev/null") == "\"/dev/null\"");
    CHECK(seatbelt::sbpl_quote("a\"b") == "\"a\\\"b\"");
    CHECK(seatbelt::sbpl_quote("a\\b") == "\"a\\\\b\"");
    CHECK(seatbelt::sbpl_quote("\\\"") == "\"\\\\\\\"\"");  // \" -> \\\"
    CHECK(seatbelt::sbpl_quote("r\xc3\xa9") == "\"r\xc3\xa9\"");
}

TEST_CASE("seatbelt: canonicalisation as macOS resolves /tmp, /var and $TMPDIR") {
    auto v = seatbelt::macos_view();
    CHECK(seatbelt::canonical("/tmp", v) == "/private/tmp");
    CHECK(seatbelt::canonical("/tmp/", v) == "/private/tmp");
    CHECK(seatbelt::canonical("/var/folders/xy/abc/T/", v) == "/private/var/folders/xy/abc/T");
    CHECK(seatbelt::canonical("/etc/hosts", v) == "/private/etc/hosts");
    CHECK(seatbelt::canonical("/private/tmp", v) == "/private/tmp");
    CHECK(seatbelt::canonical("/tmpfoo", v) == "/tmpfoo");  // a component prefix, not a string prefix
    CHECK(seatbelt::canonical("/Users/dev/./ws/../ws", v) == "/Users/dev/ws");
}

TEST_CASE("seatbelt: a symlinked root resolves through nested links; a missing tail keeps its spelling") {
    auto v = seatbelt::symlink_view({{"/Users/dev/link", "/Volumes/data/real"},
                                     {"/Volumes/data", "/private/var/data"},
                                     {"/tmp", "/private/tmp"}});
    CHECK(seatbelt::canonical("/Users/dev/link/sub", v) == "/private/var/data/real/sub");
    // A view where nothing below /Users/dev/new exists: the longest existing
    // prefix is resolved, the rest appended.
    seatbelt::RealpathView partial = [&v](const std::string& p) -> std::optional<std::string> {
        if (p.rfind("/Users/dev/link/new", 0) == 0) return std::nullopt;
        return v(p);
    };
    CHECK(seatbelt::canonical("/Users/dev/link/new/deeper", partial) == "/private/var/data/real/new/deeper");
    // A cycle resolves to nothing, then falls back to an ancestor that does.
    auto loop = seatbelt::symlink_view({{"/a", "/b"}, {"/b", "/a"}});
    CHECK(seatbelt::canonical("/a/x", loop) == "/a/x");
}

TEST_CASE("seatbelt: a real symlinked root on this host, through realpath(3)") {
    char tmpl[] = "/var/tmp/dsh-seatbelt-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string base = tmpl;
    const std::string real_dir = base + "/real";
    const std::string link = base + "/link";
    REQUIRE(::mkdir(real_dir.c_str(), 0700) == 0);
    REQUIRE(::symlink(real_dir.c_str(), link.c_str()) == 0);
    seatbelt::RealpathView host = [](const std::string& p) -> std::optional<std::string> {
        char buf[PATH_MAX];
        if (::realpath(p.c_str(), buf) == nullptr) return std::nullopt;
        return std::string(buf);
    };
    char rbase[PATH_MAX];
    REQUIRE(::realpath(base.c_str(), rbase) != nullptr);
    auto p = seatbelt::plan(policy(Mode::WorkspaceWrite, link, {link, real_dir, link + "/missing"}), {"true"}, host);
    CHECK(p.writable_roots ==
          std::vector<std::string>{std::string(rbase) + "/real", std::string(rbase) + "/real/missing"});
    ::unlink(link.c_str());
    ::rmdir(real_dir.c_str());
    ::rmdir(base.c_str());
}

TEST_CASE("seatbelt: the probe runs the read-only profile") {
    CHECK(seatbelt::probe_argv() ==
          std::vector<std::string>{"/usr/bin/sandbox-exec", "-p", RO_PROFILE, "--", "/usr/bin/true"});
}

TEST_CASE("seatbelt: render_darwin_plan shows argv, params and profile") {
    auto text = seatbelt::render_darwin_plan(policy(Mode::WorkspaceWrite, "/Users/dev/ws", {"/Users/dev/ws", "/tmp"}),
                                             {"make"});
    CHECK(text.find("runner: seatbelt\n") != std::string::npos);
    CHECK(text.find("  \"-DWRITABLE_ROOT_1=/private/tmp\"\n") != std::string::npos);
    CHECK(text.find("  WRITABLE_ROOT_0 = \"/Users/dev/ws\"\n") != std::string::npos);
    CHECK(text.find("enforcement: full\n") != std::string::npos);
}
