// Linux's runners, in the order auto asks them: a configured custom runner,
// then bubblewrap stacked with Landlock, then Landlock alone.
#include "bwrap_plan.hpp"
#include "bwrap_runner.hpp"
#include "custom_runner.hpp"
#include "landlock_runner.hpp"

namespace dsh {

const std::vector<const Runner*>& registry() {
    static const std::vector<const Runner*> runners = {&custom::runner(), &bwrap::runner(), &landlock::runner()};
    return runners;
}

std::string_view host_platform() noexcept { return "linux"; }

std::optional<int> run_internal_entry(int argc, const char* const* argv) {
    if (argc > 1 && std::string_view(argv[1]) == bwrap::kStageArg) return bwrap::run_stage(argc, argv);
    if (argc == 2 && std::string_view(argv[1]) == bwrap::kProbeArg) return bwrap::run_probe_check();
    return std::nullopt;
}

}  // namespace dsh
