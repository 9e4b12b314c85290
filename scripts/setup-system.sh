#!/usr/bin/env bash
# Install the system packages the tests use (`make test`; the demo needs none), where missing:
# PostgreSQL server (initdb, pg_ctl), Prometheus (prometheus, promtool), Chromium.
set -u
need=()
have_initdb() {
  command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}
have_initdb || need+=(postgresql)
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then
  echo "system packages: PostgreSQL, Prometheus, Alertmanager and Chromium are present"
  exit 0
fi
echo "system packages missing: ${need[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "not root and no sudo: install them with: apt-get install -y ${need[*]}" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get here: install ${need[*]} with your package manager" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null 2>&1 || echo "apt-get update failed; trying the install anyway" >&2
if $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/tmp/ett-apt.log 2>&1; then
  echo "system packages installed: ${need[*]}"
else
  echo "apt-get install ${need[*]} failed (see /tmp/ett-apt.log); tests that need them will say so" >&2
fi
exit 0
