// Windows entry point: the command line arrives as UTF-16 (wmain), becomes
// UTF-8 like every string inside dsh-confine, and goes to the same run().
#include "../app.hpp"
#include "win_util.hpp"

int wmain(int argc, wchar_t** argv) {
    std::vector<std::string> args = dsh::win::narrow_argv(argc, argv);
    std::vector<const char*> ptrs;
    for (const auto& a : args) ptrs.push_back(a.c_str());
    ptrs.push_back(nullptr);
    return dsh::run(argc, ptrs.data());
}
