"""Turn the Go dump into tests/unit/plugins/data/dra_allocator_cases.json.

Keeps upstream's inputs as resource.k8s.io/v1 dicts (as Go's JSON encoding writes them) and
upstream's own outcome per case; only null fields are dropped.
Checks the dump holds every case name the Go table declares.
"""

import json
import re
import sys
from pathlib import Path
from typing import Any


def prune(value: Any) -> Any:
    if isinstance(value, dict):
        pruned = {k: prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v is not None}
    if isinstance(value, list):
        return [prune(v) for v in value]
    return value


dump_path, module, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
dump = json.loads(dump_path.read_text())
declared: set[str] = set()
for name in ("allocator_testing.go", "lexicographical_testing.go"):
    source = (module / "structured/internal/allocatortesting" / name).read_text()
    declared |= set(re.findall(r'^\t\t"([^"]+)": \{', source, re.M))
assert declared == set(dump), sorted(declared ^ set(dump))
cases = {}
for name in sorted(dump):
    record = dump[name]
    case: dict[str, Any] = {"features": record["features"]}
    if "skipped_missing_features" in record:
        case["needs_features"] = record["skipped_missing_features"]
    else:
        for key in ("claims", "classes", "slices", "allocated_devices", "allocated_shared_device_ids",
                    "allocated_capacity", "node"):
            case[key] = prune(record.get(key)) or ([] if key != "node" else None)
        case["results"] = None if record["results"] is None else [prune(r) for r in record["results"]]
        if record.get("error"):
            case["error"] = record["error"]
            case["error_substrings"] = record.get("error_substrings") or []
        case["allocate_one_invocations"] = record["num_allocate_one"]
    cases[name] = case
out.write_text(json.dumps({"source": "k8s.io/dynamic-resource-allocation@v0.37.2 structured/internal/allocatortesting",
                           "cases": cases}, indent=1, sort_keys=True) + "\n")
print(f"{len(cases)} cases, {sum('needs_features' in c for c in cases.values())} need unsupported features")
