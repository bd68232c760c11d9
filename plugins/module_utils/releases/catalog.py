# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The version catalog: the only place in the collection that knows versions.

For each supported Kubernetes minor release it says which resource.k8s.io API
versions exist, which of them the API server serves by default, what must be
switched on (feature gates, ``--runtime-config``) for DRA to work, and every
DRA feature gate with its stage, default, locked state and the components it
acts in. ``validate_gates`` refuses, before anything is written, what would
make a component refuse to start.

Pure data and pure functions: no Ansible, no network, standard library only
(hack/cluster loads this file by path).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases import kube_gate_lists

RESOURCE_GROUP = "resource.k8s.io"

SUPPORTED_MINORS = tuple(range(30, 39))

# Releases whose entries come from unreleased upstream code: they may still change.
# 1.38's rows were checked against the binaries of v1.38.0-beta.0 (the gate matrix) until v1.38.0 is served.
PROVISIONAL_MINORS = (38,)
# The pre-release each provisional release's rows were checked against.
PROVISIONAL_CHECKED_AGAINST = {38: "v1.38.0-beta.0"}

# First release whose components refuse to start when an enabled gate (on by default
# or set) depends on a disabled one (component-base's feature gate dependencies).
DEPENDENCIES_ENFORCED_FROM = 35

# minor -> resource.k8s.io versions the release has, newest first.
_API_VERSIONS = {
    30: ("v1alpha2",),
    31: ("v1alpha3",),
    32: ("v1beta1", "v1alpha3"),
    33: ("v1beta2", "v1beta1", "v1alpha3"),
    34: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    35: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    36: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    37: ("v1", "v1beta2", "v1beta1", "v1alpha3"),
    # v1beta1 is removed (k8s.io/api's prerelease lifecycle: introduced 1.32, removed 1.38).
    38: ("v1", "v1beta2", "v1alpha3"),
}

# minor -> the resource.k8s.io versions DRA needs switched on with --runtime-config
# (empty when the release serves a usable version by default).
_RUNTIME_CONFIG_NEEDED = {
    30: ("v1alpha2",),
    31: ("v1alpha3",),
    32: ("v1beta1",),
    33: ("v1beta1", "v1beta2"),
}

# Versions the collection's own API calls understand, best first.
CLIENT_API_PREFERENCE = ("v1", "v1beta2", "v1beta1")

KUBE_APISERVER = "kube-apiserver"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBE_SCHEDULER = "kube-scheduler"
KUBELET = "kubelet"
COMPONENTS = (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET)

ALPHA = "alpha"
BETA = "beta"
GA = "GA"

_ALL = COMPONENTS
_API = (KUBE_APISERVER,)
_API_SCHED = (KUBE_APISERVER, KUBE_SCHEDULER)
_API_KCM_SCHED = (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER)
_API_KCM = (KUBE_APISERVER, KUBE_CONTROLLER_MANAGER)
_API_KUBELET = (KUBE_APISERVER, KUBELET)

# Every gate below is registered in all four binaries (they share one gate
# registry), so each of them accepts, rejects and reports every gate alike;
# "components" only says where a gate changes behaviour.
#
# name -> (components, history, removed_in, depends_on)
#   history: ((first minor, stage, default, locked), ...) in release order;
#            the first entry's minor is the first release whose binaries know the name.
#            Entries for a release in PLANNED_MINORS are upstream's plans (the comments beside the
#            gates in the last release's kube_features.go); only upgrade checks read them.
#            1.38's entries are v1.38.0-beta.0's kube_features.go, checked gate by gate, true and
#            false, against its four binaries (tests/integration/test_gate_matrix.py).
#   removed_in: first minor whose binaries no longer know the name (None: still there).
#   depends_on: gates that must be enabled when this one is (enforced at start-up from 1.35,
#               for every enabled gate, on by default or set).
_GATES = {
    "DynamicResourceAllocation": (
        _ALL,
        ((26, ALPHA, False, False), (32, BETA, False, False), (34, GA, True, False), (35, GA, True, True)),
        38, ()),
    # Split out of DynamicResourceAllocation in 1.31 ("classic" DRA), dropped in 1.32.
    "DRAControlPlaneController": (
        _API_KCM_SCHED, ((31, ALPHA, False, False),), 32, ("DynamicResourceAllocation",)),
    # 39: upstream's plan ("remove in 1.39" in v1.38.0-beta.0's kube_features.go).
    "DRAAdminAccess": (
        _API_KCM_SCHED,
        ((32, ALPHA, False, False), (34, BETA, True, False), (36, GA, True, True)),
        39, ("DynamicResourceAllocation",)),
    "DRAResourceClaimDeviceStatus": (
        _API_SCHED,
        ((32, ALPHA, False, False), (33, BETA, True, False), (37, GA, True, True)),
        None, ()),
    "DRADeviceTaints": (
        _API_KCM_SCHED,
        ((33, ALPHA, False, False), (36, BETA, True, False), (37, GA, True, False), (38, GA, True, True)),
        None, ("DynamicResourceAllocation",)),
    "DRAPartitionableDevices": (
        _API_SCHED, ((33, ALPHA, False, False), (36, BETA, True, False), (38, GA, True, True)),
        None, ("DynamicResourceAllocation",)),
    "DRAPrioritizedList": (
        _API_KCM_SCHED,
        ((33, ALPHA, False, False), (34, BETA, True, False), (36, GA, True, False), (37, GA, True, True)),
        None, ("DynamicResourceAllocation",)),
    # 39: upstream's plan ("LockToDefault: true in 1.39").
    "DRAConsumableCapacity": (
        _API_SCHED, ((34, ALPHA, False, False), (36, BETA, True, False), (38, GA, True, False), (39, GA, True, True)),
        None, ("DynamicResourceAllocation",)),
    "DRADeviceBindingConditions": (
        _API_SCHED, ((34, ALPHA, False, False), (36, BETA, True, False), (38, GA, True, True)),
        None, ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus")),
    "DRAExtendedResource": (
        _ALL, ((34, ALPHA, False, False), (36, BETA, True, False), (37, GA, True, True)),
        None, ("DynamicResourceAllocation",)),
    "DRASchedulerFilterTimeout": (
        (KUBE_SCHEDULER,), ((34, BETA, True, False),), None, ("DynamicResourceAllocation",)),
    "DRADeviceTaintRules": (
        _API_KCM_SCHED,
        ((35, ALPHA, False, False), (36, BETA, False, False), (37, GA, True, False), (38, GA, True, True)),
        None, ("DRADeviceTaints",)),
    "DRAListTypeAttributes": (
        _API_SCHED, ((36, ALPHA, False, False),), None, ("DynamicResourceAllocation",)),
    "DRANodeAllocatableResources": (
        _API_SCHED, ((36, ALPHA, False, False),), None, ("DynamicResourceAllocation",)),
    "DRAResourceClaimGranularStatusAuthorization": (
        _API, ((36, BETA, True, False),), None,
        ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus")),
    "DRAResourcePoolStatus": (
        _API_KCM, ((36, ALPHA, False, False),), None, ("DynamicResourceAllocation",)),
    "DRAWorkloadResourceClaims": (
        _ALL, ((36, ALPHA, False, False), (37, BETA, False, False)),
        None, ("DynamicResourceAllocation", "GenericWorkload")),
    "DRADerivedAttributes": (
        _API_SCHED, ((37, ALPHA, False, False),), None, ("DynamicResourceAllocation",)),
    "DRADeviceCompatibilityGroups": (
        _API_SCHED, ((37, ALPHA, False, False),), None, ("DynamicResourceAllocation", "DRAPartitionableDevices")),
    # Beta in 1.37 but off until the minimum compatibility version reaches 1.37 (upstream's
    # versioned spec has a second 1.37 entry, on, with MinCompatibilityVersion 1.37): a 1.37
    # component runs with a minimum compatibility version of 1.36 unless told otherwise.
    # 1.38: GA and on, so DRAConsumableCapacity=false stops the components (the dependency); 39: upstream's plan
    # ("LockToDefault: true in 1.39").
    "DRAFractionalCapacityRange": (
        _API_SCHED, ((37, BETA, False, False), (38, GA, True, False), (39, GA, True, True)), None,
        ("DRAConsumableCapacity",)),
    "DRAOptionalNodeOperations": (
        (KUBE_APISERVER, KUBE_SCHEDULER, KUBELET), ((37, ALPHA, False, False),), None,
        ("DynamicResourceAllocation", "NodeDeclaredFeatures")),
    "DRAPartitionableDevicesType": (
        _API, ((37, ALPHA, False, False),), None,
        ("DynamicResourceAllocation", "DRAPartitionableDevices", "DRAResourcePoolStatus")),
    # Upstream's comment says "remove in 1.37", but v1.37.2 still has it (locked).
    "KubeletPodResourcesDynamicResources": (
        (KUBELET,),
        ((27, ALPHA, False, False), (34, BETA, True, False), (36, GA, True, True)),
        None, ()),
    "ResourceHealthStatus": (
        _API_KUBELET, ((31, ALPHA, False, False), (36, BETA, True, False)),
        None, ("DynamicResourceAllocation",)),
    "ResourceHealthStatusMessage": (
        _API_KUBELET, ((36, BETA, True, False),), None, ("ResourceHealthStatus",)),
    # Not a DRA gate; listed because DRAWorkloadResourceClaims depends on it.
    "GenericWorkload": (
        _ALL, ((35, ALPHA, False, False), (37, BETA, False, False)), None, ()),
}

# Gates outside DRA that a DRA gate depends on and that dra.admin does not set (they are
# not DRA gates, and non-DRA gates depend on them too): only their defaults are used, to
# judge the dependencies. Same layout as _GATES.
_OUTSIDE_GATES = {
    "NodeDeclaredFeatures": (
        (KUBE_APISERVER, KUBE_SCHEDULER, KUBELET),
        ((35, ALPHA, False, False), (36, BETA, True, False), (37, GA, True, True)), None, ()),
}

# Gates whose API objects live in a resource.k8s.io version that is off by default:
# gate -> {minor: version to add to --runtime-config when the gate is enabled}.
_GATE_API_VERSIONS = {
    "DRADeviceTaints": {33: "v1alpha3", 34: "v1alpha3"},  # DeviceTaintRule, before it had its own gate
    "DRADeviceTaintRules": {35: "v1alpha3", 36: "v1beta2"},
    "DRAResourcePoolStatus": {36: "v1alpha3", 37: "v1alpha3", 38: "v1alpha3"},
    # Workload and PodGroup (what DRAWorkloadResourceClaims reserves claims for), another API group.
    "GenericWorkload": {35: "scheduling.k8s.io/v1alpha1", 36: "scheduling.k8s.io/v1alpha2",
                        37: "scheduling.k8s.io/v1beta1", 38: "scheduling.k8s.io/v1beta1"},
}


# --- Upgrade facts (dra_upgrade_check_info) ----------------------------------------------------
# Targets of an upgrade check: the supported releases and the next one. 1.39 is unreleased: what the
# catalog says of it comes from upstream's plans (the API lifecycle tags in k8s.io/api, gate removals and
# locks announced in 1.38's kube_features.go).
UPGRADE_TARGET_MINORS = SUPPORTED_MINORS + (39,)
PLANNED_MINORS = (39,)
# resource.k8s.io versions by the first release without them (k8s.io/api's prerelease-lifecycle tags,
# and v1alpha3 keeping only DeviceTaintRule from 1.34): version -> ((resources or None for all, minor), ...)
_API_REMOVED = {
    "v1alpha2": ((None, 31),),
    "v1alpha3": ((("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"), 34),
                 (("devicetaintrules",), 39)),
    "v1beta1": ((None, 38),),
    "v1beta2": ((("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"), 39),),
}
# The version kube-apiserver stores resource.k8s.io objects in, from the release on (the newest version
# that existed one release earlier, the minimum compatibility version), and DeviceTaintRule's own
# (pkg/kubeapiserver/default_storage_factory_builder.go).
_STORAGE_VERSIONS = {33: "v1beta1", 34: "v1beta2", 35: "v1"}
_STORAGE_VERSION_OVERRIDES = {"devicetaintrules": {33: "v1alpha3", 37: "v1beta2"},
                              "resourcepoolstatusrequests": {36: "v1alpha3"}}
# kubelet may be this many minors older than kube-apiserver (version skew policy; 2 for kubelets < 1.25).
KUBELET_MAX_SKEW = 3

# DeviceTaintRule (device taints set by an administrator): minor -> the resource.k8s.io version that
# serves it. 1.33-1.34: v1alpha3 behind DRADeviceTaints (alpha); its selector also has deviceClassName and
# CEL selectors, but there is no effect None and no status. From 1.35 the rule has its own gate
# (DRADeviceTaintRules, needing DRADeviceTaints), a status with the EvictionInProgress condition and effect
# None, and its selector only driver, pool and device. 1.35: v1alpha3, both gates alpha; 1.36: v1beta2
# (DRADeviceTaints beta on, DRADeviceTaintRules beta off, v1beta2 off by default); 1.37: v1, GA and on.
_DEVICE_TAINT_RULE_API = {33: "v1alpha3", 34: "v1alpha3", 35: "v1alpha3", 36: "v1beta2", 37: "v1", 38: "v1"}
DEVICE_TAINT_RULE_STATUS_FROM = 35
DEVICE_TAINT_RULE_RESOURCE = "devicetaintrules"
# The role knob that switches the rule's API on (roles/feature_gates).
DEVICE_TAINTS_KNOB = "dra_feature_gates_device_taints"


# admissionregistration.k8s.io: minor -> the version serving ValidatingAdmissionPolicy and
# ValidatingAdmissionPolicyBinding by default from that release on (GA and on in 1.30; v1beta1, off by default,
# in 1.28-1.29; pkg/controlplane of each release). Used by the guardrails (rbac/guardrails.py).
ADMISSION_GROUP = "admissionregistration.k8s.io"
_ADMISSION_POLICY_API = {30: "v1"}


# The most devices one claim's allocation may hold (resourceapi.AllocationResultsMaxSize, 1.30 to 1.37).
ALLOCATION_RESULTS_MAX_SIZE = 32
# kube-scheduler panics (makeslice: cap out of range) on a claim whose requests' device counts sum past the
# native int: the allocator added them without an overflow check (kubernetes#141307, "DRA: avoid integer overflow
# in per-claim device-limit checks"). The first patch of each minor whose k8s.io/dynamic-resource-allocation
# carries the check (read from the module's sources on the Go module proxy, v0.<minor>.<patch>); minors below are
# never fixed, minors above (1.38 on) are fixed from their first release.
SCHEDULER_COUNT_OVERFLOW_FIXED_IN = {34: 12, 35: 9, 36: 5, 37: 1}

# What 1.38 changes for DRA beyond gates and API versions (the upgrade check; docs/decisions.md, "What the catalog
# says about 1.38", names each source). Tables of "first patch of each minor with the change; minors above have it
# from their first release, minors below never":
# - kube-scheduler's allocator reads a DeviceTaintRule without deviceSelector as selecting no device (before: every
#   device; kubernetes#141648, in k8s.io/dynamic-resource-allocation v0.37.1's resourceslice/tracker).
TAINT_RULE_NO_SELECTOR_NONE_FROM = {37: 1}
# - the device-taint-eviction controller also evicts pods whose DRA-backed extended resources' claim
#   (status.extendedResourceClaimStatus) holds a tainted device (kubernetes#142289; resourceclaim.PodClaims of
#   k8s.io/dynamic-resource-allocation v0.37.2 yields that claim).
EXTENDED_RESOURCE_TAINT_EVICTION_FROM = {37: 2}
# kubelet gRPC probes fail at once on a refused connection instead of retrying until the probe's timeout
# (kubernetes#142457, v1.38.0-alpha.2; v1.37.2's pkg/probe/grpc still dials with WithBlock).
GRPC_PROBE_FAIL_FAST_FROM = 38
# k8s.io/dynamic-resource-allocation's kubeletplugin helper refuses to publish attribute and capacity names qualified
# with the driver's own domain ("gpu.example.com/model" in gpu.example.com's slices) from 0.38
# (resourceslice.Options.ValidateQualifiedNames, on by default); 1.38's scheduler reads the qualified name where a
# device has both.
SELF_QUALIFIED_NAMES_REFUSED_FROM = 38
# From this target on the plan says that putting an older kubelet binary back is no undo: the kubelet's checkpoints
# (CPU manager V2/V3, DRA's) are written in the newer format (kubernetes#139069).
KUBELET_DOWNGRADE_NOTE_FROM = 38
# From this release the kubelet refuses to start when the user-namespace ID range it would use, or one recorded for a
# pod on its disk, reaches ID 4294967295 (2^32-1, which the kernel cannot map): the kubelet user's subordinate range
# from getsubids, and pods' `userns` files (pkg/kubelet/userns, kubernetes#141345).
KUBELET_USERNS_RANGE_CHECKED_FROM = 38


def has_patch_change(table, version):
    """Whether a release has a change listed by first patch per minor (TAINT_RULE_NO_SELECTOR_NONE_FROM,
    EXTENDED_RESOURCE_TAINT_EVICTION_FROM): minors above the table have it, minors below do not."""
    minor = parse_minor(version)
    if minor > max(table):
        return True
    first = table.get(minor)
    return first is not None and parse_patch(version) >= first


def patch_change_from(table):
    """The first release of each minor with the change, as text ('1.37.1, 1.38.0')."""
    return ", ".join(["1.%d.%d" % item for item in sorted(table.items())] + ["1.%d.0" % (max(table) + 1)])


class VersionError(DraAdminError, ValueError):
    """A Kubernetes version the catalog cannot answer for."""


_FULL_RELEASE = re.compile(r"^v?\d+\.\d+\.\d+$")


def is_full_release(version):
    """Whether `version` names one released version in full (v1.37.2 or 1.37.2), not a minor, a pre-release or
    a build."""
    return bool(_FULL_RELEASE.match(str(version or "")))


# What Kubernetes publishes before a release: v1.38.0-alpha.1, -beta.0, -rc.1 (kubeadm's "unstable" versions).
_PRE_RELEASE = re.compile(r"^v?\d+\.\d+\.\d+-(alpha|beta|rc)\.\d+$")
_RELEASE_ORDER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-(alpha|beta|rc)\.(\d+))?")


def is_pre_release(version):
    """Whether `version` names one pre-release in full (v1.38.0-beta.0): an alpha, a beta or a release candidate."""
    return bool(_PRE_RELEASE.match(str(version or "")))


def names_one_version(version):
    """Whether `version` names one version in full: a release (v1.37.2) or a pre-release (v1.38.0-beta.0)."""
    return is_full_release(version) or is_pre_release(version)


def pre_release_stage(version):
    """'alpha', 'beta' or 'rc' for a pre-release, "" for anything else."""
    match = _PRE_RELEASE.match(str(version or ""))
    return match.group(1) if match else ""


def release_order(version):
    """A key that orders versions as Kubernetes publishes them: v1.38.0-alpha.1 < v1.38.0-beta.0 < v1.38.0-rc.1 <
    v1.38.0 (a build after a release or pre-release, v1.37.2-3+abc or v1.38.0-beta.0.5+abc, orders as that one);
    None when `version` names no release."""
    match = _RELEASE_ORDER.match(str(version or ""))
    if not match:
        return None
    major, minor, patch, stage, number = match.groups()
    return (int(major), int(minor), int(patch)) + (((0, stage, int(number)),) if stage else ((1,),))


def parse_minor(version):
    """Return the minor number of a Kubernetes version string such as 'v1.33.2'."""
    match = re.match(r"^v?1\.(\d+)(?:\.\d+)?(?:[-+].*)?$", str(version).strip())
    if not match:
        raise VersionError(
            "cannot read Kubernetes version %r: expected a form like v1.33 or 1.33.2" % (version,))
    return int(match.group(1))


def parse_patch(version):
    """The patch number of a Kubernetes version string ('v1.37.2' -> 2; 'v1.37' and pre-releases such as
    'v1.37.1-rc.0', which come before their patch, -> one below it, at least 0)."""
    parse_minor(version)
    match = re.match(r"^v?1\.\d+\.(\d+)(-)?", str(version).strip())
    if not match:
        return 0
    return max(int(match.group(1)) - (1 if match.group(2) else 0), 0)


def scheduler_count_overflow(version):
    """Whether this release's kube-scheduler crashes on a claim whose device counts overflow when summed
    (SCHEDULER_COUNT_OVERFLOW_FIXED_IN)."""
    minor = parse_minor(version)
    if minor > max(SCHEDULER_COUNT_OVERFLOW_FIXED_IN):
        return False
    fixed = SCHEDULER_COUNT_OVERFLOW_FIXED_IN.get(minor)
    return fixed is None or parse_patch(version) < fixed


def scheduler_count_overflow_fixed_in():
    """The first fixed patch of each minor, as text ('1.34.12, 1.35.9, 1.36.5, 1.37.1')."""
    return ", ".join("1.%d.%d" % item for item in sorted(SCHEDULER_COUNT_OVERFLOW_FIXED_IN.items()))


def require_supported(version):
    """Return the minor of a supported version, or raise naming the supported ones."""
    minor = parse_minor(version)
    if minor not in SUPPORTED_MINORS:
        raise VersionError(
            "Kubernetes %s is not supported: supported releases are 1.%d to 1.%d"
            % (version, SUPPORTED_MINORS[0], SUPPORTED_MINORS[-1]))
    return minor


def resource_api_versions(version):
    """The resource.k8s.io API versions a release has, newest first."""
    return _API_VERSIONS[require_supported(version)]


def default_served_api_versions(version):
    """resource.k8s.io versions served without any --runtime-config."""
    return ("v1",) if require_supported(version) >= 34 else ()


def runtime_config_for_dra(version):
    """The --runtime-config entries DRA needs on this release, as a dict."""
    needed = _RUNTIME_CONFIG_NEEDED.get(require_supported(version), ())
    return dict(("%s/%s" % (RESOURCE_GROUP, v), "true") for v in needed)


def gates_for_dra(version):
    """The feature gates DRA needs on this release (all four components), as a dict."""
    return {} if require_supported(version) >= 34 else {"DynamicResourceAllocation": True}


def preferred_api_version(served_versions):
    """The newest resource.k8s.io version that is both served and understood, or None."""
    for candidate in CLIENT_API_PREFERENCE:
        if candidate in served_versions:
            return candidate
    return None


def is_provisional(version):
    """Whether the catalog's entry for this release comes from unreleased upstream code."""
    return require_supported(version) in PROVISIONAL_MINORS


def _state_at(history, minor):
    state = None
    for entry in history:
        if entry[0] <= minor:
            state = entry
    return state


def gate_info(version, name):
    """What a release knows about one gate, or None when its binaries do not know the name.

    Returns a dict: stage, default, locked, components, depends_on.
    """
    return _info(require_supported(version), name, _GATES.get(name))


def _info(minor, name, spec):
    if spec is None:
        return None
    components, history, removed_in, depends_on = spec
    state = _state_at(history, minor)
    if state is None or (removed_in is not None and minor >= removed_in):
        return None
    return {"name": name, "stage": state[1], "default": state[2], "locked": state[3],
            "components": list(components), "depends_on": list(depends_on)}


def _catalog_at(minor):
    catalog = {}
    for name in sorted(_GATES):
        info = _info(minor, name, _GATES[name])
        if info is not None:
            catalog[name] = info
    return catalog


def gate_catalog(version):
    """Every gate this catalog knows that exists on the release: name -> gate_info()."""
    return _catalog_at(require_supported(version))


def removed_gates(version):
    """Gates that existed in an earlier release but are gone on this one: name -> removed in '1.N'."""
    minor = require_supported(version)
    return dict((name, "1.%d" % spec[2]) for name, spec in _GATES.items()
                if spec[2] is not None and minor >= spec[2])


def graduated_removed_gates(version):
    """Gates gone on this release after they went GA: their feature is simply on."""
    minor = require_supported(version)
    return sorted(name for name, spec in _GATES.items()
                  if spec[2] is not None and minor >= spec[2] and spec[1][-1][1] == GA)


def _not_yet(version, name):
    """The first release that has the gate, when it is newer than this one."""
    spec = _GATES.get(name)
    if spec is None:
        return None
    first = spec[1][0][0]
    return "1.%d" % first if require_supported(version) < first else None


def gate_value(value):
    """A feature gate value as a bool: accepts booleans and 'true'/'false' in any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InputError("%r is not a feature gate value: use true or false" % (value,))


def _outside_defaults_at(minor):
    defaults = {}
    for name, spec in _OUTSIDE_GATES.items():
        info = _info(minor, name, spec)
        if info is not None:
            defaults[name] = info["default"]
    return defaults


def outside_defaults(version):
    """Defaults of the non-DRA gates that DRA gates depend on (_OUTSIDE_GATES) on this release."""
    return _outside_defaults_at(require_supported(version))


def _effective_at(minor, requested):
    values = dict((name, info["default"]) for name, info in _catalog_at(minor).items())
    for name, value in requested.items():
        if name in values:
            values[name] = gate_value(value)
    values.update(_outside_defaults_at(minor))
    return values


def effective_gates(version, requested):
    """The value every catalogued gate will have with `requested` applied (unknown names skipped),
    plus the defaults of the outside gates DRA gates depend on."""
    return _effective_at(require_supported(version), requested)


def _unmet_dependencies_at(minor, values):
    """[(gate, [its dependencies that end up off])] for each gate that ends up on with `values` (parsed, known
    gates) set. A dependency the release does not know (a removed gate) is no dependency there: upstream
    drops it with the gate."""
    effective = _effective_at(minor, values)
    unmet = []
    for name, info in sorted(_catalog_at(minor).items()):
        if not effective[name]:
            continue
        missing = [dep for dep in info["depends_on"] if dep in effective and not effective[dep]]
        if missing:
            unmet.append((name, missing))
    return unmet


def _names(names):
    names = list(names)
    return names[0] if len(names) == 1 else "%s and %s" % (", ".join(names[:-1]), names[-1])


def dependency_errors(version, values):
    """Errors for enabled gates whose dependencies end up disabled, with `values` (parsed, known gates) set.

    A gate set to true needs its dependencies on every release (before 1.35 the component would start
    and the gate would do nothing). From 1.35 the components also refuse a gate that is on by default
    and depends on one that `values` switches off; those errors are grouped by the gate switched off.
    """
    minor = require_supported(version)
    catalog = gate_catalog(version)
    errors = []
    broken_by = {}  # gate set to false -> default-on gates that depend on it
    for name, missing in _unmet_dependencies_at(minor, values):
        if values.get(name):
            errors.append(
                "feature gate %s needs %s enabled on Kubernetes 1.%d: add %s to the requested gates"
                % (name, " and ".join(missing), minor, ", ".join("%s=true" % dep for dep in missing)))
        elif minor >= DEPENDENCIES_ENFORCED_FROM:
            for dep in missing:
                broken_by.setdefault(dep, []).append(name)
    for dep in sorted(broken_by):
        dependents = broken_by[dep]
        locked = [name for name in dependents if catalog[name]["locked"]]
        fix = ("remove %s=false (%s cannot be switched off: locked)" % (dep, _names(locked)) if locked else
               "remove %s=false, or also set %s" % (dep, ", ".join("%s=false" % name for name in dependents)))
        errors.append(
            "feature gate %s=false: %s %s on by default on Kubernetes 1.%d and %s on %s, so every component "
            "refuses to start (\"%s is enabled, but depends on features that are disabled\"): %s"
            % (dep, _names(dependents), "is" if len(dependents) == 1 else "are", minor,
               "depends" if len(dependents) == 1 else "depend", dep, dependents[0], fix))
    return errors


def validate_gates(version, requested, component=None):
    """Check requested feature gates against the release; return a list of error messages.

    An empty list means every component of that release will accept the gates.
    Each message names the gate, what is wrong, and what to do instead.
    """
    try:
        minor = require_supported(version)
    except VersionError as exc:
        return [str(exc)]
    errors = []
    if component is not None and component not in COMPONENTS:
        errors.append("unknown component %r: expected one of %s" % (component, ", ".join(COMPONENTS)))
    catalog = gate_catalog(version)
    removed = removed_gates(version)
    values = {}
    for name in sorted(requested):
        try:
            values[name] = gate_value(requested[name])
        except ValueError as exc:
            errors.append("feature gate %s: %s" % (name, exc))
    for name in sorted(values):
        value = values[name]
        info = catalog.get(name)
        if info is None:
            if name in removed:
                errors.append(
                    "feature gate %s was removed in Kubernetes %s; on 1.%d every component refuses to start "
                    "with it: remove it from the requested gates" % (name, removed[name], minor))
            elif _not_yet(version, name):
                errors.append(
                    "feature gate %s does not exist before Kubernetes %s (this cluster is 1.%d): remove it, "
                    "or upgrade the cluster first" % (name, _not_yet(version, name), minor))
            elif name in _OUTSIDE_GATES:
                errors.append(
                    "feature gate %s is not a DRA gate (the catalog knows it only because DRA gates depend on "
                    "it, with its default): dra.admin does not set it; remove it from the requested gates"
                    % name)
            else:
                errors.append(
                    "feature gate %s is unknown to the DRA catalog for Kubernetes 1.%d: check the spelling; "
                    "known gates: %s" % (name, minor, ", ".join(sorted(catalog))))
            continue
        if info["locked"] and value != info["default"]:
            errors.append(
                "feature gate %s is locked to %s on Kubernetes 1.%d (%s): setting it to %s makes the "
                "component refuse to start; remove it or set it to %s"
                % (name, str(info["default"]).lower(), minor, info["stage"], str(value).lower(),
                   str(info["default"]).lower()))
    # A locked gate keeps its value (the error above says so): judge the dependencies without it.
    settable = dict((name, value) for name, value in values.items()
                    if name in catalog and not (catalog[name]["locked"] and value != catalog[name]["default"]))
    return errors + dependency_errors(version, settable)


def runtime_config_for_gates(version, requested):
    """Extra --runtime-config entries the enabled gates need for their API objects, as a dict."""
    minor = require_supported(version)
    entries = {}
    for name, value in requested.items():
        try:
            enabled = gate_value(value)
        except ValueError:
            continue
        api_version = _GATE_API_VERSIONS.get(name, {}).get(minor)
        if enabled and api_version:
            group_version = api_version if "/" in api_version else "%s/%s" % (RESOURCE_GROUP, api_version)
            entries[group_version] = "true"
    return entries


def validate_runtime_config(version, requested):
    """Check resource.k8s.io entries of a --runtime-config map; return a list of error messages.

    Entries of other API groups are not this catalog's business and pass unchecked.
    """
    try:
        minor = require_supported(version)
    except VersionError as exc:
        return [str(exc)]
    errors = []
    known = _API_VERSIONS[minor]
    for key in sorted(requested):
        parts = str(key).split("/")
        if parts[0] != RESOURCE_GROUP:
            continue
        if len(parts) < 2 or not parts[1]:
            errors.append("runtime-config entry %s names no version: use %s/<version>, one of %s"
                          % (key, RESOURCE_GROUP, ", ".join(known)))
        elif parts[1] not in known:
            errors.append(
                "runtime-config entry %s: Kubernetes 1.%d has no %s/%s (it has %s); kube-apiserver refuses "
                "to start with it: remove it" % (key, minor, RESOURCE_GROUP, parts[1], ", ".join(known)))
        if str(requested[key]).strip().lower() not in ("true", "false"):
            errors.append("runtime-config entry %s=%s: the value must be true or false" % (key, requested[key]))
    return errors


def _minor_ranges(minors):
    """'1.30-1.33, 1.36' for sorted minors."""
    ranges = []
    for minor in minors:
        if ranges and ranges[-1][1] == minor - 1:
            ranges[-1][1] = minor
        else:
            ranges.append([minor, minor])
    return ", ".join("1.%d" % a if a == b else "1.%d-1.%d" % (a, b) for a, b in ranges)


def validate_without_version(gates, runtime_config=None, component=None):
    """Check gates and --runtime-config entries given without a Kubernetes version; a list of errors.

    Accepted only what every catalogued release (SUPPORTED_MINORS) accepts: a gate value must be a
    boolean, a gate no catalogued release knows is refused, and so is a gate (or the request as a whole,
    for dependencies) or a resource.k8s.io entry that some release refuses, naming those releases and the
    fix (give the component's version). Removals (None values) are never refused.
    """
    versions = ["v1.%d" % minor for minor in SUPPORTED_MINORS]
    span = _minor_ranges(SUPPORTED_MINORS)
    hint = ("without kubernetes_version only what every catalogued release (%s) accepts is written: give "
            "kubernetes_version, the component's version (e.g. v1.%d), to check it against that release"
            % (span, SUPPORTED_MINORS[-1]))
    errors = []
    values = {}
    for name in sorted(gates or {}):
        if gates[name] is None:
            continue
        try:
            values[name] = gate_value(gates[name])
        except ValueError as exc:
            errors.append("feature gate %s: %s" % (name, exc))
    known = {}
    for name in sorted(values):
        if name in _GATES:
            known[name] = values[name]
        elif name in _OUTSIDE_GATES:
            errors.append("feature gate %s is not a DRA gate: dra.admin does not set it; remove it from the "
                          "requested gates" % name)
        else:
            errors.append("feature gate %s is unknown to every Kubernetes release the DRA catalog knows (%s): "
                          "check the spelling; known gates: %s" % (name, span, ", ".join(sorted(_GATES))))
    single_refusals = False
    for name in sorted(known):
        refusing = [v for v in versions if validate_gates(v, {name: known[name]}, component)]
        if refusing:
            single_refusals = True
            first = validate_gates(refusing[0], {name: known[name]}, component)[0]
            errors.append("feature gate %s=%s is refused on Kubernetes %s (%s); %s"
                          % (name, str(known[name]).lower(), _minor_ranges(parse_minor(v) for v in refusing),
                             first, hint))
    if known and not single_refusals:
        refusing = [v for v in versions if validate_gates(v, known, component)]
        if refusing:
            errors.append("feature gates %s together are refused on Kubernetes %s (%s); %s"
                          % (", ".join(sorted(known)), _minor_ranges(parse_minor(v) for v in refusing),
                             validate_gates(refusing[0], known, component)[0], hint))
    entries = dict((k, v) for k, v in (runtime_config or {}).items() if v is not None)
    for key in sorted(entries):
        refusing = [v for v in versions if validate_runtime_config(v, {key: entries[key]})]
        if refusing:
            errors.append("%s (refused on Kubernetes %s); %s"
                          % ("; ".join(validate_runtime_config(refusing[0], {key: entries[key]})),
                             _minor_ranges(parse_minor(v) for v in refusing), hint))
    return errors


def dra_gates(version, extra_gates=None):
    """The gates the feature_gates role writes on a release: the gates DRA needs, with the requested
    ones over them (a requested value wins; None, which removes a gate, is skipped). Values that are
    not booleans are kept as given, for validate_dra_gates to name."""
    gates = gates_for_dra(version)
    for name, value in (extra_gates or {}).items():
        if value is None:
            continue
        try:
            gates[name] = gate_value(value)
        except ValueError:
            gates[name] = value
    return gates


def dra_runtime_config(version, gates):
    """The --runtime-config entries the role writes for kube-apiserver with these gates (from dra_gates)."""
    runtime_config = runtime_config_for_dra(version)
    runtime_config.update(runtime_config_for_gates(version, gates))
    return runtime_config


def dra_additions(version, component, requested_gates=None):
    """What enable_dra adds to one component's settings on a release (component_flags, kubelet_config):
    (the gates DRA needs, the --runtime-config entries DRA and the requested gates need). The entries
    are kube-apiserver's only: for other components they are empty."""
    runtime_config = {}
    if component == KUBE_APISERVER:
        runtime_config = dra_runtime_config(version, dra_gates(version, requested_gates))
    return gates_for_dra(version), runtime_config


def validate_dra_gates(version, extra_gates=None, component=None):
    """Check what the feature_gates role would write (dra_gates), judged as a whole; a list of errors.

    This is the role's check (component_flags and kubelet_config with enable_dra) and
    dra_version_info's: a gate that needs DynamicResourceAllocation is fine on 1.33, because the role
    writes DynamicResourceAllocation=true beside it; switching off a gate DRA needs is refused.
    """
    try:
        require_supported(version)
    except VersionError as exc:
        return [str(exc)]
    extra_gates = dict((k, v) for k, v in (extra_gates or {}).items() if v is not None)
    errors = []
    for name in sorted(gates_for_dra(version)):
        try:
            off = name in extra_gates and not gate_value(extra_gates[name])
        except ValueError:
            continue
        if off:
            errors.append("feature gate %s=false switches DRA off on Kubernetes %s: remove it from the "
                          "requested gates (this role only enables DRA)" % (name, version))
    return errors + validate_gates(version, dra_gates(version, extra_gates), component)


def dra_settings(version, extra_gates=None):
    """What the feature_gates role writes on a release: the gates and runtime-config DRA needs
    plus the requested gates (and the API versions they need), and the validation errors.

    Returns a dict: gates, runtime_config, errors, provisional (gates and runtime_config are empty
    when there are errors: nothing would be written).
    """
    errors = validate_dra_gates(version, extra_gates)
    if errors:
        return {"gates": {}, "runtime_config": {}, "errors": errors, "provisional": False}
    gates = dra_gates(version, extra_gates)
    return {"gates": gates, "runtime_config": dra_runtime_config(version, gates), "errors": [],
            "provisional": is_provisional(version)}


# --- Upgrade checks ------------------------------------------------------------------------------

def require_upgrade_target(version):
    """The minor of a release an upgrade check can look at, or VersionError naming the range."""
    minor = parse_minor(version)
    if minor not in UPGRADE_TARGET_MINORS:
        raise VersionError("Kubernetes %s is not a release the catalog knows: upgrade targets are 1.%d to 1.%d"
                           % (version, UPGRADE_TARGET_MINORS[0], UPGRADE_TARGET_MINORS[-1]))
    return minor


def api_removed_in(api_version, resource):
    """The first release without `resource` in resource.k8s.io/`api_version`, as a minor, or None."""
    for resources, minor in _API_REMOVED.get(api_version, ()):
        if resources is None or resource in resources:
            return minor
    return None


def api_serving(version, api_version, resource):
    """How a release serves resource.k8s.io/`api_version` `resource`: 'default', 'runtime-config'
    (only when switched on) or None (not at all)."""
    minor = require_upgrade_target(version)
    removed = api_removed_in(api_version, resource)
    if removed is not None and minor >= removed:
        return None
    if api_version not in _API_VERSIONS.get(min(minor, SUPPORTED_MINORS[-1]), ()):
        return None
    return "default" if api_version == "v1" and minor >= 34 else "runtime-config"


def storage_version(version, resource):
    """The resource.k8s.io version a release stores `resource` in (None before 1.33: not catalogued)."""
    minor = require_upgrade_target(version)
    table = dict(_STORAGE_VERSIONS)
    table.update(_STORAGE_VERSION_OVERRIDES.get(resource, {}))
    found = [table[m] for m in sorted(table) if m <= minor]
    return found[-1] if found else None


def target_gate_info(version, name):
    """gate_info() for an upgrade target (1.38 included); None when that release has no such gate."""
    return _info(require_upgrade_target(version), name, _GATES.get(name))


def target_unmet_dependencies(version, values):
    """For an upgrade target (1.38 included): [{gate, missing, set}] for each gate that would be on with the
    component's own settings `values` ({gate: bool} of catalogued gates; others are ignored) while a gate it
    depends on is off. `set`: whether `values` switches the gate on (else it is on by default). From
    DEPENDENCIES_ENFORCED_FROM such a component refuses to start."""
    minor = require_upgrade_target(version)
    known = _catalog_at(minor)
    values = dict((name, value) for name, value in values.items() if name in known)
    return [{"gate": name, "missing": missing, "set": bool(values.get(name))}
            for name, missing in _unmet_dependencies_at(minor, values)]


def upgrade_sensitive_gates(current, target):
    """Gates a component of release `current` may set that the `target` release refuses, whatever their value
    there: {gate: why}. Those locked on the target but not on `current`, those the target removes, and the
    dependencies of gates the target switches on by default (switching one off is refused from 1.35)."""
    now, then = parse_minor(current), require_upgrade_target(target)
    before, after = _catalog_at(now), _catalog_at(then)
    sensitive = {}
    for name, info in sorted(before.items()):
        if name not in after:
            sensitive[name] = "removed in 1.%d" % _GATES[name][2]
        elif info["locked"] is False and name in after and after[name]["locked"]:
            sensitive[name] = "locked to %s on 1.%d" % (str(after[name]["default"]).lower(), then)
    if then >= DEPENDENCIES_ENFORCED_FROM:
        for name, info in sorted(after.items()):
            if info["default"] and not (before.get(name) or {}).get("default"):
                for dep in info["depends_on"]:
                    if dep in before and not before[dep]["locked"] and dep not in sensitive:
                        sensitive[dep] = "%s is on by default on 1.%d and depends on it" % (name, then)
    return sensitive


def gate_api_versions(name):
    """{minor: "<group>/<version>"}: the API version each release serves the gate's objects from, which
    --runtime-config must switch on with the gate (empty when the gate has no such objects)."""
    return dict((minor, version if "/" in version else "%s/%s" % (RESOURCE_GROUP, version))
                for minor, version in _GATE_API_VERSIONS.get(name, {}).items())


def is_catalogued(name):
    """Whether the catalog knows the gate (on any release)."""
    return name in _GATES


def gate_removed_in(name):
    """The first release whose binaries no longer know the gate, as a minor, or None."""
    spec = _GATES.get(name)
    return spec[2] if spec else None


# ---- every gate of a release (kube_gate_lists, read from each release's k8s.io/kubernetes module) ----------

# Gates of a release's list that some of its components do not know: started with every gate of the list at its
# default, these binaries refuse the gate as unrecognized (each component has its own registry). minor -> {gate:
# components}. tests/integration/test_gate_matrix.py finds exactly these on the pinned releases; hack/gate-matrix's
# kube-apiserver builds found none on 1.32 to 1.36 (docs/decisions.md, "Every gate of a release").
_KUBE_GATES_UNKNOWN_TO = {
    37: {"ControllerManagerReleaseLeaderElectionLockOnExit": (KUBE_SCHEDULER,)},
    38: {"ControllerManagerReleaseLeaderElectionLockOnExit": (KUBE_APISERVER, KUBE_SCHEDULER, KUBELET)},
}


def kube_gate_info(minor, name, component=None):
    """{stage, default, locked} of any Kubernetes gate (DRA or not) as the components of release 1.<minor> know it
    (`component`: as that component knows it); None where it does not know the gate, or the release has no list
    (kube_gate_listed)."""
    if component in _KUBE_GATES_UNKNOWN_TO.get(minor, {}).get(name, ()):
        return None
    for first, last, default, locked, stage in kube_gate_lists.GATES.get(name, ()):
        if first <= minor <= last:
            return {"stage": stage, "default": default, "locked": locked}
    return None


def kube_gates_unknown_to(minor):
    """{gate: components} of the release's list that those components do not know (a copy)."""
    return dict((name, tuple(components)) for name, components in _KUBE_GATES_UNKNOWN_TO.get(minor, {}).items())


def kube_gate_listed(minor):
    """Whether release 1.<minor> has a gate list (kube_gate_lists.RELEASES)."""
    return minor in kube_gate_lists.RELEASES


def kube_gate_in_a_list(name):
    """Whether any release's list has the gate (client-go's gates are in none)."""
    return name in kube_gate_lists.GATES


def kube_gate_removed_in(name):
    """The first listed release whose components no longer know the gate, as a minor; None for a gate the newest
    list still has or no list has (client-go's gates, or one removed before the first list)."""
    runs = kube_gate_lists.GATES.get(name)
    if not runs or runs[-1][1] >= max(kube_gate_lists.RELEASES):
        return None
    return runs[-1][1] + 1


def oldest_kubelet_minor(version):
    """The oldest kubelet minor a kube-apiserver of this release supports (version skew policy)."""
    return require_upgrade_target(version) - KUBELET_MAX_SKEW


def _device_taint_rule_gate(minor):
    return "DRADeviceTaintRules" if minor >= DEVICE_TAINT_RULE_STATUS_FROM else "DRADeviceTaints"


def device_taint_rule_support(version):
    """How a release serves DeviceTaintRule, as a dict.

    api_version: the resource.k8s.io version with the rule (None before 1.33); gates: the gates to set to
    true for it (the rule's gate and the gates it depends on that are off by default; empty when on by
    default); runtime_config: the --runtime-config entries its API version needs; default_on: served and
    acted on without any setting; usable: the rule has effect None and a status (from 1.35), which
    dra.admin needs for dry runs and to know when eviction is done; selector_fields: what its
    deviceSelector can select by.
    """
    minor = require_supported(version)
    api_version = _DEVICE_TAINT_RULE_API.get(minor)
    if api_version is None:
        return {"api_version": None, "gates": {}, "runtime_config": {}, "default_on": False, "usable": False,
                "selector_fields": [], "first": "1.%d" % min(_DEVICE_TAINT_RULE_API)}
    catalog = gate_catalog(version)
    wanted, todo = [], [_device_taint_rule_gate(minor)]
    while todo:
        name = todo.pop(0)
        if name in catalog and name not in wanted:
            wanted.append(name)
            todo.extend(catalog[name]["depends_on"])
    dra = gates_for_dra(version)  # switched on with DRA itself (role feature_gates always writes them)
    gates = dict((name, True) for name in wanted if not catalog[name]["default"] and name not in dra)
    runtime_config = runtime_config_for_gates(version, dict((name, True) for name in wanted))
    usable = minor >= DEVICE_TAINT_RULE_STATUS_FROM
    return {"api_version": api_version, "gates": gates, "runtime_config": runtime_config,
            "default_on": not gates and not runtime_config, "usable": usable,
            "selector_fields": ["driver", "pool", "device"] if usable else
            ["deviceClassName", "driver", "pool", "device", "selectors"],
            "first": "1.%d" % min(_DEVICE_TAINT_RULE_API)}


def device_taint_rules_unavailable(version):
    """Why DeviceTaintRules are not usable on a cluster of this release that does not serve them, and what
    switches them on: one sentence for an error message."""
    minor = require_supported(version)
    support = device_taint_rule_support(version)
    if support["api_version"] is None:
        return ("DeviceTaintRule is not available on Kubernetes %s: it first exists in %s (as alpha); "
                "device taints need an upgrade" % (version, support["first"]))
    if not support["usable"]:
        return ("DeviceTaintRule is not available on Kubernetes %s for dra.admin: 1.%d has it only as alpha "
                "(resource.k8s.io/%s, feature gate DRADeviceTaints) without effect None and without a status, "
                "which dry runs and the wait for eviction need; upgrade to 1.%d or later"
                % (version, minor, support["api_version"], DEVICE_TAINT_RULE_STATUS_FROM))
    if support["default_on"]:
        return ("DeviceTaintRule is not available on Kubernetes %s: this cluster does not serve "
                "resource.k8s.io/%s devicetaintrules although the release serves it by default; check "
                "kube-apiserver's --runtime-config and --feature-gates for entries switching it off"
                % (version, support["api_version"]))
    needs = []
    if support["gates"]:
        needs.append("feature gate%s %s on kube-apiserver, kube-controller-manager and kube-scheduler"
                     % ("s" if len(support["gates"]) > 1 else "",
                        ", ".join("%s=true" % name for name in sorted(support["gates"]))))
    if support["runtime_config"]:
        needs.append("--runtime-config=%s on kube-apiserver" % ",".join(
            "%s=%s" % item for item in sorted(support["runtime_config"].items())))
    return ("DeviceTaintRule is not available on Kubernetes %s: this cluster does not serve "
            "resource.k8s.io/%s devicetaintrules; it needs %s (role dra.admin.feature_gates with %s: true)"
            % (version, support["api_version"], " and ".join(needs), DEVICE_TAINTS_KNOB))


def device_taints_gates(version):
    """The gates the feature_gates role adds for its device-taints knob on this release; a VersionError
    when the release has no DeviceTaintRule (the role never writes a gate a release does not know)."""
    support = device_taint_rule_support(version)
    if support["api_version"] is None:
        raise VersionError(device_taint_rules_unavailable(version) + ": set %s: false" % DEVICE_TAINTS_KNOB)
    return dict(support["gates"])


def admission_policy_api_version(version):
    """The apiVersion (group/version) a release serves ValidatingAdmissionPolicy and its binding in by default
    (every release the catalog knows has one), or VersionError for a release the catalog does not know."""
    minor = require_upgrade_target(version)
    found = [_ADMISSION_POLICY_API[m] for m in sorted(_ADMISSION_POLICY_API) if m <= minor]
    return "%s/%s" % (ADMISSION_GROUP, found[-1])


def newest_admission_policy_api_version():
    return "%s/%s" % (ADMISSION_GROUP, _ADMISSION_POLICY_API[max(_ADMISSION_POLICY_API)])


# The namespace label that allows adminAccess, renamed in 1.34.
OLD_ADMIN_LABEL = "resource.k8s.io/admin-access"
NEW_ADMIN_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_LABEL_RENAMED_IN = 34
# kube-apiserver itself refuses a ResourceClaim or ResourceClaimTemplate with adminAccess outside a namespace
# labelled with the release's admin-access label from this release on (pkg/registry/resource/utils.go,
# AuthorizedForAdmin, run by the strategies' Validate: before validating admission). 1.32 has adminAccess
# (DRAAdminAccess, alpha) without that check.
ADMIN_LABEL_ENFORCED_FROM = 33


def admin_access_label(version):
    """The namespace label (value "true") that allows adminAccess on a release: the old key before
    ADMIN_LABEL_RENAMED_IN, the new one from it on."""
    return NEW_ADMIN_LABEL if parse_minor(version) >= ADMIN_LABEL_RENAMED_IN else OLD_ADMIN_LABEL
