#include "probe_cmd.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bwrap_plan.hpp"
#include "bwrap_runner.hpp"
#include "landlock.hpp"
#include "probe_cache.hpp"

namespace dsh::probe_cmd {

namespace {

using ojson = nlohmann::ordered_json;

// The file's text without trailing whitespace; nullopt when it cannot be read.
std::optional<std::string> read_text(const char* path) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n < 0) return std::nullopt;
    std::string s(buf, static_cast<size_t>(n));
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

ojson gaps_json(const std::vector<Gap>& gaps) {
    ojson a = ojson::array();
    for (const auto& g : gaps) a.push_back({{"effect", g.effect}, {"detail", g.detail}, {"ownEffect", g.own_effect}});
    return a;
}

// Enforcement and open gaps of a stack of layers, per mode.
ojson per_mode(const std::function<std::vector<Layer>(const Policy&)>& layers_for) {
    ojson m = ojson::object();
    for (Mode mode : {Mode::ReadOnly, Mode::WorkspaceWrite}) {
        Confinement c;
        c.policy.mode = mode;
        c.layers = layers_for(c.policy);
        m[std::string(to_string(mode))] = {{"enforcement", to_string(c.enforcement())}, {"gaps", gaps_json(c.gaps())}};
    }
    return m;
}

// Why user namespaces may be refused to this user: the sysctls that say so.
std::vector<std::string> userns_hints() {
    std::vector<std::string> h;
    if (::geteuid() == 0) return h;  // bwrap as real root needs no user namespace
    if (auto v = read_text("/proc/sys/kernel/unprivileged_userns_clone"); v && *v == "0")
        h.push_back("user namespaces are disabled for unprivileged users (kernel.unprivileged_userns_clone=0)");
    if (auto v = read_text("/proc/sys/user/max_user_namespaces"); v && *v == "0")
        h.push_back("user namespaces are disabled (user.max_user_namespaces=0)");
    if (auto v = read_text("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); v && *v == "1")
        h.push_back("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): "
                    "load an AppArmor profile for bwrap (bwrap-userns-restrict) or set the sysctl to 0");
    return h;
}

std::string bwrap_version(const std::string& path) {
    auto r = chain::run_bounded(path, {path, "--version"}, 2000, -1, true);
    if (!r.started || r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) return {};
    std::string v = r.out;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
    return v;
}

}  // namespace

ojson probe_all(const chain::Options& opts) {
    ojson doc;
    doc["type"] = "probe";
    doc["version"] = 1;
    doc["platform"] = "linux";
    doc["chain"] = {"bwrap", "landlock"};

    // Landlock first: the bwrap stack includes it.
    const int abi = landlock::query_abi();
    ojson ll;
    ll["runner"] = "landlock";
    ll["usable"] = abi > 0;
    ll["abi"] = abi > 0 ? ojson(abi) : ojson(nullptr);
    std::vector<std::string> ll_reasons;
    if (abi <= 0) ll_reasons.push_back(landlock::describe_unavailable(abi));
    if (auto lsm = read_text("/sys/kernel/security/lsm")) {
        ll["lsm"] = *lsm;
        if (("," + *lsm + ",").find(",landlock,") == std::string::npos)
            ll_reasons.push_back("landlock is not in the kernel's active LSM list (/sys/kernel/security/lsm: " + *lsm +
                                 "); add it to the lsm= boot parameter");
    } else {
        ll["lsm"] = nullptr;
        ll["lsmNote"] = "/sys/kernel/security/lsm cannot be read (securityfs not mounted?); the verdict rests on "
                        "the landlock_create_ruleset ABI query";
    }
    if (abi > 0 && abi < landlock::FULL_ABI)
        ll["abiNote"] = fmt::format("ABI {} is older than {}: some own file effects are not governed (see gaps)",
                                    abi, landlock::FULL_ABI);
    if (abi > 0)
        ll["modes"] = per_mode([&](const Policy& p) {
            return std::vector<Layer>{landlock::plan(p, abi, p.mode == Mode::ReadOnly).layer};
        });
    ll["reason"] = ll_reasons.empty() ? ojson(nullptr) : ojson(fmt::format("{}", fmt::join(ll_reasons, "; ")));

    ojson bw;
    bw["runner"] = "bwrap";
    bw["path"] = opts.bwrap_path;
    chain::ProbeResult pr = chain::probe_bwrap(opts.bwrap_path, opts.probe_timeout_ms, false);
    if (pr.usable) probe_cache::store(probe_cache::key_for(opts.bwrap_path));
    else probe_cache::forget();
    bw["usable"] = pr.usable;
    const std::string version = bwrap::check_binary(opts.bwrap_path) ? bwrap_version(opts.bwrap_path) : "";
    bw["bwrapVersion"] = version.empty() ? ojson(nullptr) : ojson(version);
    bw["probeMs"] = pr.elapsed_ms;
    bw["probeTimeoutMs"] = opts.probe_timeout_ms;
    bw["stackedWith"] = abi > 0 ? ojson::array({"landlock"}) : ojson::array();
    bw["modes"] = per_mode([&](const Policy& p) {
        std::vector<Layer> ls{bwrap::layer(p, opts.bwrap_path)};
        if (abi > 0) ls.push_back(landlock::plan(p, abi, p.mode == Mode::ReadOnly).layer);
        return ls;
    });
    if (pr.usable) {
        bw["reason"] = nullptr;
    } else {
        std::string reason = pr.reason;
        for (const auto& h : userns_hints()) reason += "; " + h;
        bw["reason"] = reason;
    }
    bw["cacheFile"] = probe_cache::file_path(false);
    bw["cacheKey"] = probe_cache::key_for(opts.bwrap_path);

    ojson cu;
    cu["runner"] = "custom";
    cu["usable"] = !opts.runner_command.empty();
    // As a run does: a configured runnerCommand is what auto takes (the seed
    // skips the chain and every probe for it).
    cu["selectedBy"] = opts.runner_command.empty() ? "--runner custom" : "auto (runnerCommand is configured)";
    if (opts.runner_command.empty()) {
        cu["reason"] = "not configured (runnerCommand in the config file)";
    } else {
        cu["runnerCommand"] = opts.runner_command;
        cu["enforcement"] = "full";
        cu["note"] = "asserted by the operator; not probed";
        cu["reason"] = nullptr;
    }

    doc["selected"] = !opts.runner_command.empty() ? ojson("custom")
                      : pr.usable                 ? ojson("bwrap")
                      : abi > 0                   ? ojson("landlock")
                                                  : ojson(nullptr);
    doc["runners"] = ojson::array({bw, ll, cu});
    return doc;
}

int run(const chain::Options& opts, bool json) {
    const ojson doc = probe_all(opts);
    std::string out;
    if (json) {
        out = doc.dump() + "\n";
    } else {
        out = fmt::format("platform linux, chain: bwrap, landlock; auto selects: {}\n",
                          doc["selected"].is_null() ? "nothing (a confined run fails closed)"
                                                    : doc["selected"].get<std::string>());
        for (const auto& r : doc["runners"]) {
            const std::string name = r["runner"];
            std::string line = fmt::format("{:<9} {}", name, r["usable"].get<bool>() ? "usable" : "not usable");
            if (name == "bwrap") {
                line += fmt::format("  {}", r["path"].get<std::string>());
                if (!r["bwrapVersion"].is_null()) line += fmt::format(" ({})", r["bwrapVersion"].get<std::string>());
                if (!r["stackedWith"].empty()) line += ", stacked with landlock";
            }
            if (name == "landlock" && !r["abi"].is_null()) line += fmt::format("  ABI {}", r["abi"].get<int>());
            out += line + "\n";
            if (r.contains("modes") && (r["usable"].get<bool>() || name == "bwrap")) {
                for (auto it = r["modes"].begin(); it != r["modes"].end(); ++it) {
                    std::string g;
                    for (const auto& gap : it.value()["gaps"])
                        if (gap["ownEffect"].get<bool>()) g += (g.empty() ? "" : ", ") + gap["effect"].get<std::string>();
                    out += fmt::format("    {:<16} {}{}\n", it.key(), it.value()["enforcement"].get<std::string>(),
                                       g.empty() ? "" : " (not governed: " + g + ")");
                }
            }
            if (!r["reason"].is_null()) out += fmt::format("    why: {}\n", r["reason"].get<std::string>());
            if (r.contains("lsmNote")) out += fmt::format("    note: {}\n", r["lsmNote"].get<std::string>());
            if (r.contains("abiNote")) out += fmt::format("    note: {}\n", r["abiNote"].get<std::string>());
        }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return doc["selected"].is_null() ? 125 : 0;
}

}  // namespace dsh::probe_cmd
