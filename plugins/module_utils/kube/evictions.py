# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Eviction API (policy/v1 ``Eviction``) as data: the request's body, what a refusal means, and the
backoff between retries of a refused eviction (kube/evictions_service.py makes the requests).

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.waits import growing_delays


def eviction_body(pod, grace_period=None):
    meta = pod.get("metadata") or {}
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}}
    if grace_period is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period}
    return body


NAMESPACE_TERMINATING = "NamespaceTerminating"


def eviction_refusal(status, causes=()):
    """What a refused eviction means for the drain.

    "gone": the pod no longer exists (404).
    "budget": a PodDisruptionBudget does not allow it yet (429): retry until the timeout.
    "namespace": the pod's namespace is being deleted (403 with the NamespaceTerminating cause): no
    eviction can be created there, the namespace controller will delete the pod; retry until it is
    marked for deletion, then wait for it to go.
    "error": anything else; the drain stops on it.
    """
    if status == 404:
        return "gone"
    if status == 429:
        return "budget"
    if status == 403 and NAMESPACE_TERMINATING in causes:
        return "namespace"
    return "error"


def backoff_delays(initial=0.5, factor=2.0, ceiling=5.0):
    """Retry delays for PDB refusals: 0.5, 1, 2, 4, 5, 5, ... seconds (common.waits.growing_delays)."""
    return growing_delays(ceiling, first=initial, factor=factor)
