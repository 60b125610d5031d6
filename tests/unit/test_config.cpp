#include <catch2/catch.hpp>

#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/config.hpp"
#include "../../src/own_state.hpp"

using namespace dsh;

namespace {
Outcome parse(const std::string& text, Config& c) { return parse_config(text, "/etc/c.json", c); }
std::string config_error(const std::string& text) {
    Config c;
    Outcome o = parse(text, c);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::ConfigInvalid);
    CHECK(o.exit_status() == 125);
    return o.message;
}
}  // namespace

TEST_CASE("config: an empty object is all defaults") {
    Config c;
    REQUIRE(parse("{}", c));
    CHECK(c.path == "/etc/c.json");
    CHECK_FALSE(c.mode);
    CHECK_FALSE(c.workspace_root);
    CHECK_FALSE(c.runner);
    CHECK_FALSE(c.bwrap_path);
    CHECK(c.runner_command.empty());
    CHECK(c.runner_failure_signatures.empty());
    CHECK_FALSE(c.probe_timeout_ms);
    CHECK(c.writable_roots.empty());
    CHECK_FALSE(c.approver);
    CHECK_FALSE(c.private_tmp);
    CHECK_FALSE(c.custom_runner());
}

TEST_CASE("config: every key parses") {
    Config c;
    REQUIRE(parse(R"({
        "mode": "workspace-write",
        "workspaceRoot": "/srv/ws",
        "runner": "landlock",
        "bwrapPath": "/opt/bin/bwrap",
        "runnerCommand": ["/opt/runner", "--flag"],
        "runnerFailureSignatures": ["runner: ", "fatal"],
        "probeTimeoutMs": 250,
        "writableRoots": ["/srv/cache", "/srv/out"],
        "approver": "/usr/local/bin/approve",
        "privateTmp": true
    })",
                  c));
    CHECK(c.mode == Mode::WorkspaceWrite);
    CHECK(c.workspace_root == std::string("/srv/ws"));
    CHECK(c.runner == RunnerKind::Landlock);
    CHECK(c.bwrap_path == std::string("/opt/bin/bwrap"));
    CHECK(c.runner_command == std::vector<std::string>{"/opt/runner", "--flag"});
    CHECK(c.runner_failure_signatures == std::vector<std::string>{"runner: ", "fatal"});
    CHECK(c.probe_timeout_ms == 250);
    CHECK(c.writable_roots == std::vector<std::string>{"/srv/cache", "/srv/out"});
    CHECK(c.approver == std::string("/usr/local/bin/approve"));
    CHECK(c.private_tmp == true);
    CHECK(c.custom_runner());
    Config off;
    REQUIRE(parse(R"({"privateTmp": false})", off));
    CHECK(off.private_tmp == false);
}

TEST_CASE("config: each mode and runner name") {
    for (const char* m : {"read-only", "workspace-write", "danger-full-access"}) {
        Config c;
        REQUIRE(parse(std::string(R"({"mode":")") + m + "\"}", c));
        CHECK(to_string(*c.mode) == m);
    }
    for (const char* r : {"auto", "bwrap", "landlock", "seatbelt", "windows-acl", "custom"}) {
        Config c;
        REQUIRE(parse(std::string(R"({"runner":")") + r + "\"}", c));
        CHECK(to_string(*c.runner) == r);
    }
    CHECK(config_error(R"({"mode":"Read-Only"})") ==
          "config /etc/c.json: \"mode\": unknown mode \"Read-Only\" (read-only, workspace-write or danger-full-access)");
    CHECK(config_error(R"({"runner":"docker"})") ==
          "config /etc/c.json: \"runner\": unknown runner \"docker\" (auto, bwrap, landlock, seatbelt, windows-acl or "
          "custom)");
}

TEST_CASE("config: an unknown key is an error naming it") {
    CHECK(config_error(R"({"mode":"read-only","modes":"x"})") ==
          "config /etc/c.json: unknown key \"modes\" (known: mode, workspaceRoot, runner, bwrapPath, runnerCommand, "
          "runnerFailureSignatures, probeTimeoutMs, writableRoots, cache, protect, unprotect, denyRead, hideSecrets, secretPaths, approver, privateTmp, network, "
              "keepDescendants, timeout, killAfter, maxProcs, memory, cpuTime, fileSize, nofile, limits, allowCore)");
    CHECK_THAT(config_error(R"({"WorkspaceRoot":"/x"})"), Catch::Contains("unknown key \"WorkspaceRoot\""));
}

TEST_CASE("config: every wrong type names the key") {
    // key -> a value of the wrong type for it, and the type it must be
    const std::map<std::string, std::pair<std::string, std::string>> cases = {
        {"mode", {"1", "a string, not a number"}},
        {"workspaceRoot", {"true", "a string, not a boolean"}},
        {"runner", {"[\"bwrap\"]", "a string, not an array"}},
        {"bwrapPath", {"{}", "a string, not an object"}},
        {"runnerCommand", {"\"/bin/runner\"", "an array of strings, not a string"}},
        {"runnerFailureSignatures", {"\"x\"", "an array of strings, not a string"}},
        {"probeTimeoutMs", {"\"5000\"", "a number, not a string"}},
        {"writableRoots", {"\"/x\"", "an array of strings, not a string"}},
        {"approver", {"null", "a string, not null"}},
        // Strictly a boolean: "true", 1 or null are not.
        {"privateTmp", {"\"true\"", "true or false, not a string"}},
    };
    for (const auto& [key, v] : cases) {
        INFO(key);
        CHECK(config_error("{\"" + key + "\":" + v.first + "}") == "config /etc/c.json: \"" + key + "\" must be " + v.second);
    }
    CHECK(config_error(R"({"privateTmp":1})") == "config /etc/c.json: \"privateTmp\" must be true or false, not a number");
    CHECK(config_error(R"({"privateTmp":null})") == "config /etc/c.json: \"privateTmp\" must be true or false, not null");
    CHECK(config_error(R"({"writableRoots":["/a",2]})") ==
          "config /etc/c.json: \"writableRoots\"[1] must be a string, not a number");
    CHECK(config_error(R"({"runnerCommand":[null],"runnerFailureSignatures":["x"]})") ==
          "config /etc/c.json: \"runnerCommand\"[0] must be a string, not null");
}

TEST_CASE("config: paths must be absolute and strings non-empty") {
    CHECK(config_error(R"({"workspaceRoot":"ws"})") ==
          "config /etc/c.json: \"workspaceRoot\" must be an absolute path, not \"ws\"");
    CHECK(config_error(R"({"bwrapPath":"bwrap"})") == "config /etc/c.json: \"bwrapPath\" must be an absolute path, not \"bwrap\"");
    CHECK(config_error(R"({"writableRoots":["rel"]})") ==
          "config /etc/c.json: \"writableRoots\"[0] must be an absolute path, not \"rel\"");
    CHECK(config_error(R"({"runnerCommand":["runner"],"runnerFailureSignatures":["x"]})") ==
          "config /etc/c.json: \"runnerCommand\"[0] must be an absolute path, not \"runner\"");
    CHECK(config_error(R"({"approver":""})") == "config /etc/c.json: \"approver\" must not be empty");
    CHECK(config_error(R"({"mode":""})") == "config /etc/c.json: \"mode\" must not be empty");
}

TEST_CASE("config: the seed's sandbox-local texts") {
    const std::string p = "config /etc/c.json: sandbox-local: ";
    CHECK(config_error(R"({"probeTimeoutMs":0})") == p + "probeTimeoutMs must be a positive finite number");
    CHECK(config_error(R"({"probeTimeoutMs":-5})") == p + "probeTimeoutMs must be a positive finite number");
    CHECK(config_error(R"({"runnerFailureSignatures":["x"]})") == p + "runnerFailureSignatures requires runnerCommand");
    CHECK(config_error(R"({"runnerCommand":["/r"]})") == p + "runnerCommand requires at least one runnerFailureSignatures entry");
    CHECK(config_error(R"({"runnerCommand":["/r"],"runnerFailureSignatures":[]})") ==
          p + "runnerCommand requires at least one runnerFailureSignatures entry");
    CHECK(config_error(R"({"runnerCommand":["/r"],"runnerFailureSignatures":["  "]})") ==
          p + "runnerFailureSignatures entries must be non-empty single-line strings");
    CHECK(config_error(R"({"runnerCommand":["/r"],"runnerFailureSignatures":["a\nb"]})") ==
          p + "runnerFailureSignatures entries must be non-empty single-line strings");
    CHECK(config_error(R"({"runnerCommand":["/r"],"runnerFailureSignatures":["a\rb"]})") ==
          p + "runnerFailureSignatures entries must be non-empty single-line strings");
    // The seed's order: the timeout is checked before the runner pairing.
    CHECK(config_error(R"({"runnerFailureSignatures":["x"],"probeTimeoutMs":0})") ==
          p + "probeTimeoutMs must be a positive finite number");
    // An empty runnerCommand means "not configured", and empty signatures with it are fine.
    Config c;
    REQUIRE(parse(R"({"runnerCommand":[],"runnerFailureSignatures":[]})", c));
    CHECK_FALSE(c.custom_runner());
}

TEST_CASE("config: probeTimeoutMs rounds up and saturates") {
    Config c;
    REQUIRE(parse(R"({"probeTimeoutMs":0.2})", c));
    CHECK(c.probe_timeout_ms == 1);
    REQUIRE(parse(R"({"probeTimeoutMs":1e12})", c));
    CHECK(c.probe_timeout_ms == 2147483647);
}

TEST_CASE("config: not JSON, not an object, duplicates, comments") {
    CHECK_THAT(config_error("{"), Catch::StartsWith("config /etc/c.json: not valid JSON"));
    CHECK_THAT(config_error(""), Catch::StartsWith("config /etc/c.json: not valid JSON"));
    CHECK_THAT(config_error("{\"mode\":\"read-only\"} x"), Catch::StartsWith("config /etc/c.json: not valid JSON"));
    CHECK_THAT(config_error("// c\n{}"), Catch::StartsWith("config /etc/c.json: not valid JSON"));
    // Where, in our words: never the parser's own text.
    CHECK(config_error("{\n  \"mode\": \n") == "config /etc/c.json: not valid JSON at line 3, column 1; correct it (a missing "
                                         "bracket, quote or comma, or a comment: JSON has none)");
    CHECK(config_error("{\"mode\" 1}") == "config /etc/c.json: not valid JSON at column 9; correct it");
    CHECK(config_error("[]") == "config /etc/c.json: must be a JSON object, not an array");
    CHECK(config_error(R"({"mode":"read-only","mode":"danger-full-access"})") ==
          "config /etc/c.json: key \"mode\" appears more than once");
}

TEST_CASE("config: a key is echoed quoted as JSON, so the message stays one line") {
    // Found by fuzz/fuzz_config.cpp: keys went into the message raw.
    CHECK(config_error("{\"mo\\nde\":1}") ==
          "config /etc/c.json: unknown key \"mo\\nde\" (known: mode, workspaceRoot, runner, bwrapPath, "
          "runnerCommand, runnerFailureSignatures, probeTimeoutMs, writableRoots, cache, protect, unprotect, denyRead, hideSecrets, secretPaths, approver, privateTmp, network, "
              "keepDescendants, timeout, killAfter, maxProcs, memory, cpuTime, fileSize, nofile, limits, allowCore)");
    CHECK_THAT(config_error("{\"\\u001b[2J\\\"x\":1}"), Catch::Contains("unknown key \"\\u001b[2J\\\"x\" (known:"));
    CHECK(config_error("{\"writableRoots\":[{\"a\\rb\":1,\"a\\rb\":2}]}") ==
          "config /etc/c.json: key \"a\\rb\" appears more than once");
    for (const char* text : {"{\"a\\nb\":1}", "{\"\\n\":1,\"\\n\":2}", "{\"\\u0007\":0}"})
        CHECK(config_error(text).find_first_of("\n\r\x07") == std::string::npos);
}

TEST_CASE("config: lookup order") {
    std::map<std::string, std::string> env;
    auto get = [&env](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    SECTION("--config wins and is explicit") {
        env["DSH_CONFINE_CONFIG"] = "/e.json";
        auto c = config_candidates(std::string("/f.json"), get);
        REQUIRE(c.size() == 1);
        CHECK(c[0].path == "/f.json");
        CHECK(c[0].explicit_);
    }
    SECTION("then $DSH_CONFINE_CONFIG") {
        env["DSH_CONFINE_CONFIG"] = "/e.json";
        auto c = config_candidates(std::nullopt, get);
        REQUIRE(c.size() == 1);
        CHECK(c[0].path == "/e.json");
        CHECK(c[0].explicit_);
    }
    SECTION("then XDG, then /etc") {
        env["DSH_CONFINE_CONFIG"] = "";
        env["XDG_CONFIG_HOME"] = "/x";
        env["HOME"] = "/h";
        auto c = config_candidates(std::nullopt, get);
        REQUIRE(c.size() == 2);
        CHECK(c[0].path == "/x/dsh-confine/config.json");
        CHECK_FALSE(c[0].explicit_);
        CHECK(c[1].path == "/etc/dsh-confine/config.json");
    }
    SECTION("no XDG: ~/.config") {
        env["HOME"] = "/h";
        env["XDG_CONFIG_HOME"] = "relative";
        auto c = config_candidates(std::nullopt, get);
        REQUIRE(c.size() == 2);
        CHECK(c[0].path == "/h/.config/dsh-confine/config.json");
    }
    SECTION("nothing set: /etc only") {
        auto c = config_candidates(std::nullopt, get);
        REQUIRE(c.size() == 1);
        CHECK(c[0].path == "/etc/dsh-confine/config.json");
    }
}

TEST_CASE("config: load_config refuses a named file that is missing") {
    Config c;
    Outcome o = load_config(std::string("/nonexistent/dsh/config.json"), c);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::ConfigInvalid);
    CHECK_THAT(o.message, Catch::StartsWith("config /nonexistent/dsh/config.json: "));
}

TEST_CASE("config: nesting is bounded before parsing, so a deep value is an error, not a crash") {
    auto deep = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
    CHECK(json_depth_within("{}", 1));
    CHECK_FALSE(json_depth_within("{}", 0));
    CHECK(json_depth_within(deep(64), 64));
    CHECK_FALSE(json_depth_within(deep(65), 64));
    // Brackets inside strings (escaped quotes included) do not count.
    CHECK(json_depth_within("{\"a\":\"[[[[\\\"[[[[\"}", 1));
    CHECK_FALSE(json_depth_within("{\"a\":\"\\\\\",\"b\":[[]]}", 2));
    // The object itself is one level: 63 more fit, 64 do not.
    Config c;
    CHECK(config_error("{\"mode\":" + deep(63) + "}") == "config /etc/c.json: \"mode\" must be a string, not an array");
    CHECK(config_error("{\"mode\":" + deep(64) + "}") == "config /etc/c.json: nested deeper than 64 levels");
    CHECK(config_error("{\"mode\":" + deep(200000) + "}") == "config /etc/c.json: nested deeper than 64 levels");
    CHECK(config_error("{\"x\":\"" + std::string(kMaxConfigBytes, 'a') + "\"}") ==
          "config /etc/c.json: larger than 1048576 bytes");
}

TEST_CASE("config: every place a later run could read a config from counts as own state") {
    std::map<std::string, std::string> env;
    auto get = [&env](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    // The flag does not hide the others: they are the next run's config.
    env["DSH_CONFINE_CONFIG"] = "/e.json";
    env["XDG_CONFIG_HOME"] = "/x";
    env["HOME"] = "/h";
    CHECK(config_state_paths(std::string("f.json"), get) ==
          std::vector<std::string>{"f.json", "/e.json", "/x/dsh-confine/config.json",
                                   "/h/.config/dsh-confine/config.json", "/etc/dsh-confine/config.json"});
    env.clear();
    env["XDG_CONFIG_HOME"] = "relative";
    CHECK(config_state_paths(std::nullopt, get) == std::vector<std::string>{"/etc/dsh-confine/config.json"});
}

namespace {
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/var/tmp/dsh-unit-config-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
        ::chmod(path.c_str(), 0755);
    }
    ~TempDir() { (void)!std::system(("rm -rf '" + path + "'").c_str()); }
    std::string write(const std::string& name, const std::string& text, mode_t mode = 0644) const {
        const std::string p = path + "/" + name;
        std::ofstream(p) << text;
        ::chmod(p.c_str(), mode);
        return p;
    }
};
}  // namespace

TEST_CASE("config: load_config reads only a file nobody else can rewrite") {
    TempDir d;
    Config c;
    const std::string good = d.write("good.json", "{\"mode\":\"read-only\"}");
    REQUIRE(load_config(good, c));
    CHECK(c.mode == Mode::ReadOnly);

    const std::string open = d.write("open.json", "{}", 0646);
    Outcome o = load_config(open, c);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::ConfigInvalid);
    CHECK(o.message == "config " + open + ": writable by group or others (mode 0646), so another user could change "
                                          "what the next run does; chmod go-w " + open);

    // A symlink (dotfile managers) to a trusted file is read, to an untrusted one refused.
    const std::string link = d.path + "/link.json";
    REQUIRE(::symlink(good.c_str(), link.c_str()) == 0);
    REQUIRE(load_config(link, c));
    ::unlink(link.c_str());
    REQUIRE(::symlink(open.c_str(), link.c_str()) == 0);
    CHECK_FALSE(load_config(link, c));

    // Not a regular file: refused without blocking.
    const std::string fifo = d.path + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    o = load_config(fifo, c);
    REQUIRE_FALSE(o);
    CHECK(o.message == "config " + fifo + ": not a regular file");
    o = load_config(d.path, c);
    REQUIRE_FALSE(o);
    CHECK(o.message == "config " + d.path + ": not a regular file");

    // A directory above it writable by others without the sticky bit.
    ::chmod(d.path.c_str(), 0777);
    o = load_config(good, c);
    REQUIRE_FALSE(o);
    CHECK(o.message == "config " + good + ": directory " + d.path + " is writable by group or others (mode 0777) "
                       "without the sticky bit, so another user could replace the file; chmod go-w " + d.path);
    ::chmod(d.path.c_str(), 01777);  // sticky, like /tmp: fine
    CHECK(load_config(good, c));
}

TEST_CASE("config: network is off, loopback or host, nothing else (issue 17)") {
    for (auto [text, want] : {std::pair<const char*, Network>{R"({"network":"off"})", Network::Off},
                              {R"({"network":"loopback"})", Network::Loopback},
                              {R"({"network":"host"})", Network::Host}}) {
        Config c;
        REQUIRE(parse_config(text, "config /etc/c.json", c));
        CHECK(c.network == want);
    }
    Config c;
    CHECK(parse_config("{}", "config /etc/c.json", c));
    CHECK_FALSE(c.network);
    CHECK(config_error(R"({"network":"none"})") ==
          "config /etc/c.json: \"network\": unknown network mode \"none\" (off, loopback, host, or "
          "{\"allow\": [...]} for an allow-list)");
    CHECK_THAT(config_error(R"({"network":false})"), Catch::Contains("\"network\""));
}

TEST_CASE("config: network as an object is an allow list (and a deny list), every entry checked (issue 19)") {
    Config c;
    REQUIRE(parse_config(R"({"network":{"allow":["registry.npmjs.org:443","*.pypi.org"],"deny":["10.0.0.0/8"]}})",
                         "config /etc/c.json", c));
    REQUIRE(c.network_allow);
    CHECK(*c.network_allow == std::vector<std::string>{"registry.npmjs.org:443", "*.pypi.org"});
    CHECK(c.network_deny == std::vector<std::string>{"10.0.0.0/8"});
    CHECK_FALSE(c.network);
    CHECK(config_error(R"({"network":{"allow":["a.org:0"]}})") ==
          "config /etc/c.json: \"network.allow\": bad network rule \"a.org:0\": the port must be a number from 1 to "
          "65535; a rule is a host, *.domain, an IP address or CIDR, each with an optional :PORT ([IPv6]:PORT)");
    CHECK_THAT(config_error(R"({"network":{"deny":["a.org"]}})"), Catch::Contains("must have a non-empty \"allow\" list"));
    CHECK_THAT(config_error(R"({"network":{"allow":[]}})"), Catch::Contains("must have a non-empty \"allow\" list"));
    CHECK_THAT(config_error(R"({"network":{"allow":["a.org"],"allowed":["b.org"]}})"),
               Catch::Contains("unknown key \"network.allowed\""));
    CHECK_THAT(config_error(R"({"network":{"allow":"a.org"}})"), Catch::Contains("\"network.allow\" must be an array of strings"));
}

TEST_CASE("config: widening values only from a sealed file (issue 37)") {
    TempDir d;
    Config c;
    const std::string fix = "put it in /etc/dsh-confine/config.json (or a root-owned file in /etc/dsh-confine named "
                            "by --config)";
    const std::string why = "is taken only from the command line or from a file no confined run could have written "
                            "(owned by root in directories only root can write; for root, one in /etc/dsh-confine), "
                            "and an earlier run could have written this one; ";
    struct Case {
        const char* text;
        const char* key;
        std::string fix;
    };
    for (const auto& k : {Case{R"({"mode":"danger-full-access"})", "\"mode\": \"danger-full-access\"",
                               "pass --mode danger-full-access (or --escalate) on the command line, or " + fix},
                          Case{R"({"runnerCommand":["/bin/true"],"runnerFailureSignatures":["x"]})",
                               "\"runnerCommand\"", fix},
                          Case{R"({"bwrapPath":"/usr/bin/bwrap"})", "\"bwrapPath\"", fix},
                          Case{R"({"approver":"/usr/bin/true"})", "an \"approver\" command",
                               "pass --approver on the command line, or " + fix}}) {
        CAPTURE(k.text);
        const std::string f = d.write("c.json", k.text);
        const Outcome o = load_config(f, c);
        REQUIRE_FALSE(o);
        CHECK(o.err == Err::StateUnsafe);
        CHECK(o.message == "config " + f + ": " + k.key + " " + why + k.fix);
    }
    // What keeps the run confined is taken from the same file.
    const std::string ok =
        d.write("ok.json", R"({"mode":"workspace-write","approver":"tty","network":"off","writableRoots":["/srv"]})");
    REQUIRE(load_config(ok, c));
    CHECK_FALSE(c.sealed);
    CHECK(c.mode == Mode::WorkspaceWrite);
    // A sealed config may say them.
    c = Config{};
    c.sealed = true;
    c.mode = Mode::DangerFullAccess;
    c.runner_command = {"/bin/true"};
    CHECK(check_widening(c));
}

TEST_CASE("config: a sealed file is root's in a chain only root can write (issue 37)") {
    auto sealed = [](const char* path, bool root, const char* dir) {
        const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        const bool s = sealed_file(fd, root, dir);
        ::close(fd);
        return s;
    };
    // /etc/passwd: root's, 0644, in /etc (0755, root's).
    CHECK(sealed("/etc/passwd", false, "/etc/dsh-confine"));
    CHECK_FALSE(sealed("/etc/passwd", true, "/etc/dsh-confine"));  // root: only the system config's directory
    CHECK(sealed("/etc/passwd", true, "/etc"));
    // Anything under a sticky directory (/var/tmp): never.
    TempDir d;
    const std::string f = d.write("c.json", "{}");
    if (::geteuid() == 0) REQUIRE(::chown(f.c_str(), 0, 0) == 0);
    CHECK_FALSE(sealed(f.c_str(), false, d.path.c_str()));
    CHECK_FALSE(sealed(f.c_str(), true, d.path.c_str()));
}

#include "../../src/caches.hpp"
#include <map>

namespace {
std::vector<std::string> cache_paths(const std::string& tool, const std::map<std::string, std::string>& vars,
                                     const std::string& home, Outcome* o = nullptr) {
    std::vector<dsh::caches::Dir> out;
    const dsh::caches::Env env = [&](std::string_view n) -> const char* {
        auto it = vars.find(std::string(n));
        return it == vars.end() ? nullptr : it->second.c_str();
    };
    Outcome r = dsh::caches::dirs(tool, env, home, out);
    if (o) *o = r;
    std::vector<std::string> p;
    for (auto& d : out) p.push_back(d.path);
    return p;
}
}  // namespace

TEST_CASE("each tool's cache is where the tool looks, its variables first", "[config][presets]") {
    using V = std::vector<std::string>;
    CHECK(cache_paths("npm", {}, "/h") == V{"/h/.npm"});
    CHECK(cache_paths("npm", {{"npm_config_cache", "/c/npm"}}, "/h") == V{"/c/npm"});
    CHECK(cache_paths("npm", {{"NPM_CONFIG_CACHE", "/c/NPM"}}, "/h") == V{"/c/NPM"});
    CHECK(cache_paths("pip", {}, "/h") == V{"/h/.cache/pip"});
    CHECK(cache_paths("pip", {{"XDG_CACHE_HOME", "/x"}}, "/h") == V{"/x/pip"});
    CHECK(cache_paths("pip", {{"PIP_CACHE_DIR", "/p"}, {"XDG_CACHE_HOME", "/x"}}, "/h") == V{"/p"});
    CHECK(cache_paths("cargo", {}, "/h") == V{"/h/.cargo/registry", "/h/.cargo/git"});
    CHECK(cache_paths("cargo", {{"CARGO_HOME", "/ch"}}, "/h") == V{"/ch/registry", "/ch/git"});
    CHECK(cache_paths("go", {}, "/h") == V{"/h/go/pkg/mod", "/h/go/pkg/sumdb", "/h/.cache/go-build"});
    CHECK(cache_paths("go", {{"GOPATH", "/g1:/g2"}, {"GOCACHE", "off"}}, "/h") == V{"/g1/pkg/mod", "/g1/pkg/sumdb"});
    CHECK(cache_paths("go", {{"GOMODCACHE", "/m"}, {"GOCACHE", "/gc"}}, "/h") == V{"/m", "/h/go/pkg/sumdb", "/gc"});
    CHECK(cache_paths("yarn", {{"YARN_CACHE_FOLDER", "/y"}}, "/h") == V{"/y"});
    CHECK(cache_paths("maven", {}, "/h") == V{"/h/.m2/repository"});
    CHECK(cache_paths("ccache", {{"CCACHE_DIR", "/cc"}}, "/h") == V{"/cc"});
    // Never the home itself, an ancestor of it or /; never a relative variable; no home: said.
    Outcome o = Outcome::success();
    CHECK(cache_paths("npm", {{"npm_config_cache", "/h"}}, "/h", &o).empty());
    CHECK(o.message.find("holds your home directory") != std::string::npos);
    cache_paths("pip", {{"PIP_CACHE_DIR", "/"}}, "/h", &o);
    CHECK(o.message.find("holds your home directory") != std::string::npos);
    cache_paths("cargo", {{"CARGO_HOME", "rel"}}, "/h", &o);
    CHECK(o.message.find("CARGO_HOME=rel is not an absolute path") != std::string::npos);
    cache_paths("maven", {}, "", &o);
    CHECK(o.message.find("set HOME") != std::string::npos);
}

TEST_CASE("config cache: a list of known tools", "[config][presets]") {
    Config c;
    REQUIRE(parse_config(R"({"cache": ["npm", "pip,cargo"]})", "config X", c));
    CHECK(c.cache == std::vector<std::string>{"npm", "pip", "cargo"});
    Config bad;
    Outcome o = parse_config(R"({"cache": ["gradle"]})", "config X", bad);
    REQUIRE_FALSE(o);
    CHECK(o.message.find("unknown tool 'gradle'") != std::string::npos);
}
