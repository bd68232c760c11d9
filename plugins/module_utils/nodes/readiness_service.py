# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether a node is back (nodes.readiness), looked at until it is or the time is up. Read only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

try:
    from urllib3.exceptions import HTTPError as NoAnswer  # the kubernetes client's transport: no connection
except ImportError:  # pragma: no cover - the kubernetes client brings urllib3
    NoAnswer = OSError

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.common.waits import growing_delays
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import pod_key
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_service import (
    daemonsets_placing, missing_driver_pods, ready_driver_pods,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import kubelet_version
from ansible_collections.dra.admin.plugins.module_utils.nodes.readiness import (
    device_problems, expected_release, node_problems, published_devices,
)


# What a kube-apiserver answers while it restarts (kubeadm upgrade apply, a kubelet restart on its node): its
# authorizer not yet synced (403), not ready (429, 5xx), or no answer at all (no status).
TRANSIENT_STATUSES = (None, 401, 403, 429, 500, 502, 503, 504)


class NodeNotBack(DraAdminError):
    """The node is not back after the time given; the result names each problem."""


def driver_daemonsets(api, refs):
    found = []
    for ref in refs:
        namespace, dummy, name = ref.partition("/")
        ds = api.get_or_none("/apis/apps/v1/namespaces/%s/daemonsets/%s" % (namespace, name))
        if ds is None or not name:
            raise DraAdminError("driver_daemonsets: no DaemonSet %s: give namespace/name of each driver's "
                                "DaemonSet" % ref)
        found.append(ds)
    return found


def driver_pod_problems(api, node, daemonsets):
    """(ready driver pods on the node, problems): a DaemonSet that places a pod on the node without a ready one."""
    expected = daemonsets_placing(node, daemonsets)
    pods = api.list_items("/api/v1/pods", {"fieldSelector": "spec.nodeName=%s" % node["metadata"]["name"]})
    ready = ready_driver_pods(pods, expected)
    return ready, ["no ready pod of %s on %s" % (ref, node["metadata"]["name"])
                   for ref in missing_driver_pods(expected, ready)]


def look(api, params, daemonsets):
    """One look: the result's fields and the problems."""
    name = params["node"]
    node = api.get_or_none("/api/v1/nodes/%s" % name)
    if node is None:
        raise DraAdminError("node: the cluster has no node %s: give a name `kubectl get nodes` shows" % name)
    problems = node_problems(node, params["kubelet_version"])
    ready_pods, pod_problems = driver_pod_problems(api, node, daemonsets)
    slices = api.list_items(api.resource_path("resourceslices")) if params["drivers"] else []
    devices = published_devices(slices, name, params["drivers"])
    problems += pod_problems + device_problems(name, devices, params["expect_devices"])
    return {"node": name, "kubelet_version": kubelet_version(node), "driver_pods": [pod_key(p) for p in ready_pods],
            "devices": devices, "problems": problems, "back": not problems}


def wait_until_back(api, params, clock=time.time, sleep=time.sleep):
    """Look until the node is back or wait_timeout seconds are up; NodeNotBack (with the last look) then."""
    try:
        params = dict(params, kubelet_version=expected_release(params["kubelet_version"]))
    except ValueError as exc:
        raise DraAdminError("kubelet_version: %s" % exc)
    daemonsets = driver_daemonsets(api, params["driver_daemonsets"])
    deadline = clock() + params["wait_timeout"]
    delays = growing_delays(params["wait_sleep"])
    while True:
        try:
            result = look(api, params, daemonsets)
        except (DraApiError, NoAnswer) as exc:
            if getattr(exc, "status", None) not in TRANSIENT_STATUSES:
                raise
            result = {"node": params["node"], "kubelet_version": "", "driver_pods": [], "devices": {},
                      "problems": ["the API server did not answer: %s" % exc], "back": False}
        if result["back"] or clock() >= deadline:
            break
        sleep(next(delays))
    if not result["back"] and params["fail_when_not_back"]:
        raise NodeNotBack("%s is not back after %ss: %s" % (params["node"], params["wait_timeout"],
                                                            "; ".join(result["problems"])), result)
    return result
