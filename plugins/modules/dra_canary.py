#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_canary
short_description: Probe each DRA pool with a short-lived pod whose claim takes one free device
version_added: 0.1.0
description:
  - For every ResourceSlice pool (of O(drivers) and O(pools), or of every driver) with a free device, creates a
    ResourceClaimTemplate and a pod using it. The claim asks for one device of the driver's DeviceClass through a
    CEL selector naming the driver and an attribute only that device has among the driver's devices on its node
    (every attribute when none tells it apart), and tolerates no device taint. A pool published for one node is
    pinned to it (required node affinity on C(metadata.name)); a pool of devices not bound to one node is probed
    only when an attribute tells the chosen device apart from all of the driver's devices.
  - The container writes its environment and the device paths of O(expect_paths) it finds into its termination
    message and ends. The module then deletes the pod, its claim and the template, and waits until the pod and
    the claim are gone.
  - Each probe is timed in four phases - C(allocation) (pod created until its claim is allocated), C(prepare)
    (until the container started - the driver's NodePrepareResources and the container's start), C(device) (the
    container saw the device - O(expect_env) and O(expect_paths)) and C(unprepare) (pod deleted until the pod
    and its claim are gone - the driver's NodeUnprepareResources and the deallocation). A phase that fails or
    times out ends the probe; C(unprepare) is always waited for.
  - The probes of all pools run at the same time. A free device is one the scheduler can allocate now (as
    M(dra.admin.dra_capacity_info) counts C(free) - not allocated, not tainted by its slice or a DeviceTaintRule,
    pool complete and valid). Pools with no free device, on a cordoned node, or with no DeviceClass for their
    driver are reported in RV(skipped_pools) and never probed.
  - The objects carry the labels C(dra.admin/purpose=canary) and C(dra.admin/canary-run=<run id>). They are
    deleted also when the run fails; a claim is never forced away (its finalizer stays until the driver
    unprepared it), so a driver that cannot unprepare leaves it, and RV(results) says so.
  - In check mode nothing is created; RV(planned) and RV(summary) say what would be probed.
  - Needs permission to create, list and delete pods, C(resourceclaimtemplates) and C(resourceclaims) in
    O(namespace) and to list its events, and to list ResourceSlices, ResourceClaims, DeviceClasses, Nodes,
    (with O(skip_waited_pools)) pods and (where served) DeviceTaintRules cluster-wide.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.actiongroup_k8s
attributes:
  check_mode:
    support: full
    details:
      - Reads the slices, claims and DeviceClasses and reports the probes it would run, creating nothing.
  diff_mode:
    support: none
options:
  drivers:
    description: Only the pools of these drivers (default every driver that publishes slices).
    type: list
    elements: str
    default: []
  pools:
    description:
      - Only these pools (their names; a node-local pool is usually named after its node).
      - A pool that O(drivers) (every driver when empty) do not publish is refused, naming their pools.
    type: list
    elements: str
    default: []
  nodes:
    description:
      - Only the node-local pools of these nodes (default every pool).
      - A node named here is probed even when cordoned, its probe's pod tolerating the cordon
        (C(node.kubernetes.io/unschedulable)); the role C(dra.admin.node_upgrade) checks a node this way before it
        uncordons it. A name the cluster does not have is refused.
    type: list
    elements: str
    default: []
  device_classes:
    description:
      - The DeviceClass the claim of each driver's probes asks for, by driver. Without one, the first class (by
        name) whose selectors are only C(device.driver == "<driver>").
      - A class that does not exist is refused before anything is created.
    type: dict
    default: {}
  skip_waited_pools:
    description:
      - Leave out the pools a user's pod may be waiting for - a Pending pod, not yet on a node, with a claim (by
        name, from a template, or made for its extended resources) that is not allocated, or an extended resource
        a DeviceClass backs whose claim is not made yet, asking for a DeviceClass of the pool's driver (or one
        whose driver cannot be told) - the canary never takes a free device such a pod waits for. They are reported in RV(skipped_pools) with
        the pods named (C(waiting_pods)).
      - V(false) probes them anyway.
    type: bool
    default: true
  namespace:
    description: The namespace of the probes' pods and templates; it must exist.
    type: str
    default: dra-canary
  image:
    description:
      - The probes' container image; it needs C(sh) and C(env). Pulled if not present (C(IfNotPresent)).
    type: str
    default: registry.k8s.io/e2e-test-images/busybox:1.36.1-1
  expect_env:
    description:
      - Environment variables the container must see, name to value; an empty value only requires the variable
        to be set. Both may use the placeholders C({driver}), C({pool}), C({node}), C({device}) (the allocated
        device's name), C({device_env}) (that name in upper case with non-word characters as C(_)) and
        C({claim_uid}).
      - The default is what the example driver (C(gpu.example.com)) puts into a container for each device it
        prepared - C(GPU_DEVICE_<DEVICE>_RESOURCE_CLAIM) set to the claim's UID.
      - An empty name is refused.
    type: dict
    default:
      GPU_DEVICE_{device_env}_RESOURCE_CLAIM: "{claim_uid}"
  expect_paths:
    description:
      - Device nodes or files the container must see, e.g. C(/dev/nvidia{device}); the same placeholders but
        C({claim_uid}), filled with the device chosen for the probe.
    type: list
    elements: str
    default: []
  tolerations:
    description:
      - Tolerations of the probes' pods (node taints; the claims still tolerate no device taint).
      - Checked as the API server checks a pod's tolerations (fields, operator V(Equal) or V(Exists), effect,
        C(tolerationSeconds) only with V(NoExecute)) before anything is created.
    type: list
    elements: dict
    default: []
  allocation_timeout:
    description: Seconds from the pod's creation until its claim must be allocated.
    type: int
    default: 60
  prepare_timeout:
    description: Seconds from the allocation until the container must have started, and again until it has
      finished its check (covers pulling O(image)).
    type: int
    default: 180
  unprepare_timeout:
    description: Seconds from the pod's deletion until the pod and its claim must be gone.
    type: int
    default: 120
  wait_sleep:
    description: Seconds between two looks at the probes (the phases' times are this exact).
    type: float
    default: 0.5
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Probe every pool of the example driver
  dra.admin.dra_canary:
    drivers: [gpu.example.com]
  register: canary

- name: Fail when a pool's probe failed
  ansible.builtin.assert:
    that: canary.ok
    fail_msg: "{{ canary.summary }}"

- name: What would be probed
  dra.admin.dra_canary:
  check_mode: true

- name: A driver that creates device nodes
  dra.admin.dra_canary:
    drivers: [gpu.nvidia.com]
    device_classes: {gpu.nvidia.com: gpu.nvidia.com}
    image: registry.example.com/tools/busybox:1.36
    expect_env: {}
    expect_paths: ["/dev/nvidiactl"]
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""

RETURN = r"""
resource_api_version:
  description: The C(resource.k8s.io) version used.
  returned: always
  type: str
  sample: v1
run_id:
  description: The run's id, the value of the C(dra.admin/canary-run) label of everything it created.
  returned: always
  type: str
namespace:
  description: The namespace of the probes.
  returned: always
  type: str
planned:
  description: One entry per probe - C(driver), C(pool), C(node) (null for devices not bound to one node),
    C(device) (the free device chosen), C(device_class), C(selector) (the claim's CEL expression), C(unique)
    (whether the selector matches only that device), C(total), C(free) and C(tainted) devices of the pool.
  returned: always
  type: list
  elements: dict
results:
  description:
    - The planned probes (empty in check mode) with C(pod), C(claim), C(allocated) ({driver, pool, device}),
      C(ok), C(failed_phase) (the first phase that failed, or null) and C(phases) - per phase reached
      (C(allocation), C(prepare), C(device), C(unprepare)) C(ok), C(seconds) and C(detail) (why it failed,
      with the pod's last warning event).
  returned: always
  type: list
  elements: dict
  sample:
    - driver: gpu.example.com
      pool: worker-1
      node: worker-1
      device: gpu-0
      ok: true
      failed_phase: null
      phases:
        allocation: {ok: true, seconds: 1.02, detail: ""}
        prepare: {ok: true, seconds: 1.51, detail: ""}
        device: {ok: true, seconds: 0.5, detail: ""}
        unprepare: {ok: true, seconds: 2.03, detail: ""}
skipped_pools:
  description:
    - The pools not probed - C(driver), C(pool), C(reason), C(total), C(free), C(tainted).
    - Named so, not C(skipped), which Ansible reserves (a result with it is shown as a skipped task, and
      C(failed_when) and C(changed_when) are not applied to it).
  returned: always
  type: list
  elements: dict
ok:
  description: Whether every probe passed every phase (true when nothing was probed).
  returned: always
  type: bool
failed_pools:
  description: Every probe that failed, as its C(<driver>/<pool>), a colon and the first phase that failed.
  returned: always
  type: list
  elements: str
  sample: ["gpu.example.com/worker-2: prepare"]
summary:
  description: One line per probe (phase times) and per skipped pool; in check mode, what would be probed.
  returned: always
  type: list
  elements: str
metrics_text:
  description:
    - The run in the Prometheus text format for node-exporter's textfile collector (empty in check mode) -
      C(dra_admin_canary_phase_seconds{driver,pool,phase}), C(dra_admin_canary_success{driver,pool,phase}) (1 or
      0), C(dra_admin_canary_skipped{driver,pool}) and C(dra_admin_canary_last_run_timestamp_seconds).
  returned: always
  type: str
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.canary.canary import DEFAULT_EXPECT_ENV, template_errors
from ansible_collections.dra.admin.plugins.module_utils.canary.canary_service import run_canary
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.common.names import dns_label_error, subdomain_error
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import toleration_errors
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_parameter_errors

TIMEOUTS = ("allocation_timeout", "prepare_timeout", "unprepare_timeout")


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        drivers=dict(type="list", elements="str", default=[]),
        pools=dict(type="list", elements="str", default=[]),
        nodes=dict(type="list", elements="str", default=[]),
        device_classes=dict(type="dict", default={}),
        skip_waited_pools=dict(type="bool", default=True),
        namespace=dict(type="str", default="dra-canary"),
        image=dict(type="str", default="registry.k8s.io/e2e-test-images/busybox:1.36.1-1"),
        expect_env=dict(type="dict", default=dict(DEFAULT_EXPECT_ENV)),
        expect_paths=dict(type="list", elements="str", default=[]),
        tolerations=dict(type="list", elements="dict", default=[]),
        allocation_timeout=dict(type="int", default=60),
        prepare_timeout=dict(type="int", default=180),
        unprepare_timeout=dict(type="int", default=120),
        wait_sleep=dict(type="float", default=0.5),
    )
    return spec


def input_errors(params):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = wait_parameter_errors(params, timeouts=TIMEOUTS)
    errors += [subdomain_error("drivers", d) for d in params["drivers"]]
    errors += [subdomain_error("device_classes key", d) for d in params["device_classes"]]
    errors += [subdomain_error("device_classes[%s]" % d, c, example="gpu.example.com")
               for d, c in sorted(params["device_classes"].items())]
    errors += ["expect_env: a variable name is empty; name the environment variable the driver sets in the "
               "container (the default: %s)" % ", ".join(sorted(DEFAULT_EXPECT_ENV))
               for name in params["expect_env"] if not str(name or "").strip()]
    errors += toleration_errors("tolerations", params["tolerations"])
    errors.append(dns_label_error("namespace", params["namespace"]))
    if not (params["image"] or "").strip():
        errors.append("image is empty: name an image with sh and env, e.g. busybox:1.36")
    errors += template_errors("expect_env", list(params["expect_env"]) + [str(v or "") for v in
                                                                          params["expect_env"].values()])
    errors += template_errors("expect_paths", params["expect_paths"])
    errors += ["expect_paths: {claim_uid} is not known when the pod is made; use it in expect_env"
               for p in params["expect_paths"] if "{claim_uid}" in p]
    return [e for e in errors if e]


def options(params):
    return {"namespace": params["namespace"], "image": params["image"].strip(),
            "expect_env": dict((k, str(v or "")) for k, v in params["expect_env"].items()),
            "expect_paths": params["expect_paths"], "tolerations": params["tolerations"],
            "timeouts": {"allocation": params["allocation_timeout"], "prepare": params["prepare_timeout"],
                         "unprepare": params["unprepare_timeout"]},
            "sleep": params["wait_sleep"]}


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    with fails_on_error(module) as failure:
        raise_input_errors(input_errors(params), "; nothing was created")
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        report = run_canary(api, options(params), params["drivers"], params["pools"], params["device_classes"],
                            check_mode=module.check_mode, skip_waited_pools=params["skip_waited_pools"],
                            on_nodes=params["nodes"])
    left = [r for r in report["results"] if not r["phases"].get("unprepare", {}).get("ok")]
    module.exit_json(changed=bool(left), api_requests=api.requests, **report)


if __name__ == "__main__":
    main()
