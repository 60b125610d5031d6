#include "cli_fast.hpp"

#include <optional>
#include <string_view>

namespace dsh {

namespace {

// Values CLI11 could read differently from us are left to CLI11: empty ones,
// ones that start with '-' (CLI11 may take them for an option), and names of
// subcommands.
bool plain_value(std::string_view v) {
    if (v.empty() || v[0] == '-') return false;
    for (std::string_view sub : {"probe", "explain", "check", "session", "self-test"})
        if (v == sub) return false;
    return true;
}

// A descriptor number as CLI11 reads it (strtoll base 0, then the
// NonNegativeNumber check): only plain decimal without a leading zero, short
// enough to fit an int, is taken here; "010" (octal there), "0x3", "+3", "-1"
// and the rest go to CLI11.
std::optional<int> plain_fd(std::string_view v) {
    if (v.empty() || v.size() > 9) return std::nullopt;
    if (v.size() > 1 && v[0] == '0') return std::nullopt;
    int n = 0;
    for (char c : v) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + (c - '0');
    }
    return n;
}

bool set_once(std::optional<std::string>& field, std::string_view v) {
    if (field) return false;  // repeated: CLI11's multi-option policy decides
    field = std::string(v);
    return true;
}

bool flag_once(bool& field) {
    if (field) return false;
    field = true;
    return true;
}

}  // namespace

bool parse_cli_fast(const std::vector<std::string>& ours, bool dashdash, std::vector<std::string>& command,
                    Request& out) {
    if (!dashdash || command.empty() || command.front().empty()) return false;
    Request r;
    for (size_t i = 0; i < ours.size(); ++i) {
        std::string_view a = ours[i];
        if (a.size() < 3 || a[0] != '-' || a[1] != '-') return false;
        std::string_view name = a.substr(2);
        std::optional<std::string_view> value;
        if (auto eq = name.find('='); eq != std::string_view::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        // Flags take no value here; "--supervise=false" and the like are CLI11's.
        if (name == "supervise" || name == "markers" || name == "clearenv" || name == "scrub-secrets") {
            if (value) return false;
            bool& f = name == "supervise" ? r.supervise
                      : name == "markers" ? r.markers
                      : name == "clearenv" ? r.clearenv
                                           : r.scrub_secrets;
            if (!flag_once(f)) return false;
            continue;
        }
        if (!value) {
            if (i + 1 >= ours.size()) return false;
            value = std::string_view(ours[++i]);
        }
        if (!plain_value(*value)) return false;
        if (name == "mode") {
            if (!set_once(r.mode, *value)) return false;
        } else if (name == "root") {
            if (!set_once(r.root, *value)) return false;
        } else if (name == "runner") {
            if (!set_once(r.runner, *value)) return false;
        } else if (name == "writable") {
            r.writable.emplace_back(*value);
        } else if (name == "report-fd") {
            auto fd = plain_fd(*value);
            if (!fd || r.report_fd != -1) return false;
            r.report_fd = *fd;
        } else if (name == "keep-fd") {
            auto fd = plain_fd(*value);
            if (!fd) return false;
            r.keep_fds.push_back(*fd);
        } else {
            return false;
        }
    }
    r.action = Action::Run;
    r.argv = std::move(command);
    out = std::move(r);
    return true;
}

}  // namespace dsh
