// The windows-acl runner inside dsh-confine.exe: finds the helper next to the
// executable, builds its argv (acl_plan.hpp) and fills the Launch. Runs nothing.
#pragma once

#include "../launch.hpp"

namespace dsh::acl {

// requested: --runner (Auto or WindowsAcl are usable here). Any failure means
// the runner cannot be used: the caller fails closed.
Outcome prepare(RunnerKind requested, Launch& l);

}  // namespace dsh::acl
