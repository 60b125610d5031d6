// `dsh-confine probe [--json]`: every runner of this platform, usable or not,
// its enforcement and gaps per mode, and the concrete reason when not.
#pragma once

#include <nlohmann/json.hpp>

#include "chain.hpp"

namespace dsh::probe_cmd {

// Runs the probes (fresh, not from the cache; a usable bwrap verdict is
// stored) and returns the JSON document.
nlohmann::ordered_json probe_all(const chain::Options& opts);

// Prints text or JSON on stdout. Exit status: 0 when at least one runner of
// the chain is usable, 125 when none is (a confined run would fail closed).
int run(const chain::Options& opts, bool json);

}  // namespace dsh::probe_cmd
