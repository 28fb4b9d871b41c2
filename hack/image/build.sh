#!/usr/bin/env bash
# `make image-test`, step one: the project's Dockerfile built with podman on a Debian bookworm base
# made from Debian packages (mmdebstrap; no image registry needed). Prints the image name last.
# podman flags that work on these machines: runc with cgroupfs (crun fails on cgroups in hybrid
# mode) and explicit ulimits (setrlimit of the defaults fails); see shared FIELD_NOTES.
#
# The base is pinned by bookworm.lock, every Debian package of it at its version (bookworm with its
# updates and security suites, mmdebstrap's default): a fresh base whose packages differ from the
# lock is refused, naming each package that moved, and `build.sh --relock` (make image-lock) builds
# afresh and writes the lock to commit. The base tarball and its podman tag are keyed by the lock,
# and SOURCE_DATE_EPOCH fixes the file times, so one lock gives one file tree. Debian's mirror keeps
# only the current versions and no snapshot archive is reachable from here: the lock is checked
# against what the mirror serves, it cannot fetch old versions back.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { echo "[image $(date +%H:%M:%S)] $*" >&2; }
relock=0
[ "${1:-}" = --relock ] && relock=1

packages="python3,python3-venv,ca-certificates"
lock="$here/bookworm.lock"
key=$( (echo "$packages"; cat "$lock") | sha256sum | cut -c1-12)
base_image="localhost/secondary-scheduler-base:bookworm-$key"
image="${IMAGE:-localhost/secondary-scheduler:test}"
cache="${SECONDARY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/secondary-scheduler}/images"
tarball="$cache/bookworm-$key.tar"
export SOURCE_DATE_EPOCH=1767225600  # 2026-01-01; any fixed value
podman_=(podman --runtime runc --cgroup-manager=cgroupfs)
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

missing=()
for tool in podman mmdebstrap runc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} (Debian packages)"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman mmdebstrap runc >&2
fi

# Package=version lines of a base tarball, sorted (from its dpkg status; nothing is run in it).
base_packages() {
  tar -xOf "$1" ./var/lib/dpkg/status | awk '
    /^Package: / { p = $2 } /^Version: / { v = $2 }
    /^Status: / { ok = ($4 == "installed") }
    /^$/ { if (ok) print p "=" v; p = v = ""; ok = 0 }
    END { if (ok) print p "=" v }' | LC_ALL=C sort
}

mkdir -p "$cache"
if [ $relock -eq 1 ] || [ ! -s "$tarball" ]; then
  log "mmdebstrap bookworm ($packages)"
  start=$SECONDS
  # mmdebstrap picks the output format from the file name: keep the .tar suffix on the partial file.
  partial="$cache/bookworm-$key.partial.tar"
  mmdebstrap --quiet --variant=apt --include="$packages" bookworm "$partial" </dev/null >&2
  if [ $relock -eq 1 ]; then
    { echo "# The Debian bookworm packages of the image base, at the versions hack/image/build.sh requires."
      echo "# Written by \`make image-lock\` ($(date -u +%Y-%m-%d)); do not edit by hand."
      base_packages "$partial"; } >"$lock"
    key=$( (echo "$packages"; cat "$lock") | sha256sum | cut -c1-12)
    base_image="localhost/secondary-scheduler-base:bookworm-$key"
    tarball="$cache/bookworm-$key.tar"
    log "wrote $lock ($(grep -vc '^#' "$lock") packages)"
  elif ! drift=$(diff <(grep -v '^#' "$lock") <(base_packages "$partial")); then
    rm -f "$partial"
    log "the bookworm base differs from $lock (< locked, > what the mirror has now):"
    echo "$drift" >&2
    log "run \`make image-lock\` and commit hack/image/bookworm.lock to move the pin"
    exit 1
  fi
  mv "$partial" "$tarball"
  log "base built in $((SECONDS - start)) s"
fi
if ! "${podman_[@]}" image exists "$base_image"; then
  log "podman import $tarball"
  "${podman_[@]}" import "$tarball" "$base_image" >&2
fi
# RUN steps (pip) trust what this machine trusts (an egress proxy's CA, say); nothing of it is
# written into the image.
trust=()
[ -f /etc/ssl/certs/ca-certificates.crt ] && trust=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
log "podman build $image (Dockerfile, BASE_IMAGE=$base_image)"
start=$SECONDS
"${podman_[@]}" build "${limits[@]}" "${trust[@]}" --network host --build-arg "BASE_IMAGE=$base_image" \
  -t "$image" -f "$repo/Dockerfile" "$repo" >&2
log "image built in $((SECONDS - start)) s: $("${podman_[@]}" image inspect --format '{{.Size}}' "$image") bytes"
echo "$image"
