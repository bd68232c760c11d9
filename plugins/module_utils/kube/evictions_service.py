# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Evictions through the Eviction API, and the wait until the evicted pods are gone, with the client of
access/api.py passed in (the node drain and ``dra_device_taint``'s effect Evict make them alike).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.common.waits import growing_delays
from ansible_collections.dra.admin.plugins.module_utils.kube.evictions import backoff_delays, eviction_body, eviction_refusal
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import covering_budgets, pod_key

MAX_PARALLEL_EVICTIONS = 16
# The longest watch asked of the server at once; a wait that needs more LISTs again and watches on.
WATCH_SECONDS = 60


class PodEvictor(object):
    """Evictions through the Eviction API (policy/v1), as the drain makes them: a refusal by a
    PodDisruptionBudget (429) or in a namespace being deleted (403, NamespaceTerminating) is retried with
    backoff (kube.evictions.backoff_delays) while `remaining()` (seconds left) is above 0; a pod that is gone or
    already terminating needs no eviction. Used by the node drain and by dra_device_taint's effect Evict.

    evict() returns None when the pod is evicted (or needs no eviction), else what kept it:
    {pod, reason (budget, namespace, error), pdbs (the PodDisruptionBudgets covering it), message}.
    """

    def __init__(self, api, remaining, grace_period=None, clock=time.time, sleep=time.sleep):
        self.api = api
        self.remaining = remaining
        self.grace_period = grace_period
        self.clock = clock
        self.sleep = sleep

    def evict(self, pod, retry=True):
        """Evict one pod; with `retry` false one request only (a refusal is returned at once, for a caller that
        retries in rounds of its own)."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return None  # already terminating: only wait for it to go
        path = "/api/v1/namespaces/%s/pods/%s/eviction" % (meta["namespace"], meta["name"])
        delays = backoff_delays()
        body = eviction_body(pod, self.grace_period)
        while True:
            try:
                self.api.request("POST", path, body=body, content_type="application/json")
                return None
            except DraApiError as exc:
                refusal = eviction_refusal(exc.status, exc.causes)
                if refusal == "gone" or (refusal != "budget" and self.is_gone_or_terminating(pod)):
                    return None
                if refusal == "error":
                    return {"pod": pod_key(pod), "reason": refusal, "message": "%s: %s" % (pod_key(pod), exc),
                            "pdbs": []}
                if not retry or self.remaining() <= 0:
                    return self.refused(pod, refusal, exc)
                self.sleep(min(next(delays), max(self.remaining(), 0.1)))

    def evict_all(self, pods, retry=True):
        """Evict the pods concurrently (each as evict() does); the refusals, in the pods' order."""
        if not pods:
            return []
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_EVICTIONS, len(pods))) as pool:
            outcomes = list(pool.map(lambda p: self.evict(p, retry), pods))
        return [o for o in outcomes if o]

    def is_gone_or_terminating(self, pod):
        meta = pod["metadata"]
        current = self.api.get_or_none("/api/v1/namespaces/%s/pods/%s" % (meta["namespace"], meta["name"]))
        return current is None or current["metadata"]["uid"] != meta["uid"] or \
            bool(current["metadata"].get("deletionTimestamp"))

    def refused(self, pod, refusal, exc):
        """What kept the pod when the evictions stop: the budgets covering it and the server's own words (a
        PodDisruptionBudget's refusal names the budget and its counts in the Status's causes)."""
        if refusal == "namespace":
            return {"pod": pod_key(pod), "reason": refusal, "pdbs": [],
                    "message": "%s: its namespace is being deleted, and the pod was not marked for deletion "
                               "within the timeout (%s)" % (pod_key(pod), exc)}
        pdbs = self.pdbs_for(pod)
        said = "; ".join(exc.cause_messages) or str(exc)
        return {"pod": pod_key(pod), "reason": refusal, "pdbs": pdbs,
                "message": "%s refused by PodDisruptionBudget %s (%s)" % (pod_key(pod), ", ".join(pdbs) or "?", said)}

    def pdbs_for(self, pod):
        """Names of the PodDisruptionBudgets in the pod's namespace whose selector selects it."""
        return covering_budgets(pod, self.api.list_items(
            "/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % pod["metadata"]["namespace"]))


def wait_pods_gone(api, scopes, remaining, sleep, wait_sleep):
    """Wait until the pods are gone; what is still there when `remaining()` (seconds left) reaches 0.

    scopes: [(path, query, waiting)]: a pod collection to LIST and watch (the node's pods, field-selected; a
    namespace's pods) and the pods awaited in it, a dict of UID to the name to report. Per scope: one LIST, then a
    watch from that LIST's resourceVersion, which ends as the last awaited pod there is deleted; a LIST again when
    the watch ends first (the server's time limit, or a version it no longer has: ERROR 410). Where the server
    refuses the watch, the LIST is polled instead (growing_delays up to `wait_sleep`). The pods were evicted
    together, so the scopes are waited for one after the other. Returns the names still there, sorted."""
    left = []
    for path, query, waiting in scopes:
        left.extend(_wait_scope(api, path, query, dict(waiting), remaining, sleep, wait_sleep))
    return sorted(left)


def _wait_scope(api, path, query, waiting, remaining, sleep, wait_sleep):
    delays = growing_delays(wait_sleep)
    watching = True
    while True:
        pods, version = api.list_snapshot(path, query)
        live = set((p.get("metadata") or {}).get("uid") for p in pods)
        for uid in [u for u in waiting if u not in live]:
            del waiting[uid]
        if not waiting:
            return []
        if remaining() <= 0:
            return list(waiting.values())
        if watching and version:
            watching = _watch_deletions(api, path, dict(query or {}, resourceVersion=version), waiting, remaining)
            if not waiting:
                return []
        else:
            sleep(min(next(delays), max(remaining(), 0.1)))


def _watch_deletions(api, path, query, waiting, remaining):
    """Watch from the query's resourceVersion, taking each deleted pod out of `waiting`, until none is left, the
    watch ends, or the time is up. False when the server refuses the watch (poll then)."""
    try:
        for event in api.watch(path, query, timeout=min(remaining(), WATCH_SECONDS)):
            if event.get("type") == "ERROR":
                return True  # the version is gone: LIST again
            if event.get("type") == "DELETED":
                waiting.pop(((event.get("object") or {}).get("metadata") or {}).get("uid"), None)
            if not waiting or remaining() <= 0:
                return True
    except DraApiError:
        return False
    return True
