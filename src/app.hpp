#pragma once

namespace dsh {
// The whole program: returns the exit status, or does not return (exec).
int run(int argc, const char* const* argv);
}  // namespace dsh
