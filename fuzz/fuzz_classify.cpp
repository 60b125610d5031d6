// libFuzzer target: supervise's classification. The input is a runner's
// `runnerFailureRules` JSON, a NUL, then the stderr text; the first byte picks
// the exit code. Nothing may crash, and the seed's order must hold: a runner
// failure is never also a denial, and exit 0 is neither.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "classify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const int code = data[0] % 4 == 0 ? 0 : data[0] % 4 == 1 ? 1 : data[0] % 4 == 2 ? 125 : data[0];
    std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto nul = rest.find('\0');
    std::string rules_text = nul == std::string::npos ? rest : rest.substr(0, nul);
    std::string err = nul == std::string::npos ? std::string() : rest.substr(nul + 1);
    nlohmann::json rules = nlohmann::json::parse(rules_text, nullptr, false);
    if (rules.is_discarded()) rules = nlohmann::json::array();
    const auto parsed = dsh::rules_from_json(rules);
    const std::vector<std::string> sigs = {"permission denied", "read-only file system"};
    const auto c = dsh::classify(parsed, sigs, code, err);
    if (c.runner_failed && c.denied) std::abort();
    if (code == 0 && (c.runner_failed || c.denied)) std::abort();
    const auto sig = dsh::classify(parsed, sigs, std::nullopt, err);  // death by signal
    if (sig.runner_failed) std::abort();
    return 0;
}
