#include "seatbelt_plan.hpp"

#include <fmt/format.h>

namespace dsh::seatbelt {

namespace {

// "/a/b" under "/a": equal, or a prefix followed by '/'.
bool has_prefix_component(std::string_view path, std::string_view prefix) {
    if (prefix == "/") return true;
    return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
           (path.size() == prefix.size() || path[prefix.size()] == '/');
}

}  // namespace

RealpathView symlink_view(std::vector<std::pair<std::string, std::string>> links) {
    return [links = std::move(links)](const std::string& path) -> std::optional<std::string> {
        std::string p = lexically_normal(path);
        // Bounded like the kernel's MAXSYMLINKS, so a cyclic table ends.
        for (int hops = 0; hops < 32; ++hops) {
            bool rewrote = false;
            for (const auto& [link, target] : links) {
                if (has_prefix_component(p, link) && link != "/") {
                    p = lexically_normal(target + p.substr(link.size()));
                    rewrote = true;
                    break;
                }
            }
            if (!rewrote) return p;
        }
        return std::nullopt;  // ELOOP: resolves to nothing
    };
}

RealpathView macos_view() {
    return symlink_view({{"/tmp", "/private/tmp"}, {"/var", "/private/var"}, {"/etc", "/private/etc"}});
}

std::string canonical(std::string_view path, const RealpathView& view) {
    const std::string abs = lexically_normal(path);
    if (auto r = view(abs)) return *r;
    // Walk up to the longest existing ancestor; the missing components are
    // not symlinks (they do not exist), so only the prefix needs resolving.
    std::string head = abs;
    std::string tail;
    while (head.size() > 1) {
        const auto slash = head.find_last_of('/');
        tail = head.substr(slash) + tail;
        head = slash == 0 ? "/" : head.substr(0, slash);
        if (auto r = view(head)) return lexically_normal(*r + tail);
    }
    return abs;
}

std::string sbpl_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '"';
    for (char ch : s) {
        if (ch == '\\') out += "\\\\";
        else if (ch == '"') out += "\\\"";
        else out += ch;
    }
    out += '"';
    return out;
}

Plan plan(const Policy& policy, const std::vector<std::string>& command, const RealpathView& view) {
    Plan p;
    // The seed's profile, forms joined by one space. Only constants are
    // pasted into the text; every path travels as a -D parameter so no
    // spelling can change the profile's meaning.
    std::vector<std::string> forms = {"(version 1)", "(allow default)", "(deny file-write*)"};
    int file_index = 0;
    for (const auto& f : policy.writable_files) {
        // The policy's two device files are constants, pasted as literals:
        // /dev/null is the seed's own form; /dev/tty, the command's own
        // controlling terminal (policy.cpp), is one form more than the seed
        // has, in every mode (docs/DECISIONS.md, "Contract regressions").
        if (f == "/dev/null" || f == "/dev/tty") {
            forms.push_back("(allow file-write* (literal " + sbpl_quote(f) + "))");
        } else {
            std::string name = fmt::format("WRITABLE_FILE_{}", file_index++);
            p.params.emplace_back(name, canonical(f, view));
            forms.push_back("(allow file-write* (literal (param " + sbpl_quote(name) + ")))");
        }
    }
    if (policy.mode == Mode::WorkspaceWrite) {
        for (const auto& r : policy.writable_roots) {
            std::string c = canonical(r.path, view);
            bool seen = false;
            for (const auto& w : p.writable_roots) seen = seen || w == c;
            if (!seen) p.writable_roots.push_back(std::move(c));
        }
        if (!p.writable_roots.empty()) {
            std::string form = "(allow file-write*";
            for (size_t i = 0; i < p.writable_roots.size(); ++i) {
                std::string name = fmt::format("WRITABLE_ROOT_{}", i);
                p.params.emplace_back(name, p.writable_roots[i]);
                form += " (subpath (param " + sbpl_quote(name) + "))";
            }
            form += ")";
            forms.push_back(std::move(form));
        }
    }
    for (size_t i = 0; i < forms.size(); ++i) {
        if (i) p.profile += ' ';
        p.profile += forms[i];
    }

    p.argv = {std::string(SANDBOX_EXEC), "-p", p.profile};
    // sandbox-exec takes -D KEY=VALUE (getopt; the value may hold '=' or any
    // byte but NUL). One element each, joined to the flag as sandbox-exec's
    // own usage spells it.
    for (const auto& [name, value] : p.params) p.argv.push_back("-D" + name + "=" + value);
    p.argv.push_back("--");
    p.argv.insert(p.argv.end(), command.begin(), command.end());

    p.layer.name = "seatbelt";
    // file-write* covers every write-like operation Seatbelt knows (data,
    // create, unlink, rename, link, mode, owner, flags, times, xattr), so
    // the command's own file effects are all governed: full, as the seed says.
    p.layer.enforcement = Enforcement::Full;
    p.layer.gaps = {
        {"process-visibility", "Seatbelt leaves other processes visible (no PID namespace)", false},
        {"terminal-input-injection",
         "the profile does not filter ioctl on the controlling terminal (TIOCSTI); not verified on macOS", false},
    };
    p.layer.details = nlohmann::json{{"sandboxExec", std::string(SANDBOX_EXEC)}, {"profile", p.profile}};
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [name, value] : p.params) params[name] = value;
    p.layer.details["params"] = params;
    p.denial_signatures = {"operation not permitted"};
    p.runner_failure_rules = nlohmann::json::array({nlohmann::json{{"fatalSignatures", {"sandbox-exec: "}}}});
    return p;
}

std::vector<std::string> probe_argv() {
    Policy ro;
    ro.mode = Mode::ReadOnly;
    ro.writable_files = {"/dev/null"};
    return plan(ro, {"/usr/bin/true"}, macos_view()).argv;
}

std::string render_darwin_plan(const Policy& policy, const std::vector<std::string>& command) {
    Plan p = plan(policy, command, macos_view());
    std::string out;
    out += "platform: darwin\n";
    out += "runner: seatbelt\n";
    out += fmt::format("mode: {}\n", to_string(policy.mode));
    out += "enforcement: full\n";
    out += "argv:\n";
    for (const auto& a : p.argv) out += "  " + nlohmann::json(a).dump() + "\n";
    out += "params:\n";
    for (const auto& [name, value] : p.params) out += "  " + name + " = " + nlohmann::json(value).dump() + "\n";
    out += "profile:\n  " + p.profile + "\n";
    out += "writable roots (canonical as macOS resolves them):\n";
    for (const auto& r : p.writable_roots) out += "  " + nlohmann::json(r).dump() + "\n";
    out += "denial signatures: \"operation not permitted\"\n";
    out += "runner failure: a stderr line containing \"sandbox-exec: \"\n";
    out += "gaps (not own file effects):\n";
    for (const auto& g : p.layer.gaps) out += "  " + g.effect + ": " + g.detail + "\n";
    out += "note: roots were resolved through macOS's fixed symlinks (/tmp, /var, /etc -> /private/...); "
           "on a Mac, dsh-confine resolves them with realpath(3).\n";
    return out;
}

}  // namespace dsh::seatbelt
