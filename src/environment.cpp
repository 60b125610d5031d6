#include "environment.hpp"

#include <algorithm>
#include <cctype>

namespace dsh {

namespace {

std::string upper(std::string_view s) {
    std::string u(s);
    for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u;
}

// The name part of a "K=V" entry (the whole entry when it has no '=').
std::string_view name_of(std::string_view entry) noexcept {
    auto eq = entry.find('=');
    return eq == std::string_view::npos ? entry : entry.substr(0, eq);
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool looks_like_secret(std::string_view name) noexcept {
    // Names only: values are never inspected (a password inside DATABASE_URL
    // is not found; see the man page). Broad on purpose: dropping a harmless
    // variable costs less than leaking a credential, and --setenv puts back
    // anything the command really needs.
    static constexpr std::string_view kWords[] = {"TOKEN",      "SECRET",     "KEY",    "PASSWORD", "PASSWD",
                                                  "PASSPHRASE", "CREDENTIAL", "COOKIE", "PRIVATE"};
    static constexpr std::string_view kPrefixes[] = {"AWS_", "AZURE_", "ALIBABA_CLOUD_", "ALICLOUD_",
                                                     "CLOUDSDK_AUTH_"};
    static constexpr std::string_view kNames[] = {"SSH_AUTH_SOCK", "KRB5CCNAME"};
    const std::string u = upper(name);
    const std::string_view v = u;
    for (auto w : kWords)
        if (v.find(w) != std::string_view::npos) return true;
    for (auto p : kPrefixes)
        if (v.substr(0, p.size()) == p) return true;
    for (auto n : kNames)
        if (v == n) return true;
    return false;
}

Outcome check_env_name(std::string_view flag, std::string_view name) {
    if (name.empty()) return failf(Err::Usage, "{}: the variable name is empty", flag);
    if (name.find('=') != std::string_view::npos)
        return failf(Err::Usage, "{} {}: a variable name cannot contain '='", flag, name);
    return Outcome::success();
}

Outcome build_environment(const EnvRequest& req, const std::vector<std::string>& current,
                          std::vector<std::string>& out, EnvChanges& changes) {
    for (const auto& [k, v] : req.set)
        if (auto o = check_env_name("--setenv", k); !o) return o;
    for (const auto& k : req.unset)
        if (auto o = check_env_name("--unsetenv", k); !o) return o;

    out.clear();
    changes = EnvChanges{};
    changes.cleared = req.clear;
    if (!req.clear) {
        out.reserve(current.size() + req.set.size());
        for (const auto& e : current) {
            const std::string_view name = name_of(e);
            if (req.scrub_secrets && looks_like_secret(name)) {
                if (!contains(changes.scrubbed, name)) changes.scrubbed.emplace_back(name);
                continue;
            }
            if (contains(req.unset, name)) {
                if (!contains(changes.unset, name)) changes.unset.emplace_back(name);
                continue;
            }
            out.push_back(e);
        }
    }
    for (const auto& kv : req.set) {
        // Not a structured binding: C++17 lambdas cannot capture one (clang
        // rejects it; the fuzz build uses clang).
        const std::string& k = kv.first;
        std::string entry = k + "=" + kv.second;
        auto it = std::find_if(out.begin(), out.end(), [&](const std::string& e) { return name_of(e) == k; });
        if (it != out.end()) {
            *it = std::move(entry);
            // A later duplicate of the same name (environ may hold two) must not survive.
            out.erase(std::remove_if(it + 1, out.end(), [&](const std::string& e) { return name_of(e) == k; }),
                      out.end());
        } else {
            out.push_back(std::move(entry));
        }
        if (!contains(changes.set, k)) changes.set.push_back(k);
    }
    return Outcome::success();
}

const char* env_lookup(const std::vector<std::string>& env, std::string_view name) noexcept {
    for (const auto& e : env)
        if (name_of(e) == name && e.size() > name.size()) return e.c_str() + name.size() + 1;
    return nullptr;
}

}  // namespace dsh
