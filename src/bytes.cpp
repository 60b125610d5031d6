#include "bytes.hpp"

#include <algorithm>
#include <vector>

namespace dsh {

bool next_code_point(std::string_view s, size_t& i, uint32_t& cp) noexcept {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
        cp = c;
        ++i;
        return true;
    }
    size_t n = 0;
    uint32_t v = 0;
    if ((c & 0xe0) == 0xc0) n = 1, v = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) n = 2, v = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) n = 3, v = c & 0x07;
    else return false;
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
        const auto d = static_cast<unsigned char>(s[i + k]);
        if ((d & 0xc0) != 0x80) return false;
        v = (v << 6) | (d & 0x3f);
    }
    constexpr uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return false;
    cp = v;
    i += n + 1;
    return true;
}

bool is_utf8(std::string_view s) noexcept {
    uint32_t cp;
    for (size_t i = 0; i < s.size();)
        if (!next_code_point(s, i, cp)) return false;
    return true;
}

std::string to_hex(std::string_view s) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) {
        out += digits[c >> 4];
        out += digits[c & 0xf];
    }
    return out;
}

std::optional<std::string> from_hex(std::string_view h) {
    if (h.size() % 2) return std::nullopt;
    const auto nibble = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    std::string out;
    out.reserve(h.size() / 2);
    for (size_t k = 0; k < h.size(); k += 2) {
        const int hi = nibble(h[k]), lo = nibble(h[k + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi << 4 | lo);
    }
    return out;
}

namespace {

// The optimal-string-alignment distance (Levenshtein plus one swap of neighbours).
size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

}  // namespace

bool parse_fd(std::string_view v, int& out) noexcept {
    if (v.empty() || v.size() > 9) return false;
    int n = 0;
    for (char ch : v) {
        if (ch < '0' || ch > '9') return false;
        n = n * 10 + (ch - '0');
    }
    out = n;
    return true;
}

std::string passwd_home(std::string_view text, int field, std::string_view value) {
    std::string found;
    for_each_line(text, [&](std::string_view line) {
        std::string_view f[6];
        int n = 0;
        for (size_t at = 0; n < 6; ++n) {
            const size_t colon = line.find(':', at);
            f[n] = line.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at);
            if (colon == std::string_view::npos) {
                ++n;
                break;
            }
            at = colon + 1;
        }
        if (n <= field || f[field] != value) return true;
        if (n == 6) found = std::string(f[5]);
        return false;
    });
    return found;
}

std::string_view nearest_word(std::string_view word, const std::string_view* candidates, size_t n) {
    if (word.size() > 64) return {};  // nobody mistypes that much by two letters
    std::string_view best;
    size_t best_d = 3;
    bool tie = false;
    for (size_t i = 0; i < n; ++i) {
        const size_t dist = edit_distance(word, candidates[i]);
        if (dist < best_d) {
            best = candidates[i], best_d = dist, tie = false;
        } else if (dist == best_d) {
            tie = true;
        }
    }
    if (best.empty() || tie || best_d == 0 || best_d >= word.size()) return {};
    return best;
}

}  // namespace dsh
