// libFuzzer target: the command line. The input is split on NUL bytes into
// argv[1..]; parse_cli must return (never crash, throw or hang) and its result
// must keep the invariants the rest of the program relies on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> args{"dsh-confine"};
    std::string cur;
    for (size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            args.push_back(cur);
            cur.clear();
        } else {
            cur.push_back(static_cast<char>(data[i]));
        }
    }
    if (!cur.empty() || size == 0) args.push_back(cur);
    if (args.size() > 64) return 0;  // keep iterations fast
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);

    dsh::Request req;
    dsh::Outcome o = dsh::parse_cli(static_cast<int>(args.size()), argv.data(), req);
    if (o) {
        // A run always has a command, and its name is never empty.
        if (req.action == dsh::Action::Run && (req.argv.empty() || req.argv.front().empty())) std::abort();
        // The command is a suffix of the arguments, untouched: the first word
        // that is not ours and everything after it.
        if (!req.argv.empty()) {
            if (req.argv.size() >= args.size()) std::abort();
            const size_t from = args.size() - req.argv.size();
            for (size_t i = 0; i < req.argv.size(); ++i)
                if (req.argv[i] != args[from + i]) std::abort();
        }
    } else {
        // Failures are usage errors; what reaches stderr is exactly one line
        // with no control character (the arguments are echoed in it).
        const std::string shown = dsh::one_line(o.message);
        if (o.message.empty()) std::abort();
        for (unsigned char ch : shown)
            if (ch < 0x20 || ch == 0x7f) std::abort();
        if (o.exit_status() != 125) std::abort();
    }
    return 0;
}
