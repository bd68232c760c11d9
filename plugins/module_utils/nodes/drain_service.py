# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Ordered node drain and return to service, against the API (see nodes.drain for the plan).

Requests per node are proportional to the pods on it: pods are listed with a
field selector on the node and watched until the evicted ones are gone, claims
and pods are then polled by name (a claim whose consumers left the node is
checked for a consumer elsewhere by GET). The
cluster-wide claim list runs twice per drain (preflight and final check),
never per poll.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.allocation.whatif_service import preview_evictions
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.access.api import MERGE_PATCH
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import gather_claim_views
from ansible_collections.dra.admin.plugins.module_utils.claims.claims import (
    blocks_node, claim_view, consumer_label, consumer_note, held_for_non_pods_only_off_node, holds_devices,
    non_pod_message, pod_ref, view_name, view_names,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import (
    CONSUMER_POD_GROUP, claims_used_by, pod_claims, reserved_for,
)
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain import (
    CORDON_ANNOTATION, cannot_free_message, claims_drain_cannot_free, claims_only_for_node,
    drivers_beyond_daemonsets, drivers_left_on_node, plan_drain,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.evictions_service import PodEvictor, wait_pods_gone
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import (
    controller_of, object_key, pod_key, pod_ready,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import select_nodes_for_daemonset
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import (
    EXCLUSION_VALUE, daemonset_excludes, is_cordoned, node_excluded,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import driver_publishes_for_node, slices_for_node
from ansible_collections.dra.admin.plugins.module_utils.common.progress import elapsed_since
from ansible_collections.dra.admin.plugins.module_utils.common.waits import growing_delays
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_progress import (
    CLAIM_PODS_GONE, CLAIMS_RELEASED, DRAIN_WAITS, DRIVER_PODS_GONE, OTHER_PODS_GONE, WAIT_PHASE, drain_progress,
    drain_waiting_for,
)


class DrainError(DraAdminError):
    """The drain stopped; `details` says what blocks it. The node stays cordoned."""


class NodeDrain(object):
    def __init__(self, api, params, check_mode=False, clock=time.time, sleep=time.sleep):
        self.api = api
        self.p = params
        self.node = params["node"]
        self.check_mode = check_mode
        self.clock = clock
        self.sleep = sleep
        # Without waiting (wait: false), a run is one phase of a drain that started at `since`.
        self.started = params.get("since") or clock()
        self.deadline = self.started + params["wait_timeout"]
        self.events = []
        self.phases = {}
        self.warnings = []
        self.changed = False
        self.driver_refs = list(params["driver_daemonsets"])
        self.non_pod = {}  # claims on the node reserved only for consumers that are not pods: key -> view
        self.group_consumers = {}  # (namespace, claim) -> the PodGroups reserving or listing it at the start
        self.evictor = PodEvictor(api, self.remaining, params.get("grace_period"), clock=clock, sleep=sleep)

    # ------------------------------------------------------------------ helpers
    def event(self, text):
        self.events.append("%6.1fs %s" % (self.clock() - self.started, text))

    def phase(self, name, since):
        self.phases[name] = round(self.clock() - since, 2)

    def remaining(self):
        return self.deadline - self.clock()

    def get_node(self):
        node = self.api.get_or_none("/api/v1/nodes/%s" % self.node)
        if node is None:
            raise DrainError("node %r does not exist; check the name with 'kubectl get nodes'" % self.node)
        return node

    def patch_node(self, patch):
        self.api.request("PATCH", "/api/v1/nodes/%s" % self.node, body=patch, content_type=MERGE_PATCH)
        self.changed = True

    def on_node(self):
        """The query selecting the node's pods."""
        return {"fieldSelector": "spec.nodeName=%s" % self.node}

    def pods_on_node(self):
        return list(self.api.list_items("/api/v1/pods", self.on_node()))

    def driver_daemonsets(self):
        """The driver DaemonSets, each checked to keep its pods off nodes with the exclusion label.

        Given neither driver_daemonsets nor driver_pod_labels, the drivers are every DaemonSet that keeps its
        pods off nodes with the exclusion label (one cluster-wide DaemonSet LIST): the label is what takes
        them off the node, so they are the ones to remove last and to wait for on the way back."""
        label = self.p["exclusion_label"]
        if not (self.p["driver_daemonsets"] or self.p["driver_pod_labels"]):
            found = [ds for ds in self.api.list_items("/apis/apps/v1/daemonsets") if daemonset_excludes(ds, label)]
            self.driver_refs = [object_key(ds) for ds in found]
            return found
        found = []
        for ref in self.p["driver_daemonsets"]:
            namespace, name = ref.split("/", 1)
            ds = self.api.get_or_none("/apis/apps/v1/namespaces/%s/daemonsets/%s" % (namespace, name))
            if ds is None:
                raise DrainError("driver DaemonSet %s not found; give driver_daemonsets as namespace/name" % ref)
            if not daemonset_excludes(ds, label):
                raise DrainError(
                    "driver DaemonSet %s does not keep its pods off nodes labelled %s, so the drain could not "
                    "take the driver off the node last. Add a required node affinity '%s DoesNotExist' to "
                    "every nodeSelectorTerm (role dra.admin.driver does), or set exclusion_label to the key "
                    "it uses." % (ref, label, label))
            found.append(ds)
        self.driver_refs = list(self.p["driver_daemonsets"])
        return found

    # ------------------------------------------------------------------ drain
    def drain(self):
        t0 = self.clock()
        node = self.get_node()
        self.driver_daemonsets()
        pods = self.pods_on_node()
        plan = plan_drain(pods, driver_daemonsets=self.driver_refs,
                          driver_labels=self.p["driver_pod_labels"],
                          evict_daemonset_pods=self.p["evict_daemonset_pods"],
                          delete_emptydir_data=self.p["delete_emptydir_data"], force=self.p["force"])
        gathered = gather_claim_views(self.api, node=self.node)
        version, held = gathered["version"], gathered["blocking"]
        self.phase("preflight", t0)
        was_cordoned = is_cordoned(node)
        labels = node["metadata"].get("labels") or {}
        annotations = node["metadata"].get("annotations") or {}
        self.check_drivers_removable(labels, plan["driver_pods"])
        summary = self.plan_summary(plan, held, was_cordoned, labels, annotations)
        summary["daemonset_claims"] = view_names(gathered["daemonset_claims"])
        self.note_non_pod_claims(v for v in gathered["views"] if holds_devices(v) and v["non_pod_consumers"])
        summary["non_pod_claims"] = self.non_pod_reports()
        self.group_consumers = pod_group_consumers(gathered["views"])
        self.refuse_before_writes(plan, gathered, summary)
        if self.p.get("preview"):
            summary["preview"] = preview_evictions(self.api, plan["claim_pods"], removed_nodes=[self.node])
            return summary
        if self.p.get("wait") is False:
            return self.advance(plan, gathered, labels, was_cordoned, node, summary)
        if self.check_mode:
            self.changed = summary["would_change"]
            return summary
        self.warn_at_start(plan, gathered)
        t = self.clock()
        self.cordon(node, was_cordoned)
        self.phase("cordon", t)
        for wait in DRAIN_WAITS:  # the one order of the drain's phases, as the runs with wait: false take them
            t = self.clock()
            self.run_phase(wait, plan, labels, wait_for_it=True, version=version, held=held)
            self.phase(WAIT_PHASE[wait], t)
            if wait == CLAIMS_RELEASED:
                summary["non_pod_claims"] = self.non_pod_reports()
                self.warn_non_pod(summary)
        summary.update(phases=self.phases, events=self.events)
        return summary

    def run_phase(self, wait, plan, labels, wait_for_it, version=None, held=None):
        """The writes that end one wait of DRAIN_WAITS (and, with wait_for_it, the wait itself): the claim pods'
        evictions, the other pods', the claims' release (only waited for), the driver's removal. A run with
        wait: false takes only the next phase (advance) and leaves terminating pods to the wait."""
        if wait in (CLAIM_PODS_GONE, OTHER_PODS_GONE):
            what = "claim pod" if wait == CLAIM_PODS_GONE else "pod"
            pods = plan["claim_pods" if wait == CLAIM_PODS_GONE else "other_pods"]
            if not wait_for_it:
                pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            self.evict_all(pods, what, wait=wait_for_it)
        elif wait == CLAIMS_RELEASED and wait_for_it:
            self.wait_claims_released(version, held, plan["claim_pods"], labels)
        elif wait == DRIVER_PODS_GONE:
            self.remove_driver(labels, plan["driver_pods"] if wait_for_it else [])

    def refuse_before_writes(self, plan, gathered, summary):
        """What stops the drain before its first write: claims its evictions cannot free (only reported with
        preview), pods that need an explicit option."""
        summary["claims_not_freed"] = self.claims_not_freed(plan, gathered)
        if summary["claims_not_freed"] and not self.p.get("preview"):
            raise DrainError(cannot_free_message(self.node, summary["claims_not_freed"]),
                             {"claims_not_freed": summary["claims_not_freed"]})
        if plan["blocked"]:
            reasons = "; ".join("%s (%s)" % (b["pod"], b["reason"]) for b in plan["blocked"])
            raise DrainError("pods on %s need an explicit option before the drain can start: %s. Nothing was "
                             "changed." % (self.node, reasons), {"blocked_pods": plan["blocked"]})

    def claims_not_freed(self, plan, gathered):
        """nodes.drain.claims_drain_cannot_free; the budgets of the namespaces concerned are read (one LIST each)
        only when a claim pod names a claim allocated for this node alone."""
        candidates = claims_only_for_node(plan["claim_pods"], gathered["views"], self.node)
        pdbs = [b for namespace in sorted(set(ns for ns, dummy in candidates))
                for b in self.api.list_items("/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % namespace)]
        return claims_drain_cannot_free(plan["claim_pods"], gathered["views"], pdbs, self.node,
                                        candidates) if pdbs else []

    def warn_at_start(self, plan, gathered):
        if self.p["force"] and plan["unmanaged"]:
            self.warnings.append("force=true: evicting pods no controller will recreate: %s"
                                 % ", ".join(plan["unmanaged"]))
        if gathered["daemonset_claims"]:
            self.warnings.append(
                "ResourceClaim(s) used on %s only by DaemonSet pods, which stay on the node and are not waited "
                "for: %s. The DRA driver leaves while they are prepared; give such DaemonSets a node affinity that "
                "keeps them off the node before the drain if they must be unprepared first."
                % (self.node, describe_claims(gathered["daemonset_claims"])))

    def warn_non_pod(self, summary):
        if self.non_pod:
            self.warnings.append(
                "ResourceClaim(s) on %s stay reserved for consumers that are not pods; the drain evicted the pods "
                "on the node that use them and does not wait for the reservation (no eviction ends it): %s"
                % (self.node, "; ".join(r["message"] for r in summary["non_pod_claims"])))

    def advance(self, plan, gathered, labels, was_cordoned, node, summary):
        """wait: false: the writes of the next phase whose waits are over, and no wait (_progress). Returns
        the plan, what the drain still waits for (waiting_for, pending, as read before this run's writes) and
        the seconds since the drain started; in check mode only that. Run again after each wait."""
        label_set = node_excluded(labels, self.p["exclusion_label"])
        waiting_for, pending = drain_waiting_for(
            summary["claim_pods"], summary["other_pods"], view_names(gathered["blocking"]), summary["driver_pods"],
            label_set)
        summary.update(drain_progress(waiting_for, pending, self.started, self.clock()), started=self.started)
        if self.check_mode:
            self.changed = summary["would_change"]
            return summary
        if CORDON_ANNOTATION not in (node["metadata"].get("annotations") or {}):  # the run that starts the drain
            self.warn_at_start(plan, gathered)
        t = self.clock()
        self.cordon(node, was_cordoned)
        self.phase("cordon", t)
        if waiting_for in (CLAIM_PODS_GONE, OTHER_PODS_GONE) or (waiting_for == DRIVER_PODS_GONE and not label_set):
            if waiting_for == DRIVER_PODS_GONE:
                self.note_non_pod_claims(gathered["non_pod_claims"])
                summary["non_pod_claims"] = self.non_pod_reports()
                self.warn_non_pod(summary)
            t = self.clock()
            self.run_phase(waiting_for, plan, labels, wait_for_it=False)
            self.phase(WAIT_PHASE[waiting_for], t)
        summary.update(phases=self.phases, events=self.events, elapsed=elapsed_since(self.started, self.clock()))
        return summary

    def node_drivers(self):
        """Drivers publishing the node's own devices: a current slice bound to the node by name (its nodeName,
        or with perDeviceNodeSelection a device's). One slice LIST."""
        slices = self.api.list_items(self.api.resource_path("resourceslices"))
        return sorted(set(((s.get("spec") or {}).get("driver")) for s in slices_for_node(slices, self.node)))

    def check_drivers_removable(self, labels, driver_pods):
        """Before the first write: refuse a drain that would end with a driver still on the node because no
        pod of it is among the driver pods to take off (a mistyped exclusion_label or driver_daemonsets finds
        none). Not checked once the node carries the exclusion label: the driver was taken off before."""
        if node_excluded(labels, self.p["exclusion_label"]):
            return
        drivers = self.node_drivers()
        not_in_pods = self.p.get("drivers_not_in_pods") or []
        left = drivers_left_on_node(drivers, driver_pods, not_in_pods)
        if left:
            found = ("driver_daemonsets %s have no pod on it" % ", ".join(self.p["driver_daemonsets"])
                     if self.p["driver_daemonsets"] else
                     "no pod on it matches driver_pod_labels" if self.p["driver_pod_labels"] else
                     "no DaemonSet keeps its pods off nodes labelled %s (exclusion_label)" % self.p["exclusion_label"])
            raise DrainError(
                "driver(s) %s publish devices of %s, but the drain found no driver pod on the node to take off "
                "last (%s), so it would end with the driver still there. Set driver_daemonsets to the driver's "
                "DaemonSet (namespace/name), or exclusion_label to the label key its node affinity excludes; list a "
                "driver that does not run in a pod on the node in drivers_not_in_pods. Nothing was changed."
                % (", ".join(left), self.node, found), {"drivers_left_on_node": left})
        beyond = drivers_beyond_daemonsets(drivers, driver_pods, not_in_pods)
        if beyond:
            self.warnings.append(
                "driver(s) %s publish devices of %s, but fewer driver DaemonSets have a pod there (%s): a driver "
                "whose DaemonSet is not among them stays on the node; add it to driver_daemonsets"
                % (", ".join(beyond), self.node, ", ".join(sorted(set(pod_key(p) for p in driver_pods)))))

    def plan_summary(self, plan, held, was_cordoned, labels, annotations):
        """What the drain would do; would_change is true when it would write anything (what cordon,
        evict_all and remove_driver write: unschedulable, the cordon annotation, evictions, the label)."""
        order = ([pod_key(p) for p in plan["claim_pods"]] + [pod_key(p) for p in plan["other_pods"]])
        label_set = node_excluded(labels, self.p["exclusion_label"])
        would_change = bool(order or plan["driver_pods"] or not was_cordoned or not label_set
                            or CORDON_ANNOTATION not in annotations)
        return {
            "node": self.node, "was_cordoned": was_cordoned, "would_change": would_change,
            "eviction_order": order,
            "claim_pods": [pod_key(p) for p in plan["claim_pods"]],
            "other_pods": [pod_key(p) for p in plan["other_pods"]],
            "driver_pods": [pod_key(p) for p in plan["driver_pods"]],
            "skipped_pods": plan["skipped"],
            "claims_held_at_start": view_names(held),
        }

    def cordon(self, node, was_cordoned):
        annotations = node["metadata"].get("annotations") or {}
        patch = {}
        if not was_cordoned:
            patch["spec"] = {"unschedulable": True}
        if CORDON_ANNOTATION not in annotations:
            patch["metadata"] = {"annotations": {CORDON_ANNOTATION: "true" if was_cordoned else "false"}}
        if patch:
            self.patch_node(patch)
            self.event("cordoned %s" % self.node)

    def evict_all(self, pods, what, wait=True):
        """Evict every pod concurrently (PDB refusals retried), then wait for all of them together (unless
        not `wait`)."""
        if not pods:
            return
        self.changed = True
        failures = self.evictor.evict_all(pods)
        if not failures and wait:
            failures = self.wait_pods_gone(pods)
        if failures:
            raise DrainError(
                "could not evict %d %s(s) from %s within the timeout: %s. The node stays cordoned and the "
                "DRA driver was not touched. Next: relax the PodDisruptionBudget(s) named, or raise wait_timeout."
                % (len(failures), what, self.node, "; ".join(f["message"] for f in failures)),
                {"blocking_pods": [f["pod"] for f in failures],
                 "pod_disruption_budgets": sorted(set(b for f in failures for b in f["pdbs"]))})
        self.event("evicted %d %s(s)" % (len(pods), what) if wait else "eviction of %d %s(s) asked" % (len(pods), what))

    def wait_pods_gone(self, pods):
        """Until the pods are gone (kube.evictions_service.wait_pods_gone on the node's pods: a LIST, then a watch
        from its version); a failure per pod still there at the deadline."""
        left = set(wait_pods_gone(self.api, [("/api/v1/pods", self.on_node(), dict(
            (p["metadata"]["uid"], pod_key(p)) for p in pods))], self.remaining, self.sleep, self.p["wait_sleep"]))
        return [{"pod": k, "pdbs": [], "message": "%s evicted but still terminating" % k}
                for k in (pod_key(p) for p in pods) if k in left]

    def wait_claims_released(self, version, held, claim_pods, labels):
        """Poll the node's known claims by name until none keeps the driver on the node; then one final LIST."""
        watched = set((v["namespace"], v["name"]) for v in held)
        for pod in claim_pods:
            for name in pod_claims(pod):
                watched.add((pod["metadata"]["namespace"], name))
        last_report = 0
        delays = growing_delays(self.p["wait_sleep"])
        while True:
            still = self.claims_still_held(version, watched, labels)
            if not still:
                final = gather_claim_views(self.api, node=self.node)
                self.note_non_pod_claims(final["non_pod_claims"])
                remaining = final["blocking"]
                if not remaining:
                    self.event("no ResourceClaim allocated or reserved on %s" % self.node)
                    return
                watched.update((v["namespace"], v["name"]) for v in remaining)
                still = remaining
            if self.clock() - last_report >= 5:
                last_report = self.clock()
                self.event("waiting for %d claim(s): %s" % (len(still), describe_claims(still)))
            if self.remaining() <= 0:
                raise DrainError(
                    "%d ResourceClaim(s) still allocated or reserved on %s after the timeout: %s. The node stays "
                    "cordoned and the DRA driver was not touched, so it can still unprepare them. Next: check "
                    "the consumers listed, then run the drain again." % (len(still), self.node, describe_claims(still)),
                    {"claims": view_names(still)})
            self.sleep(next(delays))

    def watched_claims(self, version, watched):
        """The watched claims that still exist. One request per namespace: a GET for a lone claim, else a LIST."""
        by_namespace = {}
        for namespace, name in watched:
            by_namespace.setdefault(namespace, set()).add(name)
        claims = []
        for namespace, names in sorted(by_namespace.items()):
            if len(names) == 1:
                one = self.api.get_or_none(self.api.resource_path("resourceclaims", namespace=namespace,
                                                                  name=next(iter(names)), version=version))
                claims.extend([one] if one else [])
            else:
                path = self.api.resource_path("resourceclaims", namespace=namespace, version=version)
                claims.extend(c for c in self.api.list_items(path) if c["metadata"]["name"] in names)
        return claims

    def claims_still_held(self, version, watched, labels):
        """Views of the watched claims that still keep the driver on the node (see claims.claims.blocks_node).

        Consumers are placed from one LIST of the node's pods; a claim none of whose consumers runs
        here is checked for a live consumer elsewhere (GET by name, until one is found).
        """
        claims = [c for c in self.watched_claims(version, watched) if c.get("status")]
        node_pods = self.pods_on_node() if claims else []
        pods = dict((p["metadata"]["uid"], pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                    for p in node_pods)
        used = claims_used_by(node_pods, claims)
        still = []
        for claim in claims:
            if not any(ref.get("uid") in pods for ref in reserved_for(claim)):
                self.find_consumer_elsewhere(claim, pods)
            view = claim_view(claim, {self.node: labels}, pods, ({}, set()), listed=self.group_consumers)
            if blocks_node(view, self.node, used):
                view["missing_consumers"] = []
                still.append(view)
            elif holds_devices(view) and held_for_non_pods_only_off_node(view, used):
                self.note_non_pod_claims([view])
        return still

    def note_non_pod_claims(self, views):
        for view in views:
            self.non_pod[view_name(view)] = view

    def non_pod_reports(self):
        """The claims on the node reserved for consumers that are not pods: claim, consumers, what to do."""
        return [{"claim": key, "consumers": [consumer_label(c) for c in view["non_pod_consumers"]],
                 "message": non_pod_message(view)} for key, view in sorted(self.non_pod.items())]

    def find_consumer_elsewhere(self, claim, pods):
        """Add to `pods` the first consumer pod of the claim that exists (on another node)."""
        namespace = claim["metadata"]["namespace"]
        for ref in reserved_for(claim):
            if ref.get("resource") != "pods" or ref.get("apiGroup"):
                continue
            pod = self.api.get_or_none("/api/v1/namespaces/%s/pods/%s" % (namespace, ref.get("name")))
            if pod is not None and pod["metadata"]["uid"] == ref.get("uid"):
                pods[ref["uid"]] = pod_ref(pod["spec"].get("nodeName"), pod["metadata"].get("ownerReferences"))
                return

    def remove_driver(self, labels, driver_pods):
        key = self.p["exclusion_label"]
        if not node_excluded(labels, key):
            self.patch_node({"metadata": {"labels": {key: EXCLUSION_VALUE}}})
            self.event("labelled %s %s=true: driver DaemonSet pods leave the node" % (self.node, key))
        if driver_pods:
            still = self.wait_pods_gone(driver_pods)
            if still:
                raise DrainError("driver pod(s) %s still on %s after the timeout; every claim was released. Check "
                                 "the DaemonSet's node affinity for %s." % (", ".join(f["pod"] for f in still),
                                                                            self.node, key),
                                 {"driver_pods": [f["pod"] for f in still]})
            self.changed = True
            self.event("driver pod(s) gone: %s" % ", ".join(pod_key(p) for p in driver_pods))

    # ------------------------------------------------------------------ return to service
    def return_to_service(self):
        node = self.get_node()
        drivers = self.driver_daemonsets()
        labels = node["metadata"].get("labels") or {}
        annotations = node["metadata"].get("annotations") or {}
        cordoned = is_cordoned(node)
        was_cordoned = annotations.get(CORDON_ANNOTATION) == "true"
        uncordon = cordoned and (self.p["uncordon"] == "always" or
                                 (self.p["uncordon"] == "if_drain_cordoned" and not was_cordoned))
        summary = {"node": self.node, "was_cordoned": was_cordoned,
                   "would_change": self.p["exclusion_label"] in labels or uncordon or CORDON_ANNOTATION in annotations,
                   "uncordon": uncordon}
        if self.check_mode:
            self.changed = summary["would_change"]
            return summary
        t = self.clock()
        if self.p["exclusion_label"] in labels:
            self.patch_node({"metadata": {"labels": {self.p["exclusion_label"]: None}}})
            self.event("removed label %s" % self.p["exclusion_label"])
        self.wait_driver_ready(drivers)
        self.wait_slices_published()
        self.phase("driver_back", t)
        t = self.clock()
        patch = {}
        if uncordon:
            patch["spec"] = {"unschedulable": None}
        if CORDON_ANNOTATION in annotations:
            patch["metadata"] = {"annotations": {CORDON_ANNOTATION: None}}
        if patch:
            self.patch_node(patch)
            self.event("uncordoned %s" % self.node if uncordon else "left %s cordoned" % self.node)
        self.phase("uncordon", t)
        summary.update(phases=self.phases, events=self.events)
        return summary

    def wait_driver_ready(self, drivers):
        """A ready, not terminating pod on the node of each driver DaemonSet that admits the node once the
        exclusion label is gone (or, with driver_pod_labels alone, of any pod carrying them)."""
        node = self.get_node()
        expected = daemonsets_placing(node, drivers)
        if drivers and not expected:
            self.event("no driver DaemonSet places a pod on %s; none waited for" % self.node)
        if not (expected or self.p["driver_pod_labels"]):
            return
        delays = growing_delays(self.p["wait_sleep"])
        while True:
            ready = ready_driver_pods(self.pods_on_node(), self.driver_refs, self.p["driver_pod_labels"])
            missing = missing_driver_pods(expected, ready) if expected else ([] if ready else ["driver pod"])
            if not missing:
                self.event("driver pod(s) ready: %s" % ", ".join(pod_key(p) for p in ready))
                return
            if self.remaining() <= 0:
                raise DrainError("no ready pod of %s on %s after the timeout; the node stays cordoned. Check "
                                 "the driver DaemonSet's rollout and its pod logs." % (", ".join(missing), self.node),
                                 {"driver_daemonsets_not_ready": missing})
            self.sleep(next(delays))

    def wait_slices_published(self):
        labels = (self.get_node().get("metadata") or {}).get("labels") or {}  # after the exclusion label went
        for driver in self.p["drivers"]:
            delays = growing_delays(self.p["wait_sleep"])
            while not self.node_has_slices(driver, labels):
                if self.remaining() <= 0:
                    raise DrainError("driver %s publishes no ResourceSlice for %s after the timeout; the node "
                                     "stays cordoned. Check the driver pod's logs." % (driver, self.node))
                self.sleep(next(delays))
            self.event("%s publishes ResourceSlices for %s" % (driver, self.node))

    def node_has_slices(self, driver, labels):
        """The driver publishes for the node (kube.slices.driver_publishes_for_node: a current slice covers it by
        nodeName, allNodes or a nodeSelector admitting its labels, per device too): from the driver's slices."""
        path = self.api.resource_path("resourceslices")
        every = self.api.list_items(path, {"fieldSelector": "spec.driver=%s" % driver})
        return driver_publishes_for_node(every, driver, self.node, labels)


def daemonsets_placing(node, daemonsets):
    """namespace/name of the DaemonSets that place a pod on the node (its labels and taints, the exclusion label)."""
    return [object_key(ds) for ds in daemonsets if select_nodes_for_daemonset([node], ds)[0]]


def ready_driver_pods(pods, driver_refs, driver_labels=None):
    """The node's driver pods (of those DaemonSets, or carrying those labels) that are ready and not terminating."""
    plan = plan_drain(pods, driver_daemonsets=driver_refs, driver_labels=driver_labels)
    return [p for p in plan["driver_pods"] if pod_ready(p) and not p["metadata"].get("deletionTimestamp")]


def missing_driver_pods(expected, ready_pods):
    """The DaemonSets (namespace/name) in `expected` with no pod among `ready_pods`."""
    have = set()
    for pod in ready_pods:
        ref = controller_of(pod)
        if ref and ref.get("kind") == "DaemonSet":
            have.add("%s/%s" % (pod["metadata"].get("namespace"), ref.get("name")))
    return [ref for ref in expected if ref not in have]


def pod_group_consumers(views):
    """{(namespace, claim name): [consumer reference]} of the PodGroups among the views' consumers (reserving or
    listing the claim): while the drain waits, a group stays a consumer of its claim also when the scheduler drops
    its reservation (which it does while none of the group's pods can be placed, as on a cordoned node)."""
    out = {}
    for view in views:
        refs = [{"apiGroup": c["api_group"], "resource": c["resource"], "name": c["name"], "uid": c["uid"]}
                for c in view["consumers"] if c["kind"] == CONSUMER_POD_GROUP and c["exists"] is not False]
        if refs:
            out[(view["namespace"], view["name"])] = refs
    return out


def describe_claims(views):
    parts = []
    for view in views:
        who = ", ".join("%s%s" % (consumer_label(c), consumer_note(c)) for c in view["consumers"]) or "no consumer"
        parts.append("%s/%s [%s] by %s" % (view["namespace"], view["name"], view["state"], who))
    return "; ".join(parts)
