"""harness/bench/gotemplate.py renders exactly what Go's text/template renders.

The golden file holds Go's own renderings (hack/gotemplate/main.go, scheduler_perf's functions) of
every Go template in upstream's scheduler_perf and of tests/data/gotemplate/*.yaml for a few
environments; `make gotemplate-golden` regenerates it when the pinned Kubernetes moves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.bench.gotemplate import Template, TemplateError
from harness.bench.gotemplate_golden import GOLDEN, template_files

ENTRIES: list[dict[str, Any]] = json.loads(GOLDEN.read_text())
PATHS: dict[str, Path] = dict(template_files())


def test_the_golden_file_covers_every_template_upstream_has_now() -> None:
    assert sorted({entry["template"] for entry in ENTRIES}) == sorted(PATHS)


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['template']}@{e['env']['Index']}" for e in ENTRIES])
def test_rendering_matches_go(entry: dict[str, Any]) -> None:
    template = Template(PATHS[entry["template"]].read_text(), entry["template"])
    if "error" in entry:
        with pytest.raises(TemplateError):
            template.render(entry["env"])
    else:
        assert template.render(entry["env"]) == entry["output"]


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ('{{define "x"}}{{end}}', "not supported"),
        ("{{if .a}}", "missing {{end}}"),
        ("{{end}}", "unexpected {{end}}"),
        ("{{Unknown 1}}", "not defined"),
        ("{{.a.b}}", "nil pointer"),
        ("{{$undefined}}", "undefined variable"),
    ],
)
def test_what_it_cannot_render_is_an_error_naming_the_construct(source: str, fragment: str) -> None:
    with pytest.raises(TemplateError, match=r"t\.yaml") as raised:
        Template(source, "t.yaml").render({})
    assert fragment in str(raised.value)
