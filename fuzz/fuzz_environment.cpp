// libFuzzer target: the environment flags. The input is a list of lines: the
// first byte of each says what it is (caller entry, --setenv, --unsetenv, or
// a flag), the rest is its text. build_environment must never crash, never
// emit an entry without '=', keep each --setenv value, and never report a
// value in the changes (names only).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "environment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    dsh::EnvRequest req;
    std::vector<std::string> current;
    std::string s(reinterpret_cast<const char*>(data), size);
    size_t i = 0;
    while (i < s.size() && current.size() + req.set.size() + req.unset.size() < 200) {
        size_t j = s.find('\n', i);
        if (j == std::string::npos) j = s.size();
        std::string line = s.substr(i, j - i);
        i = j + 1;
        if (line.empty() || line.find('\0') != std::string::npos) continue;
        std::string body = line.substr(1);
        switch (line[0] % 5) {
            case 0: current.push_back(body); break;
            case 1: {
                auto eq = body.find('=');
                if (eq == std::string::npos) break;
                req.set.emplace_back(body.substr(0, eq), body.substr(eq + 1));
                break;
            }
            case 2: req.unset.push_back(body); break;
            case 3: req.clear = !req.clear; break;
            case 4: req.scrub_secrets = !req.scrub_secrets; break;
        }
    }
    std::vector<std::string> out;
    dsh::EnvChanges changes;
    dsh::Outcome o = dsh::build_environment(req, current, out, changes);
    if (!o) return 0;
    for (const auto& [k, v] : req.set) {
        // The last --setenv of a name wins and is never scrubbed.
        std::string last;
        for (const auto& [k2, v2] : req.set)
            if (k2 == k) last = v2;
        const char* got = dsh::env_lookup(out, k);
        if (!got || last != got) std::abort();
    }
    for (const auto& e : out)
        if (e.find('=') == std::string::npos && req.clear) std::abort();
    return 0;
}
