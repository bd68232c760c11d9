#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_driver_plan_info
short_description: Decide and render a DRA driver's DaemonSet, upgrade strategy, RBAC and DeviceClasses
version_added: 0.1.0
description:
  - Validates the inputs (image or chart, health port 1-65535 not colliding with another container port,
    upgrade settings) and fails with every problem before anything is installed.
  - Reads the nodes and finds the ones the driver will run on (node selector, required node affinity and taints,
    as the DaemonSet controller decides); the drain exclusion label (O(exclusion_label) C(DoesNotExist)) is
    added to every nodeSelectorTerm. Fails when no node is selected.
  - Chooses the update strategy from the selected nodes' C(status.nodeInfo.kubeletVersion) - C(maxSurge 1,
    maxUnavailable 0) (seamless upgrade) when the driver supports it and every kubelet is 1.33 or newer,
    otherwise C(maxUnavailable) O(max_unavailable) with a warning saying why (or a failure with
    O(seamless_upgrade=required)). A seamless update sets the DaemonSet's C(minReadySeconds) to
    O(seamless_min_ready_seconds), so the kubelet registers the new plugin before the old one stops.
  - With O(method=template) renders the ServiceAccount, the driver ClusterRole and binding (the driver persona
    of M(dra.admin.dra_rbac_plan_info)) and the DaemonSet with gRPC liveness and startup probes
    (service C(liveness)) on O(health_port). With O(method=helm) renders the chart values (the role's overlay on
    O(chart_values) for known charts), and with O(rendered) checks the DaemonSet Helm rendered.
  - Renders the DeviceClasses for the driver in the newest served C(resource.k8s.io) version.
  - Read-only; role P(dra.admin.driver#role) applies the result.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  driver: {description: The DRA driver name its ResourceSlices carry (for example C(gpu.example.com))., type: str, required: true}
  method:
    description: C(template) for the built-in DaemonSet, C(helm) for a chart.
    type: str
    choices: [template, helm]
    default: template
  namespace: {description: Namespace of the driver., type: str, default: dra-system}
  daemonset_name: {description: DaemonSet (and service account) name; default derived from O(driver)., type: str}
  image: {description: Kubelet plugin image (O(method=template))., type: str}
  image_pull_policy: {description: Image pull policy., type: str, default: IfNotPresent}
  command: {description: Container command., type: list, elements: str, default: []}
  args: {description: Container arguments., type: list, elements: str, default: []}
  env:
    description:
      - Extra environment variables, name to value.
      - >-
        A value that is a secret (a token, a password) is given as its source instead, so the DaemonSet carries the
        reference and never the value - C({secretKeyRef: {name: <Secret>, key: <key>}}) or C(configMapKeyRef) (with
        C(optional: true) where the variable may be missing); it becomes the variable's C(valueFrom).
    type: dict
    default: {}
  health_port: {description: Port of the driver's gRPC health service (1-65535)., type: raw, default: 51515}
  container_ports:
    description: Other container ports (for example metrics), as C({name, containerPort}) dicts.
    type: list
    elements: dict
    default: []
  plugin_dir: {description: Kubelet plugins directory on the host., type: str, default: /var/lib/kubelet/plugins}
  registrar_dir: {description: Kubelet plugin registration directory on the host., type: str,
                  default: /var/lib/kubelet/plugins_registry}
  cdi_dir: {description: CDI spec directory on the host., type: str, default: /var/run/cdi}
  privileged:
    description:
      - Run the plugin container privileged (every capability, host devices, no seccomp). Off by default - the
        container then drops every capability but O(capabilities), may not escalate privileges and runs under the
        runtime's default seccomp profile; it mounts only its own directory under O(plugin_dir)
        (C(<plugin_dir>/<driver>)), O(registrar_dir) and O(cdi_dir).
    type: bool
    default: false
  capabilities:
    description:
      - Linux capabilities the unprivileged plugin container gets (names without C(CAP_), for example C(SYS_ADMIN)).
        Not with O(privileged=true), which has every capability.
    type: list
    elements: str
    default: []
  resources: {description: Container resources., type: dict, default: {}}
  priority_class: {description: Pod priority class., type: str, default: system-node-critical}
  termination_grace_period: {description: Pod termination grace period in seconds., type: int, default: 30}
  labels: {description: Extra labels on the DaemonSet and its pods., type: dict, default: {}}
  pod_annotations: {description: Pod annotations (a change rolls the DaemonSet)., type: dict, default: {}}
  node_selector: {description: Node labels the driver's nodes must have., type: dict, default: {}}
  node_affinity:
    description: Required nodeSelectorTerms (ORed); the exclusion label is added to each.
    type: list
    elements: dict
    default: []
  tolerations: {description: Pod tolerations., type: list, elements: dict, default: []}
  exclusion_label: {description: Node label that keeps the driver off a node (the drain role sets it)., type: str,
                    default: dra.admin/driver-excluded}
  liveness:
    description: Liveness probe timing C({period, failure_threshold, timeout}).
    type: dict
    default: {period: 10, failure_threshold: 3, timeout: 5}
  startup:
    description: Startup probe timing C({period, failure_threshold, timeout}).
    type: dict
    default: {period: 1, failure_threshold: 600, timeout: 5}
  seamless_upgrade:
    description:
      - C(auto) uses a seamless upgrade when possible and falls back to O(max_unavailable) with a warning;
        C(required) fails instead of falling back; C(disabled) always uses O(max_unavailable).
    type: str
    choices: [auto, required, disabled]
    default: auto
  supports_seamless_upgrade:
    description:
      - Whether the driver hands over with C(kubeletplugin.RollingUpdate) and its pod UID. For known charts the
        chart's own answer is used when this is not set; for the built-in template the default is V(true).
    type: bool
  seamless_min_ready_seconds:
    description:
      - With a seamless upgrade, the DaemonSet's C(minReadySeconds) - how long a new plugin pod is Ready before the
        DaemonSet controller stops the old one on its node. A pod is Ready once its probe reaches its sockets, while
        the kubelet registers the new plugin from a loop that runs every second; a claim prepared after the old
        plugin stopped and before that registration fails (C(NodePrepareResources) cannot connect).
      - For a known chart it goes into the checked rendering unless the chart sets its own. V(0) stops the old pod
        as soon as the new one is Ready. From 0 to 300.
    type: int
    default: 5
  max_unavailable: {description: C(maxUnavailable) when not upgrading seamlessly (integer or percentage)., type: raw, default: 1}
  cluster_slices:
    description:
      - With O(method=template), the manifests hold a ValidatingAdmissionPolicy that lets the plugin's service account
        write only ResourceSlices of O(driver) whose C(spec.nodeName) is the node its token is bound to.
      - V(true) also lets it write slices without C(spec.nodeName) (C(allNodes), C(nodeSelector),
        C(perDeviceNodeSelection)), for a driver that publishes network-attached pools.
    type: bool
    default: false
  device_classes:
    description: DeviceClasses C({name, expression, config}); the expression is ANDed with the driver match.
    type: list
    elements: dict
    default: []
  chart_ref: {description: Chart reference (O(method=helm))., type: str}
  chart_kind:
    description: Values layout of the chart; C(auto) detects it from the chart name.
    type: str
    choices: [auto, dra-example-driver, nvidia, other]
    default: auto
  chart_values: {description: The user's chart values., type: dict, default: {}}
  chart_version:
    description:
      - Chart version, required with O(method=helm) - the version that was reviewed. A chart directory on this host
        must carry the same version in its C(Chart.yaml) (Helm ignores C(--version) for a chart on disk).
    type: str
  chart_repo_url: {description: Chart repository URL (O(method=helm))., type: str}
  release_name:
    description: Helm release name (O(method=helm)); empty for the driver name with other characters than
      lowercase letters, digits and C(-) replaced by C(-).
    type: str
  helm_binary: {description: Path of the helm program; empty for C(helm) on the PATH., type: str}
  rendered:
    description: Manifests Helm rendered from the values in RV(chart) (the output of its C(render_argv) command);
      the driver DaemonSet in them is checked, and DeviceClasses the chart installs itself are left to the chart
      (dropped from RV(device_classes)).
    type: raw
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Plan the example driver from the built-in template
  dra.admin.dra_driver_plan_info:
    driver: gpu.example.com
    image: registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0
    command: [dra-example-kubeletplugin]
    node_selector: {example.com/gpu: "true"}
    device_classes: [{name: gpu.example.com}]
  register: plan

- name: Apply it
  kubernetes.core.k8s:
    definition: "{{ plan.manifests }}"
"""

RETURN = r"""
kubernetes_version: {description: API server version., returned: always, type: str}
resource_api_version: {description: C(resource.k8s.io) version of the DeviceClasses., returned: always, type: str}
daemonset_name: {description: The DaemonSet name (template) or the name expected from the chart., returned: always, type: str}
selected_nodes: {description: Nodes the driver will run on., returned: always, type: list, elements: str}
excluded_nodes: {description: Other nodes with the reason., returned: always, type: dict}
kubelet_versions: {description: Kubelet version of each selected node., returned: always, type: dict}
strategy: {description: The DaemonSet updateStrategy., returned: always, type: dict,
           sample: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}}
seamless: {description: Whether the upgrade is seamless., returned: always, type: bool}
min_ready_seconds:
  description: The DaemonSet's C(minReadySeconds) - O(seamless_min_ready_seconds) when seamless, else V(0) (not set).
  returned: always
  type: int
  sample: 5
strategy_reason: {description: Why this strategy., returned: always, type: str}
warnings_list: {description: The warnings also given to Ansible., returned: always, type: list, elements: str}
affinity: {description: The node affinity with the exclusion label in every term., returned: always, type: dict}
manifests:
  description: Objects to apply for O(method=template) - ServiceAccount, ClusterRole, ClusterRoleBinding, DaemonSet.
  returned: always
  type: list
  elements: dict
policies:
  description: >-
    For O(method=template), the ValidatingAdmissionPolicy and its binding that hold the plugin's service account to
    its own driver's ResourceSlices of its own node (see O(cluster_slices)).
  returned: always
  type: list
  elements: dict
device_classes: {description: DeviceClass manifests., returned: always, type: list, elements: dict}
chart:
  description: For O(method=helm) the chart's C(kind) (a known chart, or null), the C(values) to install with, the
    C(health_ports) its containers probe, the C(release_name), C(render_argv) (C(helm template) with
    C(--validate), so the chart renders against the cluster's version and API groups; the values go on its
    stdin; run through C(/bin/sh -c) with a prologue that hands the C(K8S_AUTH_*) environment variables of
    the host to Helm, so it reaches the same cluster as the modules, AWX's Kubernetes credential included)
    and C(device_classes) (the DeviceClasses the rendered chart installs itself). With O(rendered) also
    C(manifest) (the rendering's documents but Helm hooks, as Helm is to apply them), C(post_renderer) (a Helm
    post-renderer script that drops Helm's own rendering and prints the C(manifest.yaml) beside it, so that what is
    installed is what was checked) and C(hooks) (the hooks Helm runs from its own rendering).
  returned: always
  type: dict
health_ports:
  description: Ports that carry the gRPC liveness probe.
  returned: always
  type: list
  elements: int
rendered_problems: {description: Problems of the DaemonSet in O(rendered)., returned: when O(rendered) is given, type: list, elements: str}
api_requests: {description: Number of API requests the module made., returned: always, type: int}
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.plan_service import plan
from ansible_collections.dra.admin.plugins.module_utils.drivers.inputs import DriverInputError
from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import DEFAULT_HANDOVER_SECONDS
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL, exclusion_label_error


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        driver=dict(type="str", required=True),
        method=dict(type="str", choices=["template", "helm"], default="template"),
        namespace=dict(type="str", default="dra-system"),
        daemonset_name=dict(type="str"),
        image=dict(type="str"),
        image_pull_policy=dict(type="str", default="IfNotPresent"),
        command=dict(type="list", elements="str", default=[]),
        args=dict(type="list", elements="str", default=[]),
        env=dict(type="dict", default={}),
        health_port=dict(type="raw", default=51515),
        container_ports=dict(type="list", elements="dict", default=[]),
        plugin_dir=dict(type="str", default="/var/lib/kubelet/plugins"),
        registrar_dir=dict(type="str", default="/var/lib/kubelet/plugins_registry"),
        cdi_dir=dict(type="str", default="/var/run/cdi"),
        privileged=dict(type="bool", default=False),
        capabilities=dict(type="list", elements="str", default=[]),
        resources=dict(type="dict", default={}),
        priority_class=dict(type="str", default="system-node-critical"),
        termination_grace_period=dict(type="int", default=30),
        labels=dict(type="dict", default={}),
        pod_annotations=dict(type="dict", default={}),
        node_selector=dict(type="dict", default={}),
        node_affinity=dict(type="list", elements="dict", default=[]),
        tolerations=dict(type="list", elements="dict", default=[]),
        exclusion_label=dict(type="str", default=DEFAULT_EXCLUSION_LABEL),
        liveness=dict(type="dict", default={"period": 10, "failure_threshold": 3, "timeout": 5}),
        startup=dict(type="dict", default={"period": 1, "failure_threshold": 600, "timeout": 5}),
        seamless_upgrade=dict(type="str", choices=["auto", "required", "disabled"], default="auto"),
        supports_seamless_upgrade=dict(type="bool"),
        seamless_min_ready_seconds=dict(type="int", default=DEFAULT_HANDOVER_SECONDS),
        cluster_slices=dict(type="bool", default=False),
        max_unavailable=dict(type="raw", default=1),
        device_classes=dict(type="list", elements="dict", default=[]),
        chart_ref=dict(type="str"),
        chart_kind=dict(type="str", choices=["auto", "dra-example-driver", "nvidia", "other"], default="auto"),
        chart_values=dict(type="dict", default={}),
        chart_version=dict(type="str"),
        chart_repo_url=dict(type="str"),
        release_name=dict(type="str"),
        helm_binary=dict(type="str"),
        rendered=dict(type="raw"),
    )
    return spec


def invalid_settings(problems):
    """Settings that cannot make a working driver: refused, naming every problem."""
    return DraAdminError("invalid driver settings, nothing was installed: %s" % "; ".join(problems),
                         {"problems": list(problems)})


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        label_error = exclusion_label_error(module.params["exclusion_label"])
        if label_error:
            raise invalid_settings([label_error])
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        try:
            result = plan(api, module.params, module.warn)
        except DriverInputError as exc:
            raise invalid_settings(exc.problems)
        if result.get("rendered_problems"):
            raise DraAdminError("the chart's DaemonSet is not safe to install, nothing was installed: %s"
                                % "; ".join(result["rendered_problems"]), result)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
