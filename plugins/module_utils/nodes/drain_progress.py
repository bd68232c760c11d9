# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The node drain phase by phase (role drain, dra_node_drain with ``wait: false``): which of its waits is not
over yet and what it still waits for, and the one drain result made of the per-phase runs (filter
dra.admin.drain_result). The progress fields and line are ``common.progress``'s; how many rounds a role's
timeout allows is ``common.waits.wait_retries``.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.progress import module_fields, progress, ran

# The waits of a node drain, in order: each must be over before the writes of the next phase.
CLAIM_PODS_GONE = "claim_pods_gone"
OTHER_PODS_GONE = "other_pods_gone"
CLAIMS_RELEASED = "claims_released"
DRIVER_PODS_GONE = "driver_pods_gone"
DRAIN_WAITS = (CLAIM_PODS_GONE, OTHER_PODS_GONE, CLAIMS_RELEASED, DRIVER_PODS_GONE)

# What each wait waits for, for the progress line.
WAIT_TEXT = {
    CLAIM_PODS_GONE: "the evicted pods that use ResourceClaims to be gone",
    OTHER_PODS_GONE: "the other evicted pods to be gone",
    CLAIMS_RELEASED: "the ResourceClaims on the node to be released",
    DRIVER_PODS_GONE: "the DRA driver pods to leave the node",
}

# The drain phase (the module's `phases` key) whose time a wait is part of.
WAIT_PHASE = {
    CLAIM_PODS_GONE: "evict_claim_pods",
    OTHER_PODS_GONE: "evict_other_pods",
    CLAIMS_RELEASED: "wait_claims_released",
    DRIVER_PODS_GONE: "remove_driver",
}


def drain_waiting_for(claim_pods, other_pods, held_claims, driver_pods, label_set):
    """The first wait of the drain not over yet and what it still waits for: (wait, sorted pending names).

    claim_pods, other_pods and driver_pods: the node's pods of each kind (namespace/name) as listed now,
    terminating ones included; held_claims: the claims that still keep the driver on the node; label_set:
    whether the node carries the exclusion label (the driver was told to leave). (None, []) when the
    drain has nothing left to wait for; (DRIVER_PODS_GONE, []) when only the label is still to be set.
    """
    for wait, names in ((CLAIM_PODS_GONE, claim_pods), (OTHER_PODS_GONE, other_pods),
                        (CLAIMS_RELEASED, held_claims)):
        if names:
            return wait, sorted(names)
    if driver_pods or not label_set:
        return DRIVER_PODS_GONE, sorted(driver_pods)
    return None, []


def drain_progress(waiting_for, pending, since, now):
    """The progress fields of a drain run with wait=false (common.progress.progress with the drain's texts)."""
    return progress(waiting_for, pending, since, now, WAIT_TEXT)


def merge_drain_steps(steps, waits):
    """One drain result, as dra_node_drain returns it with `wait: true`, from the role's per-phase runs.

    steps: the results of the runs with `wait: false`, in order (the first one's plan is the drain's: the
    eviction order and the pods and claims it found); waits: {wait name: the until-loop's last result}.
    Phases add up (a wait's seconds go to the phase it belongs to); events run in order; changed is whether
    any step changed something. Steps that did not run (skipped) are left out.
    """
    ran_steps = [s for s in steps if ran(s)]
    if not ran_steps:
        return {}
    first, last = ran_steps[0], ran_steps[-1]
    out = module_fields(first, also=("phases", "events", "api_requests"))
    out["non_pod_claims"] = last.get("non_pod_claims", first.get("non_pod_claims", []))
    phases = {}
    events = []
    for step in ran_steps:
        for name, seconds in (step.get("phases") or {}).items():
            phases[name] = round(phases.get(name, 0.0) + seconds, 2)
        events.extend(step.get("events") or [])
    # A wait's time: from the run or wait before it (all count from the same start) to the wait's last round.
    waited = [r for r in ((waits or {}).get(w) for w in DRAIN_WAITS) if ran(r)]
    marks = [r["elapsed"] for r in ran_steps + waited if r.get("elapsed") is not None]
    for wait in DRAIN_WAITS:
        result = (waits or {}).get(wait)
        if not ran(result) or result.get("elapsed") is None:
            continue
        before = max([m for m in marks if m < result["elapsed"]] or [result["elapsed"]])
        phase = WAIT_PHASE[wait]
        phases[phase] = round(phases.get(phase, 0.0) + result["elapsed"] - before, 2)
        events.append("%6.1fs %s after %d round(s)" % (result["elapsed"], wait, result.get("attempts") or 1))
    events.sort(key=lambda line: float(line.split("s", 1)[0]))
    out.update(changed=any(s.get("changed") for s in ran_steps), phases=phases, events=events,
               api_requests=sum(s.get("api_requests") or 0 for s in ran_steps))
    return out
