// The custom runner: an operator's own runnerCommand (config file), given the
// same bwrap-shaped profile and trusted to apply it. A configured one is what
// auto takes, without a probe (the seed); its failures are read from stderr
// with the configured runnerFailureSignatures.
#pragma once

#include "../runner.hpp"

namespace dsh::custom {

const dsh::Runner& runner();

}  // namespace dsh::custom
