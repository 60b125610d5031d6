#include "platforms.hpp"

#include "darwin/seatbelt_plan.hpp"
#include "windows/acl_plan.hpp"

namespace dsh {

Outcome foreign_plan_text(const std::string& platform, const ForeignPlanInput& in, std::string& text) {
    if (platform == "darwin") {
        text = seatbelt::render_darwin_plan(in.policy, in.argv);
    } else if (platform == "windows") {
        text = acl::render_windows_plan(in.policy, in.argv, in.tmpdir, in.session);
    } else {
        return failf(Err::Usage, "explain --platform {}: expected linux, darwin or windows", platform);
    }
    return Outcome::success();
}

}  // namespace dsh
