#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_upgrade_check_info
short_description: What an upgrade to a Kubernetes release will break or change for Dynamic Resource Allocation
version_added: 0.1.0
description:
  - Reads the cluster and lists, for a target Kubernetes release, each thing that will break or change for DRA,
    with its evidence and the fix (the dra.admin role and variable where there is one).
  - C(resource.k8s.io) versions in use that the target no longer serves (kube-apiserver's
    C(apiserver_request_total) and C(apiserver_requested_deprecated_apis) on its C(/metrics)), and served versions
    the target does not have at all (kube-apiserver refuses them in C(--runtime-config)).
  - The storage version of the existing DRA objects (StorageVersion API where served, otherwise the discovery
    documents' C(storageVersionHash)) against the target's, and whether objects stay in an older encoding.
  - Feature gates the target refuses - a gate it removes, a gate it locks to the other value, a gate that would be on
    while a gate it depends on is off (refused at start-up from 1.35) - for every component alike. The control plane's
    from the static pods' commands when their mirror pods are visible, otherwise kube-apiserver's from its
    C(kubernetes_feature_enabled), and a warning names kube-controller-manager and kube-scheduler, whose gates the
    API then does not show. Each kubelet's as its host holds them (O(kubelet_host_gates), read on the nodes by
    M(dra.admin.dra_kubelet_gates_info)), or only with O(kubelet_gates_from=node_proxy) from its C(/configz) through
    the API server's node proxy; kubelets with the same settings share their findings, and a warning names each node
    whose kubelet could not be read, with the reason (see O(kubelet_gates)).
  - Namespaces with only the 1.33 admin-access label (C(resource.k8s.io/admin-access)), which 1.34 renamed to
    C(resource.kubernetes.io/admin-access).
  - The 1.36 authorization of ResourceClaim status, checked with SubjectAccessReviews, for the service accounts
    of the drivers' DaemonSets (C(resourceclaims/driver), associated-node verbs) and the schedulers given in
    O(schedulers) (C(resourceclaims/binding)).
  - Kubelets older than the target's version skew policy allows, and kubelets too old for seamless driver upgrades.
  - C(resource.k8s.io) versions that the target or the release after it drops (C(v1beta1) goes in 1.38, C(v1beta2)
    and DeviceTaintRule C(v1alpha3) in 1.39) where users keep them - the files of O(manifest_paths), the
    C(kubectl.kubernetes.io/last-applied-configuration) annotation of the DeviceClasses, ResourceClaimTemplates,
    DeviceTaintRules and ResourceSlices, and the manifests of the deployed Helm releases (see O(helm_releases)) -
    each with its file and line or document index, kind and name, the release that drops it and the version to
    write instead.
  - DeviceTaintRules without C(deviceSelector) when the upgrade crosses 1.37.1 or 1.38 - kube-scheduler read such
    a rule as every device before and reads it as no device after - with what the rule does before and after.
  - The pods a C(NoExecute) device taint in force (a DeviceTaintRule or a ResourceSlice's device taint) would
    newly evict when the upgrade crosses 1.37.2 or 1.38, which evict pods holding DRA-backed extended resources
    too (their claim holds the tainted device and does not tolerate the taint).
  - Driver DaemonSets with a container that has a gRPC liveness probe and no startupProbe, for targets from 1.38
    (the kubelet's gRPC probe then fails at once on a refused connection).
  - For targets from 1.38, a note that putting an older kubelet binary back is no undo (its checkpoints).
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  target_version:
    description:
      - The Kubernetes release to upgrade to, for example V(v1.37) or V(1.34.2); from the cluster's own release
        up to 1.38 (1.38 is unreleased, its facts are upstream's plans).
    type: str
    required: true
  fail_on:
    description:
      - Severities that make the module fail (the findings are still returned). Default is never to fail on a
        finding.
    type: list
    elements: str
    choices: [breaking, warning, info]
    default: []
  kubelet_gates:
    description:
      - Check each node's kubelet feature gates (from where O(kubelet_gates_from) says).
      - With V(false) no kubelet is checked, and RV(sources.kubelet_feature_gates) says so.
    type: bool
    default: true
  kubelet_gates_from:
    description:
      - V(hosts) (the default) judges the gates given in O(kubelet_host_gates), read on each node's host; the module
        asks nothing more of the API server, and the check needs no right beyond reading.
      - V(node_proxy) reads each node's kubelet configuration instead (C(GET /api/v1/nodes/<node>/proxy/configz), one
        request per node; a kubelet kube-apiserver cannot reach may take as long as its dial timeout to fail). It
        needs C(get) on C(nodes/proxy), which reaches the whole kubelet API - exec into every pod of the node
        included - so grant it only where the hosts cannot be reached.
    type: str
    choices: [hosts, node_proxy]
    default: hosts
  kubelet_host_gates:
    description:
      - The results of M(dra.admin.dra_kubelet_gates_info) on the nodes' hosts (a list, or a map such as host to
        result), matched to the Nodes by their C(node); playbook C(upgrade_check.yml) gathers them. A Node without
        a result, or whose result has an C(error), is named in the C(kubelet-gates-unread) finding.
    type: raw
    default: []
  schedulers:
    description:
      - Custom schedulers to check for the 1.36 C(resourceclaims/binding) permission, as service accounts
        (V(namespace/name)) or user names. kube-scheduler's own permission comes with Kubernetes.
    type: list
    elements: str
    default: []
  manifest_paths:
    description:
      - Files and directories of Kubernetes manifests (YAML or JSON, several documents per file, a C(List) read
        item by item) on the host the module runs on, for example a git checkout of what a GitOps tool
        applies. Directories are read recursively for C(.yaml), C(.yml) and C(.json) files; C(.git) is skipped.
      - Each document whose C(resource.k8s.io) version the target or the release after it drops is named in a
        C(stored-api-version) finding. A path that does not exist fails the module before the cluster is read.
    type: list
    elements: path
    default: []
  helm_releases:
    description:
      - Read the deployed Helm releases (Secrets with labels C(owner=helm) and C(status=deployed), all namespaces;
        needs C(list) on C(secrets)) and check the C(resource.k8s.io) versions of their manifests.
      - Without the permission the module does not fail; a C(stored-api-version-unread) warning says so.
      - Off by default - listing Secrets cluster-wide reads every namespace's secrets, more than a read-only check
        should need; switch it on with an identity allowed to.
    type: bool
    default: false
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
notes:
  - The metrics count requests since kube-apiserver started, on the instance that answers; they do not name
    clients (kube-apiserver's audit log does). With several API servers, each has its own counts.
  - Which version an object is stored in is known per resource, not per object, without reading etcd.
  - The number of API requests does not grow with the number of claims; it grows by one per node only with
    O(kubelet_gates_from=node_proxy). See RV(api_requests).
  - Nodes without a kubelet behind them (virtual or KWOK nodes) have no host result (or answer C(/configz) with an
    error); they are named in a C(kubelet-gates-unread) finding, not passed.
  - ResourceClaims are read only when a C(NoExecute) device taint is in force and the upgrade crosses 1.37.2 or 1.38;
    their last-applied annotations are not checked (their number grows with the workloads).
  - Helm releases stored in ConfigMaps (C(HELM_DRIVER=configmap)) or SQL are not read.
"""

EXAMPLES = r"""
- name: What will upgrading to 1.37 break for DRA?
  dra.admin.dra_upgrade_check_info:
    target_version: v1.37
  register: upgrade

- name: The same without asking every kubelet (large clusters)
  dra.admin.dra_upgrade_check_info:
    target_version: v1.38
    kubelet_gates: false

- name: Show the findings
  ansible.builtin.debug:
    msg: "{{ upgrade.findings | map(attribute='message') | list }}"

- name: Check the manifests a GitOps tool applies, and the Helm releases, for 1.38
  dra.admin.dra_upgrade_check_info:
    target_version: v1.38
    manifest_paths: [/srv/gitops/cluster-a, /srv/gitops/shared/dra-classes.yaml]
  register: upgrade_138

- name: Stop when something would break
  dra.admin.dra_upgrade_check_info:
    target_version: "1.36"
    fail_on: [breaking]
    schedulers: [kube-system/my-scheduler]
"""

RETURN = r"""
kubernetes_version:
  description: The API server's C(gitVersion).
  returned: always
  type: str
  sample: v1.33.13
target_version:
  description: The release checked for, as given.
  returned: always
  type: str
  sample: v1.34
findings:
  description: What will break or change, breaking first.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: >-
        The kind of finding - C(api-version-in-use), C(api-version-removed), C(storage-version),
        C(feature-gate-removed), C(feature-gate-locked), C(feature-gate-dependency), C(feature-gate-unknown),
        C(feature-gate-unchecked),
        C(feature-gates-unread), C(kubelet-gates-unread), C(admin-access-label), C(admin-access-namespaces),
        C(driver-rbac), C(scheduler-rbac),
        C(kubelet-skew), C(kubelet-version-unknown), C(seamless-driver-upgrade), C(upgrade-path),
        C(planned-release), C(metrics-unreadable), C(stored-api-version), C(stored-api-version-unread),
        C(self-qualified-names),
        C(taint-rule-without-selector), C(extended-resource-eviction), C(grpc-probe-without-startup) or
        C(kubelet-downgrade). Feature gates are judged from the DRA catalog and, for every other gate, from the
        gate list of the target release (read from its own Kubernetes module, 1.32 and later);
        C(feature-gate-unchecked) names the gates no list has (client-go's) or that a target without a list may
        not know. The feature gate findings' evidence names the component (and for kubelets the
        C(nodes)); a C(stored-api-version) finding's evidence lists each C(documents) entry with C(source),
        C(document), C(line), C(kind), C(name), C(api_version) and C(removed_in).
      type: str
      returned: always
    severity:
      description: >-
        C(breaking) (something stops working, or a component refuses to start, on the target), C(warning) (works
        only after an action, or cannot be known from the API) or C(info).
      type: str
      returned: always
    subject: {description: What the finding is about., type: str, returned: always}
    message: {description: What will happen and the evidence., type: str, returned: always}
    fix: {description: What to do; the dra.admin role and variable where there is one., type: str, returned: always}
    evidence: {description: The data the finding rests on., type: dict, returned: always}
  sample:
    - id: admin-access-label
      severity: breaking
      subject: namespace monitoring
      message: namespace monitoring has resource.k8s.io/admin-access=true but not resource.kubernetes.io/admin-access=true
      fix: kubectl label namespace monitoring resource.kubernetes.io/admin-access=true
      evidence: {namespace: monitoring}
summary:
  description: Number of findings per severity.
  returned: always
  type: dict
  sample: {breaking: 1, warning: 2, info: 0}
sources:
  description: >-
    Where the facts came from - C(feature_gates) (C(static pod command) or C(kubernetes_feature_enabled)),
    C(storage_versions) (C(StorageVersion API) or C(discovery storageVersionHash)), the driver service accounts
    checked, C(kubelet_feature_gates) (C(read) and C(unread) node names, and C(source)), the C(manifest_files)
    read and the number of C(helm_releases) read.
  returned: always
  type: dict
  contains:
    feature_gates: {description: C(static pod command) or C(kubernetes_feature_enabled)., type: str, returned: always}
    storage_versions:
      description: C(StorageVersion API) or C(discovery storageVersionHash).
      type: str
      returned: always
    driver_service_accounts:
      description: The drivers' service accounts checked, as C(namespace/name).
      type: list
      elements: str
      returned: always
    kubelet_feature_gates:
      description: >-
        The nodes whose kubelet gates were read (C(read)) and those they could not be (C(unread); the reasons are
        in the C(kubelet-gates-unread) finding), and C(source): the hosts, C(/configz) through the node proxy, or
        C(not read (kubelet_gates: false)) with O(kubelet_gates=false).
      type: dict
      returned: always
    manifest_files:
      description: The manifest files read from O(manifest_paths).
      type: list
      elements: str
      returned: always
    helm_releases:
      description: >-
        How many deployed Helm releases were read, or C(not read (helm_releases: false)) with
        O(helm_releases=false).
      type: raw
      returned: always
  sample:
    feature_gates: kubernetes_feature_enabled
    storage_versions: discovery storageVersionHash
    driver_service_accounts: [dra-driver/dra-example-driver]
    kubelet_feature_gates: {read: [worker-1], unread: [], source: "each node's host: the kubelet's --config file, ..."}
    manifest_files: [/srv/gitops/cluster-a/gpu-class.yaml]
    helm_releases: 2
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import AnsibleK8SModule, DraApi, auth_argument_spec
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import SEVERITIES
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks_service import check


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        target_version=dict(type="str", required=True),
        fail_on=dict(type="list", elements="str", choices=list(SEVERITIES), default=[]),
        schedulers=dict(type="list", elements="str", default=[]),
        kubelet_gates=dict(type="bool", default=True),
        kubelet_gates_from=dict(type="str", choices=["hosts", "node_proxy"], default="hosts"),
        kubelet_host_gates=dict(type="raw", default=[]),
        manifest_paths=dict(type="list", elements="path", default=[]),
        helm_releases=dict(type="bool", default=False),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = check(api, module.params["target_version"], module.params["schedulers"],
                       module.params["kubelet_gates"], module.params["manifest_paths"],
                       module.params["helm_releases"], module.params["kubelet_gates_from"],
                       module.params["kubelet_host_gates"])
        failing = [f for f in result["findings"] if f["severity"] in module.params["fail_on"]]
        if failing:
            raise DraAdminError("%d finding(s) of severity %s for an upgrade to %s: %s" % (
                len(failing), " or ".join(module.params["fail_on"]), module.params["target_version"],
                "; ".join("%s: %s" % (f["subject"], f["message"]) for f in failing)), result)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
