#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_driver_status_info
short_description: Report (and wait for) a DRA driver DaemonSet's rollout and its ResourceSlices on every selected node
version_added: 0.1.0
description:
  - Reads the driver's DaemonSet, works out the nodes it selects (node selector, required node affinity,
    taints, as the DaemonSet controller does), and reports the rollout (pods updated and available) and which
    of those nodes publish ResourceSlices of O(driver) with complete pools.
  - With O(wait=true) polls until the rollout is complete and every selected node publishes its slices, and
    returns the progress seen; on timeout it fails naming the nodes that did not.
  - Checks the DaemonSet itself (exclusion label in every node affinity term, gRPC liveness probe on each of
    O(health_ports), O(expected_strategy)) and fails on a problem when O(fail_on_problems=true).
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  driver: {description: Driver name in the ResourceSlices., type: str, required: true}
  namespace: {description: Namespace of the DaemonSet., type: str, required: true}
  daemonset_name: {description: Name of the DaemonSet., type: str, required: true}
  exclusion_label:
    description: Node label key every node affinity term must exclude (C([prefix/]name), as Kubernetes defines label keys).
    type: str
    default: dra.admin/driver-excluded
  health_ports: {description: Ports that must carry a gRPC liveness probe (service C(liveness))., type: list, elements: int, default: []}
  require_startup_probe: {description: Also require a gRPC startup probe on each health port., type: bool, default: false}
  expected_strategy: {description: The updateStrategy the DaemonSet must have., type: dict}
  wait: {description: Wait for the rollout and the slices., type: bool, default: false}
  wait_timeout: {description: Seconds to wait; a finite number above 0., type: int, default: 300, aliases: [timeout]}
  wait_sleep: {description: Seconds between polls; a finite number above 0., type: float, default: 2.0, aliases: [poll_interval]}
  since:
    description:
      - When the wait started (seconds since the epoch, RV(started) of an earlier call), for a role that waits in an
        C(until) loop of calls with O(wait=false) - RV(elapsed) counts from it. Default is the call's own start.
    type: float
  fail_on_problems: {description: Fail when the DaemonSet check finds a problem or (after waiting) nodes lack slices., type: bool, default: true}
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Wait until the driver runs and publishes on every selected node
  dra.admin.dra_driver_status_info:
    driver: gpu.example.com
    namespace: dra-system
    daemonset_name: gpu-example-com-kubeletplugin
    health_ports: [51515]
    wait: true
    wait_timeout: 600
  register: status

- name: Show progress
  ansible.builtin.debug:
    var: status.progress
"""

RETURN = r"""
done: {description: Rollout complete and every selected node publishes complete slices., returned: always, type: bool}
rollout:
  description: The rollout - C(done), C(desired), C(updated), C(available), C(ready) and a C(text) summary.
  returned: always
  type: dict
selected_nodes: {description: Nodes the DaemonSet selects., returned: always, type: list, elements: str}
nodes_with_slices:
  description: >-
    Selected nodes the driver publishes for, with every pool of it covering the node complete: a current
    slice covers the node through its C(nodeName), C(allNodes) or a C(nodeSelector) admitting the node (at
    slice level, or per device with C(perDeviceNodeSelection)).
  returned: always
  type: list
  elements: str
nodes_without_slices: {description: Selected nodes publishing no (or incomplete) slices of the driver., returned: always, type: list, elements: str}
daemonset_problems: {description: What is wrong with the DaemonSet spec., returned: always, type: list, elements: str}
update_strategy: {description: The DaemonSet's updateStrategy., returned: always, type: dict}
progress: {description: One line per change seen while waiting., returned: always, type: list, elements: str}
elapsed: {description: Seconds spent (since O(since) when given)., returned: always, type: float}
started:
  description: When the call (or the wait, with O(since)) started, in seconds since the epoch.
  returned: always
  type: float
pending:
  description: >-
    What a wait for the driver still waits for - the rollout while it is not complete (with its text), each selected node
    without complete ResourceSlices, or a node the DaemonSet selects when it selects none; empty when RV(done).
  returned: always
  type: list
  elements: str
api_requests: {description: Number of API requests the module made., returned: always, type: int}
"""

import time

from ansible_collections.dra.admin.plugins.module_utils.common.api import (
    AnsibleK8SModule, DraApi, DraApiError, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.checks import check_daemonset, rollout_state
from ansible_collections.dra.admin.plugins.module_utils.drivers.inputs import port_problem
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import select_nodes_for_daemonset
from ansible_collections.dra.admin.plugins.module_utils.common.names import dns_label_error, subdomain_error
from ansible_collections.dra.admin.plugins.module_utils.nodes.selection import exclusion_label_error
from ansible_collections.dra.admin.plugins.module_utils.nodes.selection import DEFAULT_EXCLUSION_LABEL, node_label_map
from ansible_collections.dra.admin.plugins.module_utils.claims.slices import nodes_with_complete_slices
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_options, wait_parameter_errors


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        driver=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        daemonset_name=dict(type="str", required=True),
        exclusion_label=dict(type="str", default=DEFAULT_EXCLUSION_LABEL),
        health_ports=dict(type="list", elements="int", default=[]),
        require_startup_probe=dict(type="bool", default=False),
        expected_strategy=dict(type="dict"),
        wait=dict(type="bool", default=False),
        since=dict(type="float"),
        fail_on_problems=dict(type="bool", default=True),
    )
    spec.update(wait_options(300, 2.0, timeout_aliases=["timeout"], sleep_aliases=["poll_interval"]))
    return spec


def input_errors(params, spec=None):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = wait_parameter_errors(params, spec=spec)
    errors.append(subdomain_error("driver", params["driver"]))
    errors.append(dns_label_error("namespace", params["namespace"]))
    errors.append(subdomain_error("daemonset_name", params["daemonset_name"], "gpu-example-com-kubeletplugin"))
    errors.append(exclusion_label_error(params["exclusion_label"]))
    errors.extend(port_problem(port, "health_ports entry") for port in params["health_ports"])
    return [e for e in errors if e]


def observe(api, params):
    path = "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (params["namespace"], params["daemonset_name"])
    daemonset = api.get_or_none(path)
    if daemonset is None:
        raise DraApiError("DaemonSet %s/%s does not exist: install the driver first (role dra.admin.driver)"
                          % (params["namespace"], params["daemonset_name"]))
    nodes = list(api.list_items("/api/v1/nodes"))
    selected, _excluded = select_nodes_for_daemonset(nodes, daemonset)
    slices = api.list_items(api.resource_path("resourceslices"), {"fieldSelector": "spec.driver=%s" % params["driver"]})
    chosen = set(selected)
    with_slices = nodes_with_complete_slices(slices, params["driver"],
                                             node_label_map(n for n in nodes if n["metadata"]["name"] in chosen))
    return {
        "daemonset": daemonset,
        "rollout": rollout_state(daemonset),
        "selected_nodes": selected,
        "nodes_with_slices": with_slices,
        "nodes_without_slices": sorted(set(selected) - set(with_slices)),
    }


def progress_state(seen):
    line = "rollout %s; slices on %d/%d selected nodes" % (
        seen["rollout"]["text"], len(seen["nodes_with_slices"]), len(seen["selected_nodes"]))
    if seen["nodes_without_slices"]:
        line += " (waiting for %s)" % ", ".join(seen["nodes_without_slices"])
    return line


def is_done(seen):
    return seen["rollout"]["done"] and not seen["nodes_without_slices"] and bool(seen["selected_nodes"])


def run(api, params, clock=time.time, sleep=time.sleep):
    started = clock()
    since = params.get("since") or started
    progress = []
    last_text = None
    while True:
        seen = observe(api, params)
        elapsed = clock() - started
        state = progress_state(seen)
        if state != last_text:
            progress.append("%ds %s" % (int(elapsed), state))
            last_text = state
        if not params["wait"] or is_done(seen) or elapsed >= params["wait_timeout"]:
            break
        sleep(params["wait_sleep"])
    if params["wait"]:
        progress.append("%ds %s" % (int(clock() - started), "done: rolled out, every selected node publishes its "
                                    "slices" if is_done(seen) else "stopped waiting (wait_timeout %ss)" % params["wait_timeout"]))
    daemonset = seen.pop("daemonset")
    seen["daemonset_problems"] = check_daemonset(daemonset, params["exclusion_label"], params["health_ports"],
                                                 params.get("expected_strategy"), params["require_startup_probe"])
    seen["update_strategy"] = (daemonset.get("spec") or {}).get("updateStrategy") or {}
    seen["done"] = is_done(seen)
    seen["progress"] = progress
    seen["elapsed"] = round(clock() - since, 1)
    seen["started"] = since
    seen["pending"] = pending(seen)
    return seen


def pending(seen):
    """What the wait still waits for: the rollout while it is not complete, then each node without slices."""
    out = [] if seen["rollout"]["done"] else ["rollout (%s)" % seen["rollout"]["text"]]
    out += ["node %s (no complete ResourceSlices)" % node for node in seen["nodes_without_slices"]]
    return out if seen["selected_nodes"] else out + ["a node the DaemonSet selects (it selects none)"]


def failure(params, result):
    if result["daemonset_problems"]:
        return "DaemonSet %s/%s: %s" % (params["namespace"], params["daemonset_name"],
                                        "; ".join(result["daemonset_problems"]))
    if params["wait"] and not result["done"]:
        parts = []
        if not result["selected_nodes"]:
            parts.append("the DaemonSet selects no node")
        if not result["rollout"]["done"]:
            parts.append("rollout not complete (%s)" % result["rollout"]["text"])
        if result["nodes_without_slices"]:
            parts.append("nodes without complete ResourceSlices of %s: %s"
                         % (params["driver"], ", ".join(result["nodes_without_slices"])))
        return ("driver %s not ready after %ss: %s. Check the driver pods on those nodes (kubectl -n %s get pods -o "
                "wide; their logs and liveness probe) and that they reach the API server"
                % (params["driver"], params["wait_timeout"], "; ".join(parts), params["namespace"]))
    return None


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    errors = input_errors(module.params, spec)
    if errors:
        module.fail_json(msg="; ".join(errors))
    api = DraApi(module)
    try:
        result = run(api, module.params)
    except DraApiError as exc:
        module.fail_json(msg=str(exc), api_requests=api.requests)
    message = failure(module.params, result)
    if message and module.params["fail_on_problems"]:
        module.fail_json(msg=message, api_requests=api.requests, **result)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
