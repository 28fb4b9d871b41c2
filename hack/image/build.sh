#!/usr/bin/env bash
# `make image-test`, step one: the project's Dockerfile built with podman on a Debian bookworm base
# made from Debian packages (mmdebstrap; no image registry needed). Prints the image name last.
# podman flags that work on these machines: runc with cgroupfs (crun fails on cgroups in hybrid
# mode) and explicit ulimits (setrlimit of the defaults fails); see shared FIELD_NOTES.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { echo "[image $(date +%H:%M:%S)] $*" >&2; }

packages="python3,python3-venv,ca-certificates"
base_image="localhost/secondary-scheduler-base:bookworm"
image="${IMAGE:-localhost/secondary-scheduler:test}"
cache="${SECONDARY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/secondary-scheduler}/images"
tarball="$cache/bookworm-$(echo "$packages" | sha256sum | cut -c1-12).tar"
podman_=(podman --runtime runc --cgroup-manager=cgroupfs)
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

missing=()
for tool in podman mmdebstrap runc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} (Debian packages)"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman mmdebstrap runc >&2
fi

mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  log "mmdebstrap bookworm ($packages)"
  start=$SECONDS
  # mmdebstrap picks the output format from the file name: keep the .tar suffix on the partial file.
  mmdebstrap --quiet --variant=apt --include="$packages" bookworm "${tarball%.tar}.partial.tar" >&2
  mv "${tarball%.tar}.partial.tar" "$tarball"
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
