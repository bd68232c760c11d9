# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Taking devices out of service through the Eviction API (dra_device_taint's effect Evict): the waves, what
is still to wait for, and what kept pods from being evicted.

The rule is written with effect NoSchedule (no new allocation on the devices); dra.admin then evicts the pods
that use the devices itself, through policy/v1 Eviction, so that PodDisruptionBudgets hold it back where
they say so (kube-controller-manager's NoExecute eviction deletes pods and respects no budget).

The pods go in waves, one wave after the other: pods that must go together are in the same wave - the pods
sharing a claim (the claim is released only when all of them are gone), the pods one PodDisruptionBudget
covers (the budget then paces them, one refusal after another, within the wave) and the pods of one Job (a
job that loses one pod is disrupted anyway) - and unrelated workloads are not disrupted at the same time.
Which pods: those of the claims allocated a selected device that do not tolerate the taint, taken as
NoExecute, for ever (devices.taints.affected_claims: toleration none or seconds), the pods a NoExecute taint
would evict.

Pure functions over the JSON objects of the API (pods, PodDisruptionBudgets, claims): no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import named_claims_recreated
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import (
    controller_of, covering_budgets, object_key, pod_key,
)

# The mode: not a Kubernetes taint effect. The rule is written with RULE_EFFECT; dra.admin evicts.
EVICT = "Evict"
RULE_EFFECT = "NoSchedule"
# Claims whose pods are evicted: those not tolerating the taint (as NoExecute) for ever.
EVICTED_TOLERATIONS = ("none", "seconds")

# The waits of an eviction, in order.
WAVE_EVICTED = "wave_evicted"
CLAIMS_RELEASED = "claims_released"
WAIT_TEXT = {
    WAVE_EVICTED: "the pods of the next eviction wave to be evicted and gone (PodDisruptionBudgets permitting)",
    CLAIMS_RELEASED: "the claims of the evicted pods to release the devices",
}


def job_of(pod):
    """namespace/name of the Job that controls the pod, or None."""
    ref = controller_of(pod)
    if ref and ref.get("kind") == "Job":
        return "%s/%s" % ((pod.get("metadata") or {}).get("namespace"), ref.get("name"))
    return None


def evicted_claims(affected):
    """The affected claims (devices.taints.affected_claims) whose pods are evicted."""
    return [c for c in affected if c["toleration"] in EVICTED_TOLERATIONS]


def claims_not_freed(affected, pods):
    """The claims to be freed by evicting their pods that the eviction cannot free: [{claim, devices, pods,
    controllers}], sorted by claim.

    affected: devices.taints.affected_claims(); pods: the pod objects of their namespaces. A claim the pods name
    by resourceClaimName while a controller owns them (claims.claims.named_claims_recreated) is reserved again
    by each replacement, still allocated the tainted device (NoSchedule keeps only new allocations off it):
    the evictions would go on, wave after wave, and the device would stay in use.
    """
    recreated = named_claims_recreated(pods)
    out = []
    for claim in evicted_claims(affected):
        controllers = recreated.get((claim["namespace"], claim["name"]))
        if controllers:
            out.append({"claim": "%s/%s" % (claim["namespace"], claim["name"]), "devices": claim["devices"],
                        "pods": ["%s/%s" % (claim["namespace"], p) for p in claim["pods"]],
                        "controllers": controllers})
    return sorted(out, key=lambda c: c["claim"])


FREE_THE_CLAIM = ("to free the device, scale the workload to zero replicas (or delete it), or have its pod template "
                  "use a resourceClaimTemplateName so that each pod gets a claim of its own; the claim is "
                  "deallocated once no pod uses it. Then run again. To keep only new allocations off the devices "
                  "without evicting, use effect NoSchedule")


def not_freed_message(name, not_freed, rule_exists):
    """The refusal of effect Evict when evictions cannot free a device (claims_not_freed)."""
    return ("DeviceTaintRule %s: evicting the pods cannot free the device(s) of ResourceClaim(s) %s: their pods are "
            "recreated by %s and the replacements name the same claim, which stays allocated the device(s) %s. "
            "Nothing was evicted%s; %s" % (
                name, ", ".join(c["claim"] for c in not_freed),
                ", ".join(sorted(set(k for c in not_freed for k in c["controllers"]))),
                ", ".join(sorted(set(d for c in not_freed for d in c["devices"]))),
                " (the rule stays as it was)" if rule_exists else " and no rule was written", FREE_THE_CLAIM))


class _Groups(object):
    """Union-find over pod keys."""

    def __init__(self, keys):
        self.parent = dict((k, k) for k in keys)

    def find(self, key):
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def join(self, keys):
        keys = [k for k in keys if k in self.parent]
        for other in keys[1:]:
            self.parent[self.find(other)] = self.find(keys[0])

    def groups(self):
        out = {}
        for key in self.parent:
            out.setdefault(self.find(key), []).append(key)
        return sorted((sorted(members) for members in out.values()), key=lambda m: m[0])


def plan_waves(affected, pods, pdbs):
    """The eviction waves: [{wave, pods, claims, pod_disruption_budgets, jobs, unmanaged, terminating}], in order.

    affected: devices.taints.affected_claims() (pods named without namespace); pods: the pod objects of their
    namespaces (a pod named by a claim but not among them is gone and not planned); pdbs: the
    PodDisruptionBudgets of those namespaces. Pods sharing a claim, covered by one budget or controlled by one
    Job are in one wave; waves are ordered by their first pod. unmanaged: pods no controller recreates;
    terminating: pods already being deleted (only waited for).
    """
    by_key = dict((pod_key(p), p) for p in pods)
    claims_of = {}
    for claim in evicted_claims(affected):
        for name in claim["pods"]:
            key = "%s/%s" % (claim["namespace"], name)
            if key in by_key:
                claims_of.setdefault(key, set()).add("%s/%s" % (claim["namespace"], claim["name"]))
    groups = _Groups(claims_of)
    budgets = dict((key, covering_budgets(by_key[key], pdbs)) for key in claims_of)
    jobs = dict((key, job_of(by_key[key])) for key in claims_of)
    for members in _members_by(claims_of, lambda key: claims_of[key]):
        groups.join(members)
    for members in _members_by(claims_of, lambda key: budgets[key]):
        groups.join(members)
    for members in _members_by(claims_of, lambda key: [jobs[key]] if jobs[key] else []):
        groups.join(members)
    waves = []
    for number, members in enumerate(groups.groups(), 1):
        waves.append({
            "wave": number, "pods": members,
            "claims": sorted(set(c for k in members for c in claims_of[k])),
            "pod_disruption_budgets": sorted(set(b for k in members for b in budgets[k])),
            "jobs": sorted(set(jobs[k] for k in members if jobs[k])),
            "unmanaged": [k for k in members if controller_of(by_key[k]) is None],
            "terminating": [k for k in members if (by_key[k].get("metadata") or {}).get("deletionTimestamp")],
            "uids": dict((k, (by_key[k].get("metadata") or {}).get("uid")) for k in members),
        })
    return waves


def _members_by(keys, values_of):
    """[[keys sharing a value]] for each value any key has."""
    out = {}
    for key in keys:
        for value in values_of(key):
            out.setdefault(value, []).append(key)
    return list(out.values())


def wave_view(wave):
    """A wave as the module returns it (without the pods' UIDs)."""
    return dict((k, v) for k, v in wave.items() if k != "uids")


def budget_views(pdbs, names):
    """The PodDisruptionBudgets named, as a dry run shows them: name, disruptions_allowed, current_healthy,
    desired_healthy, expected_pods (null before the disruption controller has computed them), sorted."""
    out = []
    for pdb in pdbs:
        if object_key(pdb) not in names:
            continue
        status = pdb.get("status") or {}
        out.append({"name": object_key(pdb), "disruptions_allowed": status.get("disruptionsAllowed"),
                    "current_healthy": status.get("currentHealthy"), "desired_healthy": status.get("desiredHealthy"),
                    "expected_pods": status.get("expectedPods"), "spec": dict((k, v) for k, v in (
                        pdb.get("spec") or {}).items() if k in ("minAvailable", "maxUnavailable"))})
    return sorted(out, key=lambda b: b["name"])


def present(wave, pods):
    """The wave's pods that still exist (the same UID; terminating ones included), sorted."""
    uids = dict((pod_key(p), (p.get("metadata") or {}).get("uid")) for p in pods)
    return sorted(k for k in wave["pods"] if uids.get(k) is not None and uids.get(k) == wave["uids"].get(k))


def wave_scopes(wave):
    """The pod collections a wave's pods are awaited in: per namespace its pods' path, no query, and the
    wave's pods there (UID to namespace/name)."""
    by_namespace = {}
    for key, uid in wave["uids"].items():
        by_namespace.setdefault(key.split("/", 1)[0], {})[uid] = key
    return [("/api/v1/namespaces/%s/pods" % namespace, None, waiting)
            for namespace, waiting in sorted(by_namespace.items())]


def eviction_waiting_for(waves, pods, affected):
    """What the eviction still waits for: (wait, pending names, the wave's number or None).

    waves: plan_waves() of the run; pods: the pods as listed now; affected: devices.taints.affected_claims() as
    read now. The first wave whose pods are not all gone (WAVE_EVICTED, its pods still there); then the claims
    still allocated a selected device that their pods did not tolerate (CLAIMS_RELEASED, the claims); else
    (None, [], None).
    """
    for wave in waves:
        left = present(wave, pods)
        if left:
            return WAVE_EVICTED, left, wave["wave"]
    held = sorted("%s/%s" % (c["namespace"], c["name"]) for c in evicted_claims(affected))
    if held:
        return CLAIMS_RELEASED, held, None
    return None, [], None


def not_evicted(failures, waves):
    """What kept pods from being evicted: [{pod, wave, reason, pod_disruption_budgets, message}], sorted.

    failures: kube.evictions_service.PodEvictor's refusals ({pod, reason, pdbs, message}); reason: budget (a
    PodDisruptionBudget refused it), namespace (its namespace is being deleted), error (another refusal), or
    terminating (evicted, but not gone in time)."""
    wave_of = dict((k, w["wave"]) for w in waves for k in w["pods"])
    out = [{"pod": f["pod"], "wave": wave_of.get(f["pod"]), "reason": f.get("reason") or "error",
            "pod_disruption_budgets": list(f.get("pdbs") or []), "message": f["message"]} for f in failures]
    return sorted(out, key=lambda f: f["pod"])


def eviction_failure_message(name, timeout, refused, waves_left, held_claims=()):
    """The failure when the time is up: the rule stays (NoSchedule), the pods not evicted keep running."""
    parts = []
    if refused:
        parts.append("%d pod(s) not evicted: %s" % (len(refused), "; ".join(
            "%s (wave %s): %s" % (f["pod"], f["wave"], f["message"]) if f["reason"] != "terminating"
            else "%s (wave %s): evicted but still terminating" % (f["pod"], f["wave"]) for f in refused)))
    if waves_left:
        parts.append("waves not started: %s" % ", ".join(str(w) for w in waves_left))
    if held_claims:
        parts.append("claims still holding the devices: %s" % ", ".join(held_claims))
    budgets = sorted(set(b for f in refused for b in f["pod_disruption_budgets"]))
    advice = ("relax the PodDisruptionBudget(s) %s or raise wait_timeout and run again" % ", ".join(budgets)
              if budgets else "raise wait_timeout and run again")
    return ("DeviceTaintRule %s is in place with effect %s (no new allocation on the devices), but after %ss the "
            "eviction is not over: %s. Pods not evicted keep running and keep their devices; %s, or lift the rule "
            "with state=absent" % (name, RULE_EFFECT, timeout, ". ".join(parts) or "no report", advice))


def eviction_report(after, waves):
    """What effect Evict returns beside devices.taints.report(): the waves as planned, evicted (their pods that
    no longer use the devices) and still_holding (the pods using the devices now).

    after: devices.taints.affected_claims() as read at the end."""
    planned = [k for w in waves for k in w["pods"]]
    still = sorted(set("%s/%s" % (c["namespace"], p) for c in after for p in c["pods"]))
    return {"waves": [wave_view(w) for w in waves], "evicted": sorted(k for k in planned if k not in still),
            "still_holding": still}
