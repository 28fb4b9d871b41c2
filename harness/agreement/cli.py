"""`python -m harness.agreement [--scenarios DIR] [--only NAME] [--seed N --generated K]
[--no-files] [--dump DIR]`: run the scenarios through both schedulers and publish the table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness import generator
from harness.agreement.report import RunInfo, publish
from harness.agreement.run import run_agreement
from harness.agreement.scenarios import (
    DEFAULT_SEED,
    RESULTS_FILE,
    SCENARIOS_DIR,
    generated_scenarios,
    load_scenarios,
    name_matches,
)
from harness.controlplane import REPO_ROOT

Raw = dict[str, Any]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.agreement",
        description="Run scenarios through kube-scheduler and through ours; print the agreement table.",
    )
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS_DIR, help="folder of scenario *.yaml files")
    parser.add_argument("--no-files", action="store_true", help="run generated scenarios only")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the generated scenarios")
    parser.add_argument("--generated", type=int, default=0, metavar="K", help="add K generated scenarios")
    parser.add_argument("--only", help="scenario names or globs to run, comma-separated, e.g. gen-137-42,fit-*")
    parser.add_argument("--dump", type=Path, help="write the generated scenarios as YAML files into this folder")
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help=f"markdown table to write (default: {RESULTS_FILE.relative_to(REPO_ROOT)} for a full run)",
    )
    args = parser.parse_args(argv)
    scenarios = [] if args.no_files else load_scenarios(args.scenarios, args.only)
    generated = [s for s in generated_scenarios(args.seed, args.generated) if name_matches(s.name, args.only)]
    if args.dump is not None:
        args.dump.mkdir(parents=True, exist_ok=True)
        for raw in generator.generate_many(args.seed, args.generated):
            name = raw.pop("name")
            if name_matches(name, args.only):
                (args.dump / f"{name}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        print(f"wrote {len(generated)} scenarios into {args.dump}")
        return 0
    scenarios += generated
    if not scenarios:
        print(f"no scenarios{f' matching {args.only!r}' if args.only else ''}", file=sys.stderr)
        return 2
    info = RunInfo.now(args.seed if args.generated else None, len(generated))
    report = run_agreement(scenarios, progress=lambda line: print(line, flush=True), info=info)
    results = args.results or (RESULTS_FILE if args.only is None and not args.no_files else None)
    return publish(report, results)
