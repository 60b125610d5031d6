// The seatbelt runner inside dsh-confine on macOS: canonicalises the roots with
// realpath(3), builds the profile and argv (seatbelt_plan.hpp), and fills the
// Launch so that dsh-confine execs /usr/bin/sandbox-exec. Runs nothing.
#pragma once

#include "../launch.hpp"

namespace dsh::seatbelt {

// requested: --runner (Auto or Seatbelt are usable here).
Outcome prepare(RunnerKind requested, Launch& l);

}  // namespace dsh::seatbelt
