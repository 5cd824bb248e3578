#!/usr/bin/env bash
# Make a fresh clone runnable: check Node, install dependencies when missing or stale, and
# make sure Postgres and Redis answer (starting or installing them where it can).
# Usage: bash bin/bootstrap.sh start|test|services
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-start}"

need_major=20; need_minor=19
if ! command -v node >/dev/null 2>&1; then
  echo "bootstrap: Node.js ${need_major}.${need_minor}+ is required and was not found." >&2
  echo "  On Debian/Ubuntu as root: apt-get update && apt-get install -y nodejs npm" >&2
  exit 1
fi
ver="$(node -p 'process.versions.node')"
major="${ver%%.*}"; rest="${ver#*.}"; minor="${rest%%.*}"
if [ "$major" -lt "$need_major" ] || { [ "$major" -eq "$need_major" ] && [ "$minor" -lt "$need_minor" ]; }; then
  echo "bootstrap: Node.js ${need_major}.${need_minor}+ is required, found ${ver}." >&2
  exit 1
fi

# Install when node_modules is missing or older than the lockfile. `npm install` follows the
# lockfile and keeps a node_modules that is only stale, where `npm ci` would delete it first.
# The lockfile lists every platform's optional binaries (@biomejs/biome's, msgpackr-extract's),
# so `npm ci` works too and neither command rewrites it (checked 2026-11-25).
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  echo "bootstrap: installing dependencies (npm install from package-lock.json)..." >&2
  npm install --no-audit --no-fund --loglevel=warn >&2
fi

# The browser tests drive Debian's Chromium through playwright-core (which downloads no browser
# of its own): CHROMIUM_PATH when set, else the system's chromium. Installed with apt-get when
# running as root on Debian, else stop with the command to run.
if [ "$mode" = test ]; then
  chromium_bin=""
  for candidate in "${CHROMIUM_PATH:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then chromium_bin="$candidate"; break; fi
  done
  if [ -z "$chromium_bin" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: Chromium (for the browser tests) was not found; installing it: apt-get install -y chromium" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2; then
      echo "bootstrap: that failed; running apt-get update and trying again..." >&2
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2 || true
    fi
    if [ -x /usr/bin/chromium ]; then chromium_bin=/usr/bin/chromium; fi
  fi
  if [ -z "$chromium_bin" ]; then
    echo "bootstrap: Chromium is required by the browser tests (test/browser-*.int.test.ts) and was not found." >&2
    echo "  On Debian/Ubuntu as root: apt-get update && apt-get install -y chromium" >&2
    echo "  Or set CHROMIUM_PATH to a Chromium or Chrome binary." >&2
    exit 1
  fi
fi

exec node_modules/.bin/tsx bin/services.ts "$mode"
