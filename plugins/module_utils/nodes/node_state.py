# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a node knows about DRA, read from its own files: the kubelet's checkpoint of prepared claims, the
plugin registration sockets and plugin directories, the CDI spec files, and which running containers use
which CDI devices.

Pure: every function takes text or data already read (nodes/node_state_service.py reads them) and returns
plain dicts. A file of a format this module does not know is reported as ``format: unknown`` with the
reason; nothing is guessed.

The formats, as read from the Kubernetes sources of v1.33.13 and v1.37.2 (pkg/kubelet/cm/dra/state) and seen
on kind nodes of both releases (containerd v2.3.4, dra-example-driver v0.4.0):

- ``<kubelet root>/dra_manager_state``: ``{"Data": "<JSON text>", "Checksum": <CRC-32 IEEE of Data's bytes>}``;
  Data is ``{"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList":
  [{"ClaimUID", "ClaimName", "Namespace", "PodUIDs": {uid: {}}, "DriverState": {driver: {"Devices": [{"PoolName",
  "DeviceName", "ShareID" (1.34+), "RequestNames", "CDIDeviceIDs"}]}}}]}``.
- registration sockets in ``<kubelet root>/plugins_registry``: ``<driver>-reg.sock``, or with rolling updates
  ``<driver>-<pod uid>-reg.sock``, ``<driver>-<hash>-reg.sock`` or ``dra-<hash>-reg.sock``
  (k8s.io/dynamic-resource-allocation/kubeletplugin); CSI drivers register there too.
- plugin data directories ``<kubelet root>/plugins/<driver>/`` with ``dra.sock`` or ``dra-<pod uid>.sock``.
- CDI specs (``/etc/cdi``, ``/var/run/cdi``; JSON or YAML): ``cdiVersion``, ``kind`` (``vendor/class``),
  ``devices[].name``; a claim's spec is a transient spec named ``<vendor>-<class>_<id>.<json|yaml>`` whose id
  and device names carry the claim's UID (the example driver: ``k8s.gpu.example.com-gpu_<claim uid>.yaml``).
- ``crictl inspect``: ``info.config.CDI_devices[].name`` (the CRI ContainerConfig's CDI devices, qualified
  ``vendor/class=name``) and the pod's UID in ``info.config.labels["io.kubernetes.pod.uid"]``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import zlib

KUBELET_ROOT_DIR = "/var/lib/kubelet"
CHECKPOINT_FILE = "dra_manager_state"
REGISTRY_DIR_NAME = "plugins_registry"
PLUGINS_DIR_NAME = "plugins"
CDI_SPEC_DIRS = ["/etc/cdi", "/var/run/cdi"]
CRICTL = "crictl"
CONTAINERD_SOCKET = "unix:///run/containerd/containerd.sock"

CHECKPOINT_KIND = "DRACheckpoint"
CHECKPOINT_API_VERSION = "checkpoint.dra.kubelet.k8s.io/v1"
CDI_SPEC_SUFFIXES = (".json", ".yaml", ".yml")

UID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_REG_SOCKET_RE = re.compile(r"^(?P<prefix>.+?)(?:-(?P<uid>%s))?-reg\.sock$" % UID_RE.pattern)
_HASHED_REG_RE = re.compile(r"^dra-[A-Za-z0-9_-]{22}-reg\.sock$")
_DRA_SOCKET_RE = re.compile(r"^dra(?:-(?P<uid>%s))?\.sock$" % UID_RE.pattern)
POD_UID_LABEL = "io.kubernetes.pod.uid"


def unknown(reason, **extra):
    """The report of a file this module cannot read as what it should be."""
    out = {"format": "unknown", "error": reason}
    out.update(extra)
    return out


def _checkpoint_devices(driver_state):
    devices = []
    for dev in (driver_state or {}).get("Devices") or []:
        devices.append({"pool": dev.get("PoolName"), "device": dev.get("DeviceName"), "share_id": dev.get("ShareID"),
                        "requests": list(dev.get("RequestNames") or []),
                        "cdi_device_ids": list(dev.get("CDIDeviceIDs") or [])})
    return devices


def checkpoint_claim(entry):
    """One ClaimInfoState of the checkpoint as a plain dict."""
    drivers = dict((name, _checkpoint_devices(state)) for name, state in sorted((entry.get("DriverState") or {}).items()))
    return {"uid": entry.get("ClaimUID"), "name": entry.get("ClaimName"), "namespace": entry.get("Namespace"),
            "pod_uids": sorted(entry.get("PodUIDs") or {}), "drivers": drivers}


def checksum(data_text):
    """The kubelet's checksum of a checkpoint's Data: CRC-32 (IEEE) of its UTF-8 bytes."""
    return zlib.crc32(data_text.encode("utf-8")) & 0xffffffff


def parse_checkpoint(text):
    """The kubelet's DRA checkpoint: {format, checksum_ok, claims, error}; format ``unknown`` (with the
    reason) when the text is not the DRACheckpoint format the pinned releases write."""
    try:
        outer = json.loads(text)
    except ValueError as exc:
        return unknown("not JSON: %s" % exc, claims=[])
    if not isinstance(outer, dict) or not isinstance(outer.get("Data"), str) or "Checksum" not in outer:
        return unknown("no Data and Checksum fields (not the kubelet's DRA checkpoint format)", claims=[])
    try:
        data = json.loads(outer["Data"])
    except ValueError as exc:
        return unknown("Data is not JSON: %s" % exc, claims=[])
    kind, version = (data or {}).get("kind"), (data or {}).get("apiVersion")
    if kind != CHECKPOINT_KIND or version != CHECKPOINT_API_VERSION:
        known = "%s, %s" % (CHECKPOINT_KIND, CHECKPOINT_API_VERSION)
        return unknown("kind %s, apiVersion %s (known: %s)" % (kind, version, known), claims=[])
    ok = checksum(outer["Data"]) == outer["Checksum"]
    return {"format": "%s %s" % (CHECKPOINT_KIND, CHECKPOINT_API_VERSION), "checksum_ok": ok,
            "claims": [checkpoint_claim(e) for e in data.get("ClaimInfoStateList") or []],
            "error": None if ok else "checksum %s does not match the data (the kubelet refuses a corrupt "
                                     "checkpoint)" % outer["Checksum"]}


def registration_socket(name):
    """What a registration socket's file name says: {name, driver, pod_uid, naming}; driver null when the
    name is hashed (``dra-<hash>-reg.sock``) or not a registration socket name at all."""
    if _HASHED_REG_RE.match(name):
        return {"name": name, "driver": None, "pod_uid": None, "naming": "hashed"}
    match = _REG_SOCKET_RE.match(name)
    if not match:
        return {"name": name, "driver": None, "pod_uid": None, "naming": "unknown"}
    uid = match.group("uid")
    return {"name": name, "driver": match.group("prefix"), "pod_uid": uid,
            "naming": "rolling-update" if uid else "plain"}


def plugin_socket(name):
    """A socket in a plugin data directory: {name, pod_uid, dra} (dra: named as the DRA helper names it)."""
    match = _DRA_SOCKET_RE.match(name)
    return {"name": name, "pod_uid": match.group("uid") if match else None, "dra": bool(match)}


def spec_claim_uids(file_name, devices):
    """The claim UIDs a CDI spec names: UIDs in its transient id (``..._<id>.<ext>``) and its device names."""
    found = set()
    stem = file_name.rsplit(".", 1)[0]
    if "_" in stem:
        found.update(UID_RE.findall(stem.rsplit("_", 1)[1]))
    for device in devices:
        found.update(UID_RE.findall(device))
    return sorted(found)


def cdi_spec(path, data, error=None):
    """A CDI spec file's report: {path, format, kind, cdi_version, devices (qualified names), claim_uids,
    error}; `data` is the file parsed (JSON or YAML), None with `error` when it could not be."""
    name = path.rsplit("/", 1)[-1]
    if error is not None or data is None:
        return unknown(error or "empty", path=path, kind=None, cdi_version=None, devices=[], claim_uids=[])
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or "cdiVersion" not in data:
        return unknown("no cdiVersion and kind (not a CDI spec)", path=path, kind=None, cdi_version=None, devices=[],
                       claim_uids=[])
    kind = data["kind"]
    names = [d.get("name") for d in data.get("devices") or [] if isinstance(d, dict) and d.get("name")]
    return {"path": path, "format": "cdi", "error": None, "kind": kind, "cdi_version": str(data["cdiVersion"]),
            "devices": ["%s=%s" % (kind, n) for n in names], "claim_uids": spec_claim_uids(name, names)}


def inspected_containers(document):
    """`crictl inspect` output (one object, or a list of them for several ids) as [{id, name, pod_uid,
    pod_name, namespace, state, cdi_devices}]."""
    items = document if isinstance(document, list) else [document]
    out = []
    for item in items:
        status = (item or {}).get("status") or {}
        config = ((item or {}).get("info") or {}).get("config") or {}
        labels = status.get("labels") or config.get("labels") or {}
        devices = [d.get("name") for d in config.get("CDI_devices") or [] if isinstance(d, dict) and d.get("name")]
        out.append({"id": status.get("id"), "name": (status.get("metadata") or {}).get("name"),
                    "pod_uid": labels.get(POD_UID_LABEL), "pod_name": labels.get("io.kubernetes.pod.name"),
                    "namespace": labels.get("io.kubernetes.pod.namespace"), "state": status.get("state"),
                    "cdi_devices": devices, "cdi_field": "CDI_devices" in config})
    return out


def running_container_ids(document):
    """The ids of `crictl ps -o json` (running containers only, crictl's default)."""
    return [c.get("id") for c in (document or {}).get("containers") or [] if c.get("id")]


def specs_in_use(specs, containers):
    """{spec path: [container ids]} of running containers that use a device of the spec."""
    users = {}
    for spec in specs:
        wanted = set(spec.get("devices") or [])
        users[spec["path"]] = sorted(c["id"] for c in containers if wanted & set(c.get("cdi_devices") or []))
    return users
