#!/usr/bin/env bash
# Shared set-up for the scripts (CONTRACT §1): make sure Bun is available (from the npm registry
# into .tools/ when `bun` is not on PATH), then install the locked dependencies. Sourced, not run;
# the caller may set install_mode=full (dev dependencies too) before sourcing.
set -euo pipefail
caller_dir="$PWD"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

bun_version="1.4.5"
# `production` (start, cli, mock-gateway: what the service runs), `dev` (benchmark: the dev
# dependencies too, for its micro-benchmark library) or `full` (test: the dev dependencies and the
# test browser; ~250 MB against ~85 MB).
install_mode="${install_mode:-production}"
# --help needs Bun but never the dependencies (the caller's arguments are visible when sourced).
for argument in "$@"; do
  case "$argument" in --help | -h) RT_SKIP_INSTALL=1 ;; esac
done

# One set-up at a time: scripts started together on a fresh clone (the mock gateway and the
# service, say) would otherwise install into .tools/ and node_modules/ at once, and the second
# would find a half-installed Bun. flock is util-linux; where it is missing the lock is skipped.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/setup.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
if ! command -v bun >/dev/null 2>&1; then
  local_bun="$repo_root/.tools/node_modules/.bin/bun"
  if [ ! -x "$local_bun" ]; then
    echo "setup: bun not found on PATH; installing bun@$bun_version from the npm registry into .tools/" >&2
    npm install --no-audit --no-fund --silent --prefix "$repo_root/.tools" "bun@$bun_version" >&2
  fi
  export PATH="$repo_root/.tools/node_modules/.bin:$PATH"
fi

# The browser tests (test/harness/browser.ts) drive Debian's Chromium. A full install puts it there
# with apt when it is missing and we may (root or passwordless sudo); otherwise, or when apt fails,
# one line says those tests will be skipped and the set-up goes on. RT_TEST_CHROMIUM names another.
install_test_browser() {
  if [ -n "${RT_TEST_CHROMIUM:-}" ] || [ -x /usr/bin/chromium ] || [ -x /usr/bin/chromium-browser ]; then return 0; fi
  local sudo=""
  if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then sudo="sudo -n"; else sudo="none"; fi
  fi
  if [ "$sudo" != "none" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium with apt-get for the browser tests" >&2
    local apt="$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o Acquire::Retries=0 -o Acquire::http::Timeout=20"
    # Missing package lists (a fresh container) fail the first try; fetch them and try once more.
    if $apt install -y --no-install-recommends chromium >/dev/null 2>&1 \
      || { $apt update >/dev/null 2>&1 && $apt install -y --no-install-recommends chromium >/dev/null 2>&1; }; then
      return 0
    fi
  fi
  echo "setup: no Chromium at /usr/bin/chromium and it could not be installed (apt install chromium); the browser tests will be skipped" >&2
  return 0
}

# Written after a full install; node_modules/ going away takes it along.
full_install_marker="$repo_root/node_modules/.router-full-install"
if [ "${RT_SKIP_INSTALL:-0}" != "1" ]; then
  if [ "$install_mode" = "full" ] || [ "$install_mode" = "dev" ]; then
    bun install --frozen-lockfile >&2
    touch "$full_install_marker"
    if [ "$install_mode" = "full" ]; then install_test_browser; fi
  elif [ -f "$full_install_marker" ]; then
    # A full install (scripts/test) is already here, and the production packages are a subset of
    # it: keep it whole rather than prune the dev packages the next test run would put back. The
    # full install's check against the lockfile is a no-op in milliseconds when nothing changed.
    bun install --frozen-lockfile >&2
  else
    bun install --frozen-lockfile --production >&2
  fi
fi
exec 9>&-
# Relative settings such as RT_DATA_DIR=./data resolve from where the command was run.
cd "$caller_dir"
