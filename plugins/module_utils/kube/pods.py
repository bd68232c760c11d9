# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Pods and other objects as the API returns them: their namespace/name keys, the controller owning a pod,
whether a pod is Ready, the PodDisruptionBudgets covering it (those the Eviction API checks), and objects kept
without their managedFields.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.selection import label_selector_matches


def pod_key(pod):
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def without_managed_fields(obj):
    """The object without metadata.managedFields (the server's record of which client set which field; no report
    reads it), changed in place: what a LIST's objects are kept as, a page at a time."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


def object_key(obj):
    """namespace/name of an object (cluster-scoped: None/name)."""
    meta = (obj or {}).get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def covering_budgets(pod, pdbs):
    """Sorted namespace/name of the PodDisruptionBudgets (of the pod's namespace) whose selector selects it: those
    the Eviction API checks for the pod."""
    meta = pod.get("metadata") or {}
    return sorted(object_key(b) for b in pdbs
                  if (b.get("metadata") or {}).get("namespace") == meta.get("namespace")
                  and label_selector_matches((b.get("spec") or {}).get("selector"), meta.get("labels") or {}))


def controller_of(pod):
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def pod_ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False
