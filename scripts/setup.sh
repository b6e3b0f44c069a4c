#!/usr/bin/env bash
# Installs what browserd needs and is missing, then builds it. Safe to run again.
#   --with-postgres  also install PostgreSQL (the store tests need it)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(chromium chromium-driver xvfb x11vnc fonts-noto-core fonts-noto-cjk fonts-dejavu-core)
[ "${1:-}" = "--with-postgres" ] && pkgs+=(postgresql)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages. Run as root:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# Chromium and Xvfb run as this unprivileged account when browserd runs as root.
session_user="${BROWSERD_SESSION_USER:-browserd}"
if [ "$(id -u)" = "0" ] && ! id "$session_user" >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin "$session_user"
fi

# npm dependencies: (re)install when absent or when the lockfile changed since the last install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
npm run --silent build
