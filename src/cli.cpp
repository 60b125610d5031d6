#include "cli.hpp"

#include <cstring>

#include "cli11.hpp"

#include "cli_fast.hpp"
#include "version.hpp"

namespace dsh {

namespace {

void policy_options(CLI::App& app, Request& r) {
    app.add_option("--mode", r.mode, "read-only (default), workspace-write or danger-full-access");
    app.add_option("--root", r.root, "workspace root (default: the current directory)");
    app.add_option("--runner", r.runner, "auto (default), bwrap, landlock, seatbelt, windows-acl or custom");
    app.add_option("--writable", r.writable, "another writable path (repeatable)");
    app.add_option("--config", r.config, "config file (JSON)");
    app.add_option("--session", r.session, "session log whose last sandbox/mode event sets the mode");
    app.add_option("--probe-timeout", r.probe_timeout_ms, "bound on each runner probe in ms (default 5000)")
        ->check(CLI::PositiveNumber);
}

}  // namespace

static Outcome parse(int argc, const char* const* argv, Request& r, bool fast) {
    // Everything after the first "--" is the command, untouched. CLI11 sees
    // only what comes before it, so no option of ours is ever taken from the
    // command's arguments.
    std::vector<std::string> ours;
    bool dashdash = false;
    for (int i = 1; i < argc; ++i) {
        if (!dashdash && std::strcmp(argv[i], "--") == 0) {
            dashdash = true;
            continue;
        }
        (dashdash ? r.argv : ours).emplace_back(argv[i]);
    }
    // The common exec-mode line skips building the CLI11 App (see cli_fast.hpp).
    if (fast && parse_cli_fast(ours, dashdash, r.argv, r)) return Outcome::success();

    CLI::App app{"Run a command, and everything it spawns, under a file-write policy.", "dsh-confine"};
    app.set_help_flag("-h,--help", "print this help and exit");
    app.set_version_flag("-V,--version", std::string(kVersion), "print the version and exit");
    policy_options(app, r);
    app.add_option("--report-fd", r.report_fd, "write the JSON-lines report to this fd")->check(CLI::NonNegativeNumber);
    app.add_option("--keep-fd", r.keep_fds, "pass this fd through to the command (repeatable)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--supervise", r.supervise, "stay as the parent and report the outcome");
    app.add_flag("--markers", r.markers, "append the sandbox marker lines to stderr (with --supervise)");
    app.add_flag("--dry-run", r.dry_run, "print the plan, as explain does, and run nothing");
    app.add_option("--escalate", r.escalate, "ask for a strictly wider mode for this call");
    app.add_option("--justification", r.justification, "why the escalation is needed");
    app.add_option("--approver", r.approver, "who approves an escalation: tty or a command");
    app.add_flag("--clearenv", r.clearenv, "start the command with an empty environment");
    app.add_option("--setenv", r.setenv, "set an environment variable: --setenv NAME VALUE (repeatable)")->allow_extra_args(false);
    app.add_option("--unsetenv", r.unsetenv, "remove an environment variable (repeatable)")->allow_extra_args(false);
    app.add_flag("--scrub-secrets", r.scrub_secrets, "drop variables whose names look like credentials");
    std::vector<std::string> positional;
    app.add_option("command", positional, "the command and its arguments (after --)");

    auto* probe = app.add_subcommand("probe", "which runners work here, and why not");
    probe->add_flag("--json", r.json, "print JSON");
    probe->fallthrough();

    auto* explain = app.add_subcommand("explain", "print the plan for a command and run nothing");
    explain->add_flag("--context", r.context, "print the one-line policy text for a model");
    explain->add_option("--platform", r.platform, "render the plan for linux, darwin or windows");
    explain->add_flag("--json", r.json, "print JSON");
    explain->fallthrough();

    auto* check = app.add_subcommand("check", "would the policy let a write to PATH happen?");
    check->add_option("--write", r.check_write, "the path to ask about")->required();
    check->add_flag("--json", r.json, "print JSON");
    check->fallthrough();

    auto* session = app.add_subcommand("session", "the session mode log");
    auto* set_mode = session->add_subcommand("set-mode", "append a sandbox/mode event");
    set_mode->add_option("FILE", r.session_file, "the session log")->required();
    set_mode->add_option("MODE", r.session_mode, "the mode")->required();
    session->require_subcommand(1);

    auto* self_test = app.add_subcommand("self-test", "run the conformance checks under each usable runner");
    self_test->add_flag("--json", r.json, "print JSON");
    self_test->add_option("--binary", r.selftest_binary,
                          "test this dsh-confine-compatible program instead of this one");
    // The payload the checks run confined (one escape attempt, reported on
    // stdout); hidden from --help because it is of no use on its own.
    self_test->add_option("--attempt", r.selftest_attempt, "")->group("");
    self_test->fallthrough();

    app.require_subcommand(0, 1);

    try {
        std::reverse(ours.begin(), ours.end());
        app.parse(ours);
    } catch (const CLI::CallForHelp&) {
        r.action = Action::Help;
        r.text = app.help();
        return Outcome::success();
    } catch (const CLI::CallForVersion&) {
        r.action = Action::Version;
        r.text = fmt::format("dsh-confine {}\n", kVersion);
        return Outcome::success();
    } catch (const CLI::ParseError& e) {
        std::string what = e.what();
        return fail(Err::Usage, what.empty() ? "bad command line (see --help)" : what);
    }

    if (!positional.empty()) {
        if (dashdash) return fail(Err::Usage, "the command goes after --, once");
        r.argv = std::move(positional);
    }
    if (probe->parsed()) r.action = Action::Probe;
    else if (explain->parsed()) r.action = Action::Explain;
    else if (check->parsed()) r.action = Action::Check;
    else if (set_mode->parsed()) r.action = Action::SessionSetMode;
    else if (self_test->parsed()) r.action = Action::SelfTest;
    else if (r.dry_run) r.action = Action::Explain;

    const bool needs_command = r.action == Action::Run || (r.action == Action::Explain && !r.context);
    if (needs_command && r.argv.empty())
        return fail(Err::Usage, "no command given: dsh-confine [OPTIONS] -- COMMAND [ARG...]");
    if (!needs_command && !r.argv.empty() && r.action != Action::Explain)
        return fail(Err::Usage, "this subcommand takes no command after --");
    for (const auto& a : r.argv)
        if (a.empty() && &a == &r.argv.front()) return fail(Err::Usage, "the command name is empty");
    return Outcome::success();
}

Outcome parse_cli(int argc, const char* const* argv, Request& r) { return parse(argc, argv, r, true); }

Outcome parse_cli_cli11(int argc, const char* const* argv, Request& r) { return parse(argc, argv, r, false); }

}  // namespace dsh
