#include "classify.hpp"

#include "bytes.hpp"

#include <algorithm>

namespace dsh {

namespace {

std::string lowered(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii_lower(c);
    return out;
}

bool contains_ci(std::string_view haystack_lower, std::string_view needle) {
    return haystack_lower.find(lowered(needle)) != std::string_view::npos;
}

bool blank_line(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

// Splits on \r?\n as the seed does (`split(/\r?\n/)`).
std::vector<std::string_view> lines_of(std::string_view text) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (true) {
        size_t j = text.find('\n', i);
        std::string_view line = text.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i);
        if (j != std::string_view::npos && !line.empty() && line.back() == '\r') line.remove_suffix(1);
        out.push_back(line);
        if (j == std::string_view::npos) break;
        i = j + 1;
    }
    return out;
}

std::vector<std::string> strings_of(const nlohmann::json& j) {
    std::vector<std::string> out;
    if (!j.is_array()) return out;
    for (const auto& x : j)
        if (x.is_string()) out.push_back(x.get<std::string>());
    return out;
}

}  // namespace

std::vector<FailureRule> rules_from_json(const nlohmann::json& rules) {
    std::vector<FailureRule> out;
    if (!rules.is_array()) return out;
    for (const auto& r : rules) {
        if (!r.is_object()) continue;
        FailureRule fr;
        if (auto it = r.find("allowedExitCodes"); it != r.end() && it->is_array()) {
            std::vector<int> codes;
            for (const auto& c : *it)
                if (c.is_number_integer()) codes.push_back(c.get<int>());
            fr.allowed_exit_codes = std::move(codes);
        }
        if (auto it = r.find("fatalSignatures"); it != r.end()) fr.fatal_signatures = strings_of(*it);
        if (auto it = r.find("informationalLines"); it != r.end()) fr.informational_lines = strings_of(*it);
        out.push_back(std::move(fr));
    }
    return out;
}

std::optional<std::string> match_runner_failure(const std::vector<FailureRule>& rules,
                                                std::optional<int> exit_code, std::string_view stderr_text) {
    if (!exit_code || *exit_code == 0) return std::nullopt;
    const auto lines = lines_of(stderr_text);
    for (const auto& rule : rules) {
        if (rule.allowed_exit_codes &&
            std::find(rule.allowed_exit_codes->begin(), rule.allowed_exit_codes->end(), *exit_code) ==
                rule.allowed_exit_codes->end())
            continue;
        std::vector<std::string> fatal;
        for (const auto& s : rule.fatal_signatures)
            if (!blank_line(s)) fatal.push_back(lowered(s));
        if (fatal.empty()) continue;
        std::vector<std::string> informational;
        for (const auto& s : rule.informational_lines) informational.push_back(lowered(s));
        for (auto line : lines) {
            const std::string l = lowered(line);
            if (std::find(informational.begin(), informational.end(), l) != informational.end()) continue;
            for (const auto& f : fatal)
                if (l.find(f) != std::string::npos) return std::string(line);
        }
    }
    return std::nullopt;
}

bool is_denial(std::optional<int> exit_code, std::string_view stderr_text,
               const std::vector<std::string>& denial_signatures) {
    if (!exit_code || *exit_code == 0) return false;
    const std::string text = lowered(stderr_text);
    for (const auto& s : denial_signatures)
        if (!s.empty() && contains_ci(text, s)) return true;
    return false;
}

Classification classify(const std::vector<FailureRule>& rules, const std::vector<std::string>& denial_signatures,
                        std::optional<int> exit_code, std::string_view stderr_text) {
    Classification c;
    c.runner_failure = match_runner_failure(rules, exit_code, stderr_text);
    c.runner_failed = c.runner_failure.has_value();
    c.denied = !c.runner_failed && is_denial(exit_code, stderr_text, denial_signatures);
    return c;
}

namespace {

bool path_char(char c) {
    return c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == '~' || (c >= '0' && c <= '9') ||
           (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// `name` occurs in `line` as a whole path: neither a longer path before it
// (foo/.git/config) nor after it (.git/config.lock).
bool names_path(std::string_view line, std::string_view name) {
    if (name.empty()) return false;
    for (size_t i = line.find(name); i != std::string_view::npos; i = line.find(name, i + 1)) {
        const size_t end = i + name.size();
        const bool before_ok = i == 0 || !path_char(line[i - 1]);
        // A path ends a sentence or a quote: "...config." or "...config':".
        const bool after_ok = end == line.size() || !path_char(line[end]) ||
                              (line[end] == '.' && (end + 1 == line.size() || !path_char(line[end + 1])));
        if (before_ok && after_ok) return true;
    }
    return false;
}

// `name` occurs in `line` as a whole path or as the directory of one
// (.vscode/settings.json names .vscode).
bool names_path_or_under(std::string_view line, std::string_view name) {
    if (names_path(line, name)) return true;
    const std::string dir = std::string(name) + "/";
    for (size_t i = line.find(dir); i != std::string_view::npos; i = line.find(dir, i + 1))
        if (i == 0 || !path_char(line[i - 1])) return true;
    return false;
}

}  // namespace

std::optional<std::string> protected_refusal(const std::vector<std::string>& protected_paths, std::string_view cwd,
                                             std::string_view stderr_text) {
    static constexpr const char* kRefusals[] = {"device or resource busy", "read-only file system",
                                                "permission denied"};
    std::string base(cwd);
    if (!base.empty() && base.back() != '/') base += '/';
    for (auto line : lines_of(stderr_text)) {
        const std::string l = lowered(line);
        if (std::none_of(std::begin(kRefusals), std::end(kRefusals),
                         [&](const char* r) { return l.find(r) != std::string::npos; }))
            continue;
        for (const auto& p : protected_paths) {
            if (names_path_or_under(line, p)) return p;
            if (base.size() > 1 && p.size() > base.size() && p.compare(0, base.size(), base) == 0) {
                const std::string rel = p.substr(base.size());
                if (names_path_or_under(line, rel) || names_path_or_under(line, "./" + rel)) return p;
            }
        }
    }
    return std::nullopt;
}

std::string denial_marker(std::string_view mode) {
    return "[sandbox: file access denied under " + std::string(mode) + " mode]";
}

std::string escalation_hint(std::string_view subject) {
    return "[sandbox: escalation available \u2014 retry this exact " + std::string(subject) +
           " once with sandbox_permissions (the narrowest wider mode that suffices) + justification; "
           "the approval prompt asks the user]";
}

std::string runner_failure_marker(std::string_view mode) {
    return "[sandbox: the sandbox runner itself failed under " + std::string(mode) +
           " mode \u2014 the command did not run; this is a sandbox problem, not a command failure]";
}

}  // namespace dsh
