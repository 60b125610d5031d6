// Orchestration: request -> policy -> runner -> report -> exec. Every path
// that cannot enforce a confined mode ends here with an error and no exec.
#include "app.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "cli.hpp"
#include "environment.hpp"
#include "launch.hpp"
#include "linux/landlock_runner.hpp"
#include "policy.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "selftest.hpp"
#include "supervise.hpp"

extern char** environ;

namespace dsh {

namespace {

void print_error(const Outcome& o) {
    std::string line = "dsh-confine: " + o.message + "\n";
    // A stderr pipe whose reader is gone must not turn a clean 125 into death
    // by SIGPIPE. The disposition is put back afterwards: SIG_IGN would survive
    // exec and change the command's own behaviour on a broken pipe.
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old);
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::sigaction(SIGPIPE, &old, nullptr);
}

// Reports a failure: stderr, then the report's error record. Returns the exit status.
int failed(const Report& report, const Outcome& o) {
    print_error(o);
    (void)report.write(error_record(o));
    return o.exit_status();
}

std::string current_dir() {
    char buf[4096];
    if (::getcwd(buf, sizeof buf) != nullptr) return buf;
    return "/";
}

Outcome resolve_policy(const Request& req, Policy& policy) {
    PolicyInput in;
    in.cwd = current_dir();
    if (req.mode) {
        auto m = parse_mode(*req.mode);
        if (!m)
            return failf(Err::Usage, "unknown mode \"{}\" (read-only, workspace-write or danger-full-access)",
                         *req.mode);
        in.mode = *m;
        in.mode_source = "flag";
    }
    if (req.root) {
        in.root = *req.root;
        in.root_source = "flag";
    }
    in.writable = req.writable;
    if (const char* t = std::getenv("TMPDIR")) in.tmpdir = t;
    in.keep_fds = req.keep_fds;
    return build_policy(in, policy);
}

// A confined mode that cannot be enforced: the seed's text, with the runner's
// own failure appended when it was found while setting up.
Outcome unavailable(const Policy& p, const Outcome& cause, bool at_run_time) {
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

// Chooses the runner and fills the Launch: the report's record, the
// in-process layers and what to exec. Runs nothing. Shared by run, explain
// and supervise, so that what is shown is what runs.
Outcome prepare_launch(const Request& req, Launch& l) {
    Confinement& c = l.c;
    const Policy& policy = c.policy;
    for (int fd : policy.keep_fds)
        if (fd <= 2) return failf(Err::Usage, "--keep-fd {}: stdio is always passed through", fd);
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

    RunnerKind runner = RunnerKind::Auto;
    if (req.runner) {
        auto r = parse_runner(*req.runner);
        if (!r) return failf(Err::Usage, "unknown runner \"{}\"", *req.runner);
        runner = *r;
    }
    if (runner != RunnerKind::Auto && runner != RunnerKind::Landlock) {
        c.skipped.push_back({std::string(to_string(runner)), "not available on this platform"});
        return unavailable(policy, Outcome::success(), false);
    }
    landlock::Plan plan;
    if (auto o = landlock::prepare(policy, c, plan); !o) {
        c.skipped.push_back({"landlock", o.message});
        return unavailable(policy, o, false);
    }
    l.landlock = std::move(plan);
    return Outcome::success();
}

int run_command(const Request& req, const Report& report) {
    Launch l;
    if (req.markers && !req.supervise)
        return failed(report, fail(Err::Usage, "--markers needs --supervise: in exec mode nothing is left to "
                                               "write them once the command ends"));
    if (auto o = resolve_policy(req, l.c.policy); !o) return failed(report, o);
    if (auto o = prepare_launch(req, l); !o) return failed(report, o);
    if (req.supervise) return supervise(l, report, {req.markers, req.approver.has_value()});
    return failed(report, enter_and_exec(l, report, true));
}

}  // namespace

int run(int argc, const char* const* argv) {
    Request req;
    if (auto o = parse_cli(argc, argv, req); !o) {
        print_error(o);
        return o.exit_status();
    }
    switch (req.action) {
        case Action::Help:
        case Action::Version:
            std::fputs(req.text.c_str(), stdout);
            return 0;
        case Action::Run: break;
        case Action::SelfTest:
#if defined(__linux__)
            return selftest::run(req);
#else
            [[fallthrough]];
#endif
        case Action::Probe:
        case Action::Explain:
        case Action::Check:
        case Action::SessionSetMode: {
            Outcome o = fail(Err::Usage, "this subcommand is not built yet");
            print_error(o);
            return o.exit_status();
        }
    }
    Report report;
    if (auto o = report.open(req.report_fd); !o) {
        print_error(o);
        return o.exit_status();
    }
    return run_command(req, report);
}

}  // namespace dsh
