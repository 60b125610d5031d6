// macOS's runners: Seatbelt (sandbox-exec), a chain of one.
#include "seatbelt_runner.hpp"


namespace dsh {

const std::vector<const Runner*>& registry() {
    static const std::vector<const Runner*> runners = {&seatbelt::runner()};
    return runners;
}

std::string_view host_platform() noexcept { return "darwin"; }

std::optional<int> run_internal_entry(int, const char* const*) { return std::nullopt; }

}  // namespace dsh
