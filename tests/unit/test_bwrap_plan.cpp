#include <algorithm>
#include <catch2/catch.hpp>

#include "../../src/linux/bwrap_plan.hpp"
#include "../../src/linux/probe_cache.hpp"
#include "../../src/carveouts.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsh;
using Args = std::vector<std::string>;

namespace {

const Args kBase = {"--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc", "--die-with-parent",
                    "--unshare-ipc", "--cap-drop", "ALL"};
const Args kProc = {"--ro-bind",     "/proc/sys", "/proc/sys",  "--ro-bind-try",       "/proc/sysrq-trigger",
                    "/proc/sysrq-trigger", "--ro-bind-try", "/proc/irq", "/proc/irq", "--ro-bind-try",
                    "/proc/bus",     "/proc/bus"};

Args cat(std::initializer_list<Args> parts) {
    Args out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

// A scratch directory under /var/tmp with the files a test writes there,
// removed again by clean() (files last written first, then the directories
// named, then the scratch itself).
struct Scratch {
    std::string dir;
    std::vector<std::string> made;
    explicit Scratch(const std::string& name) {
        std::string tmpl = "/var/tmp/dsh-unit-" + name + "-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        dir = tmpl;
    }
    void write(const std::string& path, const std::string& body) {
        std::FILE* f = std::fopen(path.c_str(), "w");
        REQUIRE(f);
        std::fputs(body.c_str(), f);
        std::fclose(f);
        made.push_back(path);
    }
    void clean(std::initializer_list<std::string> dirs) {
        for (auto it = made.rbegin(); it != made.rend(); ++it) ::unlink(it->c_str());
        for (const auto& d : dirs) ::rmdir(d.c_str());
        ::rmdir(dir.c_str());
    }
};

Policy ww(std::vector<WritableRoot> roots) {
    Policy p;
    p.mode = Mode::WorkspaceWrite;
    p.workspace_root = roots.front().path;
    p.writable_roots = std::move(roots);
    p.writable_files = {"/dev/null"};
    return p;
}

// The stage of a /bin/true run: exec'd as fd 5, the record in fd 6.
bwrap::StageSpec true_spec() {
    bwrap::StageSpec spec;
    spec.self = "/proc/self/fd/5";
    spec.record_fd = 6;
    spec.command_path = "/bin/true";
    spec.argv = {"true"};
    return spec;
}

}  // namespace

TEST_CASE("bwrap read-only profile: the seed's, hardened") {
    Policy p;
    p.mode = Mode::ReadOnly;
    p.writable_files = {"/dev/null"};
    CHECK(bwrap::profile_args(p, {}) == cat({kBase, kProc}));
    bwrap::ProfileOptions root;
    root.stage_keeps_setpcap = true;
    CHECK(bwrap::profile_args(p, root) == cat({kBase, {"--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_SYS_ADMIN"}, kProc}));
}

TEST_CASE("bwrap workspace-write: the host's /tmp is bound like any root") {
    auto p = ww({{"/home/u/ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, true}, {"/var/tmp/t", Grant::Tmpdir, true}});
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc,
               {"--bind", "/tmp", "/tmp", "--bind", "/home/u/ws", "/home/u/ws", "--bind", "/var/tmp/t",
                "/var/tmp/t"}}));
    auto l = bwrap::layer(p, "/usr/bin/bwrap");
    CHECK(l.details["tmpIsTmpfs"] == false);
}

TEST_CASE("bwrap workspace-write, private /tmp: tmpfs first, then the roots") {
    auto p = ww({{"/home/u/ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, false}, {"/var/tmp/t", Grant::Tmpdir, true}});
    p.private_tmp = true;
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc,
               {"--tmpfs", "/tmp", "--bind", "/home/u/ws", "/home/u/ws", "--bind", "/var/tmp/t", "/var/tmp/t"}}));
    CHECK(bwrap::layer(p, "/usr/bin/bwrap").details["tmpIsTmpfs"] == true);
}

TEST_CASE("bwrap read-only, private /tmp: an empty tmpfs, remounted read-only (no widening)") {
    Policy p;
    p.mode = Mode::ReadOnly;
    p.writable_files = {"/dev/null"};
    p.private_tmp = true;
    CHECK(bwrap::profile_args(p, {}) == cat({kBase, kProc, {"--tmpfs", "/tmp", "--remount-ro", "/tmp"}}));
}

TEST_CASE("bwrap workspace-write: root and $TMPDIR under a private /tmp are bound after the tmpfs") {
    auto p = ww({{"/tmp/ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, false}, {"/tmp/user-tmp", Grant::Tmpdir, true}});
    p.private_tmp = true;
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc,
               {"--tmpfs", "/tmp", "--bind", "/tmp/ws", "/tmp/ws", "--bind", "/tmp/user-tmp", "/tmp/user-tmp"}}));
}

TEST_CASE("bwrap workspace-write: the host's /tmp is bound before a root under it") {
    auto p = ww({{"/tmp/ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, true}});
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc, {"--bind", "/tmp", "/tmp", "--bind", "/tmp/ws", "/tmp/ws"}}));
}

TEST_CASE("bwrap workspace-write: extra roots, ancestors before descendants") {
    auto p = ww({{"/srv/ws/sub/deep", Grant::Workspace, true},
                 {"/tmp", Grant::Tmp, false},
                 {"/srv/ws", Grant::Flag, true},
                 {"/opt/cache", Grant::Flag, true}});
    CHECK(bwrap::profile_args(p, {}) == cat({kBase, kProc,
                                             {"--tmpfs", "/tmp", "--bind", "/srv/ws", "/srv/ws", "--bind",
                                              "/opt/cache", "/opt/cache", "--bind", "/srv/ws/sub/deep",
                                              "/srv/ws/sub/deep"}}));
}

TEST_CASE("bwrap: paths with spaces and leading dashes stay single argv elements") {
    auto p = ww({{"/home/u/my ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, false}, {"/home/u/--help", Grant::Flag, true},
                 {"/home/u/-x y", Grant::Flag, true}});
    auto args = bwrap::profile_args(p, {});
    CHECK(args == cat({kBase, kProc,
                       {"--tmpfs", "/tmp", "--bind", "/home/u/my ws", "/home/u/my ws", "--bind", "/home/u/--help",
                        "/home/u/--help", "--bind", "/home/u/-x y", "/home/u/-x y"}}));
}

TEST_CASE("bwrap: full argv with the stage, and the stage parses it back") {
    auto p = ww({{"/tmp/my ws", Grant::Workspace, true}, {"/tmp", Grant::Tmp, false}});
    p.writable_roots[0].fd = 9;  // opened when the policy was built
    p.keep_fds = {7};
    bwrap::StageSpec spec;
    spec.self = "/proc/self/fd/4";
    spec.landlock_abi = 7;
    spec.report_fd = 3;
    spec.record_fd = 5;
    spec.command_path = "/usr/bin/sh";
    spec.argv = {"sh", "-c", "echo -- --mode x"};
    auto stage = bwrap::stage_args(p, spec);
    CHECK(stage == Args{"/proc/self/fd/4", "__dsh_confine_stage_v1", "--mode", "workspace-write", "--landlock", "7",
                        "--report-fd", "3", "--record-fd", "5", "--keep-fd", "7", "--file", "/dev/null",
                        "--rw", "workspace", "/tmp/my ws", "9", "--rw", "tmp", "/tmp", "-1", "--", "/usr/bin/sh",
                        "sh", "-c", "echo -- --mode x"});
    auto argv = bwrap::wrap("/usr/bin/bwrap", bwrap::profile_args(p, {}), stage);
    CHECK(argv.front() == "/usr/bin/bwrap");
    CHECK(argv[argv.size() - stage.size() - 1] == "--");
    // The root with a descriptor is bound through it, not by its name.
    const Args bind = {"--bind", "/proc/self/fd/9", "/tmp/my ws"};
    CHECK(std::search(argv.begin(), argv.end(), bind.begin(), bind.end()) != argv.end());

    bwrap::StageRequest req;
    REQUIRE(bwrap::parse_stage(Args(stage.begin() + 2, stage.end()), req));
    CHECK(req.policy.mode == Mode::WorkspaceWrite);
    CHECK(req.landlock_abi == 7);
    CHECK(req.report_fd == 3);
    CHECK(req.policy.keep_fds == std::vector<int>{7});
    CHECK(req.policy.writable_files == Args{"/dev/null"});
    REQUIRE(req.policy.writable_roots.size() == 2);
    CHECK(req.policy.writable_roots[0].path == "/tmp/my ws");
    CHECK(req.policy.writable_roots[0].source == Grant::Workspace);
    CHECK(req.policy.writable_roots[0].fd == 9);
    CHECK(req.policy.writable_roots[1].fd == -1);
    CHECK(req.command_path == "/usr/bin/sh");
    CHECK(req.argv == Args{"sh", "-c", "echo -- --mode x"});
}

TEST_CASE("bwrap stage: a command longer than bwrap's argv cap travels in the record") {
    Policy pol;
    pol.mode = Mode::ReadOnly;
    bwrap::StageSpec spec;
    spec.self = "/proc/self/fd/5";
    spec.record_fd = 6;
    spec.command_path = "/bin/echo";
    spec.argv.assign(bwrap::kArgvInline, "w");
    auto a = bwrap::stage_args(pol, spec);
    CHECK(a.back() == "w");  // at the cap: inline
    spec.argv.push_back("one-more");
    a = bwrap::stage_args(pol, spec);
    REQUIRE(a.size() >= 3);
    CHECK(a.back() == "/bin/echo");
    CHECK(a[a.size() - 2] == "--");
    CHECK(a[a.size() - 3] == "--argv-from-record");
    bwrap::StageRequest req;
    REQUIRE(bwrap::parse_stage(std::vector<std::string>(a.begin() + 2, a.end()), req));
    CHECK(req.argv_from_record);
    CHECK(req.command_path == "/bin/echo");
    CHECK(req.argv.empty());
}

TEST_CASE("bwrap stage: bad command lines are refused") {
    bwrap::StageRequest req;
    CHECK_FALSE(bwrap::parse_stage({"--", "/bin/true", "true"}, req));                      // no mode
    CHECK_FALSE(bwrap::parse_stage({"--mode", "danger-full-access", "--", "/x", "x"}, req));  // never unconfined
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--landlock", "x", "--", "/x", "x"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--rw", "tmp", "rel", "-1", "--", "/x", "x"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--rw", "tmp", "/tmp", "x", "--", "/x", "x"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--rw", "tmp", "/tmp", "--", "/x", "x"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--bogus", "--", "/x", "x"}, req));
    // The launcher's memfd is not optional: without it nothing is the launcher's.
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--", "/bin/sh", "sh"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--record-fd", "1", "--", "/bin/sh", "sh"}, req));
    CHECK(bwrap::parse_stage({"--mode", "read-only", "--record-fd", "3", "--", "/bin/sh", "sh"}, req));
}

TEST_CASE("bwrap: --json-status-fd goes right after the bwrap path") {
    Args argv = {"/usr/bin/bwrap", "--ro-bind", "/", "/", "--", "true"};
    bwrap::add_json_status_fd(argv, 9);
    CHECK(argv == Args{"/usr/bin/bwrap", "--json-status-fd", "9", "--ro-bind", "/", "/", "--", "true"});
}

TEST_CASE("custom runner: runnerCommand, the bwrap-shaped profile, --, argv") {
    // Roots opened as descriptors, as a run's policy has them: the custom
    // runner is given none of them, so its profile names each by its path
    // (issue 38: /proc/self/fd/N of a descriptor it never got failed every run).
    auto p = ww({{"/home/u/ws", Grant::Workspace, true, 7}, {"/tmp", Grant::Tmp, true, 8}});
    auto argv = bwrap::custom_argv({"/opt/run", "--flag"}, p, {"sh", "-c", "x"});
    CHECK(argv == cat({{"/opt/run", "--flag"}, kBase, kProc,
                       {"--bind", "/tmp", "/tmp", "--bind", "/home/u/ws", "/home/u/ws", "--", "sh", "-c", "x"}}));
    // The built-in runner binds the same roots from the descriptors.
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc, {"--bind", "/proc/self/fd/8", "/tmp", "--bind", "/proc/self/fd/7", "/home/u/ws"}}));
}

TEST_CASE("bwrap layer: the gaps a read-only bind leaves, closed by Landlock when stacked") {
    Policy p;
    p.mode = Mode::ReadOnly;
    auto l = bwrap::layer(p, "/usr/bin/bwrap");
    CHECK(l.name == "bwrap");
    CHECK(l.details["namespaces"] == nlohmann::json::array({"mount", "pid", "ipc"}));
    auto effects = [](const Layer& layer, bool own) {
        Args out;
        for (const auto& g : layer.gaps)
            if (g.own_effect == own) out.push_back(g.effect);
        return out;
    };
    CHECK(effects(l, true) == Args{"fifo-writes", "proc-fd-reopen"});
    CHECK(effects(l, false) == Args{"unix-sockets", "file-locks", "abstract-unix-sockets", "network"});
    Layer ll;
    ll.name = "landlock";
    ll.gaps = {{"network", "", false}};
    auto open = open_gaps({l, ll});
    REQUIRE(open.size() == 1);
    CHECK(open[0].effect == "network");
    // Workspace-write: metadata through an inherited fd (the terminal) reaches
    // the host's file; Landlock does not govern metadata either, so it stays open.
    p.mode = Mode::WorkspaceWrite;
    l = bwrap::layer(p, "/usr/bin/bwrap");
    CHECK(effects(l, true) == Args{"fifo-writes", "proc-fd-reopen", "metadata"});
    ll.gaps = {{"metadata", "", true}, {"network", "", false}};
    open = open_gaps({l, ll});
    REQUIRE(open.size() == 2);
    CHECK(open[0].effect == "metadata");
}

TEST_CASE("probe cache: only an exact key says usable") {
    const std::string key = "dsh=0.1.0 bwrap=/usr/bin/bwrap dev=1 ino=2";
    const std::string text = probe_cache::render(key);
    CHECK(text == "dsh-confine bwrap probe cache v1\nkey=" + key + "\nverdict=usable\n");
    CHECK(probe_cache::says_usable(text, key));
    CHECK_FALSE(probe_cache::says_usable(text, key + " "));
    CHECK_FALSE(probe_cache::says_usable(text, ""));
    CHECK_FALSE(probe_cache::says_usable(text + "x", key));
    CHECK_FALSE(probe_cache::says_usable("dsh-confine bwrap probe cache v1\nkey=" + key + "\nverdict=unusable\n", key));
}

TEST_CASE("bwrap: loader variables cross bwrap renamed and come back for the command") {
    Args env = {"PATH=/bin", "LD_PRELOAD=/x.so", "LD_AUDIT=/a.so", "GCONV_PATH=/g", "HOME=/h",
                "DSH_CONFINE_STAGE_ENV_FOO=bar", "LDX=1", "PWD=/caller"};
    Args stashed = bwrap::stash_loader_env(env);
    CHECK(stashed == Args{"PATH=/bin", "DSH_CONFINE_STAGE_ENV_LD_PRELOAD=/x.so", "DSH_CONFINE_STAGE_ENV_LD_AUDIT=/a.so",
                          "DSH_CONFINE_STAGE_ENV_GCONV_PATH=/g", "HOME=/h", "LDX=1",
                          "DSH_CONFINE_STAGE_ENV_PWD=/caller"});
    // bwrap adds its own PWD; the stage puts the caller's back.
    stashed.push_back("PWD=/bwrap");
    CHECK(bwrap::unstash_loader_env(stashed) == Args{"PATH=/bin", "LD_PRELOAD=/x.so", "LD_AUDIT=/a.so",
                                                     "GCONV_PATH=/g", "HOME=/h", "LDX=1", "PWD=/caller"});
    CHECK(bwrap::unstash_loader_env({"PATH=/bin", "PWD=/bwrap"}) == Args{"PATH=/bin"});
    // Only loader variables are ever restored from the stash.
    CHECK(bwrap::unstash_loader_env({"DSH_CONFINE_STAGE_ENV_PATH=/evil"}) == Args{});
}

TEST_CASE("bwrap stage: the environment is unstashed in place, nothing copied") {
    char path[] = "PATH=/bin", pre[] = "DSH_CONFINE_STAGE_ENV_LD_PRELOAD=/x.so", pwd[] = "PWD=/bwrap",
         evil[] = "DSH_CONFINE_STAGE_ENV_HOME=/evil", cpwd[] = "DSH_CONFINE_STAGE_ENV_PWD=/caller";
    char* env[] = {path, pre, pwd, evil, cpwd, nullptr};
    const std::vector<char*> out = bwrap::unstash_loader_envp(env);
    REQUIRE(out.size() == 4);
    CHECK(out[0] == path);
    CHECK(out[1] == pre + 22);  // the stashed entry's own tail
    CHECK(std::string(out[1]) == "LD_PRELOAD=/x.so");
    CHECK(out[2] == cpwd + 22);
    CHECK(std::string(out[2]) == "PWD=/caller");
    CHECK(out[3] == nullptr);   // NULL-terminated, ready for execve
    char* none[] = {nullptr};
    CHECK(bwrap::unstash_loader_envp(none) == std::vector<char*>{nullptr});
}

TEST_CASE("bwrap stage: --record-fd round-trips") {
    Policy p;
    p.mode = Mode::ReadOnly;
    bwrap::StageSpec spec = true_spec();
    spec.report_fd = 3;
    auto a = bwrap::stage_args(p, spec);
    CHECK(a == Args{"/proc/self/fd/5", "__dsh_confine_stage_v1", "--mode", "read-only", "--report-fd", "3",
                    "--record-fd", "6", "--", "/bin/true", "true"});
    bwrap::StageRequest req;
    REQUIRE(bwrap::parse_stage(Args(a.begin() + 2, a.end()), req));
    CHECK(req.record_fd == 6);
    CHECK(req.landlock_abi == 0);
}

TEST_CASE("the stage refuses a root that is not bwrap's read-only mount view") {
    CHECK(bwrap::check_mount_view(true));
    const Outcome o = bwrap::check_mount_view(false);
    CHECK_FALSE(o);
    CHECK(o.err == Err::SandboxUnavailable);
    CHECK(o.message == "bwrap did not build the sandbox: / is not mounted read-only");
}

TEST_CASE("bwrap network axis: --unshare-net for off and loopback, the stage told the mode (issue 17)") {
    Policy p;
    p.mode = Mode::ReadOnly;
    p.writable_files = {"/dev/null"};
    for (Network n : {Network::Off, Network::Loopback}) {
        p.network = n;
        CHECK(bwrap::profile_args(p, {}) == cat({kBase, kProc, {"--unshare-net"}}));
        bwrap::StageSpec spec;
        spec.self = "/proc/self/fd/3";
        spec.record_fd = 4;
        spec.command_path = "/bin/true";
        spec.argv = {"true"};
        const auto args = bwrap::stage_args(p, spec);
        bwrap::StageRequest req;
        REQUIRE(bwrap::parse_stage(std::vector<std::string>(args.begin() + 2, args.end()), req));
        CHECK(req.policy.network == n);
        const Layer l = bwrap::layer(p, "/usr/bin/bwrap");
        for (const auto& g : l.gaps) CHECK((g.effect != "network" && g.effect != "abstract-unix-sockets"));
    }
    p.network = Network::Host;
    CHECK(bwrap::profile_args(p, {}) == cat({kBase, kProc}));
    bwrap::StageRequest req;
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--net", "wide", "--record-fd", "4", "--", "/bin/true", "true"}, req));
}

TEST_CASE("bwrap carve-outs (issue 18): after every root, ancestors first, only what exists, by descriptor") {
    Policy p = ww({{"/ws", Grant::Workspace, true, 7}});
    ProtectedPath hooks{"/ws/.git/hooks", "default", "git", true, true, false, false, 11};
    ProtectedPath dotgit{"/ws/.git", "default", "git", true, true, true, false, 10};
    ProtectedPath absent{"/ws/.vscode", "default", "agent", false, false, false, false, -1};
    ProtectedPath config{"/ws/.git/config", "default", "git", true, false, false, false, 12};
    p.protected_paths = {hooks, absent, dotgit, config};
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc,
               {"--bind", "/proc/self/fd/7", "/ws", "--bind", "/proc/self/fd/10", "/ws/.git", "--ro-bind",
                "/proc/self/fd/11", "/ws/.git/hooks", "--ro-bind", "/proc/self/fd/12", "/ws/.git/config"}}));
    // The custom runner's profile carries none of our descriptors.
    const Args custom = bwrap::custom_argv({"/x"}, p, {"true"});
    CHECK(std::find(custom.begin(), custom.end(), "/ws/.git/hooks") == custom.end());
}

TEST_CASE("bwrap carve-outs bound by the stage: none in the profile, all on the stage's argv, in order") {
    Policy p = ww({{"/ws", Grant::Workspace, true, 7}});
    ProtectedPath hooks{"/ws/.git/hooks", "default", "git", true, true, false, false, 11, 2049, 18446744073709551615u};
    ProtectedPath dotgit{"/ws/.git", "default", "git", true, true, true, false, 10, 2049, 77};
    ProtectedPath absent{"/ws/.vscode", "default", "agent", false, false, false, false, -1};
    p.protected_paths = {hooks, absent, dotgit};
    bwrap::ProfileOptions opts;
    opts.stage_binds = true;
    CHECK(bwrap::profile_args(p, opts) == cat({kBase, kProc, {"--bind", "/proc/self/fd/7", "/ws"}}));
    bwrap::StageSpec spec = true_spec();
    spec.stage_binds = true;
    const Args a = bwrap::stage_args(p, spec);
    const Args want = {"--carve", "pin", "/ws/.git", "2049:77", "--carve", "ro", "/ws/.git/hooks", "2049:18446744073709551615"};
    CHECK(std::search(a.begin(), a.end(), want.begin(), want.end()) != a.end());
    bwrap::StageRequest req;
    REQUIRE(bwrap::parse_stage(Args(a.begin() + 2, a.end()), req));
    REQUIRE(req.carves.size() == 2);
    CHECK((req.carves[0].path == "/ws/.git" && req.carves[0].pin && req.carves[0].dev == 2049 &&
           req.carves[0].ino == 77));
    CHECK((req.carves[1].path == "/ws/.git/hooks" && !req.carves[1].pin && req.carves[1].dev == 2049 &&
           req.carves[1].ino == 18446744073709551615u));
    CHECK(std::find(a.begin(), a.end(), "--carves-bound") == a.end());
    CHECK_FALSE(req.carves_bound);
    // Without stage_binds bwrap binds them and the stage checks each one
    // (--carves-bound), but not one a hidden path covers.
    spec.stage_binds = false;
    const Args b = bwrap::stage_args(p, spec);
    const Args check = {"--carves-bound", "--carve", "pin", "/ws/.git", "2049:77", "--carve", "ro", "/ws/.git/hooks",
                        "2049:18446744073709551615"};
    CHECK(std::search(b.begin(), b.end(), check.begin(), check.end()) != b.end());
    REQUIRE(bwrap::parse_stage(Args(b.begin() + 2, b.end()), req));
    CHECK((req.carves_bound && req.carves.size() == 2));
    ProtectedPath hidden{"/ws/.git/hooks", "flag", "secret", true, true};
    p.hidden_paths = {hidden};
    const Args h = bwrap::stage_args(p, spec);
    CHECK(std::count(h.begin(), h.end(), "--carve") == 1);
    p.hidden_paths.clear();
    // A malformed one is refused.
    for (const Args& bad : {Args{"--carve", "rw", "/ws/x", "1:2"}, Args{"--carve", "ro", "ws/x", "1:2"},
                            Args{"--carve", "ro", "/ws/x"}, Args{"--carve", "ro", "/ws/x", "12"},
                            Args{"--carve", "ro", "/ws/x", "1:-2"}, Args{"--carve", "ro", "/ws/x", ":2"},
                            Args{"--carve", "ro", "/ws/x", "1:"}, Args{"--carve", "ro", "/ws/x", "1:18446744073709551616"}}) {
        Args line = {"--mode", "workspace-write", "--record-fd", "6"};
        line.insert(line.end(), bad.begin(), bad.end());
        line.insert(line.end(), {"--", "/bin/true", "true"});
        CHECK_FALSE(bwrap::parse_stage(line, req));
    }
}

TEST_CASE("bwrap carve-outs walked late: --carve-late on the stage's argv, the list after the record's line") {
    Policy p = ww({{"/ws", Grant::Workspace, true, 7}});
    ProtectedPath hooks{"/ws/a\nb/.git/hooks", "default", "git", true, true, false, false, 11, 2049, 18446744073709551615u};
    ProtectedPath dotgit{"/ws/a\nb/.git", "default", "git", true, true, true, false, 10, 2049, 77};
    ProtectedPath absent{"/ws/.vscode", "default", "agent", false, false, false, false, -1};
    ProtectedPath watched{"/ws/.git/modules/s/config", "default", "git", true, false, false, true, 12, 2049, 5};
    watched.why_not = kProtectedSubmoduleConfigText;
    p.protected_paths = {hooks, absent, dotgit, watched};
    // Ancestors first, NUL-ended fields (a newline in a path is just a byte), and back.
    const std::string list = bwrap::carve_list(p);
    const std::string nul(1, '\0');
    CHECK(list == "pin" + nul + "/ws/a\nb/.git" + nul + "2049:77" + nul + "ro" + nul + "/ws/a\nb/.git/hooks" + nul +
                      "2049:18446744073709551615" + nul);
    std::vector<bwrap::StageRequest::Carve> got;
    REQUIRE(bwrap::parse_carve_list(list, got));
    REQUIRE(got.size() == 2);
    CHECK((got[0].path == "/ws/a\nb/.git" && got[0].pin && got[0].dev == 2049 && got[0].ino == 77));
    CHECK((got[1].path == "/ws/a\nb/.git/hooks" && !got[1].pin && got[1].ino == 18446744073709551615u));
    got.clear();
    CHECK(bwrap::parse_carve_list("", got));
    CHECK(got.empty());
    for (const std::string& bad : {"ro" + nul + "/ws/x" + nul + "1:2", "rw" + nul + "/ws/x" + nul + "1:2" + nul,
                                   "ro" + nul + "ws/x" + nul + "1:2" + nul, "ro" + nul + "/ws/x" + nul + "12" + nul,
                                   "ro" + nul + "/ws/x" + nul})
        CHECK_FALSE(bwrap::parse_carve_list(bad, got));
    // The stage is told to wait (never with a list of its own, never without the socket it waits on).
    bwrap::StageSpec spec = true_spec();
    spec.stage_binds = true;
    spec.carve_late = true;
    const Args a = bwrap::stage_args(p, spec);
    CHECK(std::find(a.begin(), a.end(), "--carve-late") != a.end());
    CHECK(std::find(a.begin(), a.end(), "--carve") == a.end());
    bwrap::StageRequest req;
    CHECK_FALSE(bwrap::parse_stage(Args(a.begin() + 2, a.end()), req));  // no --ready-fd
    Args with = {"--ready-fd", "9"};
    with.insert(with.end(), a.begin() + 2, a.end());
    REQUIRE(bwrap::parse_stage(with, req));
    CHECK((req.carve_late && req.ready_fd == 9 && req.carves.empty()));
    with.insert(with.begin(), {"--carve", "ro", "/ws/x", "1:2"});
    CHECK_FALSE(bwrap::parse_stage(with, req));
    // --pty-fd (issue 42: the command's pty made inside, its master handed out): a descriptor above 2.
    with.erase(with.begin(), with.begin() + 4);
    with.insert(with.begin(), {"--pty-fd", "11"});
    REQUIRE(bwrap::parse_stage(with, req));
    CHECK(req.pty_fd == 11);
    with[1] = "2";
    CHECK_FALSE(bwrap::parse_stage(with, req));
    // Settled once walked: the statuses, the bwrap layer's word, and the Landlock layer's gap.
    Confinement c;
    c.policy = p;
    c.layers = {Layer{"bwrap"}, Layer{"landlock"}};
    CHECK(bwrap::settle_carve_outs(c, true, true).empty());
    CHECK(c.policy.protected_paths[0].enforced == "read-only-bind");
    CHECK(c.policy.protected_paths[1].why_not == kProtectedAbsentText);
    CHECK(c.policy.protected_paths[2].enforced == "mount-point");
    CHECK(c.policy.protected_paths[3].enforced.empty());
    CHECK(c.layers[0].details["carveOutBinds"] == "stage");
    CHECK((c.layers[0].gaps.size() == 1 && c.layers[0].gaps[0].effect == "protected-paths"));
    CHECK((c.layers[1].gaps.size() == 1 && c.layers[1].gaps[0].effect == "protected-paths" &&
           c.layers[1].enforcement == Enforcement::Partial));
    // Walked first (the plan's own call), bwrap's binds take the descriptors and Landlock is told by its plan.
    Confinement d;
    d.policy = p;
    d.layers = {Layer{"bwrap"}, Layer{"landlock"}};
    CHECK(bwrap::settle_carve_outs(d, false, false) == std::vector<int>{11, 10});
    CHECK(d.layers[1].gaps.empty());
    CHECK(d.layers[0].details["carveOutBinds"] == "bwrap");
}

TEST_CASE("bwrap carve-outs: a hidden path at, above or below a carve-out keeps every bind bwrap's") {
    Policy p = ww({{"/ws", Grant::Workspace, true, 7}});
    p.protected_paths = {{"/ws/.git/hooks", "default", "git", true, true, false, false, 11}};
    CHECK(bwrap::stage_may_bind(p));
    for (const char* hidden : {"/ws/.git/hooks", "/ws/.git", "/ws/.git/hooks/secret", "/"}) {
        p.hidden_paths = {{hidden, "flag", "named", true, true, false, false, -1}};
        CHECK_FALSE(bwrap::stage_may_bind(p));
    }
    // Beside it, or absent: no overlap.
    for (const char* hidden : {"/ws/.git/hooksx", "/ws/.gi", "/home/u/.ssh"}) {
        p.hidden_paths = {{hidden, "flag", "named", true, true, false, false, -1}};
        CHECK(bwrap::stage_may_bind(p));
    }
    p.hidden_paths = {{"/ws/.git", "flag", "named", false, false, false, false, -1}};
    CHECK(bwrap::stage_may_bind(p));
    // read-only mode binds no carve-outs at all.
    p.mode = Mode::ReadOnly;
    CHECK(bwrap::carve_binds(p).empty());
}

TEST_CASE("carve-outs: the home list applies when a root contains $HOME; a planted link fails closed") {
    char tmpl[] = "/var/tmp/dsh-unit-carve-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string h = tmpl;
    REQUIRE(::mkdir((h + "/.ssh").c_str(), 0700) == 0);
    { std::FILE* f = std::fopen((h + "/.bashrc").c_str(), "w"); REQUIRE(f); std::fclose(f); }
    Policy p = ww({{h, Grant::Workspace, true, -1}});
    carveouts::Input in;
    in.home = h;
    in.cwd = h;
    REQUIRE(carveouts::protect(p, in));
    auto find = [&](const std::string& path) -> const ProtectedPath* {
        for (const auto& e : p.protected_paths)
            if (e.path == path) return &e;
        return nullptr;
    };
    REQUIRE(find(h + "/.bashrc"));
    CHECK(find(h + "/.bashrc")->exists);
    CHECK(find(h + "/.bashrc")->what == "home");
    CHECK(find(h + "/.ssh")->directory);
    CHECK_FALSE(find(h + "/.profile")->exists);
    CHECK(find(h + "/.vscode")->what == "agent");
    // Not a home under the root: no home entries.
    in.home = "/nonexistent-home";
    REQUIRE(carveouts::protect(p, in));
    CHECK_FALSE(find(h + "/.bashrc"));
    // A symlink on the way: refused with the fix, and --unprotect is the way out.
    REQUIRE(::symlink("/etc", (h + "/.idea").c_str()) == 0);
    Outcome o = carveouts::protect(p, in);
    CHECK(o.err == Err::StateUnsafe);
    CHECK(o.message == protected_symlink_text(h + "/.idea", h + "/.idea"));
    in.unprotect_flag = {h + "/.idea"};
    REQUIRE(carveouts::protect(p, in));
    CHECK(p.unprotected == std::vector<std::string>{h + "/.idea"});
    for (const char* n : {"/.idea", "/.bashrc"}) ::unlink((h + n).c_str());
    ::rmdir((h + "/.ssh").c_str());
    ::rmdir(h.c_str());
}

TEST_CASE("carve-outs: git config parsing finds hooksPath and includes as git reads them") {
    using carveouts::git_config_keys;
    const auto k = git_config_keys(
        "\xef\xbb\xbf# comment\n"
        "[Core]\n\tHooksPath = \"my hooks\" ; trailing comment\n"
        "[core] hookspath = one\\\n-line\r\n"
        "[core \"sub\"]\n\thooksPath = not-core\n"
        "[INCLUDE]\n  path=a.cfg\n"
        "[includeIf \"gitdir:~/w/\"]\n\tpath = b.cfg # comment\n"
        "[includeIf \"onbranch:x\"] PATH = \"c\\\"q.cfg\"\n"
        "[include \"sub\"]\n\tpath = not-an-include\n"
        "[includeif]\n\tpath = not-either\n"
        "[include]\n\tpath\n"                  // a boolean: no path
        "\tpath = \"unclosed\n"                // malformed: skipped
        "\tpath = bad\\escape\n"               // malformed: skipped
        "\tpath = after   the  bad ones\n"
        "[bad section\n\tpath = in-no-section\n"
        "[include]\n\tpath = last");
    CHECK(k.hooks_paths == std::vector<std::string>{"my hooks", "one-line"});
    CHECK(k.includes == std::vector<std::string>{"a.cfg", "b.cfg", "c\"q.cfg", "after   the  bad ones", "last"});
    CHECK(git_config_keys("").includes.empty());
    CHECK(git_config_keys("[include]\npath = x\\").includes == std::vector<std::string>{"x"});
}

TEST_CASE("carve-outs: .gitmodules paths read as git reads them (keys in any case, quoted)") {
    // A line match of "path =" missed "PATH = x": the submodule's .git went unprotected (attack pass).
    const auto k = carveouts::git_config_keys(
        "[submodule \"a\"]\n\tpath = libs/a\n"
        "[Submodule \"b\"]\n\tPATH = libs/b ; comment\n"
        "[submodule \"c\"] Path = \"with space\"\n"
        "[submodule]\n\tpath = no-name\n"
        "[core]\n\tpath = not-a-submodule\n");
    CHECK(k.submodule_paths == std::vector<std::string>{"libs/a", "libs/b", "with space"});
    CHECK(k.includes.empty());
}

TEST_CASE("carve-outs: included configs and the global hooksPath inside a root, 10 deep, cycles end") {
    Scratch sc("gitinc");
    const std::string &t = sc.dir, ws = t + "/ws", home = t + "/home";
    const auto write = [&](const std::string& path, const std::string& body) { sc.write(path, body); };
    for (const auto& d : {ws, home, ws + "/.git", ws + "/inc"}) REQUIRE(::mkdir(d.c_str(), 0700) == 0);
    // .git/config -> ../inc/f1 -> f2 -> ... -> f12: git reads 10 nested includes, then refuses.
    write(ws + "/.git/config", "[include]\n\tpath = ../inc/f1\n");
    for (int i = 1; i <= 12; ++i) write(ws + "/inc/f" + std::to_string(i), "[include]\npath = f" + std::to_string(i + 1) + "\n");
    // A cycle: cyc-a includes cyc-b includes cyc-a; included from the global config by "~/".
    write(home + "/.gitconfig", "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ~/cyc-a\n");
    write(home + "/cyc-a", "[include]\n\tpath = " + ws + "/cyc-b\n");
    write(ws + "/cyc-b", "[include]\n\tpath = " + home + "/cyc-a\n[core]\n\thooksPath = " + ws + "/abs-hooks\n");
    write(t + "/system", "[includeIf \"hasconfig:remote.*.url:x\"]\n\tpath = " + ws + "/sys.cfg\n");
    Policy p = ww({{ws, Grant::Workspace, true, -1}});
    carveouts::Input in;
    in.home = home;
    in.cwd = ws;
    in.system_gitconfig = t + "/system";
    REQUIRE(carveouts::protect(p, in));
    auto find = [&](const std::string& path) -> const ProtectedPath* {
        for (const auto& e : p.protected_paths)
            if (e.path == path) return &e;
        return nullptr;
    };
    for (int i = 1; i <= 10; ++i) {
        const auto* e = find(ws + "/inc/f" + std::to_string(i));
        REQUIRE(e);
        CHECK(e->exists);
        CHECK(e->what == "git");
    }
    CHECK_FALSE(find(ws + "/inc/f11"));
    REQUIRE(find(ws + "/cyc-b"));
    CHECK(find(ws + "/cyc-b")->exists);
    CHECK_FALSE(find(home + "/cyc-a"));         // outside the root: read-only already, not listed
    REQUIRE(find(ws + "/.githooks"));           // the global, relative hooksPath, from the top
    CHECK_FALSE(find(ws + "/.githooks")->exists);
    REQUIRE(find(ws + "/abs-hooks"));           // an absolute one from an included file
    REQUIRE(find(ws + "/sys.cfg"));             // the system config's, whatever the condition
    CHECK_FALSE(find(ws + "/sys.cfg")->exists);
    for (const auto& e : p.protected_paths)
        if (e.fd >= 0) ::close(e.fd);
    // --unprotect drops an included file (and what only it includes).
    in.unprotect_flag = {ws + "/inc/f5"};
    REQUIRE(carveouts::protect(p, in));
    CHECK(find(ws + "/inc/f4"));
    CHECK_FALSE(find(ws + "/inc/f5"));
    CHECK_FALSE(find(ws + "/inc/f6"));
    for (const auto& e : p.protected_paths)
        if (e.fd >= 0) ::close(e.fd);
    sc.clean({ws + "/inc", ws + "/.git", home, ws});
}

TEST_CASE("carve-outs: ~user/ in a git config is that user's home from passwd; an unknown user and an oversized config fail closed") {
    Scratch sc("gituser");
    const std::string &t = sc.dir, ws = t + "/ws", home = t + "/home";
    const auto write = [&](const std::string& path, const std::string& body) { sc.write(path, body); };
    for (const auto& d : {ws, home, ws + "/bob", ws + "/.git"}) REQUIRE(::mkdir(d.c_str(), 0700) == 0);
    write(t + "/passwd", "root:x:0:0:root:/root:/bin/sh\nbo:x:1:1::/nowhere:/bin/sh\nbob:x:1000:1000:Bob,,,:" + ws +
                             "/bob:/bin/bash\n");
    write(ws + "/.git/config", "[include]\n\tpath = ~bob/inc.cfg\n[core]\n\thooksPath = ~bob/hooks\n");
    write(ws + "/bob/inc.cfg", "[core]\n\tbare = false\n");
    Policy p = ww({{ws, Grant::Workspace, true, -1}});
    carveouts::Input in;
    in.home = home;
    in.cwd = ws;
    in.system_gitconfig = "";
    in.passwd = t + "/passwd";
    REQUIRE(carveouts::protect(p, in));
    auto find = [&](const std::string& path) -> const ProtectedPath* {
        for (const auto& e : p.protected_paths)
            if (e.path == path) return &e;
        return nullptr;
    };
    REQUIRE(find(ws + "/bob/inc.cfg"));  // bob's, not "bo"'s (a prefix of the name)
    CHECK(find(ws + "/bob/inc.cfg")->exists);
    REQUIRE(find(ws + "/bob/hooks"));
    CHECK_FALSE(find(ws + "/bob/hooks")->exists);
    for (const auto& e : p.protected_paths)
        if (e.fd >= 0) ::close(e.fd);
    // A user the passwd file does not hold: git might find one elsewhere; refused.
    write(ws + "/.git/config", "[include]\n\tpath = ~carol/inc.cfg\n");
    Outcome o = carveouts::protect(p, in);
    REQUIRE_FALSE(o);
    CHECK(o.err == Err::StateUnsafe);
    CHECK(o.message == "a git config names ~carol/inc.cfg (an include or core.hooksPath), and the user carol is not in "
                       "/etc/passwd, so what git would read there cannot be checked; write that path out in full");
    // A config longer than what is parsed of it: refused, nothing past the bound goes unseen.
    write(ws + "/.git/config", std::string((4u << 20) + 1, '#'));
    o = carveouts::protect(p, in);
    REQUIRE_FALSE(o);
    CHECK(o.message == "the git config " + ws + "/.git/config is larger than 4 MiB, too large to check for includes and "
                       "core.hooksPath; shorten it");
    // Exactly at the bound: read whole, accepted.
    write(ws + "/.git/config", std::string(4u << 20, '#'));
    REQUIRE(carveouts::protect(p, in));
    for (const auto& e : p.protected_paths)
        if (e.fd >= 0) ::close(e.fd);
    sc.clean({ws + "/bob", ws + "/.git", home, ws});
}

TEST_CASE("bwrap stage: --net-relay travels to the stage, with --net loopback only (issue 19)") {
    Policy pol;
    pol.mode = Mode::ReadOnly;
    pol.network = Network::Loopback;
    bwrap::StageSpec spec = true_spec();
    spec.relay_fd = 8;
    spec.no_proxy = "localhost,::1";  // 127.0.0.1 allowed: it goes through the proxy (issue 42)
    auto a = bwrap::stage_args(pol, spec);
    CHECK(a == Args{"/proc/self/fd/5", "__dsh_confine_stage_v1", "--mode", "read-only", "--net", "loopback",
                    "--record-fd", "6", "--net-relay", "8", "--no-proxy", "localhost,::1", "--", "/bin/true", "true"});
    bwrap::StageRequest req;
    REQUIRE(bwrap::parse_stage(Args(a.begin() + 2, a.end()), req));
    CHECK(req.relay_fd == 8);
    CHECK(req.no_proxy == "localhost,::1");
    // Without a private loopback, a listener would be the host's: refused.
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--record-fd", "6", "--net-relay", "8", "--", "/bin/true",
                                    "true"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--net", "off", "--record-fd", "6", "--net-relay", "8", "--",
                                    "/bin/true", "true"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--mode", "read-only", "--net", "loopback", "--record-fd", "6", "--net-relay", "2",
                                    "--", "/bin/true", "true"}, req));
}

TEST_CASE("bwrap stage: --caller-signals says which shielded signals the caller ignored (issue 15)") {
    bwrap::StageRequest req;
    REQUIRE(bwrap::parse_stage({"--mode", "read-only", "--record-fd", "3", "--", "/bin/sh", "sh"}, req));
    CHECK(req.caller_signals == -1);  // not in the caller's group: the command's dispositions are bwrap's
    REQUIRE(bwrap::parse_stage({"--caller-signals", "2", "--mode", "read-only", "--record-fd", "3", "--", "/bin/sh",
                                "sh"}, req));
    CHECK(req.caller_signals == 2);  // bit 1: SIGHUP (nohup)
    CHECK_FALSE(bwrap::parse_stage({"--caller-signals", "-1", "--mode", "read-only", "--record-fd", "3", "--",
                                    "/bin/sh", "sh"}, req));
    CHECK_FALSE(bwrap::parse_stage({"--caller-signals", "x", "--mode", "read-only", "--record-fd", "3", "--",
                                    "/bin/sh", "sh"}, req));
}

TEST_CASE("hidden secrets (issue 37): a directory's tmpfs, its shown parts bound in before it is made read-only, "
          "nothing below it mounted on its own") {
    Policy p;
    p.mode = Mode::ReadOnly;
    ProtectedPath ssh{"/h/.ssh", "hide-secrets", "secret", true, true, false, false, -1};
    ssh.shown = {{"config", 21}, {"id_ed25519.pub", 22}};
    ProtectedPath key{"/h/.ssh/keys/id", "flag", "secret", true, false, false, false, -1};
    ProtectedPath netrc{"/h/.netrc", "hide-secrets", "secret", true, false, false, false, -1};
    ProtectedPath absent{"/h/.pgpass", "hide-secrets", "secret", false, false, false, false, -1};
    p.hidden_paths = {ssh, key, netrc, absent};
    CHECK(bwrap::profile_args(p, {}) ==
          cat({kBase, kProc,
               {"--tmpfs", "/h/.ssh", "--ro-bind", "/proc/self/fd/21", "/h/.ssh/config", "--ro-bind",
                "/proc/self/fd/22", "/h/.ssh/id_ed25519.pub", "--remount-ro", "/h/.ssh", "--ro-bind", "/dev/null",
                "/h/.netrc"}}));
    CHECK(bwrap::hidden_within(p, key));
    CHECK_FALSE(bwrap::hidden_within(p, ssh));
    CHECK_FALSE(bwrap::hidden_within(p, ProtectedPath{"/h/.sshx", "flag", "secret", true, false, false, false, -1}));
}

TEST_CASE("hidden secrets (issue 37): the table under $HOME and the variables, ~/.ssh's links, config secretPaths") {
    Scratch s("secrets");
    const std::string h = s.dir;
    REQUIRE(::mkdir((h + "/.ssh").c_str(), 0700) == 0);
    REQUIRE(::mkdir((h + "/.ssh/sub").c_str(), 0700) == 0);
    REQUIRE(::symlink("/var/tmp/elsewhere-key", (h + "/.ssh/sub/k").c_str()) == 0);
    REQUIRE(::symlink("/var/tmp/public-config", (h + "/.ssh/config").c_str()) == 0);
    static std::string kube;
    kube = "/k/one::relative:/k/two";
    const carveouts::Lookup env = [](const char* n) -> const char* {
        if (std::string(n) == "KUBECONFIG") return kube.c_str();
        if (std::string(n) == "GNUPGHOME") return "relative/ignored";
        return nullptr;
    };
    const auto list = carveouts::secrets(h, env, {"~/.extra", "/abs/x", "not/this"});
    const auto has = [&](const std::string& x) { return std::find(list.begin(), list.end(), x) != list.end(); };
    for (const auto& t : carveouts::secret_table())
        if (std::string(t.base) == "~") CHECK(has(h + "/" + t.rel));
    CHECK(has(h + "/.ssh"));
    CHECK(has("/k/one"));
    CHECK(has("/k/two"));
    CHECK_FALSE(has("relative"));
    CHECK_FALSE(has("relative/ignored"));
    CHECK(has(fmt::format("/run/user/{}/gnupg", ::getuid())));  // $XDG_RUNTIME_DIR unset
    CHECK(has(h + "/.ssh/sub/k"));       // a link below ~/.ssh: hide() hides its target
    CHECK_FALSE(has(h + "/.ssh/config"));  // a public name directly in it: not followed
    CHECK(has(h + "/.extra"));
    CHECK(has("/abs/x"));
    CHECK_FALSE(has("not/this"));
    // No home: only what the variables name.
    for (const auto& x : carveouts::secrets("", env)) CHECK(x.rfind(h, 0) != 0);
    ::unlink((h + "/.ssh/sub/k").c_str());
    ::unlink((h + "/.ssh/config").c_str());
    s.clean({h + "/.ssh/sub", h + "/.ssh"});
}

TEST_CASE("hidden secrets (issue 37): what ssh configs name, through Include and tokens; XDG and GH_CONFIG_DIR") {
    Scratch s("sshconf");
    const std::string h = s.dir, ssh = h + "/.ssh";
    REQUIRE(::mkdir(ssh.c_str(), 0700) == 0);
    REQUIRE(::mkdir((ssh + "/conf.d").c_str(), 0700) == 0);
    s.write(ssh + "/config",
            "Host a\n  IdentityFile ~/keys/a_key\n  identityfile=\"%d/quoted key\"\n"
            "Include conf.d/*.conf\nInclude ~/.ssh/conf.d/missing-*.conf\n"
            "Match host b\n  IdentityAgent ~/.agents/b.sock\n  IdentityAgent none\n  IdentityAgent SSH_AUTH_SOCK\n");
    s.write(ssh + "/conf.d/one.conf",
            "IdentityFile ${KEYDIR}/env_key\nIdentityFile ~/per-host/%h/id\nIdentityFile ~/%r.key\n"
            "IdentityAgent $MY_AGENT\nInclude one.conf\n");
    static std::string keydir, agent, xdg;
    keydir = h + "/envkeys";
    agent = h + "/agent.sock";
    xdg = h + "/xdgconf";
    const carveouts::Lookup env = [](const char* n) -> const char* {
        const std::string k = n;
        if (k == "KEYDIR") return keydir.c_str();
        if (k == "MY_AGENT") return agent.c_str();
        if (k == "XDG_CONFIG_HOME") return xdg.c_str();
        if (k == "GH_CONFIG_DIR") return "/gh/moved";
        return nullptr;
    };
    const auto list = carveouts::secrets(h, env);
    const auto has = [&](const std::string& x) { return std::find(list.begin(), list.end(), x) != list.end(); };
    CHECK(has(h + "/keys/a_key"));
    CHECK(has(h + "/quoted key"));                 // %d, quoted, key=value
    CHECK(has(h + "/.agents/b.sock"));             // IdentityAgent, in a Match block
    CHECK(has(h + "/envkeys/env_key"));            // Included, ${VAR}
    CHECK(has(h + "/per-host"));                   // %h: the directory before it, whole
    CHECK(has(agent));                             // IdentityAgent $VAR
    CHECK_FALSE(has(h));                           // ~/%r.key would be all of $HOME: not hidden
    CHECK_FALSE(has("none"));
    CHECK(has(xdg + "/gh"));                       // ~/.config/gh where XDG_CONFIG_HOME is
    CHECK(has(xdg + "/git/credentials"));
    CHECK(has(h + "/.config/gh"));
    CHECK(has("/gh/moved"));
    // The self-Include ends (ssh's depth), and a FIFO in the config's place is never opened.
    ::unlink((ssh + "/config").c_str());
    REQUIRE(::mkfifo((ssh + "/config").c_str(), 0600) == 0);
    CHECK_FALSE(carveouts::secrets(h, env).empty());
    ::unlink((ssh + "/config").c_str());
    ::unlink((ssh + "/conf.d/one.conf").c_str());
    s.clean({ssh + "/conf.d", ssh});
}

TEST_CASE("hidden secrets (issue 37): ~/.ssh shown parts are regular files with one link, directly in it") {
    Scratch s("sshpub");
    const std::string h = s.dir, ssh = h + "/.ssh";
    REQUIRE(::mkdir(ssh.c_str(), 0700) == 0);
    REQUIRE(::mkdir((ssh + "/sub").c_str(), 0700) == 0);
    s.write(ssh + "/id.pub", "PUB\n");
    s.write(ssh + "/known_hosts", "KH\n");
    s.write(ssh + "/id", "PRIV\n");
    s.write(ssh + "/authorized_keys", "AK\n");
    s.write(ssh + "/sub/x.pub", "SUBPUB\n");
    REQUIRE(::link((ssh + "/id").c_str(), (ssh + "/linked.pub").c_str()) == 0);
    REQUIRE(::symlink("id", (ssh + "/config").c_str()) == 0);
    Policy p;
    p.mode = Mode::ReadOnly;
    carveouts::Input in;
    in.home = h;
    in.cwd = h;
    in.hide_secrets = true;
    carveouts::hide(p, in);
    const ProtectedPath* dir = nullptr;
    for (const auto& e : p.hidden_paths) {
        if (e.path == ssh) dir = &e;
        CHECK((e.path == ssh || e.path.rfind(ssh + "/", 0) != 0));  // nothing below it on its own
    }
    REQUIRE(dir);
    CHECK(dir->directory);
    std::vector<std::string> names;
    for (const auto& x : dir->shown) names.push_back(x.first);
    CHECK(names == std::vector<std::string>{"id.pub", "known_hosts"});
    carveouts::hide(p, in);  // again: the first run's descriptors are closed, not leaked
    ::unlink((ssh + "/linked.pub").c_str());
    ::unlink((ssh + "/config").c_str());
    s.clean({ssh + "/sub", ssh});
}
