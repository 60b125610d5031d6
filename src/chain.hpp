// The chain over this host's runners (runner.hpp's registry): the one place
// that decides which runner confines a run. Used by run, explain, probe and
// the self-test alike.
#pragma once

#include "runner.hpp"

namespace dsh::chain {

using Runners = std::vector<const Runner*>;

// The runner of that kind, or null (not built for this host).
const Runner* find(RunnerKind kind, const Runners& runners = registry()) noexcept;

// Fills the plan with the chosen runner. Auto walks the registry in order
// and takes the first runner whose probe says usable and whose plan
// succeeds; every runner passed over is recorded in p.c.skipped with why. A
// forced runner is planned without a probe and without fallback. Nothing
// usable: SANDBOX_UNAVAILABLE (the seed's text), nothing runs.
// `runners`: this host's registry; a test passes its own.
Outcome choose(RunnerKind requested, const RunnerEnv& env, Plan& p, const Runners& runners = registry());

// The carve-outs' walk where it was left for later (Plan::late_walk), now:
// before any runner but bwrap is planned, and by bwrap's plan where its stage
// cannot wait for it. Nothing when it was made already.
Outcome walk_now(Plan& p);

// What becomes of the processes the command leaves running (the record's
// `descendants`), once the chosen runner is known and whether dsh-confine
// stays as the parent (supervise mode, exec mode's forwarder or pty relay).
void settle_descendants(Plan& p, bool parent_stays, const Runners& runners = registry());

// `dsh-confine probe`: every runner's row, and what auto would select.
nlohmann::ordered_json describe_all(const RunnerEnv& env, const Runners& runners = registry());

}  // namespace dsh::chain
