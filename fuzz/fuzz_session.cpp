// libFuzzer target: the session mode log. The input is the log's bytes.
// fold_session_log must return (never crash, throw or hang) and give the same
// answer twice; SessionFolder fed the same bytes in chunks split anywhere (the
// split points come from the input's own bytes) must give exactly the answer
// of one piece. An error is a SessionInvalid one-liner naming the log and a
// line that exists; a success has a mode iff some line is a sandbox/mode event,
// and that line is within the log.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "session.hpp"

namespace {

const std::string kOrigin = "/var/tmp/session.jsonl";

bool same(const dsh::SessionState& a, const dsh::SessionState& b) {
    return a.mode == b.mode && a.source == b.source && a.mode_line == b.mode_line && a.lines == b.lines &&
           a.max_seq == b.max_seq;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const size_t total_lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) +
                               (text.empty() || text.back() == '\n' ? 0 : 1);

    dsh::SessionState a;
    const dsh::Outcome oa = dsh::fold_session_log(text, kOrigin, a);
    dsh::SessionState b;
    b.mode = dsh::Mode::DangerFullAccess;  // stale: must not survive
    const dsh::Outcome ob = dsh::fold_session_log(text, kOrigin, b);
    if (oa.ok != ob.ok || oa.message != ob.message) std::abort();
    if (oa && !same(a, b)) std::abort();

    // Chunks: each split point is a byte of the input taken as an offset, so
    // the fuzzer steers where lines are cut (mid-line, at '\n', empty chunks).
    std::vector<size_t> cuts;
    for (size_t i = 0; i < size && cuts.size() < 16; i += 1 + size / 16)
        cuts.push_back(size == 0 ? 0 : (data[i] * (i + 1) * 2654435761u) % (size + 1));
    std::sort(cuts.begin(), cuts.end());
    dsh::SessionFolder f(kOrigin);
    dsh::Outcome of = dsh::Outcome::success();
    size_t at = 0;
    for (size_t c : cuts) {
        if (of) of = f.feed(text.substr(at, c - at));
        at = c;
    }
    if (of) of = f.feed(text.substr(at));
    if (of) of = f.finish();
    if (of.ok != oa.ok || of.message != oa.message) std::abort();
    if (oa && !same(f.state(), a)) std::abort();

    if (!oa) {
        if (oa.err != dsh::Err::SessionInvalid || oa.exit_status() != 125) std::abort();
        // "session log FILE line N: why", N a line of this log.
        const std::string prefix = "session log " + kOrigin + " line ";
        if (oa.message.rfind(prefix, 0) != 0) std::abort();
        const size_t n = std::strtoul(oa.message.c_str() + prefix.size(), nullptr, 10);
        if (n < 1 || n > total_lines) std::abort();
        // One line: what is echoed (a mode, nlohmann's "last read") comes quoted.
        if (oa.message.find_first_of("\r\n") != std::string::npos) std::abort();
        return 0;
    }

    // A mode only from a sandbox/mode event on a real, non-empty line; the
    // counts never exceed the log.
    if (a.lines > total_lines) std::abort();
    if (a.mode.has_value() != (a.mode_line != 0)) std::abort();
    if (a.mode && a.mode_line > total_lines) std::abort();
    if (!a.mode && !a.source.empty()) std::abort();
    if (a.mode && dsh::parse_mode(dsh::to_string(*a.mode)) != a.mode) std::abort();
    return 0;
}
