#!/usr/bin/env bash
# Apache Kafka's jars (broker, tools, clients, Streams, Connect runtime, log4j2), for tests
# and benchmarks only: `make test` runs this; `make install` and `make run` never need it.
#
# Maven resolves scripts/kafka/pom.xml (the pinned version lives there) and copies every
# jar with its dependencies into one directory, which is then a Java classpath:
#     ${LOGTROVE_CACHE:-$HOME/.cache/logtrove}/kafka-<version>/libs
# Maven's own repository goes beside it (…/m2), so nothing lands in the repository or in
# ~/.m2. Idempotent: a stamp holding the pom's checksum marks a complete copy, and a second
# run with the same pom does nothing. Concurrent runs wait for each other (flock).
#
# Usage: scripts/kafka.sh            fetch if needed, print one progress line
#        scripts/kafka.sh --libs     the same, then print the libs directory on stdout
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/kafka/pom.xml"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")"
[ -n "$version" ] || { echo "kafka.sh: no <kafka.version> in $pom" >&2; exit 1; }
cache="${LOGTROVE_CACHE:-$HOME/.cache/logtrove}"
home="$cache/kafka-$version"
libs="$home/libs"
stamp="$home/.complete"
sum="$(sha256sum "$pom" | cut -d' ' -f1)"

print_libs() { if [ "${1:-}" = "--libs" ]; then echo "$libs"; fi; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && [ -d "$libs" ]; then
  print_libs "${1:-}"
  exit 0
fi

# Java 17 and Maven come from Debian's packages when missing (as root; else a clear error).
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "kafka.sh: Java 17 (javac) and Maven are needed: apt-get install openjdk-17-jdk-headless maven" >&2
    exit 1
  fi
  echo "kafka.sh: installing openjdk-17-jdk-headless and maven" >&2
  exec 9>/tmp/logtrove-apt.lock
  flock -w 900 9
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi

mkdir -p "$home"
exec 8>"$home/.lock"
flock -w 900 8
# Another run may have finished while this one waited for the lock.
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && [ -d "$libs" ]; then
  print_libs "${1:-}"
  exit 0
fi

echo "kafka.sh: fetching Apache Kafka $version with Maven into $home (once; ~130 MB)" >&2
start=$(date +%s)
rm -rf "$libs.tmp" "$stamp"
mvn -B -q -Dstyle.color=never -f "$pom" \
  -Dmaven.repo.local="$cache/m2" \
  dependency:copy-dependencies \
  -DincludeScope=runtime \
  -DoutputDirectory="$libs.tmp" >&2
rm -rf "$libs"
mv "$libs.tmp" "$libs"
echo "$sum" > "$stamp"
echo "kafka.sh: Apache Kafka $version ready: $(ls "$libs" | wc -l) jars, $(du -sh "$libs" | cut -f1), $(( $(date +%s) - start )) s" >&2
print_libs "${1:-}"
