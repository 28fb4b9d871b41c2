"""In-tree volume → CSI driver and volume handle, for the plugins whose CSI migration is on.

The part of csi-translation-lib NodeVolumeLimits needs: which in-tree plugin a PV or inline
volume uses, that plugin's CSI driver, and the handle the translated volume would carry (only
compared for equality, so two pods mounting one disk count once). Pure; never the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.volumes import meta

Raw = Mapping[str, Any]

GCE_PD = "kubernetes.io/gce-pd"
AWS_EBS = "kubernetes.io/aws-ebs"
AZURE_DISK = "kubernetes.io/azure-disk"
CINDER = "kubernetes.io/cinder"
PORTWORX = "kubernetes.io/portworx-volume"
AZURE_FILE = "kubernetes.io/azure-file"
VSPHERE = "kubernetes.io/vsphere-volume"

UNSPECIFIED = "UNSPECIFIED"
_ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


@dataclass(frozen=True)
class InTreePlugin:
    name: str
    csi_driver: str
    source: str  # the volume source field
    id_field: str  # the field naming the disk


PLUGINS = (
    InTreePlugin(GCE_PD, "pd.csi.storage.gke.io", "gcePersistentDisk", "pdName"),
    InTreePlugin(AWS_EBS, "ebs.csi.aws.com", "awsElasticBlockStore", "volumeID"),
    InTreePlugin(AZURE_DISK, "disk.csi.azure.com", "azureDisk", "diskURI"),
    InTreePlugin(CINDER, "cinder.csi.openstack.org", "cinder", "volumeID"),
    InTreePlugin(PORTWORX, "pxd.portworx.com", "portworxVolume", "volumeID"),
    InTreePlugin(AZURE_FILE, "file.csi.azure.com", "azureFile", "shareName"),
    InTreePlugin(VSPHERE, "csi.vsphere.vmware.com", "vsphereVolume", "volumePath"),
)
BY_NAME = {p.name: p for p in PLUGINS}
# Plugins whose migration is on in 1.37 (isCSIMigrationOn); Azure File and vSphere are not counted.
MIGRATION_ON = frozenset({AWS_EBS, PORTWORX, GCE_PD, AZURE_DISK, CINDER})


def plugin_of(source: Raw) -> InTreePlugin | None:
    """The in-tree plugin of a volume or PV spec, if it uses one translation knows."""
    for plugin in PLUGINS:
        if source.get(plugin.source) is not None:
            return plugin
    return None


def is_migration_on(csi_node: Raw | None, plugin: str) -> bool:
    return csi_node is not None and plugin in MIGRATION_ON


def _aws_volume_id(value: str) -> str:
    return value.rsplit("/", 1)[-1] if value.startswith("aws://") else value


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
        zones: list[str] = []
        if pv is not None:
            labels = meta(pv).get("labels") or {}
            label = next((labels[k] for k in _ZONE_LABELS if k in labels), "")
            zones = [z for z in str(label).split("__")] if label else []
        return _gce_handle(value, zones)
    if plugin.name == AWS_EBS:
        return _aws_volume_id(value)
    return value
