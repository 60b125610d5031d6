#include "explain.hpp"
#include "bytes.hpp"

#include <algorithm>
#include <cstdio>

#include "chain.hpp"

#include <fmt/ranges.h>

#include "report.hpp"

namespace dsh {

namespace {

using ordered_json = nlohmann::ordered_json;

std::string q(const std::string& s) {
    return json_line(nlohmann::json(s));
}

std::string argv_text(const std::vector<std::string>& argv) {
    return json_line(nlohmann::json(argv));
}

std::string mode_source_text(const Resolution& r) {
    switch (r.policy.mode_source) {
        case ModeSource::Config: return "config " + r.settings.path;
        case ModeSource::Session:
            return fmt::format("session {} line {}{}", r.session_path.value_or(""), r.session.mode_line,
                               r.session.source.empty() ? "" : " (source " + r.session.source + ")");
        case ModeSource::Flag: return "--mode";
        case ModeSource::Default: return "default";
        case ModeSource::Escalation: return "escalation";
    }
    return "default";
}

std::string escalation_state(EscalationState e) {
    switch (e) {
        case EscalationState::None: return "none";
        case EscalationState::Granted: return "allowed-once";
        case EscalationState::Pending: return "pending";
    }
    return "none";
}

ordered_json sources_json(const Resolution& r) {
    ordered_json s;
    s["mode"] = to_string(r.policy.mode_source);
    s["workspaceRoot"] = to_string(r.policy.root_source);
    s["runner"] = r.runner_source;
    s["network"] = to_string(r.policy.network_source);
    s["probeTimeoutMs"] = r.probe_timeout_source;
    s["approver"] = r.approver_source;
    s["config"] = r.settings.path.empty() ? ordered_json(nullptr) : ordered_json(r.settings.path);
    s["session"] = r.session_path ? ordered_json(*r.session_path) : ordered_json(nullptr);
    if (r.session_path && r.session.mode) {
        s["sessionMode"] = to_string(*r.session.mode);
        s["sessionModeLine"] = r.session.mode_line;
        if (!r.session.source.empty()) s["sessionModeSource"] = r.session.source;
    }
    return s;
}

ordered_json escalation_json(const Resolution& r) {
    if (!r.escalation_target && !r.network_escalation) return nullptr;
    ordered_json e;
    e["state"] = escalation_state(r.escalation);
    e["mode"] = r.escalation_target ? ordered_json(to_string(*r.escalation_target)) : ordered_json(nullptr);
    e["currentMode"] = to_string(r.base_mode);
    e["currentModeSource"] = to_string(r.base_source);
    if (r.network_escalation) {
        e["network"] = to_string(*r.network_escalation);
        e["currentNetwork"] = to_string(r.base_network);
    }
    e["approver"] = r.settings.approver ? ordered_json(*r.settings.approver) : ordered_json(nullptr);
    return e;
}

}  // namespace

ordered_json plan_json(const Resolution& r, const Plan& l) {
    ordered_json j;
    j["type"] = "plan";
    j["version"] = 1;
    j["sources"] = sources_json(r);
    j["escalation"] = escalation_json(r);
    j["probeTimeoutMs"] = r.settings.probe_timeout_ms.value_or(kDefaultProbeTimeoutMs);
    j["confinement"] = confinement_record(l.c);
    if (l.in_process) j[l.in_process->name()] = l.in_process->explain();
    j["exec"] = ordered_json{{"path", l.exec_path}, {"argv", l.exec_argv}};
    return j;
}

// One line per carve-out that exists (how it holds, or why not), then one
// per reason for those that do not, naming each path.
template <typename Line>
static void carve_lines(Line& line, const char* label, const std::vector<ProtectedPath>& list) {
    bool first = true;
    auto put = [&](const std::string& text) {
        line(first ? label : "", text);
        first = false;
    };
    for (const auto& e : list) {
        if (!e.exists) continue;
        const std::string what = e.what.empty() ? e.source : e.source + ", " + e.what;
        put(fmt::format("{} ({}{}{})", q(e.path), what, e.enforced.empty() ? "" : ", " + e.enforced,
                        e.why_not.empty() ? "" : ": " + e.why_not));
    }
    std::vector<std::pair<std::string, std::vector<std::string>>> absent;  // why_not -> paths, in order
    for (const auto& e : list) {
        if (e.exists) continue;
        auto it = std::find_if(absent.begin(), absent.end(), [&](const auto& a) { return a.first == e.why_not; });
        if (it == absent.end()) {
            absent.emplace_back(e.why_not, std::vector<std::string>{});
            it = std::prev(absent.end());
        }
        it->second.push_back(q(e.path));
    }
    for (const auto& [why, paths] : absent)
        put(fmt::format("{}: {}", fmt::join(paths, ", "), why.empty() ? "absent when the run started" : why));
}

std::string plan_text(const Resolution& r, const Plan& l) {
    const Policy& p = l.c.policy;
    std::string out;
    auto line = [&out](const std::string& k, const std::string& v) { out += fmt::format("{:<13}{}\n", k, v); };
    line("command:", q(l.c.command_path) + " " + argv_text(l.c.argv.empty() ? l.exec_argv : l.c.argv));
    line("mode:", fmt::format("{} (from {})", to_string(p.mode), mode_source_text(r)));
    if (r.escalation_target || r.network_escalation) {
        std::string approver = r.settings.approver ? q(*r.settings.approver) : "none";
        if (r.escalation_target)
            line("escalation:", fmt::format("{} to {} from {} (decided by {}), approver {} ({})",
                                            escalation_state(r.escalation), to_string(*r.escalation_target),
                                            to_string(r.base_mode), to_string(r.base_source), approver,
                                            r.approver_source));
        if (r.network_escalation)
            line("escalation:", fmt::format("{} to network {} from {}, approver {} ({})", escalation_state(r.escalation),
                                            to_string(*r.network_escalation), to_string(r.base_network), approver,
                                            r.approver_source));
        if (r.escalation == EscalationState::Pending)
            out += "             (dry run: nobody was asked; a real call asks the approver first)\n";
    }
    std::string root_from = p.root_source == RootSource::Config ? "config " + r.settings.path
                            : p.root_source == RootSource::Flag ? "--root"
                            : p.root_source == RootSource::Session ? "the session log's cwd"
                                                                : "current directory";
    line("root:", fmt::format("{} (from {})", q(p.workspace_root), root_from));
    bool first = true;
    for (const auto& w : p.writable_roots) {
        line(first ? "writable:" : "", fmt::format("{} ({}{}{}{})", q(w.path), to_string(w.source),
                                                  w.tool.empty() ? "" : " " + w.tool,
                                                  w.persists ? "" : ", discarded at exit",
                                                  w.created ? ", does not exist: made when the run starts" : ""));
        first = false;
    }
    for (const auto& f : p.writable_files) {
        line(first ? "writable:" : "", fmt::format("{} (file)", q(f)));
        first = false;
    }
    if (first) line("writable:", p.mode == Mode::DangerFullAccess ? "everything (unconfined)" : "nothing");
    // The carve-outs (issues 18, 37): what is kept read-only inside the
    // roots and what is hidden, as the record's protectedPaths/hiddenPaths.
    carve_lines(line, "protected:", p.protected_paths);
    for (const auto& u : p.unprotected) line("unprotected:", q(u) + " (--unprotect)");
    carve_lines(line, "hidden:", p.hidden_paths);
    if (p.private_tmp)
        line("tmp:", p.mode == Mode::ReadOnly ? "private (--private-tmp): empty, read-only, discarded at exit"
                                              : "private (--private-tmp): empty, writable, discarded at exit");
    {
        const char* from = p.network_source == NetworkSource::Flag         ? "--net"
                           : p.network_source == NetworkSource::Config     ? "config"
                           : p.network_source == NetworkSource::Session    ? "the session log"
                           : p.network_source == NetworkSource::Escalation ? "--escalate-net"
                                                                           : "default";
        std::string net = fmt::format("{} (from {})", p.net_allow ? std::string_view("allow") : to_string(p.network), from);
        if (p.network_requested)
            net += fmt::format("; the {}'s \"{}\" cannot hold under danger-full-access",
                               p.network_source == NetworkSource::Session ? "session log" : "config",
                               to_string(*p.network_requested));
        if (!l.c.network.enforced.empty()) net += fmt::format(", enforced by {}", fmt::join(l.c.network.enforced, ", "));
        line("network:", net);
        if (p.net_allow) {
            std::vector<std::string> allow, deny;
            for (const auto& r : p.net_allow->allow) allow.push_back(r.text);
            for (const auto& r : p.net_allow->deny) deny.push_back(r.text);
            line("net allow:", fmt::format("{}", fmt::join(allow, ", ")));
            if (!deny.empty()) line("net deny:", fmt::format("{}", fmt::join(deny, ", ")));
            line("net proxy:", "dsh-confine's, outside; the command's namespace has only lo and a listener handed to "
                               "it, and each connection is a network record");
        }
        for (const auto& g : l.c.network.gaps) line("net gap:", g.effect + ": " + g.detail);
    }
    {
        const Descendants& d = l.c.descendants;
        line("at exit:", d.killed ? fmt::format("processes the command leaves running are killed ({})", d.by)
                                  : fmt::format("processes the command leaves running run on ({})", d.why));
    }
    line("config:", r.settings.path.empty() ? "none found" : q(r.settings.path));
    if (r.session_path)
        line("session:", r.session.mode ? fmt::format("{} (last sandbox/mode at line {}: {})", q(*r.session_path),
                                                      r.session.mode_line, to_string(*r.session.mode))
                                        : fmt::format("{} (no sandbox/mode event)", q(*r.session_path)));
    line("runner:", fmt::format("{} (asked: {} from {}), enforcement {}", to_string(l.c.runner),
                                r.settings.runner ? std::string(to_string(*r.settings.runner)) : "auto",
                                r.runner_source, to_string(l.c.enforcement())));
    for (const auto& s : l.c.skipped) line("skipped:", s.runner + ": " + s.reason);
    for (const auto& layer : l.c.layers) line("layer:", fmt::format("{} ({})", layer.name, to_string(layer.enforcement)));
    for (const auto& g : l.c.gaps()) line(g.own_effect ? "gap:" : "not covered:", g.effect + ": " + g.detail);
    if (l.in_process)
        for (const auto& [label, text] : l.in_process->explain_lines()) line(label, text);
    // Issue 21: each limit in force, its backend and its gaps.
    for (const auto& lim : l.c.limits.limits) {
        line("limit:", fmt::format("{} {} by {}{}{}", lim.name, lim.value, lim.backend, lim.how.empty() ? "" : " ",
                                   lim.how));
        for (const auto& g : lim.gaps) line("limit gap:", g.effect + ": " + g.detail);
    }
    line("exec:", q(l.exec_path) + " " + argv_text(l.exec_argv));
    out += "(nothing was run)\n";
    return out;
}

namespace {

// A hidden path at or above `canonical` that exists (what bwrap hides), or null.
const ProtectedPath* hidden_at(const Policy& p, const std::string& canonical) {
    for (const auto& h : p.hidden_paths)
        if (h.exists && path_under(canonical, h.path)) return &h;
    return nullptr;
}

// Whether a protected path is bound read-only by the runners: it existed
// when the run started (nothing is mounted for an absent one), inside a root
// (outside, read-only already), and is not only watched. A pinned .git is a
// mount point writable inside: it decides nothing here.
// An absent one inside a root holds too, after the run: what the command
// makes there is renamed aside when it ends (issue 37), so no write persists.
bool held(const ProtectedPath& e) {
    return (!e.exists || e.fd >= 0) && !e.watched &&
           e.why_not != kProtectedOutsideText;
}

// A held protected path at or above `canonical` (a read-only bind covers
// everything below it), else the innermost one listed there that is not
// held, or null. A pinned .git is a mount point writable inside: it decides
// nothing here.
const ProtectedPath* carved_at(const Policy& p, const std::string& canonical) {
    const ProtectedPath* unheld = nullptr;
    for (const auto& e : p.protected_paths) {
        if (e.pin || !path_under(canonical, e.path)) continue;
        if (held(e)) return &e;
        if (!unheld || e.path.size() > unheld->path.size()) unheld = &e;
    }
    return unheld;
}

}  // namespace

CheckAnswer check_write(const Policy& p, const std::string& path, const std::string& cwd) {
    CheckAnswer a;
    a.path = path;
    a.canonical = canonical_path(path, cwd);
    // The verdict is the policy's own (write_allowed); the rest only says why.
    a.allowed = write_allowed(p, path, cwd);
    if (!a.allowed) return a;
    if (p.mode == Mode::DangerFullAccess) {
        a.matched_source = "mode";
        return a;
    }
    // The carve-outs, as the runners enforce them: a hidden directory is an
    // empty read-only tmpfs and a hidden file a read-only /dev/null; a held
    // protected path a read-only bind.
    if ((a.hidden = hidden_at(p, a.canonical))) {
        a.allowed = false;
        return a;
    }
    if ((a.carved = carved_at(p, a.canonical)) && (a.held = held(*a.carved))) {
        a.allowed = false;
        return a;
    }
    for (const auto& f : p.writable_files)
        if (a.canonical == f) {
            a.matched = f;
            a.matched_source = "file";
            return a;
        }
    // The innermost root decides: $TMPDIR under a private /tmp is the host's.
    const WritableRoot* best = nullptr;
    for (const auto& r : p.writable_roots)
        if (path_under(a.canonical, r.path) && (!best || r.path.size() > best->path.size())) best = &r;
    if (best) {
        a.matched = best->path;
        a.matched_source = std::string(to_string(best->source));
        a.persists = best->persists;
    }
    return a;
}

CheckAnswer check_read(const Policy& p, const std::string& path, const std::string& cwd) {
    CheckAnswer a;
    a.read = true;
    a.path = path;
    a.canonical = canonical_path(path, cwd);
    // Reads are allowed everywhere in every mode but where a path is hidden
    // (every confined mode; danger-full-access hides nothing).
    a.hidden = hidden_at(p, a.canonical);
    a.allowed = a.hidden == nullptr;
    a.matched_source = p.mode == Mode::DangerFullAccess ? "mode" : "";
    return a;
}

std::string check_text(const Resolution& r, const CheckAnswer& a) {
    const Policy& p = r.policy;
    // The network axis is named where it is not the default, so a caller sees what else the policy holds.
    const std::string net = p.network == Network::Host ? std::string()
                                                        : fmt::format("network: {}\n", to_string(p.network));
    const char* access = a.read ? "read" : "write";
    if (a.hidden)
        return fmt::format("no: {} is hidden from the command in {} ({}, {}): a {} of it fails\n", q(a.canonical),
                           to_string(p.mode), q(a.hidden->path), a.hidden->source, access) + net;
    if (a.carved && a.held && !a.carved->exists)
        return fmt::format("no: {} is a protected path absent when the run starts in {} ({}, {}): what the command "
                           "makes there is renamed aside when the run ends\n",
                           q(a.canonical), to_string(p.mode), a.carved->what, a.carved->source) + net;
    if (a.carved && a.held)
        return fmt::format("no: {} is kept read-only inside the writable roots in {} (protected path {}: {}, {})\n",
                           q(a.canonical), to_string(p.mode), q(a.carved->path), a.carved->what, a.carved->source) + net;
    if (a.read) {
        if (a.matched_source == "mode") return fmt::format("yes: {} does not restrict reads\n", to_string(p.mode)) + net;
        return fmt::format("yes: {} may read {}\n", to_string(p.mode), q(a.canonical)) + net;
    }
    if (!a.allowed)
        return fmt::format("no: a write to {} is outside what {} allows\n", q(a.canonical), to_string(p.mode)) + net;
    if (a.matched_source == "mode") return fmt::format("yes: {} does not restrict writes\n", to_string(p.mode)) + net;
    // A protected path that holds nothing: said, never passed over.
    const std::string unheld =
        a.carved ? fmt::format("; the protected path {} is not held ({})", q(a.carved->path),
                               a.carved->exists ? a.carved->why_not : std::string(kProtectedAbsentText))
                 : std::string();
    return fmt::format("yes: {} is under {} ({}) in {}{}{}\n", q(a.canonical), q(a.matched), a.matched_source,
                       to_string(p.mode),
                       a.persists ? "" : "; the write is discarded when the command exits (private /tmp)", unheld) +
           net;
}

nlohmann::ordered_json check_json(const Resolution& r, const CheckAnswer& a) {
    ordered_json j;
    j["type"] = "check";
    j["version"] = 1;
    j["path"] = a.path;
    j["canonicalPath"] = a.canonical;
    j[a.read ? "read" : "write"] = a.allowed;
    j["mode"] = to_string(r.policy.mode);
    j["modeSource"] = to_string(r.policy.mode_source);
    j["workspaceRoot"] = r.policy.workspace_root;
    j["rootSource"] = to_string(r.policy.root_source);
    j["matched"] = a.allowed && !a.read && a.matched_source != "mode"
                       ? ordered_json{{"path", a.matched}, {"source", a.matched_source}}
                       : ordered_json(nullptr);
    // Whether an allowed write outlives the command (false: a private /tmp);
    // null when the write is refused.
    j["persists"] = a.allowed && !a.read ? ordered_json(a.persists) : ordered_json(nullptr);
    // The carve-out that decided (issue 37), or null: {path, what, source,
    // held} (held false: listed, but nothing holds it on this run).
    j["hiddenPath"] = a.hidden ? ordered_json{{"path", a.hidden->path}, {"source", a.hidden->source}}
                               : ordered_json(nullptr);
    j["protectedPath"] = a.carved ? ordered_json{{"path", a.carved->path},
                                                 {"what", a.carved->what},
                                                 {"source", a.carved->source},
                                                 {"held", a.held}}
                                  : ordered_json(nullptr);
    ordered_json roots = ordered_json::array();
    for (const auto& w : r.policy.writable_roots) {
        ordered_json rj{{"path", w.path}, {"source", to_string(w.source)}, {"persists", w.persists}};
        if (w.created) rj["created"] = true;  // made when the run starts (issue 42)
        if (!w.tool.empty()) rj["cache"] = w.tool;
        roots.push_back(std::move(rj));
    }
    j["writableRoots"] = std::move(roots);
    j["writableFiles"] = r.policy.writable_files;
    j["privateTmp"] = r.policy.private_tmp;
    j["network"] = to_string(r.policy.network);
    j["networkSource"] = to_string(r.policy.network_source);
    return j;
}

int probe_command(const RunnerEnv& env, bool json) {
    const ordered_json doc = chain::describe_all(env);
    std::string out;
    if (json) {
        out = doc.dump() + "\n";
    } else {
        std::string names;
        for (const auto& n : doc["chain"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
        out = fmt::format("platform {}, chain: {}; auto selects: {}\n", doc["platform"].get<std::string>(), names,
                          doc["selected"].is_null() ? "nothing (a confined run fails closed)"
                                                    : doc["selected"].get<std::string>());
        for (const auto& r : doc["runners"]) {
            const std::string name = r["runner"];
            const bool usable = r["usable"].get<bool>();
            std::string line = fmt::format("{:<9} {}", name, usable ? "usable" : "not usable");
            if (r.contains("summary")) line += "  " + r["summary"].get<std::string>();
            out += line + "\n";
            // Per mode, for a runner that is usable or that can be installed.
            if (r.contains("modes") && (usable || r.value("showModes", false))) {
                for (auto it = r["modes"].begin(); it != r["modes"].end(); ++it) {
                    std::string g;
                    for (const auto& gap : it.value()["gaps"])
                        if (gap["ownEffect"].get<bool>()) g += (g.empty() ? "" : ", ") + gap["effect"].get<std::string>();
                    out += fmt::format("    {:<16} {}{}\n", it.key(), it.value()["enforcement"].get<std::string>(),
                                       g.empty() ? "" : " (not governed: " + g + ")");
                }
            }
            // Per network mode (--net): what enforces it here, or why it cannot hold.
            if (r.contains("network") && usable) {
                for (auto it = r["network"].begin(); it != r["network"].end(); ++it) {
                    const auto& m = it.value();
                    std::string what;
                    if (!m["usable"].get<bool>()) what = "cannot hold: " + m["reason"].get<std::string>();
                    else if (it.key() == "host") what = "not governed";
                    else {
                        std::string e;
                        for (const auto& x : m["enforced"]) e += (e.empty() ? "" : ", ") + x.get<std::string>();
                        what = m["enforcement"].get<std::string>() + " (" + e + ")";
                    }
                    out += fmt::format("    {:<16} {}\n", "--net " + it.key(), what);
                }
            }
            if (!r["reason"].is_null()) out += fmt::format("    why: {}\n", r["reason"].get<std::string>());
            for (const char* note : {"lsmNote", "abiNote"})
                if (r.contains(note)) out += fmt::format("    note: {}\n", r[note].get<std::string>());
        }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return doc["selected"].is_null() ? 125 : 0;
}

}  // namespace dsh
