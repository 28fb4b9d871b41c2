"""The API codec (orjson or the standard library, same objects either way) and the collector
settings of a running scheduler."""

from __future__ import annotations

import gc
import importlib
import json
from collections.abc import Iterator

import pytest

from scheduler import codec, gctune

EVENT = (
    b'{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"a":"\\u00e9"}},'
    b'"spec":{"nodeName":"n1","priority":-5,"overhead":null,"enableServiceLinks":true},"status":{"x":1.5e3}}}'
)


@pytest.fixture
def stdlib_codec(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.setenv(codec.ENV, "stdlib")
    yield importlib.reload(codec)
    monkeypatch.delenv(codec.ENV)
    importlib.reload(codec)


def test_the_fast_backend_is_used_when_installed_and_decodes_like_the_standard_library() -> None:
    assert codec.BACKEND == "orjson"  # a project dependency (pyproject.toml)
    assert codec.loads(EVENT) == json.loads(EVENT)
    assert codec.loads(EVENT.decode()) == json.loads(EVENT)
    body = {"apiVersion": "v1", "kind": "Binding", "target": {"name": "n1"}, "n": None, "é": [1, 2.5, True]}
    assert json.loads(codec.dumps(body)) == body
    with pytest.raises(ValueError):
        codec.loads(b'{"truncated": ')


def test_the_standard_library_can_be_forced(stdlib_codec: object) -> None:
    assert codec.BACKEND == "stdlib"
    assert codec.loads(EVENT) == json.loads(EVENT)
    assert codec.dumps({"a": [1, None]}) == b'{"a":[1,null]}'
    with pytest.raises(ValueError):
        codec.loads(b"not json")


def test_collector_thresholds_are_raised_unless_the_defaults_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        monkeypatch.setenv(gctune.ENV, "python")
        gctune.configure()
        assert gc.get_threshold() == (700, 10, 10)
        monkeypatch.delenv(gctune.ENV)
        gctune.configure()
        assert gc.get_threshold() == gctune.THRESHOLDS
        assert gc.isenabled()
    finally:
        gc.set_threshold(*before)
