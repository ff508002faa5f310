#!/usr/bin/env bash
# System packages, from Debian's registry: libxxhash-dev (xxHash's header, to compile the
# indexer's loop; see setup.py), kcat (a real Kafka client), chromium and chromium-driver
# (the web console's browser tests).
# Idempotent; without root it only says what is missing.
set -euo pipefail
missing=()
[ -f /usr/include/xxhash.h ] || missing+=(libxxhash-dev)               # compiled indexer loop
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)            # console browser tests
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "note: missing system packages: ${missing[*]} (install them with apt-get as root)" >&2
  exit 0
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Two checkouts set up at once (a clone's `make test` beside `make run`) must not fail on
# apt's lock: wait for each other, and for any other apt, up to 15 minutes.
exec 9>/tmp/logtrove-apt.lock
flock -w 900 9
apt-get -o DPkg::Lock::Timeout=900 update -qq >/dev/null
apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}" >/dev/null
