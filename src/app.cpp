// Orchestration: request -> policy -> runner -> report -> exec. Every path
// that cannot enforce a confined mode ends here with an error and no exec.
#include "app.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#if !defined(_WIN32)
#include <fcntl.h>
#endif
#if defined(__linux__)
#include <cerrno>
#include <cstring>
#include <sys/resource.h>
#endif
#include <unistd.h>

#include "cli.hpp"
#include "environment.hpp"
#include "explain.hpp"
#include "launch.hpp"
#include "linux/landlock_runner.hpp"
#if defined(_WIN32)
#include "windows/acl_runner.hpp"
namespace dsh::host_runner {
using acl::prepare;
inline constexpr std::string_view NAME = "windows-acl";
}  // namespace dsh::host_runner
#elif defined(__APPLE__)
#include "darwin/seatbelt_runner.hpp"
namespace dsh::host_runner {
using seatbelt::prepare;
inline constexpr std::string_view NAME = "seatbelt";
}  // namespace dsh::host_runner
#else
#include "linux/bwrap_plan.hpp"
#include "linux/bwrap_runner.hpp"
#include "linux/chain.hpp"
#include "linux/probe_cmd.hpp"
#endif
#include "policy.hpp"
#include "roots.hpp"
#include "report.hpp"
#include "resolve.hpp"
#include "runner.hpp"
#include "selftest.hpp"
#include "darwin/seatbelt_plan.hpp"
#include "windows/acl_plan.hpp"
#include "session.hpp"
#include "supervise.hpp"
#include "version.hpp"

extern char** environ;

namespace dsh {

namespace {

// Reports a failure: stderr, then the report's error record. Returns the exit status.
int failed(const Report& report, const Outcome& o) {
    print_error(o.message);
    (void)report.write(error_record(o));
    return o.exit_status();
}

// A confined mode that cannot be enforced: the seed's text, with the runner's
// own failure appended when it was found while setting up.
[[maybe_unused]] Outcome unavailable(const Policy& p, const Outcome& cause, bool at_run_time) {
    std::string text = sandbox_unavailable_text(to_string(p.mode));
    if (at_run_time) text += " Runner failure: " + cause.message;
    return fail(Err::SandboxUnavailable, std::move(text));
}

// The env flags -> l.env and the record's names. No flag: environ is not read.
Outcome apply_environment(const Request& req, Launch& l) {
    EnvRequest er{req.clearenv, req.setenv, req.unsetenv, req.scrub_secrets};
    if (!er.any()) return Outcome::success();
    std::vector<std::string> current;
    for (char** e = environ; e && *e; ++e) current.emplace_back(*e);
    std::vector<std::string> out;
    if (auto o = build_environment(er, current, out, l.c.environment); !o) return o;
    l.env = std::move(out);
    return Outcome::success();
}

#if defined(__linux__)
// The runner chain's inputs: --runner, --probe-timeout, the build's bwrap path.
Outcome chain_options(const Request& req, chain::Options& opts) {
    if (req.runner) {
        auto r = parse_runner(*req.runner);
        if (!r) return fail(Err::Usage, usage_text(UsageText::UnknownRunner, *req.runner));
        opts.runner = *r;
    }
    if (req.probe_timeout_ms) opts.probe_timeout_ms = *req.probe_timeout_ms;
    opts.bwrap_path = kBwrapPath;
    opts.report_fd = req.report_fd;
    return Outcome::success();
}

// The config file's runner settings (flags already won in resolve).
void config_chain_options(const Config& cfg, chain::Options& opts) {
    if (cfg.bwrap_path) opts.bwrap_path = *cfg.bwrap_path;
    opts.runner_command = cfg.runner_command;
    opts.runner_failure_signatures = cfg.runner_failure_signatures;
}
#endif

// Chooses the runner and fills the Launch: the report's record, the
// in-process layers and what to exec. Runs nothing. Shared by run, explain
// and supervise, so that what is shown is what runs.
Outcome prepare_launch(const Request& req, Launch& l) {
    Confinement& c = l.c;
    const Policy& policy = c.policy;
    for (int fd : policy.keep_fds) {
        if (fd <= 2) return failf(Err::Usage, "--keep-fd {}: stdio is always passed through", fd);
        // The command could write forged records into the caller's report.
        if (fd == req.report_fd)
            return failf(Err::Usage, "--keep-fd {}: that is the --report-fd, which the command must not write; "
                                     "pass the command another fd", fd);
#if !defined(_WIN32)
        // Said here, before any runner: found later it reads as a sandbox failure.
        if (::fcntl(fd, F_GETFD) < 0)
            return failf(Err::Usage, "--keep-fd {}: fd {} is not open; open it before calling dsh-confine", fd, fd);
#endif
    }
    // The command is looked up on its own final PATH, as execvp in it would.
    if (auto o = apply_environment(req, l); !o) return o;
    const char* path = l.env ? env_lookup(*l.env, "PATH") : std::getenv("PATH");
    if (auto o = resolve_command(req.argv.front(), path, c.command_path); !o) return o;
    c.argv = req.argv;
    l.exec_path = c.command_path;
    l.exec_argv = req.argv;
    if (policy.mode == Mode::DangerFullAccess) {
        c.runner = RunnerKind::None;
        return Outcome::success();
    }

#if defined(_WIN32) || defined(__APPLE__)
    RunnerKind runner = RunnerKind::Auto;
    if (req.runner) {
        auto r = parse_runner(*req.runner);
        if (!r) return fail(Err::Usage, usage_text(UsageText::UnknownRunner, *req.runner));
        runner = *r;
    }
    // A chain of one (darwin: seatbelt; win32: windows-acl): taken without a probe.
    if (auto o = host_runner::prepare(runner, l); !o) {
        c.skipped.push_back({std::string(host_runner::NAME), o.message});
        return unavailable(policy, o, false);
    }
    return Outcome::success();
#else
    // Workspace-write checked this before opening its roots (build_policy).
    if (policy.mode == Mode::ReadOnly)
        if (auto o = roots::check_fd_headroom(); !o) return unavailable(policy, o, true);
    chain::Options opts;
    if (auto o = chain_options(req, opts); !o) return o;
    config_chain_options(l.config, opts);
    // The seed: a configured runnerCommand skips the chain and every probe.
    if (l.config.custom_runner() && opts.runner == RunnerKind::Auto) opts.runner = RunnerKind::Custom;
    return chain::prepare(opts, l);
#endif
}

// Resolution (config, session, escalation with approval) -> the launch.
// `ask` is No for explain: every check runs, nobody is asked, nothing runs.
Outcome resolve_and_prepare(const Request& req, AskApprover ask, Resolution& res, Launch& l) {
    if (auto o = resolve(req, current_env(), ask, res); !o) return o;
    l.c.policy = res.policy;
    l.config = res.settings;
    // The config's runner and probe timeout reach prepare_launch as if given
    // on the command line (flags already won in resolve).
    Request eff = req;
    if (res.settings.runner) eff.runner = std::string(to_string(*res.settings.runner));
    eff.probe_timeout_ms = res.settings.probe_timeout_ms;
    return prepare_launch(eff, l);
}

int run_command(const Request& req, const Report& report) {
    Launch l;
    if (req.markers && !req.supervise)
        return failed(report, fail(Err::Usage, "--markers needs --supervise: in exec mode nothing is left to "
                                               "write them once the command ends"));
    Resolution res;
    if (auto o = resolve_and_prepare(req, AskApprover::Yes, res, l); !o) return failed(report, o);
    // Escalation is advertised when an approver is composed (flag or config).
    if (req.supervise) return supervise(l, report, {req.markers, res.settings.approver.has_value()});
    return failed(report, enter_and_exec(l, report, true));
}

int explain_command(const Request& req, const Report& report) {
    if (req.context) {
        // The standing policy a model should be told about: an --escalate
        // request is per call and is not part of it.
        Request standing = req;
        standing.escalate.reset();
        standing.justification.reset();
        Resolution res;
        if (auto o = resolve(standing, current_env(), AskApprover::No, res); !o) return failed(report, o);
        std::string text = policy_context_text(res.policy) + "\n";
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    if (req.platform && *req.platform != "linux") {
        // Another system's plan, from the pure builders: shown, never run.
        Resolution res;
        const ResolveEnv env = current_env();
        if (auto o = resolve(req, env, AskApprover::No, res); !o) return failed(report, o);
        std::string text;
        if (*req.platform == "darwin")
            text = seatbelt::render_darwin_plan(res.policy, req.argv);
        else if (*req.platform == "windows")
            text = acl::render_windows_plan(res.policy, req.argv, env.tmpdir ? *env.tmpdir : "/tmp",
                                            res.session_path.has_value());
        else
            return failed(report, failf(Err::Usage, "explain --platform {}: expected linux, darwin or windows",
                                        *req.platform));
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    Launch l;
    Resolution res;
    if (auto o = resolve_and_prepare(req, AskApprover::No, res, l); !o) return failed(report, o);
    std::string text = req.json ? plan_json(res, l).dump() + "\n" : plan_text(res, l);
    std::fputs(text.c_str(), stdout);
    return 0;
}

int check_command(const Request& req, const Report& report) {
    Resolution res;
    const ResolveEnv env = current_env();
    if (auto o = resolve(req, env, AskApprover::Yes, res); !o) return failed(report, o);
    const CheckAnswer a = check_write(res.policy, *req.check_write, env.cwd);
    std::string text = req.json ? check_json(res, a).dump() + "\n" : check_text(res, a);
    std::fputs(text.c_str(), stdout);
    return a.allowed ? 0 : 1;
}

int session_command(const Request& req) {
    auto m = parse_mode(req.session_mode);
    Outcome o = m ? append_mode_event(req.session_file, *m)
                  : fail(Err::SessionInvalid, "sandbox/mode carries unknown mode " +
                                                  nlohmann::json(req.session_mode).dump(-1, ' ', false,
                                                      nlohmann::json::error_handler_t::replace));
    if (!o) print_error(o.message);
    return o.exit_status();
}

}  // namespace

int run(int argc, const char* const* argv) {
    // bwrap's child: the hidden stage that stacks Landlock inside the sandbox.
#if defined(__linux__)
    if (argc > 1 && std::string_view(argv[1]) == bwrap::kStageArg) return bwrap::run_stage(argc, argv);
    if (argc == 2 && std::string_view(argv[1]) == bwrap::kProbeArg) return bwrap::run_probe_check();
#endif
    Request req;
    if (auto o = parse_cli(argc, argv, req); !o) {
        print_error(o.message);
        return o.exit_status();
    }
    switch (req.action) {
        case Action::Help:
        case Action::Version:
            std::fputs(req.text.c_str(), stdout);
            return 0;
        case Action::SessionSetMode: return session_command(req);
        case Action::Run:
        case Action::Explain:
        case Action::Check: break;
        case Action::Probe: {
#if defined(__linux__)
            // The same bwrap, custom runner and probe bound that a run would use.
            chain::Options opts;
            Config cfg;
            Outcome o = chain_options(req, opts);
            if (o) o = load_config(req.config, cfg);
            if (!o) {
                print_error(o.message);
                return o.exit_status();
            }
            config_chain_options(cfg, opts);
            if (!req.probe_timeout_ms && cfg.probe_timeout_ms) opts.probe_timeout_ms = *cfg.probe_timeout_ms;
            return probe_cmd::run(opts, req.json);
#else
            Outcome o = fail(Err::Usage, "probe is only built for Linux");
            print_error(o.message);
            return o.exit_status();
#endif
        }
        case Action::SelfTest:
#if defined(__linux__)
            return selftest::run(req);
#endif
        {
            Outcome o = fail(Err::Usage, "this subcommand is not built yet");
            print_error(o.message);
            return o.exit_status();
        }
    }
    Report report;
    if (auto o = report.open(req.report_fd); !o) {
        print_error(o.message);
        return o.exit_status();
    }
    switch (req.action) {
        case Action::Explain: return explain_command(req, report);
        case Action::Check: return check_command(req, report);
        case Action::Run:
        case Action::Probe:
        case Action::SessionSetMode:
        case Action::SelfTest:
        case Action::Help:
        case Action::Version: break;
    }
    return run_command(req, report);
}

}  // namespace dsh
