"""Regenerates tests/data/gotemplate/golden.json: every Go template of upstream's scheduler_perf (and
tests/data/gotemplate/*.yaml) rendered by Go's own text/template with scheduler_perf's functions
(hack/gotemplate/main.go) for a few environments. `make gotemplate-golden`; needs Go.

The golden file is what tests/unit/test_gotemplate.py holds harness/bench/gotemplate.py to.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.bench.gotemplate import is_template
from harness.bench.upstream import perf_root
from harness.controlplane import REPO_ROOT

GOLDEN = REPO_ROOT / "tests" / "data" / "gotemplate" / "golden.json"
LOCAL = REPO_ROOT / "tests" / "data" / "gotemplate"

ENVIRONMENTS: list[dict[str, Any]] = [
    {"Index": 0, "Count": 10},
    {
        "Index": 7,
        "Count": 100,
        "PodGroupCount": 3,
        "class": "example.com/gpu",
        "classes": 2,
        "constraints": [{"matchAttribute": "dra.example.com/numa"}],
        "cpuRequest": "100m",
        "disruptionMode": "single",
        "hostPortBase": 8000,
        "minCount": 4,
        "nodesCount": 10,
        "numDevices": 4,
        "numListValues": 2,
        "numNonMatchingDevices": 1,
        "numPCIRoots": 2,
        "numRequests": 2,
        "podsCount": 100,
        "podsPerGroup": 4,
        "priority": 1000,
        "selectors": [{"cel": {"expression": 'device.driver == "x"'}}],
        "items": ["a", "b", 3],
        "labels": {"b": "2", "a": "1"},
        "label": "lbl",
    },
    {
        "Index": 1234,
        "Count": 5000,
        "PodGroupCount": 7,
        "class": "example.com/other",
        "classes": 3,
        "cpuRequest": "2",
        "disruptionMode": "all",
        "minCount": 2,
        "nodesCount": 5,
        "numDevices": 1,
        "podsCount": 50,
        "podsPerGroup": 2,
        "items": [],
        "labels": {},
    },
]


def template_files() -> list[tuple[str, Path]]:
    """(key, path) of every template the golden file covers."""
    root = perf_root()
    files = [
        (f"upstream/{path.relative_to(root)}", path)
        for path in sorted(root.rglob("*.yaml"))
        if path.name != "performance-config.yaml" and is_template(path.read_text())
    ]
    files += [(f"local/{path.name}", path) for path in sorted(LOCAL.glob("*.yaml"))]
    return files


def main() -> int:
    files = template_files()
    jobs = [{"path": str(path), "env": env} for _, path in files for env in ENVIRONMENTS]
    rendered = subprocess.run(
        ["go", "run", "."],
        cwd=REPO_ROOT / "hack" / "gotemplate",
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        check=True,
    )
    results = json.loads(rendered.stdout)
    entries = [
        {"template": key, "env": env, **result}
        for (key, _), env, result in zip(
            [(k, p) for k, p in files for _ in ENVIRONMENTS],
            [e for _ in files for e in ENVIRONMENTS],
            results,
            strict=True,
        )
    ]
    GOLDEN.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    print(f"{GOLDEN}: {len(entries)} renderings of {len(files)} templates", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
