// The seatbelt runner inside dsh-confine on macOS: canonicalises the roots with
// realpath(3), builds the profile and argv (seatbelt_plan.hpp), and fills the
// plan so that dsh-confine execs /usr/bin/sandbox-exec. Runs nothing.
#pragma once

#include "../runner.hpp"

namespace dsh::seatbelt {

// The runner (registry entry).
const dsh::Runner& runner();

}  // namespace dsh::seatbelt
