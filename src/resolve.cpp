#include "resolve.hpp"
#include "bytes.hpp"
#include "caches.hpp"
#include "environment.hpp"
#include "own_state.hpp"
#include "net_allow.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "report.hpp"
#include "runner.hpp"
#include "version.hpp"
#ifndef _WIN32
#include "carveouts.hpp"
#else
namespace dsh::carveouts {
struct OwnPath {  // nothing is carved on Windows: never filled
    std::string path, what;
    bool directory = true;
    std::string refusal;
};
}  // namespace dsh::carveouts
#endif

namespace dsh {

namespace {

}  // namespace

ResolveEnv current_env() {
    ResolveEnv e;
    // A failed getcwd (a deleted directory, one deeper than PATH_MAX) leaves
    // cwd empty, which build_policy refuses: never "/" in its place.
    char buf[PATH_MAX];
    if (::getcwd(buf, sizeof buf) != nullptr) e.cwd = buf;
    if (const char* t = std::getenv("TMPDIR")) e.tmpdir = t;
    if (const char* m = std::getenv("MAKEFLAGS")) e.jobserver = parse_jobserver(m);
    return e;
}

std::unique_ptr<Approver> make_approver(const std::optional<std::string>& spec, const std::string& cwd) {
    if (!spec || spec->empty()) return nullptr;
    if (*spec == "tty") return std::make_unique<TtyApprover>();
    ApproverCommand c;
    (void)parse_approver(*spec, cwd, std::getenv("PATH"), c);  // refused earlier (resolve) when it does not parse
    return std::make_unique<CommandApprover>(std::move(c));
}

#ifndef _WIN32
// The real uid's home in /etc/passwd (the static binary has no NSS); empty: none.
static std::string caller_home() {
    std::string text;
    return read_small("/etc/passwd", text) ? passwd_home(text, 2, std::to_string(::getuid())) : std::string();
}
#endif

// --cache and the config's cache (issue 42): each tool's directories, found
// in the command's environment (its $HOME, else the caller's home).
static Outcome expand_caches(const PolicyRequest& req, const Config& s, std::vector<std::pair<std::string, std::string>>& out) {
    std::vector<std::string> tools = req.cache;
    for (const auto& t : s.cache)
        if (std::find(tools.begin(), tools.end(), t) == tools.end()) tools.push_back(t);
    if (tools.empty()) return Outcome::success();
    const caches::Env env = [&req](std::string_view name) -> const char* {
        if (req.command_env) return env_lookup(*req.command_env, name);
        return std::getenv(std::string(name).c_str());
    };
    std::string home;
    if (const char* h = env("HOME"); h && *h == '/') home = h;
#ifndef _WIN32
    else home = caller_home();
#endif
    std::vector<caches::Dir> dirs;
    for (const auto& t : tools)
        if (auto o = caches::dirs(t, env, home, dirs); !o) return o;
    for (auto& d : dirs) out.emplace_back(std::move(d.path), std::move(d.tool));
    return Outcome::success();
}

// Where a read-only mode came from, as a refusal names it.
static std::string_view read_only_from(ModeSource m) {
    switch (m) {
        case ModeSource::Default: break;
        case ModeSource::Flag: return "--mode read-only";
        case ModeSource::Session: return "the session log's mode";
        case ModeSource::Config: return "the config's mode";
        case ModeSource::Escalation: return "the escalation's mode";
    }
    return "the default mode";
}

static PolicyInput policy_input(const PolicyRequest& req, const Resolution& r, const ResolveEnv& env, Mode mode,
                                ModeSource mode_source) {
    PolicyInput in;
    in.cwd = env.cwd;
    in.tmpdir = env.tmpdir;
    in.mode = mode;
    in.mode_source = mode_source;
    if (req.root) {
        in.root = *req.root;
        in.root_source = RootSource::Flag;
    } else if (r.session.cwd) {
        // The seed: the session's immutable cwd; the config's root is the
        // fallback for calls without a session.
        in.root = *r.session.cwd;
        in.root_source = RootSource::Session;
    } else if (r.settings.workspace_root) {
        in.root = *r.settings.workspace_root;
        in.root_source = RootSource::Config;
    }
    in.writable = req.writable;
    in.config_writable = r.settings.writable_roots;
    in.keep_fds = req.keep_fds;
    in.jobserver = env.jobserver;
    in.private_tmp = req.private_tmp || r.settings.private_tmp.value_or(false);
    in.keep_descendants = req.keep_descendants || r.settings.keep_descendants.value_or(false);
    in.allow_userns = req.allow_userns;
    in.create_missing = req.create_missing;
    in.cache = r.cache_dirs;
#ifndef _WIN32
    // The real uid's home from the password database, never $HOME (the
    // caller's to set: HOME=/etc would make /etc/x creatable), read only
    // where a writable path may need it (not on every start).
    // Read from /etc/passwd itself: the static binary has no NSS.
    if (!in.writable.empty() || !in.config_writable.empty() || !in.cache.empty()) in.home = caller_home();
    in.never_made.anywhere = carveouts::agent_names();
    in.never_made.anywhere.insert(in.never_made.anywhere.begin(), ".git");
    in.never_made.home = carveouts::home_names();
    // Nor the directories a login shell puts on PATH, or sources, only when
    // they exist (Debian's ~/.profile: ~/bin): made, they would run what the
    // command leaves in them at the next login (a second attack pass of
    // session 25), as ~/.local/bin would.
    for (const char* n : {"bin", ".cargo/bin", "go/bin", ".bashrc.d", ".profile.d"}) in.never_made.home.push_back(n);
    // Nor anything in the directories a later run reads its config from.
    if (!in.home.empty())
        for (const auto& f : config_state_paths(req.config, [](const char* n) { return std::getenv(n); })) {
            const std::string file = lexically_normal(f);
            const std::string dir = file.substr(0, file.rfind('/'));
            if (dir.size() > in.home.size() && path_under(dir, in.home))
                in.never_made.home.push_back(dir.substr(in.home.size() + 1));
        }
#endif
    return in;
}

namespace {

// One file of dsh-confine's own state: what decides a later run.
struct StateFile {
    std::string path;
    std::string what;
    // A program run outside any sandbox (issue 37): never carved, refused.
    bool program = false;
};

std::vector<StateFile> own_state(const PolicyRequest& req, const Resolution& r, const ResolveEnv& env) {
    std::vector<StateFile> out;
    for (auto& p : config_state_paths(req.config, [](const char* n) { return std::getenv(n); }))
        out.push_back({std::move(p), "config"});
    if (r.session_path) out.push_back({*r.session_path, "session log"});
    if (r.settings.approver)
        for (auto& p : approver_files(*r.settings.approver, env.cwd, std::getenv("PATH")))
            out.push_back({std::move(p), "approver"});
    for (const Runner* runner : registry())
        for (auto& [path, what] : runner->state_files()) out.push_back({std::move(path), what});
#if defined(__linux__)
    // What a later run executes outside any sandbox: bwrap (whichever runner
    // this run uses: the next may use bwrap) and the custom runner.
    out.push_back({r.settings.bwrap_path.value_or(kBwrapPath), "bwrap", true});
#endif
    if (!r.settings.runner_command.empty()) out.push_back({r.settings.runner_command[0], "custom runner", true});
    return out;
}

// A run must not be able to write what decides the next one: a config with a
// runnerCommand planted under the workspace would run unconfined next time,
// whatever its owner (the command runs as the caller). Each path counts
// whether it exists or not, both as named and as it resolves now. Every
// runner is refused alike (see docs/DECISIONS.md, "Own state").
//
// Under a root the caller named (workspace-write), the file is carved out
// instead when `carve` is given (docs/DECISIONS.md "Carve-outs"): the
// directory of a config, session log or probe cache, or an approver file
// that exists, strictly below every root that holds it and reached without
// a link, goes to *carve with the refusal a runner that cannot carve gives.
Outcome check_own_state(const Policy& p, const PolicyRequest& req, const Resolution& r, const ResolveEnv& env,
                        std::vector<carveouts::OwnPath>* carve = nullptr) {
    if (p.writable_roots.empty()) return Outcome::success();  // read-only: nothing to look at
    // The system config's directory is where widening values may come from
    // (sealed_file): no run may write anywhere in it. A root above it binds
    // or refuses it below (the config's own entry); a root inside it is refused.
    for (const auto& root : p.writable_roots)
        if (path_under(root.path, kSystemConfigDir))
            return fail(Err::StateUnsafe, system_dir_root_text(root.path, to_string(root.source), kSystemConfigDir));
    const std::string& cwd = env.cwd;
    for (const auto& f : own_state(req, r, env)) {
        if (f.path.empty()) continue;
        const std::string lex = lexically_normal(f.path[0] == '/' ? f.path : cwd + "/" + f.path);
        const std::string canon = canonical_path(f.path, cwd);
        const bool file = f.what == "approver" || f.program;
        const std::string target = file ? lex : lex.substr(0, std::max<size_t>(lex.rfind('/'), 1));
#ifndef _WIN32
        struct stat st {};
        // Only where bwrap may run (auto or bwrap asked): a runner that
        // cannot carve refuses anyway, and the directory made for the bind
        // would be left for nothing.
        const std::string runner = r.settings.runner ? std::string(to_string(*r.settings.runner)) : "auto";
        const bool carvable = carve && !f.program && (runner == "auto" || runner == "bwrap") &&
                              p.mode == Mode::WorkspaceWrite &&
                              lex == canon &&
                              (!file || (::lstat(lex.c_str(), &st) == 0 && S_ISREG(st.st_mode)));
#else
        const bool carvable = false;
#endif
        std::string refusal;
        for (const auto& root : p.writable_roots) {
            if (!path_under(lex, root.path) && !path_under(canon, root.path)) continue;
            // The fix depends on where the root came from; /tmp and $TMPDIR
            // come with workspace-write, so only moving the file helps there.
            std::string fix;
            switch (root.source) {
                case Grant::Workspace: fix = "choose a narrower --root, or "; break;
                case Grant::Flag: fix = "drop that --writable, or "; break;
                case Grant::Config: fix = "drop it from the config's writableRoots, or "; break;
                case Grant::Cache: fix = fmt::format("drop {} from --cache (or the config's cache), or ", root.tool); break;
                case Grant::Tmp:
                case Grant::Tmpdir:
                case Grant::Shm: break;  // the temp areas: only moving the file helps
            }
            const std::string text = fmt::format(
                "the {} {} decides later runs, and this run could rewrite it: it is under the writable root {} "
                "({}); {}move the {} out of it",
                f.what, f.path, root.path, to_string(root.source), fix, f.what);
            const bool named = root.persists && (root.source == Grant::Workspace || root.source == Grant::Flag ||
                                                 root.source == Grant::Config);
            if (!carvable || !named || !path_under(target, root.path) || target == root.path)
                return fail(Err::StateUnsafe, text);
            if (refusal.empty()) refusal = text;
        }
        if (!refusal.empty()) carve->push_back({target, f.what, !file, refusal});
    }
    return Outcome::success();
}

// The protected set (issue 18), once the roots are open.
// `late`: where the walk may wait for the spawn, it is left there instead.
Outcome carve(Policy& p, const PolicyRequest& req, const Resolution& r, const ResolveEnv& env,
             std::vector<carveouts::OwnPath> own = {}, std::shared_ptr<const carveouts::Input>* late = nullptr) {
#ifndef _WIN32
    carveouts::Input in;
    in.own = std::move(own);
    in.protect_flag = req.protect;
    in.unprotect_flag = req.unprotect;
    in.protect_config = r.settings.protect;
    in.unprotect_config = r.settings.unprotect;
    in.deny_flag = req.deny_read;
    in.deny_config = r.settings.deny_read;
    in.hide_secrets = req.hide_secrets || r.settings.hide_secrets.value_or(false);
    in.secret_extra = r.settings.secret_paths;
    in.env = [](const char* name) -> const char* { return std::getenv(name); };
    if (const char* h = std::getenv("HOME")) in.home = h;
    if (const char* x = std::getenv("XDG_CONFIG_HOME")) in.xdg_config_home = x;
    if (const char* g = std::getenv("GIT_CONFIG_GLOBAL")) in.git_config_global = g;
    if (const char* g = std::getenv("GIT_CONFIG_SYSTEM")) in.git_config_system = g;
    in.cwd = env.cwd;
#if defined(__linux__)
    // The walk waits for the spawn (docs/DECISIONS.md "The walk while bwrap
    // starts") only where bwrap's stage will bind the list itself and no
    // runner could be chosen for the list's sake: a run in workspace-write,
    // as root (the stage keeps CAP_SYS_ADMIN for its binds), no own state to
    // carve (other runners refuse it before they run), nothing hidden that
    // exists (bwrap hides it after its own binds), no custom runner, and
    // auto or bwrap asked. Anything else walks now, as explain always does.
    const auto runner = r.settings.runner.value_or(RunnerKind::Auto);
    if (late && req.late_walk && p.mode == Mode::WorkspaceWrite && ::geteuid() == 0 && in.own.empty() &&
        !r.settings.custom_runner() && (runner == RunnerKind::Auto || runner == RunnerKind::Bwrap)) {
        carveouts::hide(p, in);
        if (std::any_of(p.hidden_paths.begin(), p.hidden_paths.end(), [](const ProtectedPath& h) { return h.exists; }))
            return carveouts::walk(p, in);
        p.protected_paths.clear();
        p.unprotected.clear();
        *late = std::make_shared<const carveouts::Input>(std::move(in));
        return Outcome::success();
    }
#endif
    (void)late;
    return carveouts::protect(p, in);
#else
    (void)p, (void)req, (void)r, (void)env, (void)own, (void)late;
    return Outcome::success();
#endif
}

}  // namespace

namespace {

// --runner and --probe-timeout over the config's, and the default timeout.
Outcome merge_runner_flags(const PolicyRequest& req, Config& s) {
    if (req.runner) {
        auto r = parse_runner(*req.runner);
        if (!r) return fail(Err::Usage, usage_text(UsageText::UnknownRunner, *req.runner));
        s.runner = *r;
    }
    if (req.probe_timeout_ms) s.probe_timeout_ms = *req.probe_timeout_ms;
    if (!s.probe_timeout_ms) s.probe_timeout_ms = kDefaultProbeTimeoutMs;
    return Outcome::success();
}

}  // namespace

Outcome runner_settings(const PolicyRequest& req, Config& out) {
    out = Config{};
    if (auto o = load_config(req.config, out); !o) return o;
    return merge_runner_flags(req, out);
}

Outcome resolve(const PolicyRequest& req, const ResolveEnv& env, AskApprover ask, Resolution& out) {
    out = Resolution{};
    // 1. The escalation's own arguments: checked before anything is read or run.
    Mode target = Mode::ReadOnly;
    // --escalate-net pairs with --justification as --escalate does (the
    // pairing and blank checks; its mode is the call's own).
    std::optional<std::string> asked = req.escalate;
    if (!asked && req.escalate_net) asked = std::string(to_string(Mode::WorkspaceWrite));
    if (auto o = validate_escalation_args(asked, req.justification, target); !o) return o;
    if (req.escalate) out.escalation_target = target;
    if (req.escalate_net) {
        Network n = Network::Host;
        if (auto o = parse_network_escalation(*req.escalate_net, n); !o) return o;
        out.network_escalation = n;
    }

    std::optional<Mode> flag_mode;
    if (req.mode) {
        flag_mode = parse_mode(*req.mode);
        if (!flag_mode) {
            static constexpr std::string_view kModes[] = {"read-only", "workspace-write", "danger-full-access"};
            const std::string_view near = nearest_word(*req.mode, kModes, std::size(kModes));
            return fail(Err::Usage, near.empty() ? usage_text(UsageText::UnknownMode, *req.mode)
                                                 : usage_text(UsageText::UnknownModeNear, *req.mode, near));
        }
    }

    // 2. The config file, then the flags that override it.
    if (auto o = load_config(req.config, out.settings); !o) return o;
    Config& s = out.settings;
    if (s.runner) out.runner_source = "config";
    if (s.probe_timeout_ms) out.probe_timeout_source = "config";
    if (auto o = merge_runner_flags(req, s); !o) return o;
    if (req.runner) out.runner_source = "flag";
    if (req.probe_timeout_ms) out.probe_timeout_source = "flag";
    if (s.approver) out.approver_source = "config";
    if (req.approver) {
        s.approver = *req.approver;
        out.approver_source = "flag";
    }
    // Run directly, never by a shell: what does not parse as plain words is
    // refused now, before anything is read or run (issue 37).
    if (s.approver && *s.approver != "tty") {
        ApproverCommand c;
        if (auto o = parse_approver(*s.approver, env.cwd, std::getenv("PATH"), c); !o) return o;
    }

    // 3. The session log. Read even when --mode decides, so a broken log is
    // reported rather than left to bite the next call.
    if (req.session) {
        out.session_path = *req.session;
        if (auto o = read_session(*req.session, out.session); !o) return o;
    }

    // 4. The mode without escalation.
    if (flag_mode) {
        out.base_mode = *flag_mode;
        out.base_source = ModeSource::Flag;
    } else if (out.session.mode) {
        // An earlier confined run may have written the log (its roots are
        // unknown here): it may choose a confined mode, never none at all.
        if (*out.session.mode == Mode::DangerFullAccess && !out.session.sealed)
            return fail(Err::StateUnsafe,
                        unsealed_widening_text("session log", *req.session,
                                               "a sandbox/mode event \"danger-full-access\"",
                                               "pass --mode danger-full-access (or --escalate) for the call instead"));
        out.base_mode = *out.session.mode;
        out.base_source = ModeSource::Session;
    } else if (s.mode) {
        out.base_mode = *s.mode;
        out.base_source = ModeSource::Config;
    }

    // --private-tmp asks for something only a sandbox can give: with the
    // unconfined mode it is a contradiction, refused rather than dropped.
    // (The config's privateTmp is a default for confined runs and does not
    // apply there, like its writableRoots.)
    if (req.private_tmp && (out.escalation_target ? *out.escalation_target : out.base_mode) == Mode::DangerFullAccess)
        return fail(Err::Usage, usage_text(UsageText::PrivateTmpUnconfined));
    // --writable in read-only would grant nothing and say nothing (issue
    // 42): refused with the fix. The config's writableRoots are a standing
    // default for workspace-write runs and stay quiet, like its privateTmp.
    if (!req.writable.empty() && (out.escalation_target ? *out.escalation_target : out.base_mode) == Mode::ReadOnly) {
        return fail(Err::Usage, root_text(RootText::WritableReadOnly, read_only_from(out.base_source)));
    }
    // --cache likewise; the config's cache stays quiet in read-only (a
    // standing default), like its writableRoots.
    if (!req.cache.empty() && (out.escalation_target ? *out.escalation_target : out.base_mode) == Mode::ReadOnly) {
        return fail(Err::Usage, cache_text(CacheText::ReadOnly, read_only_from(out.base_source)));
    }
    if (auto o = expand_caches(req, s, out.cache_dirs); !o) return o;
    // The network axis: --net > the session log's > config "network" > host. Checked before any
    // approver is asked: a flag that cannot hold in the mode asked for is
    // refused, never ignored (docs/DECISIONS.md, "The network axis").
    Network net = Network::Host;
    NetworkSource net_source = NetworkSource::Default;
    std::optional<net::Rules> allow_rules;
    // The allow-list (issue 19): parsed and checked here, each entry in our
    // words (docs/DECISIONS.md, "The allow-list"). Only a runner that can
    // hand out its namespace's listener takes it (Runner::egress_proxy: bwrap
    // and Landlock); the chain passes over the others.
    {
        const bool flag_allow = req.net && req.net->rfind("allow=", 0) == 0;
        net::Rules rules;
        if (flag_allow)
            if (auto o = net::parse_rules(std::string_view(*req.net).substr(6), rules.allow); !o) return o;
        for (const auto& d : req.net_deny)
            if (auto o = net::parse_rules(d, rules.deny); !o) return o;
        const bool session_allow = !req.net && out.session.network && !out.session.net_allow.empty();
        const bool config_allow = !req.net && !out.session.network && s.network_allow;
        if (!req.net_deny.empty() && !flag_allow && !config_allow && !session_allow)
            return fail(Err::Usage, usage_text(UsageText::NetDenyWithoutAllow));
        if (config_allow) {
            for (const auto& e : *s.network_allow)
                if (auto o = net::parse_rules(e, rules.allow); !o) return o;
            for (const auto& e : s.network_deny)
                if (auto o = net::parse_rules(e, rules.deny); !o) return o;
        }
        if (session_allow) {
            for (const auto& e : out.session.net_allow)
                if (auto o = net::parse_rules(e, rules.allow); !o) return o;
            for (const auto& e : out.session.net_deny)
                if (auto o = net::parse_rules(e, rules.deny); !o) return o;
        }
        if (flag_allow || config_allow || session_allow) allow_rules = std::move(rules);
    }
    if (allow_rules) {
        net = Network::Loopback;  // the namespace; the proxy is the way out
        net_source = req.net ? NetworkSource::Flag : out.session.network ? NetworkSource::Session : NetworkSource::Config;
    } else if (req.net) {
        auto n = parse_network(*req.net);
        if (!n) return fail(Err::Usage, usage_text(UsageText::UnknownNetwork, *req.net));
        net = *n;
        net_source = NetworkSource::Flag;
    } else if (out.session.network) {
        net = *out.session.network;
        net_source = NetworkSource::Session;
    } else if (s.network) {
        net = *s.network;
        net_source = NetworkSource::Config;
    }
    const Mode effective = out.escalation_target ? *out.escalation_target : out.base_mode;
    if (effective == Mode::DangerFullAccess && net != Network::Host) {
        if (net_source == NetworkSource::Flag)
            return fail(Err::Usage, usage_text(UsageText::NetworkUnderDanger, *req.net));
        out.network_requested = net;  // the config's or the session's: reported as not holding
        net = Network::Host;
        allow_rules.reset();
    }
    out.base_network = net;
    auto set_network = [&](Policy& p) {
        p.network = net;
        p.network_source = net_source;
        p.network_requested = out.network_requested;
        p.net_allow = allow_rules;
    };

    if (!out.escalation_target && !out.network_escalation) {
        if (auto o = build_policy(policy_input(req, out, env, out.base_mode, out.base_source), out.policy); !o)
            return o;
        set_network(out.policy);
        std::vector<carveouts::OwnPath> own;
        if (auto o = check_own_state(out.policy, req, out, env, &own); !o) return o;
        return carve(out.policy, req, out, env, std::move(own), &out.late_walk);
    }

    // 5. Escalation. The policy is built for the target first, so a request
    // that could not run anyway (a missing root, a bad --writable) fails
    // before a human is asked about it. The ladder check comes first of all
    // (build_policy for a narrower target is harmless, but its errors must
    // not mask the seed's "not strictly wider" text).
    // Widening the network is an escalation like widening the mode (issue 17):
    // --escalate-net alone keeps the call's mode and asks for the network.
    EscalationRequest er;
    er.mode_asked = out.escalation_target.has_value();
    if (!er.mode_asked) target = out.base_mode;
    er.target = target;
    er.current = out.base_mode;
    er.current_network = net;
    er.target_network = out.network_escalation;
    er.justification = *req.justification;
    er.subject = req.subject;
    er.argv = req.argv;
    bool wider = !er.mode_asked;
    for (Mode m : wider_modes(er.current)) wider = wider || m == target;
    if (er.target_network) {
        bool net_wider = false;
        for (Network n : wider_networks(net)) net_wider = net_wider || n == *er.target_network;
        wider = wider && net_wider;
    }
    Policy probe_policy;
    if (wider) {
        const ModeSource src = er.mode_asked ? ModeSource::Escalation : out.base_source;
        if (auto o = build_policy(policy_input(req, out, env, target, src), probe_policy); !o) return o;
        if (auto o = check_own_state(probe_policy, req, out, env); !o) return o;
        if (auto o = carve(probe_policy, req, out, env); !o) return o;
        er.root = probe_policy.workspace_root;
        // The approver decides this call: nobody else may have rewritten it.
        if (s.approver)
            if (auto o = check_approver_files(approver_files(*s.approver, env.cwd, std::getenv("PATH"))); !o)
                return o;
    }
    std::unique_ptr<Approver> approver = make_approver(s.approver, env.cwd);
    if (ask == AskApprover::No) {
        // Every check approve_escalation makes before asking, without asking.
        Mode granted = target;
        struct Never : Approver {
            Approval ask(const EscalationRequest&) override { return Approval::AllowedOnce; }
        } never;
        if (auto o = approve_escalation(er, approver ? &never : nullptr, granted); !o) return o;
        out.escalation = EscalationState::Pending;
    } else {
        Mode granted = out.base_mode;
        if (auto o = approve_escalation(er, approver.get(), granted); !o) return o;
        out.escalation = EscalationState::Granted;
    }
    out.policy = std::move(probe_policy);
    if (out.network_escalation) {
        net = *out.network_escalation;
        net_source = NetworkSource::Escalation;
        allow_rules.reset();  // a wider network replaces the allow-list's namespace and proxy
    }
    set_network(out.policy);
    return Outcome::success();
}

std::string policy_context_text(const Policy& p) {
    switch (p.mode) {
        case Mode::ReadOnly:
            return "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox "
                   "cannot modify files in the standing mode. Do not refuse a required modification from this "
                   "policy alone: try an available tool normally and follow any denial and escalation guidance "
                   "it returns.";
        case Mode::WorkspaceWrite:
            return "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file "
                   "sandbox may modify files under the session workspace: " +
                   json_line(nlohmann::json(p.workspace_root)) +
                   ". Some platform temporary areas may also be writable.";
        case Mode::DangerFullAccess:
            return "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file "
                   "modifications by available operations.";
    }
    return "";
}

}  // namespace dsh
