#include "caches.hpp"
#include "bytes.hpp"
#include "policy.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace dsh::caches {

const std::vector<std::string_view>& tools() {
    static const std::vector<std::string_view> t = {"npm", "pip", "cargo", "go", "yarn", "maven", "ccache"};
    return t;
}

Outcome parse_list(std::string_view list, std::vector<std::string>& out) {
    const auto& known = tools();
    size_t at = 0;
    do {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string_view w = list.substr(at, comma - at);
        bool found = false;
        for (auto k : known) found = found || k == w;
        if (!found) {
            const std::string_view near = w.empty() ? std::string_view() : nearest_word(w, known.data(), known.size());
            return fail(Err::Usage, cache_text(CacheText::UnknownTool, w, near));
        }
        bool dup = false;
        for (const auto& o : out) dup = dup || o == w;
        if (!dup) out.emplace_back(w);
        at = comma + 1;
    } while (at <= list.size());
    return Outcome::success();
}

namespace {

bool under_or_equal(std::string_view path, std::string_view root) {
    if (root == "/") return true;
    return path.size() >= root.size() && path.compare(0, root.size(), root) == 0 &&
           (path.size() == root.size() || path[root.size()] == '/');
}

struct Finder {
    std::string_view tool;
    const Env& env;
    const std::string& home;
    std::vector<Dir>& out;
    Outcome problem = Outcome::success();

    // A variable the tool reads: set and not empty, it must be absolute.
    // Returns the value ("" when unset or empty).
    std::string var(std::string_view name) {
        const char* v = env(name);
        if (!v || !*v) return {};
        if (*v != '/' && problem)
            problem = fail(Err::InvalidPath, cache_text(CacheText::NotAbsolute, tool, fmt::format("{}={}", name, v)));
        return *v == '/' ? std::string(v) : std::string();
    }
    void add(std::string path, std::string from) {
        if (!problem) return;
        path = lexically_normal(path);
        if (path == "/" || (!home.empty() && under_or_equal(lexically_normal(home), path))) {
            problem = fail(Err::InvalidPath, cache_text(CacheText::HoldsHome, tool, fmt::format("{} ({})", path, from)));
            return;
        }
        for (const auto& d : out)
            if (d.path == path) return;
        out.push_back({std::move(path), std::string(tool), std::move(from)});
    }
    bool have_home() const { return !home.empty() && home[0] == '/'; }
    // VAR/rel if VAR is set, else $HOME/home_rel.
    void either(std::string_view name, std::string_view rel, std::string_view home_rel) {
        const std::string v = var(name);
        if (!problem) return;
        if (!v.empty()) return add(rel.empty() ? v : v + "/" + std::string(rel), rel.empty() ? std::string(name) : fmt::format("${}/{}", name, rel));
        if (!have_home()) {
            problem = fail(Err::InvalidPath, cache_text(CacheText::NoHome, tool, name));
            return;
        }
        add(home + "/" + std::string(home_rel), fmt::format("$HOME/{}", home_rel));
    }
    // The tool's own variable, else XDG_CACHE_HOME/sub, else $HOME/.cache/sub.
    void xdg(std::string_view own, std::string_view sub) {
        if (!own.empty()) {
            const std::string v = var(own);
            if (!problem) return;
            if (!v.empty()) return add(v, std::string(own));
        }
        either("XDG_CACHE_HOME", sub, fmt::format(".cache/{}", sub));
    }
};

}  // namespace

Outcome dirs(std::string_view tool, const Env& env, const std::string& home, std::vector<Dir>& out) {
    Finder f{tool, env, home, out};
    if (tool == "npm") {
        // npm reads its npm_config_* variables in any case.
        const std::string lower = f.var("npm_config_cache");
        if (!lower.empty()) f.add(lower, "npm_config_cache");
        else f.either("NPM_CONFIG_CACHE", "", ".npm");
    } else if (tool == "pip") {
        f.xdg("PIP_CACHE_DIR", "pip");
    } else if (tool == "cargo") {
        // The downloaded crates and git checkouts; never $CARGO_HOME itself,
        // which holds bin/ (on PATH), config.toml and the credentials.
        f.either("CARGO_HOME", "registry", ".cargo/registry");
        f.either("CARGO_HOME", "git", ".cargo/git");
    } else if (tool == "go") {
        // GOPATH's first entry (go's own rule), else $HOME/go; never its bin/.
        std::string gopath = f.var("GOPATH");
        gopath = gopath.substr(0, gopath.find(':'));
        if (!gopath.empty() && gopath[0] != '/' && f.problem)
            f.problem = fail(Err::InvalidPath, cache_text(CacheText::NotAbsolute, tool, "GOPATH=" + gopath));
        const std::string modcache = f.var("GOMODCACHE");
        if (!modcache.empty()) f.add(modcache, "GOMODCACHE");
        else if (!gopath.empty()) f.add(gopath + "/pkg/mod", "$GOPATH/pkg/mod");
        else f.either("GOPATH", "pkg/mod", "go/pkg/mod");
        if (!gopath.empty()) f.add(gopath + "/pkg/sumdb", "$GOPATH/pkg/sumdb");
        else f.either("GOPATH", "pkg/sumdb", "go/pkg/sumdb");
        const char* gocache = env("GOCACHE");
        if (!(gocache && std::string_view(gocache) == "off")) f.xdg("GOCACHE", "go-build");
    } else if (tool == "yarn") {
        f.xdg("YARN_CACHE_FOLDER", "yarn");
    } else if (tool == "maven") {
        // The local repository only: ~/.m2/settings.xml holds the passwords.
        if (!f.have_home()) f.problem = fail(Err::InvalidPath, cache_text(CacheText::NoHome, tool));
        else f.add(home + "/.m2/repository", "$HOME/.m2/repository");
    } else if (tool == "ccache") {
        f.xdg("CCACHE_DIR", "ccache");
    }
    return std::move(f.problem);
}

}  // namespace dsh::caches
