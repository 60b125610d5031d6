// The windows-acl runner inside dsh-confine.exe: finds the helper next to the
// executable, builds its argv (acl_plan.hpp) and fills the plan. Runs nothing.
#pragma once

#include "../runner.hpp"

namespace dsh::acl {

// The runner (registry entry; platform_win.cpp).
const dsh::Runner& runner();

}  // namespace dsh::acl
