// libFuzzer target: the approver's inputs and output.
//
// 1. The input is what the person typed at the tty prompt. It goes through
//    tty_conversation, the same loop TtyApprover runs on /dev/tty, and the
//    outcome must be the one an independent reading of the rule gives: lines
//    end at '\n', at most three are considered, each is cut to its first 256
//    bytes, trimmed of spaces, tabs and '\r' and lowered; the first clear
//    answer decides, EOF before that cancels, three unclear answers cancel.
//    Answers alone are never "unavailable", and nothing after the deciding
//    '\n' is read. approval_from_answer ignores padding and ASCII case.
// 2. The input, split on NUL, is the justification, root and argv of an
//    escalation request: the JSON an approver command reads never throws,
//    is one line, parses back, and keeps every valid UTF-8 string exactly.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "escalation.hpp"

namespace {

using dsh::Approval;

// The rule as the prompt states it, written without looking at the parser.
std::optional<Approval> oracle(std::string line) {
    if (line.size() > 256) line.resize(256);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
    size_t b = 0;
    while (b < line.size() && (line[b] == ' ' || line[b] == '\t' || line[b] == '\r')) ++b;
    line.erase(0, b);
    for (auto& c : line)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    for (const char* w : {"a", "allow", "allow once", "y", "yes"})
        if (line == w) return Approval::AllowedOnce;
    for (const char* w : {"r", "reject", "n", "no"})
        if (line == w) return Approval::Rejected;
    for (const char* w : {"c", "cancel"})
        if (line == w) return Approval::Cancelled;
    return std::nullopt;
}

bool valid_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::type_error&) {
        return false;
    }
}

void conversation(std::string_view typed) {
    size_t at = 0;
    int asked = 0;
    const Approval got = dsh::tty_conversation(
        [&asked](std::string_view) {
            ++asked;
            return true;
        },
        [&]() -> int { return at < typed.size() ? static_cast<unsigned char>(typed[at++]) : -1; });

    // The expected course of the conversation.
    Approval want = Approval::Cancelled;
    int want_asked = 0;
    size_t want_at = 0;
    bool allow_seen = false;  // an allow word on a considered line, all before it unclear
    for (int tries = 0; tries < 3; ++tries) {
        ++want_asked;
        const size_t nl = typed.find('\n', want_at);
        if (nl == std::string_view::npos) {  // EOF before the line ends
            want_at = typed.size();
            break;
        }
        const std::string line(typed.substr(want_at, nl - want_at));
        want_at = nl + 1;
        const auto a = oracle(line);
        // The pure rule agrees on the line as the loop keeps it.
        if (dsh::approval_from_answer(line.substr(0, dsh::kMaxAnswerBytes)) != a) std::abort();
        if (a) {
            want = *a;
            allow_seen = *a == Approval::AllowedOnce;
            break;
        }
    }
    if (got == Approval::Unavailable) std::abort();
    if (got == Approval::AllowedOnce && !allow_seen) std::abort();
    if (got != want || asked != want_asked || at != want_at) std::abort();
}

void answer_rule(std::string_view s) {
    const auto a = dsh::approval_from_answer(s);
    if (a == Approval::Unavailable) std::abort();
    std::string padded = " \t\r" + std::string(s) + "\r \t";
    std::string upper(s);
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (dsh::approval_from_answer(padded) != a || dsh::approval_from_answer(upper) != a) std::abort();
    // A clear answer is short: the longest word is "allow once".
    if (a) {
        const auto b = s.find_first_not_of(" \t\r");
        const auto e = s.find_last_not_of(" \t\r");
        if (b == std::string_view::npos || e - b + 1 > 10) std::abort();
    }
}

void request_json(std::string_view in, size_t size) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
        const size_t nul = in.find('\0', start);
        parts.emplace_back(in.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start));
        if (nul == std::string_view::npos) break;
        start = nul + 1;
    }
    dsh::EscalationRequest r;
    r.target = size % 2 ? dsh::Mode::WorkspaceWrite : dsh::Mode::DangerFullAccess;
    r.current = dsh::Mode::ReadOnly;
    r.justification = parts[0];
    if (parts.size() > 1) r.root = parts[1];
    if (parts.size() > 2) r.argv.assign(parts.begin() + 2, parts.end());
    if (size % 3 == 0) r.subject = "operation";

    // Exactly what CommandApprover writes (before its '\n').
    const std::string out = dsh::approval_request_json(r).dump(-1, ' ', false,
                                                               nlohmann::json::error_handler_t::replace);
    for (unsigned char ch : out)
        if (ch < 0x20) std::abort();  // one line: the approver reads one object, then EOF
    const auto back = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    if (back.is_discarded() || !back.is_object()) std::abort();
    if (back.value("type", "") != "escalation-request" || back.value("version", 0) != 1) std::abort();
    if (back.value("mode", "") != dsh::to_string(r.target) || back.value("currentMode", "") != "read-only")
        std::abort();
    if (!back["argv"].is_array() || back["argv"].size() != r.argv.size()) std::abort();
    if (valid_utf8(r.justification) && back["justification"] != r.justification) std::abort();
    if (valid_utf8(r.root) && back["root"] != r.root) std::abort();
    for (size_t i = 0; i < r.argv.size(); ++i)
        if (valid_utf8(r.argv[i]) && back["argv"][i] != r.argv[i]) std::abort();
    if (!back["reason"].is_string() || !back["justification"].is_string() || !back["root"].is_string()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    conversation(in);
    answer_rule(in.substr(0, std::min<size_t>(in.find('\n'), 64)));
    request_json(in, size);
    return 0;
}
