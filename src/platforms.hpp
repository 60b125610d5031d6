// Every platform's pure plan builder, for `explain --platform`: another
// system's plan, shown and never run. The one place outside src/<os>/ that
// names them; adding a platform adds a line here.
#pragma once

#include <string>
#include <vector>

#include "errors.hpp"
#include "policy.hpp"

namespace dsh {

struct ForeignPlanInput {
    const Policy& policy;
    const std::vector<std::string>& argv;
    std::string tmpdir;  // $TMPDIR as found ("/tmp" when unset)
    bool session = false;
};

// The text of `platform`'s plan, or a usage error naming the platforms.
Outcome foreign_plan_text(const std::string& platform, const ForeignPlanInput& in, std::string& text);

}  // namespace dsh
