#!/usr/bin/env bash
# Builds (or reuses) prometheus and promtool from the Go module proxy, like the control plane
# (hack/controlplane/build.sh), into a cache folder of their own keyed by the version and the
# build tags: the control plane's cache key stays as it is, and a build with other tags is never
# mistaken for this one. Prints the bin folder on stdout's last line.
#
# Why these tags: the tests scrape with static_configs only, so remove_all_sd drops every optional
# service discovery (file, http and static stay). promtool still compiles client-go and k8s.io/api,
# since its `check config` imports discovery/kubernetes whatever the tags; no tag removes that.
# Both commands go through one `go install`, so the packages they share are planned and compiled
# once and the two links overlap.
set -euo pipefail
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"  # Go module version of Prometheus 3.16.0
PROMETHEUS_TAGS="remove_all_sd"                      # comma-separated, as `go build -tags` takes them
cache="${SECONDARY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/secondary-scheduler}"
bin="$cache/prometheus-$PROMETHEUS_VERSION-${PROMETHEUS_TAGS//,/-}/bin"
mkdir -p "$bin"
exec 9>"$bin/.build.lock"
flock 9
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
log() { echo "[prometheus $(date +%H:%M:%S)] $*" >&2; }
if ! [ -x "$bin/prometheus" ] || ! [ -x "$bin/promtool" ]; then
  log "building prometheus and promtool $PROMETHEUS_VERSION -tags $PROMETHEUS_TAGS (cold: about 4 min on 2 cores)"
  start=$SECONDS
  tmp=$(mktemp -d)
  module="github.com/prometheus/prometheus"
  GOBIN="$tmp" go install -trimpath -tags "$PROMETHEUS_TAGS" -ldflags "-s -w" \
    "$module/cmd/prometheus@$PROMETHEUS_VERSION" "$module/cmd/promtool@$PROMETHEUS_VERSION"
  mv "$tmp/prometheus" "$tmp/promtool" "$bin/"; rmdir "$tmp"
  log "built in $((SECONDS - start)) s"
fi
echo "$bin"
