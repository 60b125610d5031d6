// Orchestration: request -> policy -> runner -> report -> exec. Every path
// that cannot enforce a confined mode ends here with an error and no exec.
#include "app.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <sys/socket.h>
#endif
#if defined(_WIN32)
#include <io.h>
#else
#include <unistd.h>
#endif

#include "chain.hpp"
#include "cli.hpp"
#include "environment.hpp"
#include "explain.hpp"
#include "launch.hpp"
#include "policy.hpp"
#include "report.hpp"
#include "resolve.hpp"
#include "runner.hpp"
#include "selftest.hpp"
#include "platforms.hpp"
#include "session.hpp"
#include "supervise.hpp"
#include "version.hpp"
#if !defined(_WIN32)
#include "roots.hpp"
#include "terminal.hpp"
#endif

extern char** environ;

namespace dsh {

namespace {

// The env flags -> l.env and the record's names. No flag: environ is not read.
Outcome apply_environment(const Request& req, Plan& l) {
    EnvRequest er{req.clearenv, req.setenv, req.unsetenv, req.scrub_secrets};
    // --hide-secrets hides the ssh agent's socket (carveouts.cpp) and unsets
    // the variable that names it (reported with --unsetenv's names).
    if ((req.hide_secrets || l.config.hide_secrets.value_or(false)) && l.c.policy.mode != Mode::DangerFullAccess &&
        std::getenv("SSH_AUTH_SOCK"))
        er.unset.emplace_back("SSH_AUTH_SOCK");
    if (!er.any()) return Outcome::success();
    std::vector<std::string> current;
    for (char** e = environ; e && *e; ++e) current.emplace_back(*e);
    std::vector<std::string> out;
    if (auto o = build_environment(er, current, out, l.c.environment); !o) return o;
    l.env = std::move(out);
    return Outcome::success();
}

// The runners' inputs: the effective settings and the run's fds.
RunnerEnv runner_env(const Config& settings, int report_fd) {
    RunnerEnv env;
    env.config = settings;
    env.report_fd = report_fd;
    env.probe_timeout_ms = settings.probe_timeout_ms.value_or(kDefaultProbeTimeoutMs);
    return env;
}

// The resource limits (issue 21): the flags over the config's keys, the
// backend for each (the host is looked at only when a limit needs a cgroup),
// the rlimits for the command's process. --limits required and a limit that
// cannot be enforced as asked: nothing runs.
Outcome plan_limits(const Request& req, Plan& p) {
    LimitSettings s = req.limits;
    s.fill_from(p.config.limits);
    limits::Host host;
#if !defined(_WIN32)
    if (limits::needs_host(s)) host = limits::probe();
#endif
    std::string refusal;
    if (!limits::plan(s, host, p.c.limits, refusal)) return fail(Err::LimitUnavailable, refusal);
    // Processes kept past the command's end would escape its timeout, and
    // would keep its cgroup leaf alive: the two asks contradict each other.
    if (p.c.policy.keep_descendants && (p.c.limits.timeout_ms || p.c.limits.leaf))
        return fail(Err::Usage, usage_text(UsageText::KeepDescendantsWithLimits));
    p.rlimits = p.c.limits.rlimits;
    return Outcome::success();
}

// A socket the caller hands over with --keep-fd reaches whatever it is
// connected to (or, unconnected, any address it sends to) past every network
// layer: the caller's grant, like --writable, but the network axis must not
// claim `full` over it (issue 38). Named as a gap of the axis, per fd.
static void name_kept_sockets(Confinement& c) {
#if !defined(_WIN32)
    if (c.policy.network == Network::Host) return;
    for (int fd : c.policy.keep_fds) {
        struct stat st {};
        if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
            c.network.gaps.push_back({"kept-socket", report_text(ReportText::KeptSocketGap, fd), false});
    }
#else
    (void)c;
#endif
}

#if !defined(_WIN32)
// What an fd that is not a pipe is, for the record's text.
static const char* fd_kind(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISSOCK(m)) return "a socket";
    return "a device or other file";
}

// Whether the two fds MAKEFLAGS names are make's pipe as a '+' rule passes
// it; if not, why (the text) and which fd (`bad`).
static bool is_make_pipe(const Report& report, const Jobserver& j, JobserverText& why, int& bad, const char*& what) {
    struct stat st[2] {};
    const int fds[2] = {j.read_fd, j.write_fd};
    for (int i = 0; i < 2; ++i) {
        const int fd = bad = fds[i];
        if (fd <= 2) return why = JobserverText::Stdio, false;
        const int fdflags = ::fcntl(fd, F_GETFD);
        if (fdflags < 0 || ::fstat(fd, &st[i]) != 0) return why = JobserverText::NotOpen, false;
        // The report's own fd (or its copy above 2), or another way to its file.
        if (report.enabled() && (fd == report.named() || fd == report.fd() || reaches_report(report.fd(), fd)))
            return why = JobserverText::Report, false;
        // Exec closed every close-on-exec fd of dsh-confine's caller: one that
        // is close-on-exec now was opened here, on a number the caller left free.
        if (fdflags & FD_CLOEXEC) return why = JobserverText::NotInherited, false;
        if (!S_ISFIFO(st[i].st_mode)) return what = fd_kind(st[i].st_mode), why = JobserverText::NotPipe, false;
        const int acc = ::fcntl(fd, F_GETFL) & O_ACCMODE;
        if (acc != O_RDWR && acc != (i == 0 ? O_RDONLY : O_WRONLY))
            return what = i == 0 ? "reading" : "writing", why = JobserverText::WrongEnd, false;
    }
    if (st[0].st_dev != st[1].st_dev || st[0].st_ino != st[1].st_ino)
        return bad = j.read_fd, why = JobserverText::NotOnePipe, false;
    return true;
}
#endif

// make's jobserver (issue 42): the two fds the caller's MAKEFLAGS names join
// the kept fds when they are what make passes a recursive rule, the two ends
// of one pipe (or FIFO), and only then. MAKEFLAGS is whatever the caller's
// environment says, so the fds are checked as they are, never trusted by
// name: a pipe that loops back to itself carries job tokens and reaches no
// file, while a file opened for writing, a directory or a socket would give
// the command more than its mode does. Never a refusal: an fd not kept
// leaves the command's make at -j1, and the record says why.
static void keep_jobserver(const Report& report, const Plan& p, Policy& policy) {
    Jobserver& j = policy.jobserver;
    if (j.auth == Jobserver::Auth::Fifo) j.why_not = jobserver_text(JobserverText::Fifo);
    if (j.auth != Jobserver::Auth::Fds) return;
    // The fds serve the command's make only if its MAKEFLAGS still names them.
    if (p.env) {
        const char* m = env_lookup(*p.env, "MAKEFLAGS");
        const Jobserver cmd = parse_jobserver(m ? m : "");
        if (cmd.auth != j.auth || cmd.read_fd != j.read_fd || cmd.write_fd != j.write_fd)
            return void(j.why_not = jobserver_text(JobserverText::EnvChanged));
    }
#if !defined(_WIN32)
    JobserverText why{};
    int bad = -1;
    const char* what = "";
    if (!is_make_pipe(report, j, why, bad, what))
        return void(j.why_not = jobserver_text(why, bad, j.write_fd, what));
    // Through the --keep-fd path from here on: every runner keeps what keep_fds lists.
    for (int fd : {j.read_fd, j.write_fd})
        if (std::find(policy.keep_fds.begin(), policy.keep_fds.end(), fd) == policy.keep_fds.end())
            policy.keep_fds.push_back(fd);
    j.kept = true;
#else
    (void)report;
    j.why_not = jobserver_text(JobserverText::NoFdPassing);
#endif
}

// --report-file (issue 42): made new, 0600, by this process, before anything
// runs. O_CREAT|O_EXCL never opens what is there (a file, a link, dangling
// or not, a FIFO that would block the open): a path that exists is refused.
Outcome create_report_file(const std::string& path, int& fd) {
#if defined(_WIN32)
    fd = ::_open(path.c_str(), _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT, _S_IREAD | _S_IWRITE);
#else
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
#endif
    if (fd < 0)
        return fail(Err::ReportFd, errno == EEXIST ? report_file_text(ReportFileText::Exists, path)
                                                   : report_file_text(ReportFileText::CannotCreate, path,
                                                                      std::strerror(errno)));
#if !defined(_WIN32)
    // Above the standard fds: a caller that closed one gets no report there.
    if (fd <= 2) {
        const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
        ::close(fd);
        fd = high;
        if (fd < 0)
            return fail(Err::ReportFd, report_file_text(ReportFileText::CannotCreate, path, std::strerror(errno)));
    }
#endif
    return Outcome::success();
}

#if !defined(_WIN32)
// A report fd above 2 that is a file by name (3>/tmp/r.json; an attack pass
// of session 25): the command opens it by that name (or another, for a file
// with more links) and rewrites it. A pipe, a stream socket, a terminal or a
// deleted file has no name the command could open. A datagram socket carries
// each record as one message to a named receiver that the command can send
// to as well, filling its queue until the rest of the report is dropped.
[[gnu::cold]] static Outcome check_report_fd(const Policy& policy, const Report& report) {
    struct stat st {};
    if (::fstat(report.fd(), &st) != 0) return Outcome::success();
    const std::string named = std::to_string(report.named());
    int type = 0;
    socklen_t len = sizeof type;
    if (S_ISSOCK(st.st_mode) && ::getsockopt(report.fd(), SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_DGRAM)
        return fail(Err::ReportFd, report_file_text(ReportFileText::FdDatagram, named));
    if (!(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)) || st.st_nlink == 0) return Outcome::success();
    char link[64], path[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", report.fd());
    const ssize_t n = ::readlink(link, path, sizeof path - 1);
    if (n <= 0 || path[0] != '/') return Outcome::success();
    path[n] = '\0';
    if (S_ISREG(st.st_mode) && st.st_nlink > 1)
        return fail(Err::ReportFd, report_file_text(ReportFileText::FdLinked, named, path));
    const CheckAnswer a = check_write(policy, path, current_env().cwd);
    if (a.allowed && a.persists)
        return fail(Err::ReportFd, report_file_text(ReportFileText::FdInWritable, named, path,
                                                    a.matched.empty() ? a.canonical : a.matched));
    return Outcome::success();
}
#endif

// Chooses the runner and fills the plan: the report's record, the in-process
// layers and what to exec. Runs nothing. Shared by run, explain and
// supervise, so that what is shown is what runs.
Outcome prepare_plan(const Request& req, const Report& report, Plan& p) {
    Confinement& c = p.c;
    const Policy& policy = c.policy;
    for (int fd : policy.keep_fds) {
        if (fd <= 2) return failf(Err::Usage, "--keep-fd {}: stdio is always passed through", fd);
        // The command could write forged records into the caller's report.
        if (fd == req.report_fd) return fail(Err::Usage, report_text(ReportText::KeepFdIsReport, fd));
        // Said here, before any runner: found later it reads as a sandbox failure.
        if (!fd_is_open(fd))
            return failf(Err::Usage, "--keep-fd {}: fd {} is not open; open it before calling dsh-confine", fd, fd);
#if !defined(_WIN32)
        // Another number for the report's open file (a dup, the same pipe):
        // the same forgery by another route, so the files are compared.
        if (report.enabled() && reaches_report(report.fd(), fd))
            return fail(Err::Usage, report_text(ReportText::KeepFdSharesReport, fd, report.named()));
#endif
    }
    // A report above 2 is one the command must not hold; one of its standard
    // fds that reaches the same file is the same hole. --report-fd 1 or 2 is
    // the caller sharing that stream on purpose (the nonce tells the lines apart).
#if !defined(_WIN32)
    if (report.enabled() && report.named() > 2)
        for (int fd = 0; fd <= 2; ++fd)
            if (fd_is_open(fd) && reaches_report(report.fd(), fd))
                return fail(Err::Usage, report_text(ReportText::StdFdSharesReport, fd, report.named()));
#endif
#if !defined(_WIN32)
    // A directory the command inherits (its stdin, a kept fd) is a handle on
    // the host's mount outside every read-only view: through
    // /proc/self/fd/N/.. the command could chmod (set-uid bits included) and
    // touch any file of that file system, which no mount or Landlock rule
    // governs. Confined runs take none.
    if (policy.mode != Mode::DangerFullAccess) {
        std::vector<int> given = {0, 1, 2};
        given.insert(given.end(), policy.keep_fds.begin(), policy.keep_fds.end());
        for (int fd : given) {
            struct stat st {};
            if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
            return fail(Err::Usage, directory_fd_text(fd));
        }
    }
#endif
    // A report file the command could rewrite would carry whatever it
    // likes: refused where the policy lets the command write it (a private
    // /tmp is not the host's). Unconfined, nothing is kept from the command.
    if (req.report_file && policy.mode != Mode::DangerFullAccess) {
        const CheckAnswer a = check_write(policy, *req.report_file, current_env().cwd);
        if (a.allowed && a.persists)
            return fail(Err::ReportFd, report_file_text(ReportFileText::InWritable, *req.report_file,
                                                        a.matched.empty() ? a.canonical : a.matched));
    }
#if !defined(_WIN32)
    if (report.enabled() && report.named() > 2 && policy.mode != Mode::DangerFullAccess)
        if (auto o = check_report_fd(policy, report); !o) return o;
#endif
    // The command is looked up on its own final PATH, as execvp in it would.
    if (auto o = apply_environment(req, p); !o) return o;
    keep_jobserver(report, p, c.policy);
    const char* path = p.env ? env_lookup(*p.env, "PATH") : std::getenv("PATH");
    if (auto o = resolve_command(req.argv.front(), path, c.command_path); !o) return o;
    c.argv = req.argv;
    p.exec_path = c.command_path;
    p.exec_argv = req.argv;
    if (auto o = plan_limits(req, p); !o) return o;
    if (policy.mode == Mode::DangerFullAccess) {
        c.runner = RunnerKind::None;
        return Outcome::success();
    }
#if !defined(_WIN32)
    terminal::set_relayed(!req.no_pty);
#endif
    if (auto o = chain::choose(p.config.runner.value_or(RunnerKind::Auto), runner_env(p.config, report.fd()), p); !o)
        return o;
    name_kept_sockets(c);
    return Outcome::success();
}

// Resolution (config, session, escalation with approval) -> the plan.
// `ask` is No for explain: every check runs, nobody is asked, nothing runs.
// `late_walk`: a run, whose carve-outs may be walked after the spawn (Plan::late_walk).
Outcome resolve_and_prepare(const Request& req, const Report& report, AskApprover ask, Resolution& res, Plan& p,
                            bool late_walk = false) {
    PolicyRequest pr = req.policy_request();
    pr.late_walk = late_walk;
    pr.create_missing = late_walk;  // a run: a missing --writable below home is made
    if (auto o = resolve(pr, current_env(), ask, res); !o) return o;
    p.c.policy = res.policy;
    p.config = res.settings;
    p.late_walk = std::move(res.late_walk);
    return prepare_plan(req, report, p);
}

// A run that did not go ahead leaves none of the --writable directories it
// made (issue 42): supervise keeps them once the command has started; an
// exec that returns did not start it.
[[gnu::cold]] static int not_run(int status) {
#if !defined(_WIN32)
    roots::undo_made();
#endif
    return status;
}

int run_command(const Request& req, const Report& report) {
    Plan l;
    if (req.markers && !req.supervise)
        return report_failure(report, fail(Err::Usage, "--markers needs --supervise: in exec mode nothing is left to "
                                               "write them once the command ends"));
    Resolution res;
    if (auto o = resolve_and_prepare(req, report, AskApprover::Yes, res, l, true); !o)
        return not_run(report_failure(report, o));
    // Escalation is advertised when an approver is composed (flag or config).
    SuperviseOptions opts;
    opts.pty = !req.no_pty;
    chain::settle_descendants(l, req.supervise || needs_parent(l, opts.pty));
    if (req.supervise) {
        opts.markers = req.markers;
        opts.escalation_advertised = res.settings.approver.has_value();
        return not_run(supervise(l, report, opts));
    }
    // Exec mode stays as the parent only where it must: a runner program
    // that forwards no signal, or a terminal to keep from the command.
    if (needs_parent(l, opts.pty)) {
        opts.forwarder = true;
        return not_run(supervise(l, report, opts));
    }
    return not_run(report_failure(report, enter_and_exec(l, report)));
}

int explain_command(const Request& req, const Report& report) {
    if (req.context) {
        // The standing policy a model should be told about: an --escalate
        // request is per call and is not part of it.
        Request standing = req;
        standing.escalate.reset();
        standing.justification.reset();
        Resolution res;
        if (auto o = resolve(standing.policy_request(), current_env(), AskApprover::No, res); !o) return report_failure(report, o);
        std::string text = policy_context_text(res.policy) + "\n";
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    if (req.platform && *req.platform != host_platform()) {
        // Another system's plan, from the pure builders: shown, never run.
        Resolution res;
        const ResolveEnv env = current_env();
        if (auto o = resolve(req.policy_request(), env, AskApprover::No, res); !o) return report_failure(report, o);
        std::string text;
        const ForeignPlanInput in{res.policy, req.argv, env.tmpdir ? *env.tmpdir : "/tmp", res.session_path.has_value()};
        if (auto o = foreign_plan_text(*req.platform, in, text); !o) return report_failure(report, o);
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    Plan l;
    Resolution res;
    if (auto o = resolve_and_prepare(req, report, AskApprover::No, res, l); !o) return report_failure(report, o);
    chain::settle_descendants(l, req.supervise || needs_parent(l, !req.no_pty));
    std::string text = req.json ? plan_json(res, l).dump() + "\n" : plan_text(res, l);
    std::fputs(text.c_str(), stdout);
    return 0;
}

int check_command(const Request& req, const Report& report) {
    Resolution res;
    const ResolveEnv env = current_env();
    if (auto o = resolve(req.policy_request(), env, AskApprover::Yes, res); !o) return report_failure(report, o);
    const CheckAnswer a = req.check_write ? check_write(res.policy, *req.check_write, env.cwd)
                                          : check_read(res.policy, *req.check_read, env.cwd);
    std::string text = req.json ? check_json(res, a).dump() + "\n" : check_text(res, a);
    std::fputs(text.c_str(), stdout);
    return a.allowed ? 0 : 1;
}

// `session show FILE` (issue 42): the state a run with --session FILE
// would take, one fact a line; the log is read as a run reads it (the same
// checks, the same errors).
int session_show(const Request& req) {
    SessionState st;
    if (Outcome o = read_session(req.session_file, st); !o) {
        print_error(o.text());
        return o.exit_status();
    }
    std::string out;
    out += fmt::format("mode: {}\n", st.mode ? fmt::format("{} (line {})", to_string(*st.mode), st.mode_line)
                                             : std::string("none (no sandbox/mode event: a run takes its own mode)"));
    std::string net = "none (a run takes the config's or --net)";
    if (!st.net_allow.empty()) {
        net = "allow=";
        for (size_t i = 0; i < st.net_allow.size(); ++i) net += (i ? "," : "") + st.net_allow[i];
        for (const auto& d : st.net_deny) net += " deny " + d;
    } else if (st.network) {
        net = std::string(to_string(*st.network));
    }
    out += "network: " + net + "\n";
    if (!st.source.empty()) out += "source: " + st.source + "\n";
    if (st.cwd) out += fmt::format("workspace: {} (line {})\n", *st.cwd, st.cwd_line);
    out += fmt::format("events: {} line{}{}\n", st.lines, st.lines == 1 ? "" : "s",
                       st.max_seq ? fmt::format(", last seq {}", *st.max_seq) : std::string());
    out += fmt::format("sealed: {}\n", st.sealed ? "yes (no confined run could have written it)"
                                                 : "no (a danger-full-access event in it is not taken)");
    std::fputs(out.c_str(), stdout);
    return 0;
}

int session_command(const Request& req) {
    auto m = parse_mode(req.session_mode);
    std::optional<Network> net;
    std::vector<std::string> allow, deny;
    if (req.net && req.net->rfind("allow=", 0) == 0) {
        // The allow-list (issue 19): its entries, checked, kept as given.
        std::vector<net::Rule> a, d;
        Outcome u = net::parse_rules(std::string_view(*req.net).substr(6), a);
        for (const auto& x : req.net_deny)
            if (u) u = net::parse_rules(x, d);
        if (!u) {
            print_error(u.text());
            return u.exit_status();
        }
        for (auto& r : a) allow.push_back(std::move(r.text));
        for (auto& r : d) deny.push_back(std::move(r.text));
        net = Network::Loopback;
    } else if (req.net) {
        net = parse_network(*req.net);
        if (!net) {
            const Outcome u = fail(Err::Usage, usage_text(UsageText::UnknownNetwork, *req.net));
            print_error(u.text());
            return u.exit_status();
        }
    }
    Outcome o = m ? append_mode_event(req.session_file, *m, net, allow, deny)
                  : fail(Err::SessionInvalid, "sandbox/mode carries unknown mode " +
                                                  json_line(nlohmann::json(req.session_mode)));
    if (!o) print_error(o.text());
    return o.exit_status();
}

}  // namespace

int run(int argc, const char* const* argv) {
    // A runner's own entry inside its sandbox (bwrap's stage), if this host has one.
    if (auto rc = run_internal_entry(argc, argv)) return *rc;
    Request req;
    if (auto o = parse_cli(argc, argv, req); !o) {
        print_error(o.text());
        return o.exit_status();
    }
    switch (req.action) {
        case Action::Help:
        case Action::Version:
            std::fputs(req.text.c_str(), stdout);
            return 0;
        case Action::Usage:
            std::fputs(req.text.c_str(), stderr);
            return info(Err::Usage).exit_status;
        case Action::SessionSetMode: return session_command(req);
        case Action::SessionShow: return session_show(req);
        case Action::Run:
        case Action::Explain:
        case Action::Check: break;
        case Action::Probe: {
            // The same settings (runner paths, custom runner, probe bound) a run would use.
            Config settings;
            if (auto o = runner_settings(req.policy_request(), settings); !o) {
                print_error(o.text());
                return o.exit_status();
            }
            RunnerEnv env = runner_env(settings, -1);
            env.use_probe_cache = false;
            return probe_command(env, req.json);
        }
        case Action::SelfTest: return selftest::run(req);
    }
    if (req.report_file) {
        if (req.report_fd >= 0) {
            print_error(report_file_text(ReportFileText::WithReportFd));
            return info(Err::Usage).exit_status;
        }
        if (auto o = create_report_file(*req.report_file, req.report_fd); !o) {
            print_error(o.text());
            return o.exit_status();
        }
    }
    // The run's nonce, on every record of the report (issue 38).
    if (req.report_fd >= 0) begin_run();
    Report report;
    if (auto o = report.open(req.report_fd); !o) {
        print_error(o.text());
        return o.exit_status();
    }
    switch (req.action) {
        case Action::Explain: return explain_command(req, report);
        case Action::Check: return check_command(req, report);
        case Action::Run:
        case Action::Probe:
        case Action::SessionSetMode:
        case Action::SessionShow:
        case Action::SelfTest:
        case Action::Help:
        case Action::Version:
        case Action::Usage: break;
    }
    return run_command(req, report);
}

}  // namespace dsh
