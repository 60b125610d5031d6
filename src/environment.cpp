#include "environment.hpp"
#include "bytes.hpp"

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

namespace {

std::vector<std::string> words_of(std::string_view name) {
    std::vector<std::string> out;
    const std::string u = upper(name);
    size_t i = 0;
    while (i <= u.size()) {
        size_t j = u.find('_', i);
        if (j == std::string::npos) j = u.size();
        if (j > i) out.push_back(u.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

bool one_of(std::string_view w, std::initializer_list<std::string_view> set) {
    return std::find(set.begin(), set.end(), w) != set.end();
}

}  // namespace

bool looks_like_secret(std::string_view name) noexcept {
    // By whole words (split on '_'), never by substring: KEYBOARD and MONKEY
    // are not keys. docs/DECISIONS.md "--scrub-secrets" has the rule and why.
    const auto w = words_of(name);
    if (w.empty()) return false;
    const std::string u = upper(name);
    for (auto n : {"SSH_AUTH_SOCK", "KRB5CCNAME", "PGPASSWORD", "DOCKER_AUTH_CONFIG"})
        if (u == n) return true;
    // Words that name a credential wherever they stand.
    for (const auto& x : w)
        if (one_of(x, {"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE",
                       "CREDENTIAL", "CREDENTIALS", "COOKIE", "COOKIES", "APIKEY", "AUTHTOKEN", "ACCESSTOKEN"}))
            return true;
    // Trust stores are public: a CA bundle or certificate path is never a secret.
    const std::string& last = w.back();
    if (one_of(last, {"BUNDLE", "CERT", "CERTS", "CERTIFICATE", "CERTIFICATES", "CAINFO", "CAPATH"})) return false;
    // PWD is the cwd alone, a password after a prefix (MYSQL_PWD).
    if (w.size() >= 2 && last == "PWD") return true;
    // KEY only after a word that makes it a credential (API_KEY, ACCESS_KEY_ID,
    // PRIVATE_KEY), not SORT_KEY or PRIMARY_KEY.
    for (size_t i = 1; i < w.size(); ++i)
        if ((w[i] == "KEY" || w[i] == "KEYS") &&
            one_of(w[i - 1], {"API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION", "MASTER", "AUTH",
                              "CLIENT", "SERVICE", "DEPLOY", "SSH", "LICENSE", "APP", "ADMIN", "SESSION", "WEBHOOK",
                              "SHARED", "ACCOUNT"}))
            return true;
    return false;
}

bool value_carries_credentials(std::string_view value) noexcept {
    // scheme://user:password@host — every URL in the value (lists of index
    // URLs are common). The userinfo ends at '@' before any '/', '?' or '#'.
    size_t at = 0;
    while ((at = value.find("://", at)) != std::string_view::npos) {
        at += 3;
        const size_t end = value.find_first_of("/?# \t\n", at);
        const std::string_view authority = value.substr(at, end == std::string_view::npos ? end : end - at);
        const size_t amp = authority.rfind('@');
        if (amp == std::string_view::npos) continue;
        const std::string_view userinfo = authority.substr(0, amp);
        const size_t colon = userinfo.find(':');
        if (colon != std::string_view::npos && colon + 1 < userinfo.size()) return true;
    }
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
            const std::string_view value = e.size() > name.size() ? std::string_view(e).substr(name.size() + 1) : "";
            if (req.scrub_secrets && (looks_like_secret(name) || value_carries_credentials(value))) {
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

Jobserver parse_jobserver(std::string_view makeflags) {
    // make writes MAKEFLAGS as words split by blanks, a blank inside a word
    // escaped with a backslash; "--" ends the options (what follows are variable
    // assignments, whose values anyone may have written: never read).
    std::string_view value;
    size_t i = 0;
    while (i < makeflags.size()) {
        while (i < makeflags.size() && (makeflags[i] == ' ' || makeflags[i] == '\t')) ++i;
        const size_t start = i;
        while (i < makeflags.size() && makeflags[i] != ' ' && makeflags[i] != '\t')
            i += (makeflags[i] == '\\' && i + 1 < makeflags.size()) ? 2 : 1;
        const std::string_view w = makeflags.substr(start, i - start);
        if (w == "--") break;
        for (std::string_view opt : {"--jobserver-auth=", "--jobserver-fds="})
            if (w.substr(0, opt.size()) == opt) value = w.substr(opt.size());  // the last one counts, as in make
    }
    Jobserver j;
    if (value.substr(0, 5) == "fifo:") {
        if (value.size() > 5) j.auth = Jobserver::Auth::Fifo;
        return j;
    }
    const size_t comma = value.find(',');
    int r = -1, w = -1;
    if (comma == std::string_view::npos || !parse_fd(value.substr(0, comma), r) ||
        !parse_fd(value.substr(comma + 1), w) || r == w)
        return j;
    j.auth = Jobserver::Auth::Fds;
    j.read_fd = r;
    j.write_fd = w;
    return j;
}

}  // namespace dsh
