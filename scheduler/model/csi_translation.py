"""In-tree volumes seen as the CSI volumes they migrate to (csi-translation-lib's share in the scheduler).

Which in-tree plugin a PV or inline volume uses and whether its migration is on (1.37: EBS, GCE
PD, Azure Disk, Cinder, Portworx), its CSI driver, whether a node's CSINode says the plugin is
migrated there, the handle a translated volume carries (NodeVolumeLimits counts by it), and the
node affinity a translated PV carries (VolumeBinding checks it), with csi-translation-lib's errors.
Pure: never the API, never mutates its input.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.volumes import meta, spec

Raw = Mapping[str, Any]

GCE_PD = "kubernetes.io/gce-pd"
AWS_EBS = "kubernetes.io/aws-ebs"
AZURE_DISK = "kubernetes.io/azure-disk"
CINDER = "kubernetes.io/cinder"
PORTWORX = "kubernetes.io/portworx-volume"
AZURE_FILE = "kubernetes.io/azure-file"
VSPHERE = "kubernetes.io/vsphere-volume"

MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
UNSPECIFIED = "UNSPECIFIED"
ZONE_GA = "topology.kubernetes.io/zone"
ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_GA = "topology.kubernetes.io/region"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True)
class InTreePlugin:
    name: str
    csi_driver: str
    source: str  # the volume source field
    id_field: str  # the field naming the disk
    topology_key: str | None = None  # the driver's zone key, for plugins whose PVs carry zones


PLUGINS = (
    InTreePlugin(GCE_PD, "pd.csi.storage.gke.io", "gcePersistentDisk", "pdName", "topology.gke.io/zone"),
    InTreePlugin(AWS_EBS, "ebs.csi.aws.com", "awsElasticBlockStore", "volumeID", "topology.ebs.csi.aws.com/zone"),
    InTreePlugin(AZURE_DISK, "disk.csi.azure.com", "azureDisk", "diskURI"),
    InTreePlugin(CINDER, "cinder.csi.openstack.org", "cinder", "volumeID", "topology.cinder.csi.openstack.org/zone"),
    InTreePlugin(PORTWORX, "pxd.portworx.com", "portworxVolume", "volumeID"),
    InTreePlugin(AZURE_FILE, "file.csi.azure.com", "azureFile", "shareName"),
    InTreePlugin(VSPHERE, "csi.vsphere.vmware.com", "vsphereVolume", "volumePath"),
)
BY_NAME = {p.name: p for p in PLUGINS}
# Plugins whose migration is on in 1.37 (isCSIMigrationOn); Azure File and vSphere are not counted.
MIGRATION_ON = frozenset({AWS_EBS, PORTWORX, GCE_PD, AZURE_DISK, CINDER})


class TranslationError(ValueError):
    """csi-translation-lib refused the volume; the message is its own."""


def plugin_of(source: Raw) -> InTreePlugin | None:
    """The in-tree plugin of a volume or PV spec, if it uses one translation knows."""
    for plugin in PLUGINS:
        if source.get(plugin.source) is not None:
            return plugin
    return None


def is_migration_on(csi_node: Raw | None, plugin: str) -> bool:
    return csi_node is not None and plugin in MIGRATION_ON


def migrated_on_node(plugin: str, csi_node: Raw | None) -> bool:
    """Whether the node's CSINode names the plugin in its migrated-plugins annotation."""
    if csi_node is None:
        return False
    value = (meta(csi_node).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION) or ""
    return bool(value) and plugin in value.split(",")


def _aws_volume_id(value: str) -> str:
    return value.rsplit("/", 1)[-1] if value.startswith("aws://") else value


def _gce_zones(pv: Raw) -> list[str]:
    """The zones of a GCE PD's zone label, the beta label first (as the PD translation reads them)."""
    labels = meta(pv).get("labels") or {}
    label = str(labels.get(ZONE_BETA) or labels.get(ZONE_GA) or "")
    return label.split(MULTI_ZONE_DELIMITER) if label else []


def _gce_handle(pd_name: str, zones: list[str]) -> str:
    if len(zones) == 1 and zones[0]:
        return f"projects/{UNSPECIFIED}/zones/{zones[0]}/disks/{pd_name}"
    if len(zones) > 1:
        region = zones[0].rsplit("-", 1)[0]
        return f"projects/{UNSPECIFIED}/regions/{region}/disks/{pd_name}"
    return f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{pd_name}"


def volume_handle(plugin: InTreePlugin, source: Raw, pv: Raw | None = None) -> str:
    """The CSI volume handle of a translated inline volume (pv None) or PV."""
    fields = source.get(plugin.source) or {}
    value = str(fields.get(plugin.id_field) or "")
    if plugin.name == GCE_PD:
        return _gce_handle(value, _gce_zones(pv) if pv is not None else [])
    if plugin.name == AWS_EBS:
        return _aws_volume_id(value)
    return value


# ---- PV translation (TranslateInTreePVToCSI), as far as node affinity is concerned --------------


def translate_pv_topology(pv: Raw) -> Raw:
    """The PV as csi-translation-lib would translate it, for checking node affinity: a copy with
    the driver's topology in its node affinity (the source itself is left as it is). Raises
    TranslationError where the translation fails. PVs of plugins whose migration is off come back
    unchanged."""
    plugin = plugin_of(spec(pv))
    if plugin is None or plugin.name not in MIGRATION_ON:
        return pv
    source = spec(pv).get(plugin.source) or {}
    if plugin.name == GCE_PD:
        zones = _gce_zones(pv)
        if len(zones) > 1:
            _gce_region(zones)
    elif plugin.name == AWS_EBS:
        _ebs_volume_id(str(source.get("volumeID") or ""))
    elif plugin.name == AZURE_DISK:
        kind = source.get("kind")
        if kind is not None and str(kind).casefold() != "managed":
            raise TranslationError(f"kind({kind}) is not supported in csi migration")
    if plugin.topology_key is None:
        return pv
    affinity = translate_topology(spec(pv).get("nodeAffinity"), meta(pv).get("labels") or {}, plugin.topology_key)
    if affinity == spec(pv).get("nodeAffinity"):
        return pv
    return {**pv, "spec": {**spec(pv), "nodeAffinity": affinity}}


def _gce_region(zones: list[str]) -> str:
    regions: set[str] = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(
                "failed to get region from zones: zone in unexpected format, "
                f"expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"
            )
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        shown = " ".join(f"{r}:{{}}" for r in sorted(regions))
        raise TranslationError(
            f"failed to get region from zones: multiple or no regions gotten from zones, got: map[{shown}]"
        )
    return regions.pop()


_EBS_VOLUME = re.compile(r"vol-[^/]*")


def _ebs_volume_id(volume_id: str) -> str:
    """KubernetesVolumeIDToEBSVolumeID: a bare id, or the path of an aws://zone/id URL."""
    if not volume_id.startswith("aws://"):
        return volume_id
    prefix = "failed to translate Kubernetes ID to EBS Volume ID "
    try:
        path = _go_url_path(volume_id)
    except ValueError as exc:
        raise TranslationError(f"{prefix}Invalid disk name ({volume_id}): {exc}") from None
    aws_id = path.strip("/")
    if not _EBS_VOLUME.fullmatch(aws_id):
        raise TranslationError(f"{prefix}Invalid format for AWS volume ({volume_id})")
    return aws_id


def translate_topology(affinity: Raw | None, labels: Raw, csi_key: str) -> Raw | None:
    """translateTopologyFromInTreeToCSI on a PV's nodeAffinity (a new value; the input is kept):
    the zone key it uses becomes csi_key, or, without zone terms, the zone label's zones are added
    to every term; a beta region key becomes the GA one when the beta zone key is the one in use."""
    result: dict[str, Any] | None = copy.deepcopy(dict(affinity)) if affinity is not None else None
    zone_key, region_key = _topology_keys(result, labels)
    if _topology_values(result, zone_key):
        _replace_key(result, zone_key, csi_key)
    elif zone_key in labels:
        zones = sorted({z.strip() for z in str(labels[zone_key]).split(MULTI_ZONE_DELIMITER)} - {""})
        if zones:
            result = _add_topology(result, csi_key, zones)
    if region_key == REGION_BETA and _topology_values(result, REGION_BETA):
        _replace_key(result, REGION_BETA, REGION_GA)
    return result


def _expressions(affinity: Raw | None) -> list[list[dict[str, Any]]]:
    terms = ((affinity or {}).get("required") or {}).get("nodeSelectorTerms") or ()
    return [term.get("matchExpressions") or [] for term in terms]


def _topology_keys(affinity: Raw | None, labels: Raw) -> tuple[str, str]:
    """getTopologyLabel: GA or beta zone/region keys, from the affinity first, then the labels."""
    keys = {expr.get("key") for exprs in _expressions(affinity) for expr in exprs}
    for present in (keys, labels):
        if ZONE_GA in present:
            return ZONE_GA, REGION_GA
        if ZONE_BETA in present:
            return ZONE_BETA, REGION_BETA
    return ZONE_GA, REGION_GA


def _topology_values(affinity: Raw | None, key: str) -> list[str]:
    return sorted(
        {v for exprs in _expressions(affinity) for e in exprs if e.get("key") == key for v in e.get("values") or ()}
    )


def _replace_key(affinity: Raw | None, old: str, new: str) -> None:
    for exprs in _expressions(affinity):
        for expr in exprs:
            if expr.get("key") == old:
                expr["key"] = new


def _add_topology(affinity: dict[str, Any] | None, key: str, zones: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = affinity if affinity is not None else {}
    if result.get("required") is None:
        result["required"] = {}
    required: dict[str, Any] = result["required"]
    if not required.get("nodeSelectorTerms"):
        required["nodeSelectorTerms"] = [{}]
    term: dict[str, Any]
    for term in required["nodeSelectorTerms"]:
        if term.get("matchExpressions") is None:
            term["matchExpressions"] = []
        term["matchExpressions"].append({"key": key, "operator": "In", "values": list(zones)})
    return result


# ---- Go's url.Parse, as far as an aws:// volume id needs it ------------------------------------

_HOST_BYTES = frozenset(b"!\"$&'()*+,-.0123456789:;<=>ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz~")
_USERINFO_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._:~!$&'()*+,;=%@")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_GO_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 34: '\\"', 92: "\\\\"}


def go_quote(raw: bytes) -> str:
    """strconv.Quote: printable UTF-8 kept, the rest escaped."""
    out = ['"']
    text = raw.decode("utf-8", "surrogateescape")
    for ch in text:
        code = ord(ch)
        if code in _GO_ESCAPES:
            out.append(_GO_ESCAPES[code])
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _go_unescape(s: bytes, host: bool = False) -> bytes:
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:  # %
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise ValueError(f"invalid URL escape {go_quote(s[i : i + 3])}")
            if host and int(chr(s[i + 1]), 16) < 8 and s[i : i + 3] != b"%25":
                raise ValueError(f"invalid URL escape {go_quote(s[i : i + 3])}")
            i += 3
        else:
            if host and c < 0x80 and c not in _HOST_BYTES:
                raise ValueError(f"invalid character {go_quote(bytes([c]))} in host name")
            i += 1
    return re.sub(rb"%([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]), s)


def _valid_port(port: bytes) -> bool:
    return not port or (port[:1] == b":" and all(0x30 <= b <= 0x39 for b in port[1:]))


def _go_parse_host(host: bytes) -> None:
    open_bracket = host.rfind(b"[")
    if open_bracket > 0:
        raise ValueError("invalid IP-literal")
    if open_bracket == 0:
        close = host.rfind(b"]")
        if close < 0:
            raise ValueError("missing ']' in host")
        port = host[close + 1 :]
        if not _valid_port(port):
            raise ValueError(f"invalid port {go_quote(port)} after host")
        literal = host[1:close]
        zone_at = literal.find(b"%25")
        address = _go_unescape(literal[:zone_at] if zone_at >= 0 else literal, host=True)
        try:
            parsed = ipaddress.ip_address(address.decode("utf-8", "replace"))
        except ValueError:
            raise ValueError(f"invalid host: ParseAddr({go_quote(address)}): unable to parse IP") from None
        if parsed.version == 4:
            raise ValueError("invalid IP-literal")
        return
    colon = host.rfind(b":")
    if colon >= 0 and not _valid_port(host[colon:]):
        raise ValueError(f"invalid port {go_quote(host[colon:])} after host")
    _go_unescape(host, host=True)


def _go_url_path(raw_url: str) -> str:
    """The unescaped path of an aws://… URL as Go's url.Parse finds it; ValueError in its words."""
    raw = raw_url.encode()
    url, _, fragment = raw.partition(b"#")
    try:
        if any(b < 0x20 or b == 0x7F for b in url):
            raise ValueError("net/url: invalid control character in URL")
        rest = url[len(b"aws:") :]
        rest = rest[:-1] if rest.endswith(b"?") and rest.count(b"?") == 1 else rest.partition(b"?")[0]
        authority, slash, path = rest[2:].partition(b"/")
        at = authority.rfind(b"@")
        _go_parse_host(authority[at + 1 :])
        if at >= 0:
            userinfo = authority[:at]
            if not all(b in _USERINFO_BYTES for b in userinfo):
                raise ValueError("net/url: invalid userinfo")
            for part in userinfo.split(b":", 1):
                _go_unescape(part)
        unescaped = _go_unescape(slash + path)
    except ValueError as exc:
        raise ValueError(f"parse {go_quote(url)}: {exc}") from None
    if fragment:
        try:
            _go_unescape(fragment)
        except ValueError as exc:
            raise ValueError(f"parse {go_quote(raw)}: {exc}") from None
    return unescaped.decode("utf-8", "surrogateescape")
