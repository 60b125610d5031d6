// libFuzzer target: path handling. lexically_normal must always give an
// absolute, normal path, be idempotent, and never climb above "/"; a policy's
// write check must agree with itself on the normalised path.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "policy.hpp"

static bool is_normal(const std::string& p) {
    if (p.empty() || p[0] != '/') return false;
    if (p.size() > 1 && p.back() == '/') return false;
    if (p.find("//") != std::string::npos) return false;
    for (const char* bad : {"/./", "/../"})
        if (p.find(bad) != std::string::npos) return false;
    if (p.size() >= 2 && p.compare(p.size() - 2, 2, "/.") == 0) return false;
    if (p.size() >= 3 && p.compare(p.size() - 3, 3, "/..") == 0) return false;
    return true;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string in(reinterpret_cast<const char*>(data), size);
    if (in.find('\0') != std::string::npos) return 0;  // paths never hold NUL
    const std::string n = dsh::lexically_normal(in);
    if (!is_normal(n)) std::abort();
    if (dsh::lexically_normal(n) != n) std::abort();
    if (n.size() > in.size() + 1) std::abort();

    // A policy with one writable root: the verdict on a path and on its
    // normal form agree (both go through the same canonicalisation).
    dsh::Policy p;
    p.mode = dsh::Mode::WorkspaceWrite;
    p.writable_roots.push_back(dsh::WritableRoot{"/nonexistent-fuzz-root/ws", dsh::Grant::Workspace, true});
    const bool a = dsh::write_allowed(p, "/nonexistent-fuzz-root/ws/" + in, "/");
    const bool b = dsh::write_allowed(p, dsh::lexically_normal("/nonexistent-fuzz-root/ws/" + in), "/");
    if (a != b) std::abort();
    // ".." can climb out of the root; without it nothing below the root is outside.
    if (in.find("..") == std::string::npos && !a) std::abort();
    return 0;
}
