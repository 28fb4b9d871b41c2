#!/usr/bin/env bash
# Builds (or reuses) control-plane binaries from Go modules at the pinned versions: only those named
# (`build.sh etcd kube-apiserver kwok`), or all of them (`build.sh all`, and with no argument).
# Binaries land in a user-level cache keyed by the pins, so a fresh clone on the same
# machine (which is what CI is) reuses them. Prints the bin folder on stdout's last line.
#   names: etcd kube-apiserver kube-scheduler kube-controller-manager kubectl null-binder
#          kube-apiserver-compat (K8S_COMPAT_VERSION, as kube-apiserver-<version>) kwok helm
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
k8s_names=(kube-apiserver kube-scheduler kube-controller-manager kubectl null-binder)
all_names=(etcd "${k8s_names[@]}" kube-apiserver-compat kwok helm)
[ $# -eq 0 ] && set -- all
wanted=()
for name in "$@"; do
  case " all ${all_names[*]} " in
    *" $name "*) ;;
    *) echo "build.sh: unknown binary '$name' (known: all ${all_names[*]})" >&2; exit 2 ;;
  esac
  if [ "$name" = all ]; then wanted+=("${all_names[@]}"); else wanted+=("$name"); fi
done
wants() { case " ${wanted[*]} " in *" $1 "*) return 0 ;; esac; return 1; }
key=$(cat "$here/versions.env" "$here/k8s/go.mod" "$here/k8s-compat/go.mod" "$here/etcd/go.mod" \
      "$here"/k8s/cmd/*/main.go "$here"/k8s-compat/cmd/*/main.go "$here/etcd/main.go" \
      | sha256sum | cut -c1-12)
cache="${SECONDARY_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/secondary-scheduler}"
bin="$cache/controlplane-$K8S_VERSION-$key/bin"
mkdir -p "$bin"
# One build at a time per cache folder: a second caller (a parallel test run) waits, then reuses.
exec 9>"$bin/.build.lock"
flock 9
export GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=0
log() { echo "[controlplane $(date +%H:%M:%S)] $*" >&2; }

k8s_ldflags() {  # version
  local minor=${1#v1.}; minor=${minor%%.*}
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1 \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$1"
}

build_k8s() {
  local missing=()
  # null-binder: the benchmarks' floor (binds round-robin, no logic), see k8s/cmd/null-binder.
  for b in "${k8s_names[@]}"; do
    wants "$b" && [ ! -x "$bin/$b" ] && missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] && return
  log "building ${missing[*]} $K8S_VERSION (cold: minutes each on 2 cores; cached afterwards)"
  local start=$SECONDS
  (cd "$here/k8s" && for b in "${missing[@]}"; do
     log "  go build $b"
     go build -trimpath -ldflags "$(k8s_ldflags "$K8S_VERSION")" -o "$bin/$b.tmp" "./cmd/$b" \
       && mv "$bin/$b.tmp" "$bin/$b"
   done)
  log "kubernetes binaries built in $((SECONDS - start)) s"
}

# The older apiserver minor for the compatibility tests, from its own wrapper module.
build_k8s_compat() {
  local out="$bin/kube-apiserver-$K8S_COMPAT_VERSION"
  wants kube-apiserver-compat && [ ! -x "$out" ] || return 0
  log "building kube-apiserver $K8S_COMPAT_VERSION (compatibility)"
  (cd "$here/k8s-compat" && go build -trimpath -ldflags "$(k8s_ldflags "$K8S_COMPAT_VERSION")" \
     -o "$out.tmp" ./cmd/kube-apiserver && mv "$out.tmp" "$out")
}

build_etcd() {
  wants etcd && [ ! -x "$bin/etcd" ] || return 0
  log "building etcd $ETCD_VERSION"
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" . && mv "$bin/etcd.tmp" "$bin/etcd")
}

go_install() {  # name module version
  wants "$1" && [ ! -x "$bin/$1" ] || return 0
  log "building $1 $3"
  local tmp; tmp=$(mktemp -d)
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "$2@$3"
  mv "$tmp/$1" "$bin/$1"; rmdir "$tmp"
}

build_etcd
build_k8s
build_k8s_compat
go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
go_install helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"

# kwok >= 0.8 plays no stages unless given some; these are the ones 0.7 played by default (nodes
# initialised and heartbeating, bound pods Running, completions, deletions finished), taken from
# the module go install just fetched.
kwok_stages() {
  local out="$bin/kwok-stages.yaml"
  wants kwok && [ ! -s "$out" ] || return 0
  local src; src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  [ -d "$src" ] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
  local f first=1
  : >"$out.tmp"
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [ $first -eq 1 ] || echo "---" >>"$out.tmp"
    first=0
    cat "$src/$f" >>"$out.tmp"
  done
  mv "$out.tmp" "$out"
}
kwok_stages
log "${wanted[*]} ready in $bin"
echo "$bin"
