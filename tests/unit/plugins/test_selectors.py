"""Label selectors, node selector terms and tolerations (scheduler/model/selectors.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.model.objects import Taint, Toleration
from scheduler.model.selectors import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    SelectorError,
    find_untolerated_taint,
    is_do_not_schedule,
    label_selector,
    parse_node_selector,
    parse_preferred_terms,
    required_node_affinity,
    tolerates,
)
from scheduler.testing.builders import expr, make_node, make_pod, name_in, term

LABELS = {"zone": "a", "gpu": "nvidia", "cores": "8"}


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        (None, False),  # a missing selector selects nothing
        ({}, True),  # an empty one selects everything
        ({"matchLabels": {"zone": "a"}}, True),
        ({"matchLabels": {"zone": "b"}}, False),
        ({"matchLabels": {"zone": "a", "gpu": "amd"}}, False),
        ({"matchExpressions": [expr("zone", "In", "a", "b")]}, True),
        ({"matchExpressions": [expr("zone", "In", "b")]}, False),
        ({"matchExpressions": [expr("missing", "In", "a")]}, False),
        ({"matchExpressions": [expr("zone", "NotIn", "b")]}, True),
        ({"matchExpressions": [expr("zone", "NotIn", "a")]}, False),
        ({"matchExpressions": [expr("missing", "NotIn", "a")]}, True),
        ({"matchExpressions": [expr("gpu", "Exists")]}, True),
        ({"matchExpressions": [expr("missing", "Exists")]}, False),
        ({"matchExpressions": [expr("missing", "DoesNotExist")]}, True),
        ({"matchExpressions": [expr("gpu", "DoesNotExist")]}, False),
        ({"matchLabels": {"zone": "a"}, "matchExpressions": [expr("gpu", "DoesNotExist")]}, False),
    ],
)
def test_label_selector_matches(selector: dict[str, Any] | None, want: bool) -> None:
    assert label_selector(selector).matches(LABELS) is want


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"matchExpressions": [expr("zone", "Gt", "1")]}, '"Gt" is not a valid label selector operator'),
        (
            {"matchExpressions": [expr("zone", "In")]},
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [expr("zone", "Exists", "a")]},
            'values: Invalid value: ["a"]: values set must be empty for exists and does not exist',
        ),
        ({"matchLabels": {"bad key": "a"}}, 'key: Invalid value: "bad key": name part must consist of'),
        ({"matchLabels": {"zone": "bad value!"}}, 'values[0][zone]: Invalid value: "bad value!"'),
        ({"matchLabels": {"/zone": "a"}}, "prefix part must be non-empty"),
        ({"matchLabels": {"Example.com/zone": "a"}}, "prefix part a lowercase RFC 1123 subdomain"),
    ],
)
def test_label_selector_errors_name_the_field(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as err:
        label_selector(selector)
    assert message in str(err.value)


def test_label_key_error_message_is_apimachinerys() -> None:
    with pytest.raises(SelectorError) as err:
        label_selector({"matchLabels": {"invalid key": "bar"}})
    assert str(err.value) == (
        "key: Invalid value: \"invalid key\": name part must consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )


NODE = make_node("node-1").labels({"zone": "a", "cores": "8", "gpu": "nvidia"}).obj()


@pytest.mark.parametrize(
    ("terms", "want"),
    [
        ([term(expr("zone", "In", "a"))], True),
        ([term(expr("zone", "In", "b"))], False),
        ([term(expr("cores", "Gt", "4"))], True),
        ([term(expr("cores", "Gt", "8"))], False),
        ([term(expr("cores", "Lt", "9"))], True),
        ([term(expr("zone", "Gt", "1"))], False),  # a non-numeric label never compares
        ([term(expr("missing", "Lt", "9"))], False),
        ([term(expr("zone", "NotIn", "b"), expr("gpu", "Exists"))], True),
        ([term(expr("zone", "NotIn", "a"), expr("gpu", "Exists"))], False),  # ANDed within a term
        ([term(expr("zone", "In", "b")), term(expr("gpu", "Exists"))], True),  # ORed across terms
        ([term(fields=[name_in("node-1")])], True),
        ([term(fields=[name_in("node-2")])], False),
        ([term(fields=[expr("metadata.name", "NotIn", "node-2")])], True),
        ([term(expr("zone", "In", "a"), fields=[name_in("node-2")])], False),
        ([term(fields=[name_in("node-1", "node-2")])], False),  # matchFields In takes exactly one value
        ([term(fields=[expr("metadata.name", "Exists")])], False),
        ([{}], False),  # an empty term selects nothing
        ([], False),
        ([term(expr("zone", "In", "bad value!")), term(expr("gpu", "Exists"))], True),  # broken term skipped
    ],
)
def test_node_selector_matches(terms: list[dict[str, Any]], want: bool) -> None:
    assert parse_node_selector({"nodeSelectorTerms": terms}).matches(NODE) is want


def test_match_fields_are_ignored_for_a_node_without_name() -> None:
    selector = parse_node_selector({"nodeSelectorTerms": [term(fields=[name_in("node-1")])]})
    assert selector.matches(make_node("").obj())


@pytest.mark.parametrize(
    ("terms", "message"),
    [
        (
            [term(expr("zone", "Near", "a"))],
            'p.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Near": supported values: '
            '"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
        ),
        (
            [term(expr("cores", "Gt", "4", "5"))],
            'p.nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: ["4","5"]: '
            "for 'Gt', 'Lt' operators, exactly one value is required",
        ),
        (
            [term(expr("cores", "Lt", "x"))],
            'p.nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "x": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            [{}, term(fields=[name_in("a", "b")])],
            'p.nodeSelectorTerms[1].matchFields[0].values: Invalid value: ["a","b"]: must have one element',
        ),
        (
            [term(fields=[expr("metadata.name", "Exists")])],
            'p.nodeSelectorTerms[0].matchFields[0].operator: Unsupported value: "Exists": '
            'supported values: "In", "NotIn"',
        ),
    ],
)
def test_strict_node_selector_errors_name_the_field(terms: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_node_selector({"nodeSelectorTerms": terms}, "p", strict=True)
    assert str(err.value) == message


def test_several_errors_are_aggregated() -> None:
    with pytest.raises(SelectorError) as err:
        parse_node_selector({"nodeSelectorTerms": [term(expr("a", "Near")), term(expr("b", "Far"))]}, strict=True)
    assert str(err.value).startswith("[nodeSelectorTerms[0].matchExpressions[0].operator")
    assert ", nodeSelectorTerms[1].matchExpressions[0].operator" in str(err.value)
    assert len(err.value.errors) == 2


def test_preferred_terms_score_sums_matching_weights() -> None:
    terms = parse_preferred_terms(
        [
            {"weight": 2, "preference": term(expr("zone", "In", "a"))},
            {"weight": 5, "preference": term(expr("gpu", "Exists"), expr("cores", "Gt", "4"))},
            {"weight": 7, "preference": term(expr("zone", "In", "b"))},
            {"weight": 0, "preference": term(expr("zone", "In", "a"))},  # ignored
            {"weight": 3, "preference": {}},  # ignored
        ]
    )
    assert terms.score(NODE) == 7


def test_preferred_terms_errors_are_indexed_without_preference() -> None:
    with pytest.raises(SelectorError) as err:
        parse_preferred_terms([{"weight": 2, "preference": term(expr("invalid key", "In", "bar"))}])
    assert str(err.value).startswith('[0].matchExpressions[0].key: Invalid value: "invalid key": name part')


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (make_pod("p"), True),
        (make_pod("p").node_selector(zone="a"), True),
        (make_pod("p").node_selector(zone="a", gpu="amd"), False),
        (make_pod("p").node_affinity_in("zone", ["a"]), True),
        (make_pod("p").node_selector(zone="b").node_affinity_in("zone", ["a"]), False),
        (make_pod("p").node_selector(zone="a").node_affinity_in("zone", ["b"]), False),
        (make_pod("p").spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}), False),
    ],
)
def test_required_node_affinity(pod: Any, want: bool) -> None:
    assert required_node_affinity(pod.obj()).matches(NODE) is want


TAINT = Taint("dedicated", "user1", NO_SCHEDULE)


@pytest.mark.parametrize(
    ("toleration", "want"),
    [
        (Toleration("dedicated", "Equal", "user1", NO_SCHEDULE), True),
        (Toleration("dedicated", "", "user1", NO_SCHEDULE), True),  # no operator means Equal
        (Toleration("dedicated", "Equal", "user2", NO_SCHEDULE), False),
        (Toleration("dedicated", "Exists", "", NO_SCHEDULE), True),
        (Toleration("dedicated", "Exists", "", ""), True),  # empty effect matches all effects
        (Toleration("dedicated", "Equal", "user1", PREFER_NO_SCHEDULE), False),
        (Toleration("", "Exists", "", ""), True),  # empty key with Exists tolerates everything
        (Toleration("", "Exists", "", NO_EXECUTE), False),
        (Toleration("other", "Exists", "", NO_SCHEDULE), False),
        (Toleration("dedicated", "Gt", "0", NO_SCHEDULE), False),  # no comparison operators in 1.34
    ],
)
def test_tolerates(toleration: Toleration, want: bool) -> None:
    assert tolerates(toleration, TAINT) is want


def test_find_untolerated_taint_respects_the_filter() -> None:
    taints = [Taint("soft", "", PREFER_NO_SCHEDULE), Taint("hard", "x", NO_EXECUTE)]
    assert find_untolerated_taint(taints, [], is_do_not_schedule) == taints[1]
    assert find_untolerated_taint(taints, [Toleration("hard", "Exists")], is_do_not_schedule) is None
    assert find_untolerated_taint(taints, [Toleration("hard", "Exists")]) == taints[0]
