"""The in-tree → CSI translation of PV node affinity: cases of csi-translation-lib's own tests
(in_tree_volume_test.go translateTopologyFromInTreeToCSI / addTopology / replaceTopology,
gce_pd_test.go, aws_ebs_test.go, azure_disk_test.go), and Go's url.Parse errors for aws:// ids."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.model.csi_translation import (
    BY_NAME,
    GCE_PD,
    REGION_BETA,
    REGION_GA,
    ZONE_BETA,
    ZONE_GA,
    TranslationError,
    migrated_on_node,
    translate_pv_topology,
    translate_topology,
    volume_handle,
)

Raw = dict[str, Any]
GCE_KEY = "topology.gke.io/zone"
EBS_KEY = "topology.ebs.csi.aws.com/zone"
CINDER_KEY = "topology.cinder.csi.openstack.org/zone"


def expr(key: str, *values: str) -> Raw:
    return {"key": key, "operator": "In", "values": list(values)}


def affinity(*terms: list[Raw]) -> Raw:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}}


def in_tree_pv(source: str, fields: Raw, labels: Raw | None = None, node_affinity: Raw | None = None) -> Raw:
    pv: Raw = {"metadata": {"name": "pv", "labels": dict(labels or {})}, "spec": {source: fields}}
    if node_affinity is not None:
        pv["spec"]["nodeAffinity"] = node_affinity
    return pv


US_EAST1A_GA = {ZONE_GA: "us-east1-a", REGION_GA: "us-east1"}


@pytest.mark.parametrize(
    ("labels", "node_affinity", "key", "expected"),
    [
        pytest.param(
            US_EAST1A_GA,
            affinity([expr(ZONE_GA, "us-east1-a"), expr(REGION_GA, "us-east1")]),
            GCE_KEY,
            affinity([expr(GCE_KEY, "us-east1-a"), expr(REGION_GA, "us-east1")]),
            id="replace GA zone topology with the GCE CSI key",
        ),
        pytest.param(
            US_EAST1A_GA,
            affinity([expr(ZONE_BETA, "us-west2-b"), expr(REGION_BETA, "us-west2")]),
            GCE_KEY,
            affinity([expr(GCE_KEY, "us-west2-b"), expr(REGION_GA, "us-west2")]),
            id="replace beta zone topology and upgrade the beta region key",
        ),
        pytest.param(
            {},
            affinity([expr(REGION_GA, "us-east1"), expr(ZONE_GA, "us-east1-a")]),
            EBS_KEY,
            affinity([expr(REGION_GA, "us-east1"), expr(EBS_KEY, "us-east1-a")]),
            id="zone after region in the term",
        ),
        pytest.param(
            {},
            affinity([expr(ZONE_GA, "a")], [expr("other", "x")], [expr(ZONE_GA, "b"), expr(ZONE_GA, "c")]),
            GCE_KEY,
            affinity([expr(GCE_KEY, "a")], [expr("other", "x")], [expr(GCE_KEY, "b"), expr(GCE_KEY, "c")]),
            id="replace the key in every term",
        ),
        pytest.param(
            {},
            affinity([expr(GCE_KEY, "us-east1-a")]),
            GCE_KEY,
            affinity([expr(GCE_KEY, "us-east1-a")]),
            id="no in-tree key: nothing to replace",
        ),
        pytest.param(
            {ZONE_GA: "us-central1-f__us-central1-a__ us-central1-c__us-central1-a"},
            None,
            GCE_KEY,
            affinity([expr(GCE_KEY, "us-central1-a", "us-central1-c", "us-central1-f")]),
            id="zones from the label: trimmed, deduplicated, sorted",
        ),
        pytest.param(
            {ZONE_GA: " __us-central1-a"},
            None,
            GCE_KEY,
            affinity([expr(GCE_KEY, "us-central1-a")]),
            id="zones from the label including a blank one",
        ),
        pytest.param({ZONE_GA: " __\n__\t"}, None, GCE_KEY, None, id="only blank zones in the label: nothing added"),
        pytest.param({ZONE_GA: ""}, None, GCE_KEY, None, id="empty zone label: nothing added"),
        pytest.param({}, None, GCE_KEY, None, id="no label, no affinity"),
        pytest.param(
            {ZONE_BETA: "z1"},
            affinity([expr("kubernetes.io/hostname", "n1")], [expr("rack", "r1")]),
            CINDER_KEY,
            affinity(
                [expr("kubernetes.io/hostname", "n1"), expr(CINDER_KEY, "z1")],
                [expr("rack", "r1"), expr(CINDER_KEY, "z1")],
            ),
            id="beta zone label added to every term",
        ),
        pytest.param(
            {ZONE_GA: "z1"},
            {"required": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In"}]}]}},
            GCE_KEY,
            {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [{"key": "metadata.name", "operator": "In"}],
                            "matchExpressions": [expr(GCE_KEY, "z1")],
                        }
                    ]
                }
            },
            id="a term of fields only gains the expression",
        ),
        pytest.param(
            {ZONE_GA: "z1"},
            affinity([{"key": ZONE_GA, "operator": "Exists"}]),
            GCE_KEY,
            affinity([{"key": ZONE_GA, "operator": "Exists"}, expr(GCE_KEY, "z1")]),
            id="a zone term without values counts as none: the label's zones are added",
        ),
        pytest.param(
            {},
            affinity([expr(ZONE_GA, "z1"), expr(REGION_BETA, "r1")]),
            GCE_KEY,
            affinity([expr(GCE_KEY, "z1"), expr(REGION_BETA, "r1")]),
            id="beta region kept when the GA zone key is in use",
        ),
    ],
)
def test_translate_topology(labels: Raw, node_affinity: Raw | None, key: str, expected: Raw | None) -> None:
    before = copy.deepcopy(node_affinity)
    assert translate_topology(node_affinity, labels, key) == expected
    assert node_affinity == before


@pytest.mark.parametrize(
    ("label_key", "value", "handle"),
    [
        (ZONE_BETA, "us-east1-a", "projects/UNSPECIFIED/zones/us-east1-a/disks/pd-name"),
        (ZONE_GA, "us-east1-a", "projects/UNSPECIFIED/zones/us-east1-a/disks/pd-name"),
        (ZONE_BETA, "us-central1-a__us-central1-c", "projects/UNSPECIFIED/regions/us-central1/disks/pd-name"),
        (ZONE_GA, "us-central1-a__us-central1-c", "projects/UNSPECIFIED/regions/us-central1/disks/pd-name"),
    ],
)
def test_gce_volume_handle(label_key: str, value: str, handle: str) -> None:
    pv = in_tree_pv("gcePersistentDisk", {"pdName": "pd-name"}, {label_key: value})
    assert volume_handle(BY_NAME[GCE_PD], pv["spec"], pv) == handle
    translate_pv_topology(pv)  # valid zones translate


def test_gce_pv_gains_the_zone_of_its_label() -> None:
    pv = in_tree_pv("gcePersistentDisk", {"pdName": "pd"}, {ZONE_GA: "us-central1-a__us-central1-b"})
    translated = translate_pv_topology(pv)
    assert translated["spec"]["nodeAffinity"] == affinity([expr(GCE_KEY, "us-central1-a", "us-central1-b")])
    assert "nodeAffinity" not in pv["spec"]


@pytest.mark.parametrize(
    ("source", "fields", "labels"),
    [
        ("awsElasticBlockStore", {"volumeID": "vol-1"}, {}),
        ("gcePersistentDisk", {"pdName": "pd"}, {}),
        ("azureDisk", {"diskName": "d", "diskURI": "/subscriptions/x", "kind": "Managed"}, {ZONE_GA: "z1"}),
        ("portworxVolume", {"volumeID": "px"}, {ZONE_GA: "z1"}),
        ("azureFile", {"shareName": "s", "secretName": "x"}, {ZONE_GA: "z1"}),  # migration off
        ("vsphereVolume", {"volumePath": "/p"}, {ZONE_GA: "z1"}),  # migration off
        ("csi", {"driver": "d", "volumeHandle": "h"}, {ZONE_GA: "z1"}),
    ],
)
def test_translation_without_topology_change_is_the_pv_itself(source: str, fields: Raw, labels: Raw) -> None:
    pv = in_tree_pv(source, fields, labels)
    assert translate_pv_topology(pv) is pv


@pytest.mark.parametrize(
    ("source", "fields", "labels", "error"),
    [
        (
            "gcePersistentDisk",
            {"pdName": "pd"},
            {ZONE_GA: "us-central1-a__us-east1-b"},
            "failed to get region from zones: multiple or no regions gotten from zones, "
            "got: map[us-central1:{} us-east1:{}]",
        ),
        (
            "gcePersistentDisk",
            {"pdName": "pd"},
            {ZONE_BETA: "us-central1-a__uscentral1b"},
            "failed to get region from zones: zone in unexpected format, expected: {locale}-{region}-{zone}, "
            "got: uscentral1b",
        ),
        (
            "gcePersistentDisk",
            {"pdName": "pd"},
            # The beta label is the one the PD translation reads when both are set.
            {ZONE_BETA: "us-central1-a__", ZONE_GA: "us-central1-a"},
            "failed to get region from zones: zone in unexpected format, expected: {locale}-{region}-{zone}, got: ",
        ),
        (
            "awsElasticBlockStore",
            {"volumeID": "aws://us-west-2a/02399794d890f9375"},
            {},
            "failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume "
            "(aws://us-west-2a/02399794d890f9375)",
        ),
        (
            "awsElasticBlockStore",
            {"volumeID": "aws://us west/vol-1"},
            {},
            "failed to translate Kubernetes ID to EBS Volume ID Invalid disk name (aws://us west/vol-1): "
            'parse "aws://us west/vol-1": invalid character " " in host name',
        ),
        (
            "azureDisk",
            {"diskName": "d", "diskURI": "https://blob/d.vhd", "kind": "Shared"},
            {},
            "kind(Shared) is not supported in csi migration",
        ),
    ],
)
def test_translation_errors(source: str, fields: Raw, labels: Raw, error: str) -> None:
    with pytest.raises(TranslationError) as exc:
        translate_pv_topology(in_tree_pv(source, fields, labels))
    assert str(exc.value) == error


@pytest.mark.parametrize(
    ("volume_id", "translates"),
    [
        ("vol-02399794d890f9375", True),
        ("aws:///vol-02399794d890f9375", True),
        ("aws://us-west-2a/vol-02399794d890f9375", True),
        ("aws://us-west-2a/02399794d890f9375", False),
        ("aws://a/vol-1/x", False),
        ("aws://a/%76ol-1", True),
    ],
)
def test_kubernetes_volume_id_to_ebs_volume_id(volume_id: str, translates: bool) -> None:
    pv = in_tree_pv("awsElasticBlockStore", {"volumeID": volume_id})
    if translates:
        assert translate_pv_topology(pv) is pv
    else:
        with pytest.raises(TranslationError, match="Invalid format for AWS volume"):
            translate_pv_topology(pv)


# url.Parse's answers, as Go 1.26 gives them for these ids.
@pytest.mark.parametrize(
    ("volume_id", "parse_error"),
    [
        ("aws://a%zz/vol-1", 'invalid URL escape "%zz"'),
        ("aws://a/vol-%zz", 'invalid URL escape "%zz"'),
        ("aws://a:b/vol-1", 'invalid port ":b" after host'),
        ("aws://x y@a/vol-1", "net/url: invalid userinfo"),
        ("aws://[a/vol-1", "missing ']' in host"),
        ("aws://a%41/vol-1", 'invalid URL escape "%41"'),
        ("aws://a/vol-1\x01", "net/url: invalid control character in URL"),
        ("aws://a/vol-1%4", 'invalid URL escape "%4"'),
        ("aws://a\\b/vol-1", 'invalid character "\\\\" in host name'),
        ("aws://[1.2.3.4]/vol-1", "invalid IP-literal"),
    ],
)
def test_aws_url_parse_errors(volume_id: str, parse_error: str) -> None:
    with pytest.raises(TranslationError) as exc:
        translate_pv_topology(in_tree_pv("awsElasticBlockStore", {"volumeID": volume_id}))
    quoted = volume_id.replace("\\", "\\\\").replace('"', '\\"').replace("\x01", "\\x01")
    assert str(exc.value) == (
        f"failed to translate Kubernetes ID to EBS Volume ID Invalid disk name ({volume_id}): "
        f'parse "{quoted}": {parse_error}'
    )


@pytest.mark.parametrize("volume_id", ["aws://a/vol-1#%zz"])
def test_aws_url_fragment_error_names_the_whole_id(volume_id: str) -> None:
    with pytest.raises(TranslationError, match='parse "aws://a/vol-1#%zz": invalid URL escape "%zz"'):
        translate_pv_topology(in_tree_pv("awsElasticBlockStore", {"volumeID": volume_id}))


@pytest.mark.parametrize(
    ("annotation", "migrated"),
    [
        (None, False),
        ("", False),
        ("kubernetes.io/gce-pd", True),
        ("kubernetes.io/aws-ebs,kubernetes.io/gce-pd", True),
        ("kubernetes.io/aws-ebs, kubernetes.io/gce-pd", False),  # split on commas only, as kube does
        ("kubernetes.io/gce-pd-x", False),
    ],
)
def test_migrated_on_node(annotation: str | None, migrated: bool) -> None:
    csi_node: Raw = {"metadata": {"name": "n"}}
    if annotation is not None:
        csi_node["metadata"]["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": annotation}
    assert migrated_on_node(GCE_PD, csi_node) is migrated
    assert migrated_on_node(GCE_PD, None) is False
