#include "chain.hpp"

#include <algorithm>

#include <fmt/format.h>

#if !defined(_WIN32)
#include "carveouts.hpp"
#endif

namespace dsh::chain {

Outcome walk_now(Plan& p) {
    if (!p.late_walk) return Outcome::success();
    const auto in = std::move(p.late_walk);
#if !defined(_WIN32)
    return carveouts::walk(p.c.policy, *in);
#else
    return Outcome::success();  // nothing is carved on Windows (never left for later there)
#endif
}

const Runner* find(RunnerKind kind, const Runners& runners) noexcept {
    for (const Runner* r : runners)
        if (r->kind() == kind) return r;
    return nullptr;
}

namespace {

// A parent that stays can take its orphaned descendants (PR_SET_CHILD_SUBREAPER)
// and end them when the command exits: Linux only.
#if defined(__linux__)
constexpr bool kSubreaper = true;
#else
constexpr bool kSubreaper = false;
#endif

// A runner's "cannot be used here" (recorded, the chain goes on) as opposed
// to a failure that ends the run (a usage error, a runner that failed with
// the fail-closed text already rendered).
bool passed_over(const Outcome& o) { return o.err == Err::SandboxUnavailable && o.mode.empty(); }

// The protections of the policy that a runner which cannot carve would leave
// unenforced (issue 37): each hidden path that exists, and each protected
// path that exists inside a root and would be bound (not one only watched,
// nor one outside every root, read-only already). The first one named, how
// many there are, and the deepest directory holding every one --unprotect
// can drop (the defaults and the config's: not a --protect).
struct Lost {
    const ProtectedPath* first = nullptr;
    bool hidden = false;
    size_t count = 0;
    std::string droppable;
};

std::string common_dir(const std::string& a, const std::string& b) {
    size_t i = 0, last = 0;
    for (; i < a.size() && i < b.size() && a[i] == b[i]; ++i)
        if (a[i] == '/') last = i;
    if ((i == a.size() || a[i] == '/') && (i == b.size() || b[i] == '/')) last = i;
    return last == 0 ? "/" : a.substr(0, last);
}

Lost lost_protections(const Policy& p) {
    Lost l;
    for (const auto& h : p.hidden_paths)
        if (h.exists && l.count++ == 0) l.first = &h, l.hidden = true;
    for (const auto& e : p.protected_paths) {
        if (!e.exists || e.fd < 0 || e.watched || !e.refusal.empty() || e.why_not == kProtectedOutsideText) continue;
        if (l.count++ == 0) l.first = &e;
        if (e.source != "flag") l.droppable = l.droppable.empty() ? e.path : common_dir(l.droppable, e.path);
    }
    return l;
}

// How the caller drops the protection `l` names (what the refusal suggests
// besides another runner): each kind is dropped where it was asked for.
std::string drop_text(const Lost& l) {
    const ProtectedPath& e = *l.first;
    if (l.hidden) {
        if (e.source == "hide-secrets") return "drop --hide-secrets (config hideSecrets)";
        if (e.source == "config") return fmt::format("drop {} from the config's denyRead", e.path);
        return fmt::format("drop --deny-read {}", e.path);
    }
    if (e.source == "flag") return fmt::format("drop --protect {}", e.path);
    return fmt::format("--unprotect {} to let the command write {}", l.droppable,
                       l.droppable == e.path && l.count == 1 ? "it" : "what is protected below it");
}

// The refusal of a runner that cannot carve when the policy holds `l`;
// `instead`: what would hold it.
Outcome protection_lost(const Runner& r, const Lost& l, const std::string& instead) {
    return fail(Err::ProtectionUnavailable,
                protection_lost_text(to_string(r.kind()), l.first->path, l.hidden, l.count - 1, instead, drop_text(l)));
}

// The first runner of the chain that carves (bwrap on Linux), or null.
const Runner* carver(const Runners& runners) {
    for (const Runner* r : runners)
        if (r->protects_paths()) return r;
    return nullptr;
}

std::string use_carver(const Runners& runners) {
    const Runner* c = carver(runners);
    return c ? fmt::format("use --runner {} (or auto)", to_string(c->kind()))
             : fmt::format("no runner on {} can", host_platform());
}

// What the policy asks that this runner cannot give, before anything of it
// is run: a "cannot be used" like any plan's.
Outcome can_give(const Runner& r, const Policy& p, const Runners& runners) {
    // dsh-confine's own state under a root: only a runner that carves may run.
    if (!r.protects_paths())
        for (const auto& e : p.protected_paths)
            if (!e.refusal.empty()) return fail(Err::StateUnsafe, e.refusal);
    // A protection asked for (the default carve-outs included) holds on the
    // runner or the runner is not used (issue 37): never a run without it.
    if (!r.protects_paths())
        if (const Lost l = lost_protections(p); l.count) return protection_lost(r, l, use_carver(runners));
    if (p.private_tmp && !r.private_tmp())
        return fail(Err::SandboxUnavailable, private_tmp_unavailable_text(to_string(r.kind())));
    if (p.net_allow && !r.egress_proxy())
        return fail(Err::SandboxUnavailable, net_allow_unavailable_text(to_string(r.kind())));
    if (p.keep_descendants && !r.ends_descendants().empty())
        return fail(Err::SandboxUnavailable, keep_descendants_unavailable_text(to_string(r.kind()), r.ends_descendants()));
    return Outcome::success();
}

// The platform's runners other than `r`, for a fix: "landlock", "bwrap, landlock".
std::string others(RunnerKind r, const Runners& runners) {
    std::string out;
    for (const Runner* o : runners)
        if (o->kind() != r && o->kind() != RunnerKind::Custom) out += (out.empty() ? "" : ", ") + std::string(to_string(o->kind()));
    return out;
}

}  // namespace

Outcome choose(RunnerKind requested, const RunnerEnv& env, Plan& p, const Runners& runners) {
    Confinement& c = p.c;
    const std::string mode(to_string(c.policy.mode));
    if (requested != RunnerKind::Auto) {
        const Runner* r = find(requested, runners);
        if (!r) {
            c.skipped.push_back({std::string(to_string(requested)), "not available on this platform"});
            return fail(Err::SandboxUnavailable,
                        runner_absent_text(to_string(requested), host_platform(), others(RunnerKind::Auto, runners)));
        }
        Verdict forced{Verdict::Usable, {}, "forced"};
        if (requested != RunnerKind::Bwrap)
            if (Outcome o = walk_now(p); !o) return o;
        Outcome o = can_give(*r, c.policy, runners);
        if (o) o = r->plan(env, forced, p);
        if (o || !passed_over(o)) return o;
        c.skipped.push_back({std::string(to_string(requested)), o.message});
        // Forced, it is the only candidate: its reason is the run's, with its
        // fix; the seed's "no sandbox backend is usable" is for no runner at all.
        Outcome refused = fail(Err::SandboxUnavailable,
                               forced_runner_text(to_string(requested), o.message, others(requested, runners)));
        refused.runner_failure = o.message;  // the record's runnerFailure: the runner's own reason
        return refused;
    }
    // Protected paths in play (issue 18): the runners that keep them
    // read-only first, in the registry's order otherwise (a configured
    // custom runner keeps its place: the operator chose it). A walk left for
    // later (Plan::late_walk: no custom runner, nothing hidden) leaves this
    // order as it is: the registry's puts bwrap before Landlock already.
    Runners order(runners.begin(), runners.end());
    const bool carve = std::any_of(c.policy.protected_paths.begin(), c.policy.protected_paths.end(),
                                   [](const ProtectedPath& e) { return e.exists && e.fd >= 0; }) ||
                      std::any_of(c.policy.hidden_paths.begin(), c.policy.hidden_paths.end(),
                                  [](const ProtectedPath& e) { return e.exists; });
    if (carve)
        std::stable_partition(order.begin(), order.end(),
                              [](const Runner* r) { return r->kind() == RunnerKind::Custom || r->protects_paths(); });
    // A runner passed over because it would drop a protection (issue 37),
    // and why each one that carves was not taken: when nothing runs, the
    // refusal names the protection and why no runner could hold it, rather
    // than the seed's "no sandbox backend is usable".
    const Runner* dropper = nullptr;
    const Runner* carver_skipped = nullptr;
    std::string carver_reason;
    for (const Runner* r : order) {
        if (!r->candidate(env.config)) continue;
        // Only bwrap's stage can wait for the list; any other runner sees it whole.
        if (r->kind() != RunnerKind::Bwrap)
            if (Outcome o = walk_now(p); !o) return o;
        std::string reason;
        if (Outcome o = can_give(*r, c.policy, runners); !o) {
            // Not even probed: nothing it found could change the answer.
            if (o.err == Err::ProtectionUnavailable && !dropper) dropper = r;
            reason = o.message;
        } else {
            Verdict v = r->probe(env);
            if (v.kind == Verdict::Usable) {
                Outcome po = r->plan(env, v, p);
                if (po || !passed_over(po)) return po;
                v.reason = po.message;
            }
            reason = v.reason;
        }
        if (r->protects_paths() && !carver_skipped) {
            carver_skipped = r;
            carver_reason = reason;
        }
        c.skipped.push_back({std::string(to_string(r->kind())), std::move(reason)});
    }
    if (dropper) {
        std::string instead;
        if (!carver_skipped)
            instead = use_carver(runners);
        else if (c.policy.keep_descendants && !carver_skipped->ends_descendants().empty())
            instead = keep_descendants_rules_out_text(to_string(carver_skipped->kind()),
                                                      carver_skipped->ends_descendants());
        else
            instead = carver_unusable_text(to_string(carver_skipped->kind()), carver_reason);
        return protection_lost(*dropper, lost_protections(c.policy), instead);
    }
    return unavailable(mode);
}

nlohmann::ordered_json describe_all(const RunnerEnv& env, const Runners& runners) {
    using ojson = nlohmann::ordered_json;
    ojson doc;
    doc["type"] = "probe";
    doc["version"] = 1;
    doc["platform"] = host_platform();
    ojson names = ojson::array(), rows = ojson::array();
    ojson selected = nullptr;
    for (const Runner* r : runners) {
        ojson row = r->describe(env);
        names.push_back(to_string(r->kind()));
        if (selected.is_null() && row.value("usable", false)) selected = to_string(r->kind());
        rows.push_back(std::move(row));
    }
    doc["chain"] = std::move(names);
    doc["selected"] = std::move(selected);
    doc["runners"] = std::move(rows);
    return doc;
}

namespace {
void settle_how(Plan& p, bool parent_stays, const Runners& runners) {
    Descendants& d = p.c.descendants;
    d = {};
    if (p.c.policy.mode == Mode::DangerFullAccess) {
        d.why = "danger-full-access confines nothing";
        return;
    }
    if (p.c.policy.keep_descendants) {  // choose() took a runner that leaves them
        d.why = "asked (--keep-descendants)";
        return;
    }
    const Runner* r = find(p.c.runner, runners);
    if (r && !r->ends_descendants().empty()) {
        d.killed = true;
        d.by = r->ends_descendants();
    } else if (parent_stays && kSubreaper) {
        // A runner that becomes the command (Landlock) gets a PID namespace
        // of its own under that parent (supervise; issue 38), whose end ends
        // them all; the subreaper where the kernel refuses one (supervise
        // then says so in the record) and for a runner's program.
        d.killed = true;
        d.by = p.in_process && !p.watch ? "pid-namespace" : "subreaper";
    } else {
        d.why = kSubreaper ? "exec mode leaves no parent to end them; use --supervise"
                           : "no parent of theirs can find them on this system";
    }
}
}  // namespace

void settle_descendants(Plan& p, bool parent_stays, const Runners& runners) {
    settle_how(p, parent_stays, runners);
    // A runner that becomes the command with no PID namespace of ours above
    // it shares the caller's process group: the process-group gap, in what
    // explain shows as in the record (launch.cpp adds it again where
    // supervise falls back to the subreaper).
    if (kSubreaper && p.in_process && !p.watch && p.c.descendants.by != "pid-namespace") declare_process_group(p.c);
}

}  // namespace dsh::chain

namespace dsh {

nlohmann::ordered_json per_mode(const std::function<std::vector<Layer>(const Policy&)>& layers_for) {
    using ojson = nlohmann::ordered_json;
    ojson m = ojson::object();
    for (Mode mode : {Mode::ReadOnly, Mode::WorkspaceWrite}) {
        Confinement c;
        c.policy.mode = mode;
        c.layers = layers_for(c.policy);
        ojson gaps = ojson::array();
        for (const auto& g : c.gaps())
            gaps.push_back({{"effect", g.effect}, {"detail", g.detail}, {"ownEffect", g.own_effect}});
        m[std::string(to_string(mode))] = {{"enforcement", to_string(c.enforcement())}, {"gaps", std::move(gaps)}};
    }
    return m;
}

}  // namespace dsh
