#!/usr/bin/env bash
# Regenerate tests/unit/plugins/data/dra_allocator_cases.json from upstream's shared allocator
# table: run k8s.io/dynamic-resource-allocation@v0.37.2's own incubating allocator test with a
# recorder wired in, so each case carries upstream's inputs and upstream's own outcome.
# Needs Go and the module (Go fetches gomega, the test's only missing dependency, on first run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
module=$(go env GOMODCACHE)/k8s.io/dynamic-resource-allocation@v0.37.2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$module" "$work/dra" && chmod -R u+w "$work/dra"
python3 "$here/patch.py" "$work/dra"
(cd "$work/dra" && GOFLAGS=-mod=mod DRA_DUMP="$work/cases.json" \
    go test ./structured/internal/incubating/ -run '^TestAllocator$' -count=1)
mkdir -p "$repo/tests/unit/plugins/data"
python3 "$here/convert.py" "$work/cases.json" "$module" "$repo/tests/unit/plugins/data/dra_allocator_cases.json"
