#include "chain.hpp"

#include <algorithm>

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

// What the policy asks that this runner cannot give, before anything of it
// is run: a "cannot be used" like any plan's.
Outcome can_give(const Runner& r, const Policy& p) {
    // dsh-confine's own state under a root: only a runner that carves may run.
    if (!r.protects_paths())
        for (const auto& e : p.protected_paths)
            if (!e.refusal.empty()) return fail(Err::StateUnsafe, e.refusal);
    if (p.private_tmp && !r.private_tmp())
        return fail(Err::SandboxUnavailable, private_tmp_unavailable_text(to_string(r.kind())));
    if (p.net_allow && !r.egress_proxy())
        return fail(Err::SandboxUnavailable, net_allow_unavailable_text(to_string(r.kind())));
    if (p.keep_descendants && !r.ends_descendants().empty())
        return fail(Err::SandboxUnavailable, keep_descendants_unavailable_text(to_string(r.kind()), r.ends_descendants()));
    return Outcome::success();
}

}  // namespace

Outcome choose(RunnerKind requested, const RunnerEnv& env, Plan& p, const Runners& runners) {
    Confinement& c = p.c;
    const std::string mode(to_string(c.policy.mode));
    if (requested != RunnerKind::Auto) {
        const Runner* r = find(requested, runners);
        if (!r) {
            c.skipped.push_back({std::string(to_string(requested)), "not available on this platform"});
            return unavailable(mode, fmt::format("{} is not available on this platform ({})", to_string(requested),
                                                 host_platform()));
        }
        Verdict forced{Verdict::Usable, {}, "forced"};
        if (requested != RunnerKind::Bwrap)
            if (Outcome o = walk_now(p); !o) return o;
        Outcome o = can_give(*r, c.policy);
        if (o) o = r->plan(env, forced, p);
        if (o || !passed_over(o)) return o;
        c.skipped.push_back({std::string(to_string(requested)), o.message});
        // Forced, it is the only candidate: its reason is the run's.
        return unavailable(mode, o.message);
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
    for (const Runner* r : order) {
        if (!r->candidate(env.config)) continue;
        // Only bwrap's stage can wait for the list; any other runner sees it whole.
        if (r->kind() != RunnerKind::Bwrap)
            if (Outcome o = walk_now(p); !o) return o;
        if (Outcome o = can_give(*r, c.policy); !o) {
            // Not even probed: nothing it found could change the answer.
            c.skipped.push_back({std::string(to_string(r->kind())), o.message});
            continue;
        }
        Verdict v = r->probe(env);
        if (v.kind == Verdict::Usable) {
            Outcome o = r->plan(env, v, p);
            if (o || !passed_over(o)) return o;
            v.reason = o.message;
        }
        c.skipped.push_back({std::string(to_string(r->kind())), v.reason});
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

void settle_descendants(Plan& p, bool parent_stays, const Runners& runners) {
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
        d.killed = true;
        d.by = "subreaper";
    } else {
        d.why = kSubreaper ? "exec mode leaves no parent to end them; use --supervise"
                           : "no parent of theirs can find them on this system";
    }
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
