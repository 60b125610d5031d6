#include "cli.hpp"
#include "bytes.hpp"
#include "caches.hpp"
#include "environment.hpp"

#include <cstring>
#include <string_view>

#include <CLI/CLI.hpp>

#include "version.hpp"

#if !defined(_WIN32)
#include <unistd.h>  // environ, declared with C linkage (a unity build puts unistd.h after us)
#endif
extern char** environ;

namespace dsh {

namespace {

// Where a word is read: before any subcommand (the run itself), or after one.
enum class Ctx { Top, Probe, Explain, Check, Session, SetMode, SelfTest, Show };

constexpr unsigned bit(Ctx c) { return 1u << static_cast<unsigned>(c); }

// The options of the run are also read after probe, explain, check and
// self-test, as they always were (`dsh-confine check --write P --mode M`):
// options given before a subcommand's name are read before its name is
// known, so they have to be the same set.
constexpr unsigned kGlobal = bit(Ctx::Top) | bit(Ctx::Probe) | bit(Ctx::Explain) | bit(Ctx::Check) |
                             bit(Ctx::SelfTest);
constexpr unsigned kEverywhere = kGlobal | bit(Ctx::Session) | bit(Ctx::SetMode) | bit(Ctx::Show);
// Whose --help lists the run's options: the ones that read the policy.
constexpr unsigned kPolicyHelp = bit(Ctx::Top) | bit(Ctx::Explain) | bit(Ctx::Check);

enum class Opt {
    Help, Version, Mode, Root, Runner, Writable, PrivateTmp, Config, Session, ProbeTimeout, ReportFd, ReportFile, KeepFd,
    Supervise,
    NoPty, Markers, DryRun, Escalate, Justification, Approver, Clearenv, Setenv, Unsetenv, ScrubSecrets, Json, Context,
    Platform, Write, Read, Binary, Attempt,
    Net, NetDeny, EscalateNet, KeepDescendants, Protect, Unprotect, DenyRead, HideSecrets,
    Cache, Agent, Timeout, KillAfter, MaxProcs, Memory, CpuTime, FileSize, Nofile, Limits, AllowCore, AllowUserns,
};

struct OptionSpec {
    Opt id;
    std::string_view name;        // "--mode"
    std::string_view short_name;  // "-h", or empty
    std::string_view value;       // the value's name in --help; empty: a flag, which takes none
    bool repeats;                 // may be given more than once (each adds one value)
    unsigned accepted;            // the contexts that read it
    unsigned shown;               // the contexts whose --help lists it (0: hidden)
    std::string_view help;
};

// The one table of options: the splitter reads it to know where our options
// end (which ones take a value), and --help is printed from it.
constexpr OptionSpec kOptions[] = {
    {Opt::Help, "--help", "-h", "", false, kEverywhere, kEverywhere, "print this help and exit"},
    {Opt::Version, "--version", "-V", "", false, kGlobal, bit(Ctx::Top), "print the version and exit"},
    {Opt::Mode, "--mode", "", "MODE", false, kGlobal, kPolicyHelp,
     "read-only (default), workspace-write or danger-full-access"},
    {Opt::Root, "--root", "", "DIR", false, kGlobal, kPolicyHelp, "workspace root (default: the current directory)"},
    {Opt::Runner, "--runner", "", "RUNNER", false, kGlobal, kPolicyHelp | bit(Ctx::Probe) | bit(Ctx::SelfTest),
     "auto (default), bwrap, landlock, seatbelt, windows-acl or custom"},
    {Opt::Net, "--net", "", "NET", false, kGlobal | bit(Ctx::SetMode), kPolicyHelp | bit(Ctx::SetMode),
     "network: host (default), loopback, off, or allow=LIST (hosts, *.domains, IPs, CIDRs, each :PORT optional) "
     "(set-mode: the session's network)"},
    {Opt::NetDeny, "--net-deny", "", "LIST", true, kGlobal, kPolicyHelp,
     "refuse these destinations even where --net allow= lists them (repeatable)"},
    {Opt::Writable, "--writable", "", "PATH", true, kGlobal, kPolicyHelp, "another writable path (repeatable)"},
    {Opt::Cache, "--cache", "", "TOOLS", true, kGlobal, kPolicyHelp,
     "make these tools' caches writable: npm,pip,cargo,go,yarn,maven,ccache (repeatable)"},
    {Opt::Agent, "--agent", "", "", false, kGlobal, kPolicyHelp,
     "for an AI agent: --mode workspace-write --net off --hide-secrets --scrub-secrets"},
    {Opt::Protect, "--protect", "", "PATH", true, kGlobal, kPolicyHelp,
     "keep this path read-only inside the writable roots (repeatable)"},
    {Opt::Unprotect, "--unprotect", "", "PATH", true, kGlobal, kPolicyHelp,
     "drop this path from the default protected set (repeatable; reported)"},
    {Opt::DenyRead, "--deny-read", "", "PATH", true, kGlobal, kPolicyHelp,
     "hide this path from the command, in every mode (repeatable)"},
    {Opt::HideSecrets, "--hide-secrets", "", "", false, kGlobal, kPolicyHelp,
     "hide ~/.ssh private keys, cloud and registry credentials and the ssh agent socket"},
    {Opt::AllowUserns, "--allow-userns", "", "", false, kGlobal, kPolicyHelp,
     "let the command make user namespaces (refused by default)"},
    {Opt::PrivateTmp, "--private-tmp", "", "", false, kGlobal, kPolicyHelp,
     "give the command an empty /tmp of its own, discarded at exit"},
    {Opt::KeepDescendants, "--keep-descendants", "", "", false, kGlobal, kPolicyHelp,
     "leave the command's background processes running when it exits (default: killed)"},
    {Opt::Config, "--config", "", "FILE", false, kGlobal, kPolicyHelp | bit(Ctx::Probe) | bit(Ctx::SelfTest),
     "config file (JSON)"},
    {Opt::Session, "--session", "", "FILE", false, kGlobal, kPolicyHelp,
     "session log whose last sandbox/mode event sets the mode"},
    {Opt::ProbeTimeout, "--probe-timeout", "", "MS", false, kGlobal, kPolicyHelp | bit(Ctx::Probe),
     "bound on each runner probe in ms (default 5000)"},
    {Opt::ReportFd, "--report-fd", "", "FD", false, kGlobal, kPolicyHelp, "write the JSON-lines report to this fd"},
    {Opt::ReportFile, "--report-file", "", "PATH", false, kGlobal, kPolicyHelp,
     "write the JSON-lines report to this new file (created, never overwritten)"},
    {Opt::KeepFd, "--keep-fd", "", "FD", true, kGlobal, kPolicyHelp,
     "pass this fd through to the command (repeatable)"},
    {Opt::Supervise, "--supervise", "", "", false, kGlobal, kPolicyHelp, "stay as the parent and report the outcome"},
    {Opt::NoPty, "--no-pty", "", "", false, kGlobal, kPolicyHelp,
     "give the command this terminal, not a pty of its own (gives up the terminal protections)"},
    {Opt::Timeout, "--timeout", "", "DURATION", false, kGlobal, kPolicyHelp,
     "kill the command and everything it started after DURATION (90s, 5m); exit status 124"},
    {Opt::KillAfter, "--kill-after", "", "DURATION", false, kGlobal, kPolicyHelp,
     "after the timeout's SIGTERM, SIGKILL this much later (default 5s)"},
    {Opt::MaxProcs, "--max-procs", "", "N", false, kGlobal, kPolicyHelp, "limit the number of processes"},
    {Opt::Memory, "--memory", "", "SIZE", false, kGlobal, kPolicyHelp, "limit memory (512M, 2G)"},
    {Opt::CpuTime, "--cpu-time", "", "DURATION", false, kGlobal, kPolicyHelp, "limit CPU time (per process)"},
    {Opt::FileSize, "--file-size", "", "SIZE", false, kGlobal, kPolicyHelp,
     "limit the size of each file the command writes"},
    {Opt::Nofile, "--nofile", "", "N", false, kGlobal, kPolicyHelp, "limit open files per process"},
    {Opt::Limits, "--limits", "", "MODE", false, kGlobal, kPolicyHelp,
     "best-effort (default) or required: refuse to run when a limit cannot be enforced as asked"},
    {Opt::AllowCore, "--allow-core", "", "", false, kGlobal, kPolicyHelp,
     "let the command dump core (off by default)"},
    {Opt::Markers, "--markers", "", "", false, kGlobal, kPolicyHelp,
     "append the sandbox marker lines to stderr (with --supervise)"},
    {Opt::DryRun, "--dry-run", "", "", false, kGlobal, kPolicyHelp, "print the plan, as explain does, and run nothing"},
    {Opt::Escalate, "--escalate", "", "MODE", false, kGlobal, kPolicyHelp,
     "ask for a strictly wider mode for this call"},
    {Opt::EscalateNet, "--escalate-net", "", "NET", false, kGlobal, kPolicyHelp,
     "ask for a strictly wider network for this call (off < loopback < host)"},
    {Opt::Justification, "--justification", "", "TEXT", false, kGlobal, kPolicyHelp,
     "why the escalation is needed"},
    {Opt::Approver, "--approver", "", "WHO", false, kGlobal, kPolicyHelp,
     "who approves an escalation: tty or a command"},
    {Opt::Clearenv, "--clearenv", "", "", false, kGlobal, kPolicyHelp, "start the command with an empty environment"},
    {Opt::Setenv, "--setenv", "", "NAME=VALUE", true, kGlobal, kPolicyHelp,
     "set an environment variable (repeatable)"},
    {Opt::Unsetenv, "--unsetenv", "", "NAME", true, kGlobal, kPolicyHelp,
     "remove an environment variable (repeatable)"},
    {Opt::ScrubSecrets, "--scrub-secrets", "", "", false, kGlobal, kPolicyHelp,
     "drop variables whose names look like credentials"},
    {Opt::Json, "--json", "", "", false, bit(Ctx::Probe) | bit(Ctx::Explain) | bit(Ctx::Check) | bit(Ctx::SelfTest),
     bit(Ctx::Probe) | bit(Ctx::Explain) | bit(Ctx::Check) | bit(Ctx::SelfTest), "print JSON"},
    {Opt::Context, "--context", "", "", false, bit(Ctx::Explain), bit(Ctx::Explain),
     "print the one-line policy text for a model"},
    {Opt::Platform, "--platform", "", "SYSTEM", false, bit(Ctx::Explain), bit(Ctx::Explain),
     "render the plan for linux, darwin or windows"},
    {Opt::Write, "--write", "", "PATH", false, bit(Ctx::Check), bit(Ctx::Check),
     "would a write to PATH happen? (this or --read)"},
    {Opt::Read, "--read", "", "PATH", false, bit(Ctx::Check), bit(Ctx::Check),
     "would a read of PATH happen? (this or --write)"},
    {Opt::Binary, "--binary", "", "PROGRAM", false, bit(Ctx::SelfTest), bit(Ctx::SelfTest),
     "test this dsh-confine-compatible program instead of this one"},
    // The payload the self-test's checks run confined (one escape attempt,
    // reported on stdout); hidden because it is of no use on its own.
    {Opt::Attempt, "--attempt", "", "NAME", false, bit(Ctx::SelfTest), 0, ""},
};

struct SubcommandSpec {
    Ctx ctx;
    std::string_view name;  // as typed after "dsh-confine" ("session set-mode" for the nested one)
    std::string_view help;
    std::string_view usage;
};

constexpr SubcommandSpec kSubcommands[] = {
    {Ctx::Probe, "probe", "which runners work here, and why not", "dsh-confine probe [OPTIONS]"},
    {Ctx::Explain, "explain", "print the plan for a command and run nothing",
     "dsh-confine explain [OPTIONS] -- COMMAND [ARG...]\n       dsh-confine explain --context [OPTIONS]"},
    {Ctx::Check, "check", "would the policy let a write to (or a read of) PATH happen?",
     "dsh-confine check --write PATH [OPTIONS] | check --read PATH [OPTIONS]"},
    {Ctx::Session, "session", "the session mode log",
     "dsh-confine session set-mode FILE MODE\n       dsh-confine session show FILE"},
    {Ctx::SelfTest, "self-test", "run the conformance checks under each usable runner",
     "dsh-confine self-test [OPTIONS]"},
};
constexpr SubcommandSpec kSetMode{Ctx::SetMode, "session set-mode", "append a sandbox/mode event",
                                  "dsh-confine session set-mode FILE MODE"};

constexpr SubcommandSpec kShow{Ctx::Show, "session show", "print what the session log sets",
                               "dsh-confine session show FILE"};

const SubcommandSpec& spec_of(Ctx c) {
    for (const auto& s : kSubcommands)
        if (s.ctx == c) return s;
    if (c == Ctx::Show) return kShow;
    return kSetMode;  // Top has no spec of its own; help() handles it first
}

std::string help_command(Ctx c) {
    return c == Ctx::Top ? std::string("dsh-confine") : "dsh-confine " + std::string(spec_of(c).name);
}

const OptionSpec* find_option(std::string_view name) {
    for (const auto& o : kOptions)
        if (o.name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
    return nullptr;
}

void add_row(std::string& out, std::string_view first, std::string_view desc) {
    constexpr size_t kColumn = 30;
    out += "  ";
    out += first;
    if (first.size() + 2 < kColumn) out.append(kColumn - 2 - first.size(), ' ');
    else out += "  ";
    out += desc;
    out += '\n';
}

std::string help(Ctx c) {
    std::string out;
    if (c == Ctx::Top) {
        out += "Run a command, and everything it spawns, under a file-write policy.\n";
        out += "Usage: dsh-confine [OPTIONS] -- COMMAND [ARG...]\n";
        out += "       dsh-confine [OPTIONS] SUBCOMMAND ...\n\n";
        out += "The options end at the first word that is not one of them: that word is the command,\n"
               "and nothing after it is read as an option of dsh-confine. Put -- before the command\n"
               "when it starts with - or is named like a subcommand.\n";
    } else {
        const SubcommandSpec& s = spec_of(c);
        out += fmt::format("{}\nUsage: {}\n", s.help, s.usage);
        if (c == Ctx::Explain)
            out += "\nThe command after -- is shown, never run; --context needs none.\n";
    }
    if (c == Ctx::SetMode) {
        out += "\nArguments:\n";
        add_row(out, "FILE", "the session log (created if missing)");
        add_row(out, "MODE", "read-only, workspace-write or danger-full-access");
    }
    if (c == Ctx::Show) {
        out += "\nArguments:\n";
        add_row(out, "FILE", "the session log");
    }
    out += "\nOptions:\n";
    for (const auto& o : kOptions) {
        if (!(o.shown & bit(c))) continue;
        std::string first = o.short_name.empty() ? std::string(o.name) : fmt::format("{},{}", o.short_name, o.name);
        if (!o.value.empty()) first += " " + std::string(o.value);
        add_row(out, first, o.help);
    }
    if (c == Ctx::Top || c == Ctx::Session) {
        out += "\nSubcommands:\n";
        if (c == Ctx::Top)
            for (const auto& s : kSubcommands) add_row(out, s.name, s.help);
        else
            add_row(out, "set-mode", kSetMode.help), add_row(out, "show", kShow.help);
    }
    return out;
}

bool set_once(std::optional<std::string>& field, std::string_view v) {
    if (field) return false;
    field = std::string(v);
    return true;
}

bool flag_once(bool& field) {
    if (field) return false;
    field = true;
    return true;
}

// Stores one option's value. The value's own meaning (a mode, a runner, a
// path) is checked where it is used, so that those errors reach the report.
Outcome apply(const OptionSpec& o, std::string_view v, Request& r) {
    const auto twice = [&] { return fail(Err::Usage, usage_text(UsageText::GivenTwice, o.name)); };
    switch (o.id) {
        case Opt::Help:
        case Opt::Version: break;  // handled by the caller
        case Opt::Mode: return set_once(r.mode, v) ? Outcome::success() : twice();
        case Opt::Root: return set_once(r.root, v) ? Outcome::success() : twice();
        case Opt::Runner: return set_once(r.runner, v) ? Outcome::success() : twice();
        case Opt::Net: return set_once(r.net, v) ? Outcome::success() : twice();
        case Opt::Writable: r.writable.emplace_back(v); break;
        case Opt::NetDeny: r.net_deny.emplace_back(v); break;
        case Opt::Cache: return caches::parse_list(v, r.cache);
        case Opt::Agent: return flag_once(r.agent) ? Outcome::success() : twice();

        case Opt::Protect: r.protect.emplace_back(v); break;
        case Opt::Unprotect: r.unprotect.emplace_back(v); break;
        case Opt::DenyRead: r.deny_read.emplace_back(v); break;
        case Opt::HideSecrets: return flag_once(r.hide_secrets) ? Outcome::success() : twice();
        case Opt::PrivateTmp: return flag_once(r.private_tmp) ? Outcome::success() : twice();
        case Opt::KeepDescendants: return flag_once(r.keep_descendants) ? Outcome::success() : twice();
        case Opt::AllowUserns: return flag_once(r.allow_userns) ? Outcome::success() : twice();
        case Opt::Config: return set_once(r.config, v) ? Outcome::success() : twice();
        case Opt::Session: return set_once(r.session, v) ? Outcome::success() : twice();
        case Opt::ProbeTimeout: {
            int ms = 0;
            if (!parse_fd(v, ms) || ms == 0)
                return fail(Err::Usage, usage_text(UsageText::NotMilliseconds, o.name, v));
            if (r.probe_timeout_ms) return twice();
            r.probe_timeout_ms = ms;
            break;
        }
        case Opt::ReportFd: {
            int fd = 0;
            if (!parse_fd(v, fd)) return fail(Err::Usage, usage_text(UsageText::NotAnFd, o.name, v));
            if (r.report_fd != -1) return twice();
            r.report_fd = fd;
            break;
        }
        case Opt::ReportFile: return set_once(r.report_file, v) ? Outcome::success() : twice();
        case Opt::KeepFd: {
            int fd = 0;
            if (!parse_fd(v, fd)) return fail(Err::Usage, usage_text(UsageText::NotAnFd, o.name, v));
            r.keep_fds.push_back(fd);
            break;
        }
        case Opt::Supervise: return flag_once(r.supervise) ? Outcome::success() : twice();
        case Opt::NoPty: return flag_once(r.no_pty) ? Outcome::success() : twice();
        case Opt::Markers: return flag_once(r.markers) ? Outcome::success() : twice();
        case Opt::DryRun: return flag_once(r.dry_run) ? Outcome::success() : twice();
        case Opt::Escalate: return set_once(r.escalate, v) ? Outcome::success() : twice();
        case Opt::EscalateNet: return set_once(r.escalate_net, v) ? Outcome::success() : twice();
        case Opt::Justification: return set_once(r.justification, v) ? Outcome::success() : twice();
        case Opt::Approver: return set_once(r.approver, v) ? Outcome::success() : twice();
        case Opt::Clearenv: return flag_once(r.clearenv) ? Outcome::success() : twice();
        case Opt::Setenv: {
            // The env(1) convention. A name cannot hold '=', so the first one
            // splits; an empty name is refused where names are checked.
            const size_t eq = v.find('=');
            if (eq == std::string_view::npos) return fail(Err::Usage, usage_text(UsageText::SetenvForm, v));
            r.setenv.emplace_back(std::string(v.substr(0, eq)), std::string(v.substr(eq + 1)));
            break;
        }
        case Opt::Unsetenv: r.unsetenv.emplace_back(v); break;
        case Opt::ScrubSecrets: return flag_once(r.scrub_secrets) ? Outcome::success() : twice();
        case Opt::Json: return flag_once(r.json) ? Outcome::success() : twice();
        case Opt::Context: return flag_once(r.context) ? Outcome::success() : twice();
        case Opt::Platform: return set_once(r.platform, v) ? Outcome::success() : twice();
        case Opt::Write: return set_once(r.check_write, v) ? Outcome::success() : twice();
        case Opt::Read: return set_once(r.check_read, v) ? Outcome::success() : twice();
        case Opt::Binary: return set_once(r.selftest_binary, v) ? Outcome::success() : twice();
        case Opt::Attempt: return set_once(r.selftest_attempt, v) ? Outcome::success() : twice();
        case Opt::Timeout:
        case Opt::KillAfter:
        case Opt::CpuTime: {
            auto& field = o.id == Opt::Timeout ? r.limits.timeout_ms
                          : o.id == Opt::KillAfter ? r.limits.kill_after_ms : r.limits.cpu_time_ms;
            uint64_t ms = 0;
            if (!limits::parse_duration_ms(v, ms)) return fail(Err::Usage, limit_text(LimitText::NotDuration, o.name, v));
            if (field) return twice();
            field = ms;
            break;
        }
        case Opt::Memory:
        case Opt::FileSize: {
            auto& field = o.id == Opt::Memory ? r.limits.memory : r.limits.file_size;
            uint64_t bytes = 0;
            if (!limits::parse_size(v, bytes)) return fail(Err::Usage, limit_text(LimitText::NotSize, o.name, v));
            if (field) return twice();
            field = bytes;
            break;
        }
        case Opt::MaxProcs:
        case Opt::Nofile: {
            auto& field = o.id == Opt::MaxProcs ? r.limits.max_procs : r.limits.nofile;
            uint64_t n = 0;
            if (!limits::parse_count(v, n)) return fail(Err::Usage, limit_text(LimitText::NotCount, o.name, v));
            if (field) return twice();
            field = n;
            break;
        }
        case Opt::Limits:
            if (v != "required" && v != "best-effort") return fail(Err::Usage, limit_text(LimitText::NotLimitsMode, v));
            if (r.limits.required) return twice();
            r.limits.required = v == "required";
            break;
        case Opt::AllowCore:
            if (r.limits.allow_core) return twice();
            r.limits.allow_core = true;
            break;
    }
    return Outcome::success();
}

// A word that cannot be an option's value: "--" or one of our long options.
// `--writable --mode x` is then "--writable needs a value", not a writable
// path named "--mode" followed by a command named "x".
bool is_our_option_word(std::string_view w) {
    if (w == "--") return true;
    if (w.size() < 3 || w.substr(0, 2) != "--") return false;
    return find_option(w.substr(0, w.find('='))) != nullptr;
}

std::optional<Ctx> subcommand_named(std::string_view w) {
    for (const auto& s : kSubcommands)
        if (s.name == w) return s.ctx;
    return std::nullopt;
}

Action action_of(Ctx c) {
    switch (c) {
        case Ctx::Top: return Action::Run;
        case Ctx::Probe: return Action::Probe;
        case Ctx::Explain: return Action::Explain;
        case Ctx::Check: return Action::Check;
        case Ctx::Session:
        case Ctx::SetMode: return Action::SessionSetMode;
        case Ctx::Show: return Action::SessionShow;
        case Ctx::SelfTest: return Action::SelfTest;
    }
    return Action::Run;
}

}  // namespace

std::vector<OptionName> option_names() {
    std::vector<OptionName> out;
    for (const auto& o : kOptions) out.push_back({o.name, !o.value.empty()});
    return out;
}

namespace {

// Thrown from inside CLI11's parse by our callbacks: our one-line error, or
// help/version (an Outcome that succeeded, with the Request filled). Thrown
// at the word that causes it, so the first problem in argv order wins.
struct Stop {
    Outcome out;
};

void stop_if(Outcome out) {
    if (!out) throw Stop{std::move(out)};
}

// One CLI::App per context, built from kOptions: each option is added to the
// App of every context that accepts it, and stores its value through apply()
// as soon as CLI11 reads it (trigger_on_parse), so errors come in the order
// of the words.
struct Parser {
    CLI::App top{"", "dsh-confine"};
    CLI::App* apps[8] = {};  // indexed by Ctx

    // CLI11 is told only the options the words use (`used`, indexes into
    // kOptions), in the Apps the words enter (`needed`: top, and the
    // subcommand's): the split has already checked every word against the
    // whole table, and CLI11 checks each new name against every option
    // already there, so building all seven Apps in full was most of a
    // trivial launch's instructions (1.4M of 1.7M).
    Parser(Request& r, unsigned needed, const std::vector<bool>& used) {
        top.set_help_flag();  // ours, from kOptions, rendered by help()
        top.allow_extras(false);
        apps[static_cast<unsigned>(Ctx::Top)] = &top;
        for (const auto& s : kSubcommands) apps[static_cast<unsigned>(s.ctx)] = top.add_subcommand(std::string(s.name));
        CLI::App* session = apps[static_cast<unsigned>(Ctx::Session)];
        CLI::App* set_mode = session->add_subcommand("set-mode");
        apps[static_cast<unsigned>(Ctx::SetMode)] = set_mode;
        // Counted by the split (SetModeArgs), so not ->required(): CLI11 would
        // answer a missing one in its own words.
        set_mode->add_option("FILE", r.session_file)->expected(1);
        set_mode->add_option("MODE", r.session_mode)->expected(1);
        CLI::App* show = session->add_subcommand("show");
        apps[static_cast<unsigned>(Ctx::Show)] = show;
        if (needed & bit(Ctx::Show)) show->add_option("FILE", r.session_file)->expected(1);
        for (CLI::App* app : apps) {
            app->allow_extras(false);
            app->set_help_flag();
        }

        for (size_t k = 0; k < std::size(kOptions); ++k) {
            if (!used[k]) continue;
            const OptionSpec& o = kOptions[k];
            const std::string names =
                o.short_name.empty() ? std::string(o.name) : fmt::format("{},{}", o.short_name, o.name);
            for (unsigned c = 0; c < 8; ++c) {
                if (!(o.accepted & needed & (1u << c))) continue;
                const Ctx ctx = static_cast<Ctx>(c);
                CLI::Option* opt = nullptr;
                if (o.value.empty()) {
                    opt = apps[c]->add_flag_callback(names, [&r, &o, ctx] { flag(o, ctx, r); });
                } else {
                    opt = apps[c]->add_option(names, [&r, &o](const CLI::results_t& res) {
                        stop_if(apply(o, res.front(), r));
                        return true;
                    });
                    // Exactly one value per occurrence, never split on ',' or
                    // unpacked from "[a,b]".
                    opt->expected(1)->allow_extra_args(false);
                }
                opt->trigger_on_parse();
            }
        }
    }

    // A flag: --help and --version end the parse; the others are stored.
    static void flag(const OptionSpec& o, Ctx ctx, Request& r) {
        if (o.id == Opt::Help) {
            r = Request{};
            r.action = Action::Help;
            r.text = help(ctx);
            throw Stop{Outcome::success()};
        }
        if (o.id == Opt::Version) {
            r = Request{};
            r.action = Action::Version;
            r.text = fmt::format("dsh-confine {}\n", kVersion);
            throw Stop{Outcome::success()};
        }
        stop_if(apply(o, {}, r));
    }

    // The deepest context CLI11 entered.
    Ctx parsed_context() const {
        Ctx ctx = Ctx::Top;
        for (unsigned c = 0; c < 8; ++c)
            if (c != static_cast<unsigned>(Ctx::Top) && apps[c]->parsed()) ctx = static_cast<Ctx>(c);
        return ctx;  // SetMode's number is above Session's
    }
};

// Where our words end, from the table: which words are options, which of
// them take a value, and which words name a subcommand. The words that are
// ours go to CLI11 as given (an empty `--name=` as `--name ""`, which CLI11
// would otherwise answer by taking the next word); the first word that is
// not ours starts the command. What CLI11 cannot say in our words is
// checked here: an unknown option, an option of another subcommand, a
// missing or unwanted value, a word where none belongs. Such a problem ends
// our words there and waits: CLI11 first reads the words before it, so the
// first problem in argv order is the one reported.
struct Split {
    std::vector<std::string> ours;
    int command_from = 0;            // argv index of the command's first word
    std::optional<Outcome> problem;  // found at the end of `ours`
    std::vector<bool> used = std::vector<bool>(std::size(kOptions));  // options among `ours`
    Ctx ctx = Ctx::Top;
    size_t set_mode_args = 0;
    // set-mode's FILE and MODE, handed to CLI11 last, after "--", so that an
    // option may follow them (`session set-mode FILE MODE --net off`).
    std::vector<std::string> set_mode_words;
};

Split split(int argc, const char* const* argv) {
    Split s;
    Ctx& ctx = s.ctx;
    // An option's value came before, where a command could stand: a word
    // like the command's (`--root ls -la`), so an unknown option after it
    // gets the hint to put the command after --.
    bool word_seen = false;
    const auto problem = [&](UsageText t, std::string_view a = {}, std::string_view b = {}) {
        s.problem = fail(Err::Usage, usage_text(t, a, b));
        return s;
    };
    int i = 1;
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") {
            if (ctx != Ctx::Top && ctx != Ctx::Explain) return problem(UsageText::TakesNoCommand, spec_of(ctx).name);
            ++i;
            break;
        }
        if (a.size() > 1 && a[0] == '-') {
            // --name=VALUE or --name [VALUE]; short options (-h, -V) are whole words.
            std::string_view name = a;
            std::optional<std::string_view> value;
            if (a.substr(0, 2) == "--") {
                if (const size_t eq = a.find('='); eq != std::string_view::npos) {
                    name = a.substr(0, eq);
                    value = a.substr(eq + 1);
                }
            }
            const OptionSpec* o = find_option(name);
            if (!o) {
                if (word_seen) return problem(UsageText::UnknownCommandOption, name);
                std::vector<std::string_view> here;
                for (const OptionSpec& c : kOptions)
                    if ((c.accepted & bit(ctx)) && c.shown) here.push_back(c.name);
                const std::string_view near = nearest_word(name, here.data(), here.size());
                if (!near.empty()) return problem(UsageText::UnknownOptionNear, name, near);
                return problem(UsageText::UnknownOption, name, help_command(ctx));
            }
            if (!(o->accepted & bit(ctx))) return problem(UsageText::OptionNotHere, o->name, help_command(ctx));
            s.used[static_cast<size_t>(o - kOptions)] = true;
            if (o->value.empty()) {
                if (value) return problem(UsageText::TakesNoValue, o->name);
                s.ours.emplace_back(a);
            } else if (value) {
                if (value->empty()) {
                    s.ours.emplace_back(name);
                    s.ours.emplace_back();
                } else {
                    s.ours.emplace_back(a);
                }
            } else {
                if (i + 1 >= argc || is_our_option_word(argv[i + 1]))
                    return problem(UsageText::NeedsValue, o->name, o->value);
                s.ours.emplace_back(a);
                s.ours.emplace_back(argv[++i]);
                word_seen = ctx == Ctx::Top || ctx == Ctx::Explain;
            }
            // Nothing after --help or --version is read.
            if (o->id == Opt::Help || o->id == Opt::Version) {
                s.command_from = argc;
                return s;
            }
            continue;
        }
        // A word that is not an option.
        switch (ctx) {
            case Ctx::Top:
                if (auto sub = subcommand_named(a)) {
                    ctx = *sub;
                    word_seen = false;
                    s.ours.emplace_back(a);
                    continue;
                }
                break;  // the command
            case Ctx::Explain: break;  // the command to explain
            case Ctx::Session:
                if (a != "set-mode" && a != "show") return problem(UsageText::SessionNeedsSetMode, a);
                ctx = a == "show" ? Ctx::Show : Ctx::SetMode;
                s.ours.emplace_back(a);
                continue;
            case Ctx::Show:
                if (s.set_mode_args == 1) return problem(UsageText::ShowArgs);
                s.set_mode_words.emplace_back(a);
                ++s.set_mode_args;
                continue;
            case Ctx::SetMode:
                if (s.set_mode_args == 2) return problem(UsageText::SetModeArgs);
                // FILE and MODE are any words ("probe", "++", "-"): after
                // "--" CLI11 reads them as positionals only.
                s.set_mode_words.emplace_back(a);
                ++s.set_mode_args;
                continue;
            case Ctx::Probe:
            case Ctx::Check:
            case Ctx::SelfTest: return problem(UsageText::TakesNoWord, spec_of(ctx).name, a);
        }
        break;  // argv[i] is the first word of the command
    }
    s.command_from = i;
    return s;
}

}  // namespace

Outcome parse_cli(int argc, const char* const* argv, Request& r) {
    const auto usage = [](UsageText t, std::string_view a = {}) { return fail(Err::Usage, usage_text(t, a)); };
    if (argc <= 1) {
        // Nothing typed at all: the way to use it, not an error line.
        r.action = Action::Usage;
        r.text = help(Ctx::Top).substr(0, help(Ctx::Top).find("\n\n") + 1) +
                 "Try 'dsh-confine --help' for the options and subcommands.\n";
        return Outcome::success();
    }
    Split s = split(argc, argv);
    if (!s.set_mode_words.empty()) {
        s.ours.emplace_back("--");
        for (auto& w : s.set_mode_words) s.ours.push_back(std::move(w));
    }
    Parser parser(r, bit(Ctx::Top) | bit(s.ctx) | (s.ctx == Ctx::SetMode || s.ctx == Ctx::Show ? bit(Ctx::Session) : 0u), s.used);
    try {
        // CLI11 reads its input from the back.
        std::vector<std::string> words(s.ours.rbegin(), s.ours.rend());
        parser.top.parse(words);
    } catch (Stop& stop) {
        return std::move(stop.out);
    } catch (const CLI::Error&) {
        // The split hands CLI11 only words it reads without complaint; should
        // one still fail, it fails closed with our text, never CLI11's.
        return usage(UsageText::Unreadable);
    }
    if (s.problem) return std::move(*s.problem);
    // Everything from here on is the command's, untouched.
    for (int i = s.command_from; i < argc; ++i) r.argv.emplace_back(argv[i]);

    const Ctx ctx = parser.parsed_context();
    if (ctx == Ctx::Session) return usage(UsageText::SessionNeedsSetMode);
    if (ctx == Ctx::SetMode && s.set_mode_args != 2) return usage(UsageText::SetModeArgs);
    if (ctx == Ctx::Show && s.set_mode_args != 1) return usage(UsageText::ShowArgs);
    if (ctx == Ctx::Check && !r.check_write == !r.check_read) return usage(UsageText::CheckNeedsWrite);
    // --agent (issue 42): what it stands for, unless given beside it; an
    // explicit value that would widen it is an error, one that narrows it
    // (--mode read-only) or repeats it wins.
    if (r.agent) {
        if (r.mode && *r.mode == "danger-full-access")
            return fail(Err::Usage, cache_text(CacheText::AgentMode, *r.mode));
        if (r.net && *r.net != "off") return fail(Err::Usage, cache_text(CacheText::AgentNet, *r.net));
        if (!r.mode) r.mode = "workspace-write";
        r.net = "off";
        r.hide_secrets = true;
        r.scrub_secrets = true;
    }
    r.action = action_of(ctx);
    if (r.action == Action::Run && r.dry_run) r.action = Action::Explain;

    const bool needs_command = r.action == Action::Run || (r.action == Action::Explain && !r.context);
    if (needs_command && r.argv.empty()) return usage(UsageText::NoCommand);
    if (!r.argv.empty() && r.argv.front().empty()) return usage(UsageText::EmptyCommand);
    return Outcome::success();
}

PolicyRequest Request::policy_request() const {
    PolicyRequest p;
    p.mode = mode;
    p.root = root;
    p.writable = writable;
    p.cache = cache;
    // The tools read their cache variables from the command's environment.
    if (clearenv || !setenv.empty() || !unsetenv.empty()) {
        std::vector<std::string> current, out;
        for (char** e = environ; e && *e; ++e) current.emplace_back(*e);
        EnvChanges changes;
        if (build_environment(EnvRequest{clearenv, setenv, unsetenv, scrub_secrets}, current, out, changes))
            p.command_env = std::move(out);
    }
    p.protect = protect;
    p.unprotect = unprotect;
    p.deny_read = deny_read;
    p.hide_secrets = hide_secrets;
    p.keep_fds = keep_fds;
    p.private_tmp = private_tmp;
    p.keep_descendants = keep_descendants;
    p.allow_userns = allow_userns;
    p.config = config;
    p.session = session;
    p.approver = approver;
    p.runner = runner;
    p.net = net;
    p.net_deny = net_deny;
    p.probe_timeout_ms = probe_timeout_ms;
    p.escalate = escalate;
    p.escalate_net = escalate_net;
    p.justification = justification;
    p.subject = action == Action::Check ? "operation" : "command";
    p.argv = argv;
    return p;
}

}  // namespace dsh
