# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_device_taint's effect Evict against the API: after the rule is written with effect NoSchedule, the pods
using the devices are evicted wave by wave through the Eviction API (devices.evictions decides the waves and
what is still waited for).

The evictions are the node drain's (kube.evictions_service.PodEvictor): policy/v1 Eviction, a refusal by a
PodDisruptionBudget retried with backoff until the deadline, pods gone or terminating left alone.

Requests: per namespace of the affected claims one pod LIST and one PodDisruptionBudget LIST (the plan); the
evictions; while waiting for a wave, per namespace of the wave one pod LIST and one watch (another of each when
the watch ends first, every minute at the longest; a LIST per poll where the server refuses watches); while
waiting for the claims, one claim LIST and one pod LIST (Table form) per poll. With wait false (a round of a role's
until-loop) there is no poll: each round evicts the pods of the first wave not gone yet, one request per pod
(a refusal is retried by the next round), and says what is still waited for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices.evictions import (
    CLAIMS_RELEASED, WAVE_EVICTED, budget_views, claims_not_freed, eviction_failure_message, eviction_report,
    eviction_waiting_for, evicted_claims, not_evicted, not_freed_message, plan_waves, present, wave_scopes,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import DeviceTaintError
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import affected_claims
from ansible_collections.dra.admin.plugins.module_utils.kube.evictions_service import PodEvictor, wait_pods_gone
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import pod_key


def namespaces_of(affected):
    return sorted(set(c["namespace"] for c in evicted_claims(affected)))


class DeviceEviction(object):
    """The evictions of one dra_device_taint run with effect Evict.

    task: the run (devices.taints_service.DeviceTaint: api, params, check mode, clock, sleep, started, selector);
    devices: the selected devices; taint: the rule's taint (tolerations are judged against it as NoExecute).
    """

    def __init__(self, task, devices, taint, data_version):
        self.task = task
        self.api = task.api
        self.devices = devices
        self.taint = taint
        self.data_version = data_version
        self.deadline = task.started + task.p["wait_timeout"]
        self.evictor = PodEvictor(self.api, self.remaining, clock=task.clock, sleep=task.sleep)
        self.changed = False
        self.pods = []
        self.pdbs = []
        self.after = None  # the affected claims at the end of a one-call run

    def remaining(self):
        return self.deadline - self.task.clock()

    def read_pods(self, namespaces):
        """The pods of the namespaces (whole objects: labels, owners, UIDs)."""
        return [p for namespace in namespaces for p in self.api.list_items("/api/v1/namespaces/%s/pods" % namespace)]

    def plan(self, affected):
        """The waves for the claims as read now, and the budgets that cover them (the pods and budgets of the
        claims' namespaces are kept: the pods to evict are taken from them)."""
        namespaces = namespaces_of(affected)
        self.pods = self.read_pods(namespaces)
        self.pdbs = [b for namespace in namespaces
                     for b in self.api.list_items("/apis/policy/v1/namespaces/%s/poddisruptionbudgets" % namespace)]
        waves = plan_waves(affected, self.pods, self.pdbs)
        names = set(b for w in waves for b in w["pod_disruption_budgets"])
        return waves, budget_views(self.pdbs, names)

    def to_evict(self, wave):
        """The wave's pods that still exist and are not terminating (objects, as the plan read them; one gone since
        is answered 404 and needs nothing more)."""
        left = set(present(wave, self.pods))
        return [p for p in self.pods if pod_key(p) in left and not p["metadata"].get("deletionTimestamp")]

    def evict(self, wave, retry):
        pods = self.to_evict(wave)
        refused = self.evictor.evict_all(pods, retry=retry)
        self.changed = self.changed or len(refused) < len(pods)
        return refused

    # ---------------------------------------------------------------- dry run and check mode
    def preview(self, affected):
        """The waves that would be evicted, their budgets and the claims the evictions cannot free; no request
        but reads."""
        waves, budgets = self.plan(affected)
        return waves, {"waves": [dict((k, v) for k, v in w.items() if k != "uids") for w in waves],
                       "pod_disruption_budgets": budgets, "claims_not_freed": claims_not_freed(affected, self.pods)}

    def refuse_what_cannot_be_freed(self, affected, rule_exists):
        """Before any write of a run: refuse when evicting the pods cannot free a device (devices.evictions.
        claims_not_freed), naming the claims, their controllers and what would free them."""
        namespaces = namespaces_of(affected)
        if not namespaces:
            return
        not_freed = claims_not_freed(affected, self.read_pods(namespaces))
        if not_freed:
            raise DeviceTaintError(not_freed_message(self.task.name, not_freed, rule_exists),
                                   {"claims_not_freed": not_freed})

    # ---------------------------------------------------------------- one call
    def run(self, affected):
        """Evict the waves in order, each until its pods are gone, then wait for the claims to be released.
        Returns (the module's fields, the failure message when the time is up or a refusal is final, else None);
        in check mode only the plan."""
        waves, budgets = self.plan(affected)
        out = {"pod_disruption_budgets": budgets, "not_evicted": []}
        if self.task.check_mode:
            self.changed = any(self.to_evict(w) for w in waves)
            out.update(eviction_report(affected, waves), claims_released=not evicted_claims(affected))
            return out, None
        failures, left = [], []
        for index, wave in enumerate(waves):
            failures = self.evict(wave, retry=True) or self.wait_gone(wave)
            if failures:
                left = [w["wave"] for w in waves[index + 1:]]
                break
        held = [] if failures else self.wait_released()
        self.after = after = self.affected_now()
        out.update(eviction_report(after, waves), not_evicted=not_evicted(failures, waves),
                   claims_released=not failures and not held)
        if failures or held:
            return out, eviction_failure_message(self.task.name, self.task.p["wait_timeout"], out["not_evicted"],
                                                 left, held)
        return out, None

    def wait_gone(self, wave):
        """Until the wave's pods are gone (kube.evictions_service.wait_pods_gone: per namespace of the wave a LIST,
        then a watch from its version); the pods still there at the deadline."""
        left = wait_pods_gone(self.api, wave_scopes(wave), self.remaining, self.task.sleep, self.task.p["wait_sleep"])
        return [{"pod": k, "reason": "terminating", "pdbs": [], "message": "%s evicted but still terminating" % k}
                for k in left]

    def affected_now(self):
        claims, pods = self.task.read_claims(self.data_version)
        return affected_claims(claims, self.devices, self.taint, pods, sel=self.task.selector)

    def wait_released(self):
        """Poll the claims until none the eviction concerns is still allocated a selected device; those left at
        the deadline (namespace/name)."""
        while True:
            held = sorted("%s/%s" % (c["namespace"], c["name"]) for c in evicted_claims(self.affected_now()))
            if not held or self.remaining() <= 0:
                return held
            self.task.sleep(self.task.p["wait_sleep"])

    # ---------------------------------------------------------------- one round (wait false)
    def step(self, affected):
        """One round: evict the pods of the first wave not gone yet (one request each; no retry), and say what
        the eviction waits for, as read before this round's evictions. Returns (fields, waiting_for, pending,
        failure message or None when the deadline has not passed or nothing is left)."""
        waves, budgets = self.plan(affected)
        waiting, pending, number = eviction_waiting_for(waves, self.pods, affected)
        refused = []
        if waiting == WAVE_EVICTED and not self.task.check_mode:
            refused = self.evict(waves[number - 1], retry=False)
        elif waiting == WAVE_EVICTED:
            self.changed = any(self.to_evict(w) for w in waves)
        out = {"pod_disruption_budgets": budgets, "waves_left": len([
            w for w in waves if present(w, self.pods)]), "not_evicted": not_evicted(refused, waves),
            "claims_released": waiting not in (WAVE_EVICTED, CLAIMS_RELEASED)}
        out.update(eviction_report(affected, waves))
        failure = None
        if waiting and self.task.p.get("since") and self.remaining() <= 0:
            left = [w["wave"] for w in waves if number is not None and w["wave"] > number]
            refused = set(f["pod"] for f in out["not_evicted"])
            stuck = out["not_evicted"] + [
                {"pod": k, "wave": number, "reason": "terminating", "pod_disruption_budgets": [], "message": ""}
                for k in pending if waiting == WAVE_EVICTED and k not in refused]
            failure = eviction_failure_message(self.task.name, self.task.p["wait_timeout"], stuck, left,
                                               pending if waiting == CLAIMS_RELEASED else ())
        return out, waiting, pending, failure
