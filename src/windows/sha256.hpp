// SHA-256 (FIPS 180-4), in-repo so the Windows SID derivation needs no crypto
// library on any host. Not constant-time; it hashes paths, not secrets.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsh {

std::array<uint8_t, 32> sha256(std::string_view data);
std::string sha256_hex(std::string_view data);

}  // namespace dsh
