#!/usr/bin/env bash
# Regenerate the allocator's upstream data from k8s.io/dynamic-resource-allocation@v0.37.2's own
# incubating allocator, in one writable copy of the module:
# - tests/unit/plugins/data/dra_allocator_cases.json: upstream's shared allocator table, run
#   with a recorder wired in (patch.py, dump.go.txt), each case with upstream's inputs and outcome;
# - tests/unit/plugins/data/dra_allocator_differential.json: seeded random scenarios
#   (tests/unit/plugins/dra_scenarios.py) run through upstream (differential_test.go.txt), its
#   outcome stored per seed (the test regenerates the scenarios from their seeds).
# Needs Go and the module (Go fetches gomega, the test's only missing dependency, on first run).
# Usage: gen.sh [number of seeds, default 700]
set -euo pipefail
count=${1:-700}
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

cp "$here/differential_test.go.txt" "$work/dra/structured/internal/incubating/differential_test.go"
(cd "$repo" && python3 -m tests.unit.plugins.dra_scenarios "$work/scenarios.json" "$count")
(cd "$work/dra" && GOFLAGS=-mod=mod DRA_SCENARIOS="$work/scenarios.json" DRA_OUTCOMES="$work/outcomes.json" \
    go test ./structured/internal/incubating/ -run '^TestDifferential$' -count=1 -v | grep -v '^=== RUN')
(cd "$repo" && python3 - "$work/scenarios.json" "$work/outcomes.json" "$count" \
    tests/unit/plugins/data/dra_allocator_differential.json) <<'PY'
import json, sys
from tests.unit.plugins.dra_scenarios import fingerprint
scenarios = json.load(open(sys.argv[1]))
outcomes = json.load(open(sys.argv[2]))
# A unit test should not spend seconds on one search: scenarios whose search upstream needs more
# than 20000 steps for are named, not kept (their search order is the same as the others').
long = {name: o[-1]["allocate_one_invocations"] for name, o in outcomes.items() if o[-1]["allocate_one_invocations"] > 20000}
json.dump({"source": "hack/dra-allocator-cases/gen.sh", "seeds": int(sys.argv[3]),
           "fingerprint": fingerprint(scenarios), "left_out_long_searches": long,
           "outcomes": {name: o for name, o in outcomes.items() if name not in long}},
          open(sys.argv[4], "w"), indent=1, sort_keys=True)
every = [o for per_node in outcomes.values() for o in per_node]
print(len(outcomes), "scenarios,", len(every), "allocations;", sum(1 for o in every if o.get("error")), "errors;",
      sum(1 for o in every if o["results"] is None and not o.get("error")), "no fit;", len(long), "left out")
PY
