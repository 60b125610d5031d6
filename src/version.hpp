#pragma once
namespace dsh {
inline constexpr const char* kVersion = DSH_CONFINE_VERSION;
inline constexpr const char* kBwrapPath = DSH_CONFINE_BWRAP_PATH;
}  // namespace dsh
