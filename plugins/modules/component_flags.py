#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: component_flags
short_description: Set or remove command-line flags of a control-plane component in its static Pod manifest
version_added: 0.1.0
description:
  - Changes the flags of one container of a static Pod manifest, such as
    C(/etc/kubernetes/manifests/kube-apiserver.yaml) written by kubeadm.
  - C(--feature-gates) and C(--runtime-config) are merged as maps (C(A=true,B=false)), so gates
    already there stay unless named; other flags are set or removed one by one.
  - Untouched flags keep their place and their exact text; the rest of the file is not rewritten.
    New flags go where sorting puts them when the existing flags are sorted, as kubeadm writes them.
  - With O(kubernetes_version), the feature gates and C(resource.k8s.io) runtime-config entries are
    checked against the collection's version catalog first; an unknown gate, a removed gate, a gate
    locked to the other value, or an API version the release does not have fails the task and
    nothing is written.
  - Without O(kubernetes_version), only what every release of the catalog accepts is written; a gate
    value that is not a boolean, a gate no catalogued release knows, a gate some release refuses
    (one it does not have yet, or a locked one set to the other value) and every C(resource.k8s.io)
    runtime-config entry (no API version exists on every release) fail the task, nothing written.
  - Writes atomically, after a backup kept outside the manifest directory (the kubelet would run a
    backup left there as a second Pod).
  - C(--kube-api-qps) and C(--kube-api-burst) are checked before anything is written (QPS above 0,
    Burst a whole number not below QPS (values not given are taken from the manifest, else the
    component's built-in default)).
  - With O(config_file), also merges keys into the component's configuration file (the
    KubeSchedulerConfiguration of kube-scheduler), creating it, its C(--config) flag and the
    hostPath volume and mount when the manifest has none; see O(config_file).
  - Runs on the control-plane host; it does not talk to the API server. The kubelet restarts the
    component when the file changes; waiting for it is the caller's business (the
    C(dra.admin.feature_gates) role does it).
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.platform
  - dra.admin.backup
  - dra.admin.backup.keep
options:
  path:
    description:
      - The static Pod manifest to change.
    type: path
    required: true
  container:
    description:
      - Name of the container whose flags change. Needed only when the Pod has several containers.
    type: str
  set_flags:
    description:
      - Flags to set, name (with or without the leading C(--)) to value.
      - A null value writes the bare flag (C(--flag)); a list writes the flag once per element.
      - C(feature-gates) and C(runtime-config) are refused here; use O(feature_gates) and O(runtime_config).
    type: dict
    default: {}
  remove_flags:
    description:
      - Names of flags to remove (every occurrence).
    type: list
    elements: str
    default: []
  feature_gates:
    description:
      - Feature gates to merge into C(--feature-gates), gate name to V(true) or V(false).
      - A null value removes that gate from the flag; the flag is dropped when no gate is left.
    type: dict
    default: {}
  runtime_config:
    description:
      - Entries to merge into C(--runtime-config), for example C(resource.k8s.io/v1beta1=true).
      - A null value removes that entry.
    type: dict
    default: {}
  kubernetes_version:
    description:
      - Version of the component (for example V(v1.33.13)). When given, O(feature_gates) and
        O(runtime_config) are validated against that release before anything is written; without it,
        they are accepted only when every release the collection's catalog knows accepts them.
    type: str
  enable_dra:
    description:
      - Also merge what DRA needs on O(kubernetes_version) according to the version catalog
        (C(DynamicResourceAllocation=true) on 1.30 to 1.33, nothing from 1.34) and, for the
        C(kube-apiserver) container, the C(resource.k8s.io) versions to serve with C(--runtime-config)
        (those DRA needs and those the gates in O(feature_gates) need, such as V(v1beta2) for
        C(DRADeviceTaintRules) on 1.36).
      - Requires O(kubernetes_version).
    type: bool
    default: false
  config_file:
    description:
      - The component's configuration file, named by its C(--config) flag (kube-scheduler's
        KubeSchedulerConfiguration, where its client QPS and Burst live as C(clientConnection.qps/burst)).
      - When the manifest has C(--config), the file it names is changed, found on the host through the
        manifest's hostPath mounts. Otherwise the file is created at O(config_file.path) (or merged into
        when it exists), and C(--config), a hostPath volume and a read-only mount are added to the manifest.
      - A new file takes over the values of the scheduler's deprecated flags (C(--kubeconfig),
        C(--kube-api-qps), C(--kube-api-burst), C(--kube-api-content-type), C(--profiling),
        C(--contention-profiling)), which kube-scheduler ignores once C(--config) is given.
      - The Pod gets the annotation C(dra.admin/config-sha256), the SHA-256 of the file's text, so a
        change to the file alone also changes the manifest and the kubelet restarts the component.
      - C(clientConnection.qps/burst) are checked like the flags before anything is written.
    type: dict
    suboptions:
      path:
        description:
          - Path of the file, the same inside the Pod and on the host. Needed only when the manifest has
            no C(--config).
        type: path
      kind:
        description:
          - Kind of the file; others are refused.
        type: str
        default: KubeSchedulerConfiguration
        choices: [KubeSchedulerConfiguration]
      api_version:
        description:
          - apiVersion of a new file.
        type: str
        default: kubescheduler.config.k8s.io/v1
      merge:
        description:
          - Keys to merge into the file; nested mappings merge recursively, a null value removes a key.
        type: dict
        default: {}
      volume_name:
        description:
          - Name of the hostPath volume added for a new file.
        type: str
        default: kube-scheduler-config
attributes:
  check_mode:
    support: full
    details:
      - Reports what would change and the diff; writes nothing.
  diff_mode:
    support: full
    details:
      - The manifest text before and after.
  platform:
    support: full
    platforms: posix
    details:
      - Runs on the node whose static Pod manifest it changes.
requirements:
  - PyYAML >= 3.11
notes:
  - The manifest must keep its flags as one C(--flag) or C(--flag=value) item per list element of the
    container's C(command) (as kubeadm writes them) or C(args); anything else is refused with a message.
  - Feature gates are accepted by all four components alike; where each gate takes effect is in the
    collection's version catalog (see the C(dra.admin.feature_gates) role).
"""

EXAMPLES = r"""
- name: Enable DRA and its beta API on a 1.33 API server
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-apiserver.yaml
    kubernetes_version: v1.33.13
    feature_gates:
      DynamicResourceAllocation: true
    runtime_config:
      resource.k8s.io/v1beta1: "true"
      resource.k8s.io/v1beta2: "true"

- name: Raise kube-controller-manager client QPS and Burst
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-controller-manager.yaml
    set_flags:
      kube-api-qps: 75
      kube-api-burst: 150
  register: kcm

- name: Raise kube-scheduler client QPS and Burst in its configuration file (created when kubeadm made none)
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-scheduler.yaml
    config_file:
      path: /etc/kubernetes/kube-scheduler-config.yaml
      merge:
        clientConnection:
          qps: 75
          burst: 150

- name: Drop a gate again
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-scheduler.yaml
    feature_gates:
      DRADeviceTaints: null
"""

RETURN = r"""
changed:
  description: Whether the manifest changed (or would change, in check mode).
  returned: always
  type: bool
path:
  description: The manifest.
  returned: always
  type: str
  sample: /etc/kubernetes/manifests/kube-apiserver.yaml
container:
  description: Name of the container whose flags were read.
  returned: always
  type: str
  sample: kube-apiserver
flags:
  description: The container's flags after the change, in command-line order, without the leading C(--).
    A bare flag has a null value; a repeated flag a list of values.
  returned: always
  type: dict
  sample: {advertise-address: 192.0.2.2, feature-gates: DynamicResourceAllocation=true}
flags_before:
  description: The flags before the change, same form as RV(flags).
  returned: always
  type: dict
dra_feature_gates:
  description: The gates O(enable_dra) added (empty without it).
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: true}
dra_runtime_config:
  description: The C(--runtime-config) entries O(enable_dra) added (empty without it, or for other containers).
  returned: always
  type: dict
  sample: {resource.k8s.io/v1beta1: "true"}
feature_gates:
  description: The C(--feature-gates) map after the change.
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: "true"}
runtime_config:
  description: The C(--runtime-config) map after the change.
  returned: always
  type: dict
  sample: {resource.k8s.io/v1beta1: "true"}
config_file:
  description: The configuration file (with O(config_file)).
  returned: when config_file is given
  type: dict
  contains:
    path:
      description: The file as the component sees it (its C(--config)).
      type: str
      sample: /etc/kubernetes/kube-scheduler-config.yaml
    host_path:
      description: The file on the host.
      type: str
      sample: /etc/kubernetes/kube-scheduler-config.yaml
    created:
      description: Whether the file did not exist before (a rollback removes it).
      type: bool
    changed:
      description: Whether the file changed (or would).
      type: bool
    config:
      description: The file's content after the change.
      type: dict
      sample: {apiVersion: kubescheduler.config.k8s.io/v1, kind: KubeSchedulerConfiguration,
               clientConnection: {kubeconfig: /etc/kubernetes/scheduler.conf, qps: 75, burst: 150}}
    backup_file:
      description: Its backup; empty when the file was created or not changed, or in check mode.
      type: str
clock_before_write:
  description:
    - Seconds since the epoch on the clock of a component's C(process_start_time_seconds) (C(/proc/stat) btime
      plus this module process's start ticks / 100), taken before anything was written; null without procfs.
    - A component process that started after the write reports at least this value, so a wait for the restarted
      component compares against it (M(dra.admin.component_metrics_info)'s O(dra.admin.component_metrics_info#module:started_after)).
      The wall clock (C(date +%s)) runs up to 1 s ahead of that clock and would not do.
  returned: always
  type: float
  sample: 1795303520.37
backup_file:
  description: The backup written before the change; absent when nothing was written.
  returned: changed and backup and not check mode
  type: str
  sample: /etc/kubernetes/dra-admin-backups/kube-apiserver.yaml.20250101T120000.000000
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.files import NODE_BACKUP_DIR, backup_options
from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_flags
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest as manifest_rules
from ansible_collections.dra.admin.plugins.module_utils.control_plane import tuning
from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_flags_service import clock_before_write, plan, write


def argument_spec():
    return dict(
        path=dict(type="path", required=True),
        container=dict(type="str"),
        set_flags=dict(type="dict", default={}),
        remove_flags=dict(type="list", elements="str", default=[]),
        feature_gates=dict(type="dict", default={}),
        runtime_config=dict(type="dict", default={}),
        kubernetes_version=dict(type="str"),
        enable_dra=dict(type="bool", default=False),
        config_file=dict(type="dict", options=dict(
            path=dict(type="path"),
            kind=dict(type="str", default=tuning.SCHEDULER_KIND, choices=[tuning.SCHEDULER_KIND]),
            api_version=dict(type="str", default=tuning.SCHEDULER_API_VERSION),
            merge=dict(type="dict", default={}),
            volume_name=dict(type="str", default=tuning.SCHEDULER_CONFIG_VOLUME),
        )),
        **backup_options(NODE_BACKUP_DIR)
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    path = module.params["path"]
    with fails_on_error(module, host_error="writing %s failed: {error}" % path) as failure:
        if not manifest_rules.HAS_YAML:
            raise DraAdminError(missing_required_lib("PyYAML"))
        failure.keep(path=path, changed=False)
        planned = plan(module.params)
        result = component_flags.result(planned, path, clock_before_write(), module._diff)
        failure.keep(result)
        if result["changed"] and not module.check_mode:
            write(module, planned, module.params, result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
