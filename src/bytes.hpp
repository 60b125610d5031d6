// Bytes as the records carry them: paths and arguments are bytes, JSON
// strings are Unicode. One strict UTF-8 decoder, and hex both ways (a
// record's "<key>Bytes" members).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsh {

// ASCII case folding, as JavaScript's toLowerCase does for ASCII; bytes
// >= 0x80 are left as they are (host names, header names, the seed's
// signatures: all ASCII where it matters).
constexpr char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `path` is `root` or lies below it, by name ("/a/bc" is not below
// "/a/b"); every path is below "/". Both absolute and normal (no "." or
// "..", no trailing slash): a path as the policy holds it.
constexpr bool path_under(std::string_view path, std::string_view root) noexcept {
    if (root == "/") return true;
    return path.size() >= root.size() && path.compare(0, root.size(), root) == 0 &&
           (path.size() == root.size() || path[root.size()] == '/');
}

// Decodes the code point at s[i] and moves i past it. False (i unchanged)
// where s[i] does not start a well-formed UTF-8 sequence: a stray or
// missing continuation byte, an overlong form, a surrogate, past U+10FFFF.
bool next_code_point(std::string_view s, size_t& i, uint32_t& cp) noexcept;

bool is_utf8(std::string_view s) noexcept;

// Lower-case hex of every byte, and back (nullopt: odd length or not hex).
std::string to_hex(std::string_view s);
std::optional<std::string> from_hex(std::string_view h);

// The candidate a mistyped word most likely meant: the one nearest to it by
// edit distance (insert, delete, replace, or swap two neighbours), if that is
// at most 2 and smaller than the word, and no other candidate is as near.
// Empty: none (the caller then says nothing about what was meant).
std::string_view nearest_word(std::string_view word, const std::string_view* candidates, size_t n);

// Calls f(line) for each line of `text`, split at '\n' (not included; a last
// line without one counts), until f returns false.
template <class F>
void for_each_line(std::string_view text, F&& f) {
    for (size_t i = 0; i < text.size();) {
        size_t j = text.find('\n', i);
        if (j == std::string_view::npos) j = text.size();
        if (!f(text.substr(i, j - i))) return;
        i = j + 1;
    }
}

// A descriptor number: plain decimal, no sign, at most 9 digits (an int
// that cannot overflow), as a user types it and make prints it.
bool parse_fd(std::string_view v, int& out) noexcept;

// The home directory (field 6) of the first line of a passwd file's `text`
// ("name:pw:uid:gid:gecos:home:shell") whose field `field` (0: the name, 2:
// the uid) is `value`; "" when no line is, or that line has no home field.
std::string passwd_home(std::string_view text, int field, std::string_view value);

}  // namespace dsh
