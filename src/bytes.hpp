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

// Decodes the code point at s[i] and moves i past it. False (i unchanged)
// where s[i] does not start a well-formed UTF-8 sequence: a stray or
// missing continuation byte, an overlong form, a surrogate, past U+10FFFF.
bool next_code_point(std::string_view s, size_t& i, uint32_t& cp) noexcept;

bool is_utf8(std::string_view s) noexcept;

// Lower-case hex of every byte, and back (nullopt: odd length or not hex).
std::string to_hex(std::string_view s);
std::optional<std::string> from_hex(std::string_view h);

}  // namespace dsh
