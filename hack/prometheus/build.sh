#!/usr/bin/env bash
# Builds (or reuses) prometheus and promtool from the Go module proxy, like the control plane
# (hack/controlplane/build.sh), into a cache folder of their own keyed by the version: the
# control plane's cache key stays as it is. Prints the bin folder on stdout's last line.
set -euo pipefail
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"  # Go module version of Prometheus 3.16.0
cache="${SECONDARY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/secondary-scheduler}"
bin="$cache/prometheus-$PROMETHEUS_VERSION/bin"
mkdir -p "$bin"
exec 9>"$bin/.build.lock"
flock 9
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
log() { echo "[prometheus $(date +%H:%M:%S)] $*" >&2; }
for name in promtool prometheus; do
  [ -x "$bin/$name" ] && continue
  log "building $name $PROMETHEUS_VERSION (cold: several minutes on 2 cores)"
  start=$SECONDS
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/$name@$PROMETHEUS_VERSION"
  mv "$tmp/$name" "$bin/$name"; rmdir "$tmp"
  log "$name built in $((SECONDS - start)) s"
done
echo "$bin"
