#include "acl_plan.hpp"

#include <fmt/format.h>

#include "sha256.hpp"

namespace dsh::acl {

namespace {

constexpr uint32_t SID_MODULUS = (1u << 30) - 1;

uint32_t u32le(const std::array<uint8_t, 32>& d, size_t off) {
    return uint32_t(d[off]) | uint32_t(d[off + 1]) << 8 | uint32_t(d[off + 2]) << 16 | uint32_t(d[off + 3]) << 24;
}

std::string sid_from(std::string_view bytes) {
    const auto d = sha256(bytes);
    return fmt::format("S-1-4-{}-{}", u32le(d, 0) % SID_MODULUS + 1, u32le(d, 4) % SID_MODULUS + 1);
}

std::string err(std::string_view detail) { return "windows-acl-run: " + std::string(detail); }

char fold(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : (c == '/' ? '\\' : c); }

std::string_view strip_trailing_separators(std::string_view p) {
    // Keep a root such as "C:\" or "\" whole.
    while (p.size() > 1 && (p.back() == '\\' || p.back() == '/') && !(p.size() == 3 && p[1] == ':')) p.remove_suffix(1);
    return p;
}

}  // namespace

std::string workspace_sid(std::string_view workspace) { return sid_from(workspace); }

std::string temp_sid(std::string_view temp_dir) {
    std::string bytes("temp");
    bytes += '\0';
    bytes += temp_dir;
    return sid_from(bytes) + "-1";
}

std::vector<std::string> helper_argv(std::string_view helper, Mode mode, std::string_view workspace,
                                     std::string_view temp, const std::optional<Sids>& sids,
                                     const std::vector<std::string>& command) {
    std::vector<std::string> a = {std::string(helper), "--workspace", std::string(workspace), "--temp",
                                  std::string(temp),   "--mode",      std::string(to_string(mode))};
    if (sids && mode == Mode::WorkspaceWrite) {
        a.insert(a.end(), {"--write-sid", sids->write_sid, "--temp-write-sid", sids->temp_write_sid});
    }
    a.push_back("--");
    a.insert(a.end(), command.begin(), command.end());
    return a;
}

std::vector<std::string> probe_argv(std::string_view helper, std::string_view tmp) {
    return helper_argv(helper, Mode::ReadOnly, tmp, tmp, std::nullopt, {"cmd", "/c", "exit 0"});
}

bool windows_path_within(std::string_view path, std::string_view parent) {
    path = strip_trailing_separators(path);
    parent = strip_trailing_separators(parent);
    if (path.size() < parent.size()) return false;
    for (size_t i = 0; i < parent.size(); ++i)
        if (fold(path[i]) != fold(parent[i])) return false;
    if (path.size() == parent.size()) return true;
    const char next = path[parent.size()];
    const char last = parent.empty() ? '\0' : parent.back();
    return next == '\\' || next == '/' || last == '\\' || last == '/';
}

HelperParse parse_helper_args(const std::vector<std::string>& args,
                              const std::function<bool(const std::string&)>& is_dir) {
    HelperParse r;
    auto bad = [&r](std::string detail) {
        r.error = err(detail);
        return r;
    };
    std::optional<std::string> workspace, temp, mode, write_sid, temp_write_sid;
    bool saw_separator = false;
    size_t i = 0;
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            saw_separator = true;
            ++i;
            break;
        }
        std::optional<std::string>* slot = nullptr;
        if (a == "--workspace") slot = &workspace;
        else if (a == "--temp") slot = &temp;
        else if (a == "--mode") slot = &mode;
        else if (a == "--write-sid") slot = &write_sid;
        else if (a == "--temp-write-sid") slot = &temp_write_sid;
        if (!slot) return bad("unknown argument: " + a);
        // The value after a flag is always a value, whatever it looks like.
        if (i + 1 >= args.size()) return bad(a + " requires a value");
        if (*slot) return bad(a + " given more than once");
        *slot = args[++i];
    }
    if (!workspace) return bad("missing --workspace");
    if (!temp) return bad("missing --temp");
    if (!mode) return bad("missing --mode");
    if (!saw_separator || i >= args.size()) return bad("missing -- <command>");

    HelperArgs h;
    if (*mode == "read-only") h.mode = Mode::ReadOnly;
    else if (*mode == "workspace-write") h.mode = Mode::WorkspaceWrite;
    else return bad("unknown mode: " + *mode);
    if (h.mode == Mode::ReadOnly && (write_sid || temp_write_sid))
        return bad("read-only does not accept --write-sid or --temp-write-sid");
    if (h.mode == Mode::WorkspaceWrite && (write_sid.has_value() != temp_write_sid.has_value()))
        return bad("workspace-write requires --write-sid and --temp-write-sid together");
    if (!is_dir(*workspace)) return bad("--workspace is not an existing directory: " + *workspace);
    if (!is_dir(*temp)) return bad("--temp is not an existing directory: " + *temp);
    if (write_sid && *write_sid != workspace_sid(*workspace))
        return bad("--write-sid does not match --workspace");
    // Stricter than the seed lists: the temp SID is derived from the temp
    // dir as well, so a SID for another dir is refused the same way.
    if (temp_write_sid && *temp_write_sid != temp_sid(*temp))
        return bad("--temp-write-sid does not match --temp");
    // The temp grant must not widen the workspace's (or sit in it, where a
    // workspace file could be made to alias it). Read-only grants nothing,
    // and its probe passes one dir as both.
    if (h.mode == Mode::WorkspaceWrite && windows_path_within(*temp, *workspace))
        return bad(fmt::format("Windows ACL temp root must be outside the workspace: workspace={}; temp={}",
                               *workspace, *temp));
    h.workspace = *workspace;
    h.temp = *temp;
    if (write_sid) h.sids = Sids{*write_sid, *temp_write_sid};
    h.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    r.args = std::move(h);
    return r;
}

std::string quote_windows_arg(std::string_view arg) {
    if (!arg.empty() && arg.find_first_of(" \t\n\v\"") == std::string_view::npos) return std::string(arg);
    std::string out = "\"";
    for (size_t i = 0;; ++i) {
        size_t backslashes = 0;
        while (i < arg.size() && arg[i] == '\\') {
            ++backslashes;
            ++i;
        }
        if (i == arg.size()) {
            // Before the closing quote every backslash is doubled.
            out.append(backslashes * 2, '\\');
            break;
        }
        if (arg[i] == '"') {
            out.append(backslashes * 2 + 1, '\\');
            out += '"';
        } else {
            out.append(backslashes, '\\');
            out += arg[i];
        }
    }
    out += '"';
    return out;
}

std::string windows_command_line(const std::vector<std::string>& argv) {
    std::string out;
    for (size_t i = 0; i < argv.size(); ++i) {
        if (i) out += ' ';
        out += quote_windows_arg(argv[i]);
    }
    return out;
}

Layer layer() {
    Layer l;
    l.name = "windows-acl";
    l.enforcement = Enforcement::Partial;
    l.gaps = {
        {"everyone-writable-objects",
         "the write-restricted token keeps Everyone and the logon SID as restricting SIDs (process start-up needs "
         "them), so any object whose ACL grants them write access stays writable",
         true},
        {"hard-links", "an NTFS hard link aliases one file object across the workspace and other paths", true},
        {"fat-volumes", "FAT and exFAT volumes carry no ACLs: writes there are not governed", true},
        {"grandchild-stdio", "no piped stdio for grandchildren of the confined command", false},
        {"process-visibility", "other processes stay visible", false},
    };
    l.details = nlohmann::json{{"grantMask", "0x00110156"}, {"tokenFlags", "WRITE_RESTRICTED|DISABLE_MAX_PRIVILEGE|LUA_TOKEN"}};
    return l;
}

std::vector<std::string> denial_signatures() { return {"access is denied", "access to the path", "permission denied"}; }

nlohmann::json runner_failure_rules() {
    return nlohmann::json::array(
        {nlohmann::json{{"allowedExitCodes", {HELPER_FAILURE_EXIT}}, {"fatalSignatures", {"windows-acl-run: "}}}});
}

std::string render_windows_plan(const Policy& policy, const std::vector<std::string>& command,
                                std::string_view temp, bool session) {
    std::optional<Sids> sids;
    std::string temp_dir(temp);
    const bool private_temp = session && policy.mode == Mode::WorkspaceWrite;
    if (private_temp) {
        // Created at run time with mkdtemp; its SID is derived from its name.
        temp_dir += "\\dsh-XXXXXX";
        sids = Sids{workspace_sid(policy.workspace_root), "<temp SID of the private dir, derived at run time>"};
    }
    const auto argv = helper_argv(HELPER_NAME, policy.mode, policy.workspace_root, temp_dir, sids, command);
    const Layer l = layer();
    std::string out;
    out += "platform: windows\n";
    out += "runner: windows-acl\n";
    out += fmt::format("mode: {}\n", to_string(policy.mode));
    out += "enforcement: partial\n";
    out += "argv (the helper, next to dsh-confine.exe):\n";
    for (const auto& a : argv) out += "  " + nlohmann::json(a).dump() + "\n";
    out += "command line: " + windows_command_line(argv) + "\n";
    if (policy.mode == Mode::WorkspaceWrite) {
        out += "workspace SID: " + workspace_sid(policy.workspace_root) + " (standing ACE on the workspace)\n";
        out += private_temp ? "temp SID: derived from the private temp dir; its ACE is revoked when the run ends\n"
                            : "temp: the helper creates mkdtemp(<temp>\\dsh-), sets TMP and TEMP to it, grants it, "
                              "and removes it on exit\n";
        out += "grant ACE: allow, OBJECT_INHERIT|CONTAINER_INHERIT, mask 0x00110156\n";
    }
    out += "token: CreateRestrictedToken(WRITE_RESTRICTED|DISABLE_MAX_PRIVILEGE|LUA_TOKEN); restricting SIDs: logon "
           "SID, Everyone";
    out += policy.mode == Mode::WorkspaceWrite ? ", workspace SID, temp SID\n" : "\n";
    out += "job object: KILL_ON_JOB_CLOSE (descendants die with the helper)\n";
    out += "denial signatures: \"access is denied\", \"access to the path\", \"permission denied\"\n";
    out += "runner failure: exit 127 and a stderr line containing \"windows-acl-run: \"\n";
    out += "gaps:\n";
    for (const auto& g : l.gaps) out += "  " + g.effect + ": " + g.detail + "\n";
    return out;
}

}  // namespace dsh::acl
