# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Why a claim is pending: per pod (or per claim without a pod), per node and per request, what the
scheduler's allocator finds (``allocation.search``), summed up in a few numbers and one sentence.

A pod's claims are allocated together on one node: the nodes the pod can run on (``kube/selection.pod_refusal``) and
that admit its claims already allocated are searched; the verdict is ``fits`` on the nodes where a fit is
proven, ``cannot_tell`` where a selector cannot be evaluated here, ``does_not_fit`` otherwise. A claim no
pod uses yet is explained on every node.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.dra.admin.plugins.module_utils.allocation import extended, model, search
from ansible_collections.dra.admin.plugins.module_utils.claims.capacity import allocator_rules
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import allocation, binding_waits, pod_claim_refs
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_fit import fit_refusal
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import pod_refusal
from ansible_collections.dra.admin.plugins.module_utils.kube.quantity import quantity
from ansible_collections.dra.admin.plugins.module_utils.kube.quota import claim_charge, quota_refusals

DETAIL_SUMMARY = "summary"
DETAIL_NODES = "nodes"
DETAIL_DEVICES = "devices"
DETAILS = (DETAIL_SUMMARY, DETAIL_NODES, DETAIL_DEVICES)
REASON_TEXT = {
    search.POOL_INCOMPLETE: "in a pool being updated",
    search.FEATURE_OFF: "need a feature that is off",
    search.CLASS_SELECTOR: "do not match the DeviceClass selector",
    search.REQUEST_SELECTOR: "do not match the request's selector",
    search.SELECTOR_ERROR: "make a selector fail",
    search.CANNOT_EVALUATE: "cannot be evaluated here",
    search.IN_USE: "are allocated to other claims",
    search.TAINTED: "are tainted and not tolerated",
    search.AVAILABLE: "are available",
}


def context(env, cluster, features):
    """The search context of a cluster read as explain_service.read_cluster gives it (classes by name, slices,
    claims, taint rules, server_version) with the scheduler's features."""
    rules = allocator_rules(cluster["server_version"])
    pool_rules = model.pool_rules(rules["release"], rules["taint_reader"])
    return search.Context(env, cluster["classes"], model.gather_pools(cluster["slices"], features, pool_rules),
                          model.allocated_devices(cluster["claims"]), cluster["rules"], features, pool_rules)


def _label(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def pod_claims(pod, claims_by_label, templates_by_label, quotas=()):
    """(allocated claims, search.Claim list to allocate, problems, waits) of a pod: claims from templates not made
    yet are taken from their template (the scheduler waits until they exist: a problem); waits: the problems that
    keep the pod from any node now (a claim that does not exist, or is being deleted, or one from a template that a
    ResourceQuota of the namespace refuses: kube.quota), also among problems."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    allocated, to_allocate, problems, waits = [], [], [], []
    charged = {}  # what the pod's earlier template claims add to the quotas' use
    template_of = dict((r.get("name"), r.get("resourceClaimTemplateName"))
                       for r in (pod.get("spec") or {}).get("resourceClaims") or [])
    for pod_name, claim_name, dummy in pod_claim_refs(pod):
        label = "%s/%s" % (namespace, claim_name)
        claim = claims_by_label.get(label) if claim_name else None
        if claim is None:
            template = templates_by_label.get("%s/%s" % (namespace, template_of.get(pod_name)))
            if template is None:
                waits.append("claim %s does not exist: the scheduler waits for it" % (claim_name or pod_name))
                continue
            refused = _quota_refusal(quotas, namespace, pod_name, template, charged)
            if refused:
                waits.append(refused)
                continue
            problems.append("the claim of %s from template %s is not made yet" % (pod_name, template_of.get(pod_name)))
            to_allocate.append(search.Claim("%s/<%s>" % (namespace, pod_name), (template.get("spec") or {}).get("spec")))
        elif (claim.get("metadata") or {}).get("deletionTimestamp"):
            waits.append("claim %s is being deleted: the scheduler waits until it is gone" % label)
        elif allocation(claim) is not None:
            allocated.append(claim)
            problems.extend(binding_problems(label, claim))
        else:
            to_allocate.append(search.Claim(label, claim.get("spec")))
    return allocated, to_allocate, problems + waits, waits


def binding_problems(label, claim):
    """What the claim's devices with binding conditions hold the pod for (kube.pod_claims.binding_waits)."""
    problems = []
    for wait in binding_waits(claim):
        if wait["failed"]:
            problems.append("claim %s: device %s failed binding (%s): the scheduler gives the allocation up and "
                            "tries again" % (label, wait["device"], ", ".join(wait["failed"])))
        else:
            problems.append("claim %s: device %s waits for its binding conditions (%s): the scheduler holds the pod "
                            "in PreBind until the driver sets them, or the binding timeout sends it back"
                            % (label, wait["device"], ", ".join(wait["waiting"])))
    return problems


def admitted_nodes(pod_spec, nodes):
    """The names of the nodes the pod's node filters admit (kube.selection.pod_refusal)."""
    return set((n.get("metadata") or {}).get("name") for n in nodes if pod_refusal(n, pod_spec) is None)


def claim_users(pods):
    """{"namespace/claim": [pod, ...]} of the claims the pods name (pod_claim_refs), read once for every pod's
    shared_claim_problems."""
    users = {}
    for pod in sorted(pods, key=_label):
        namespace = (pod.get("metadata") or {}).get("namespace")
        for claim_name in sorted(set(c for dummy, c, dummy2 in pod_claim_refs(pod) if c)):
            users.setdefault("%s/%s" % (namespace, claim_name), []).append(pod)
    return users


def shared_claim_problems(pod, to_allocate, users, nodes):
    """A claim of the pod, not allocated yet, that another pod waiting to be scheduled shares (users: claim_users
    of the pending pods), where no node admits both pods: the scheduler allocates it for whichever comes first, and
    on devices only that node may use the other then waits for good."""
    me = _label(pod)
    shared_with = {}
    for claim in to_allocate:
        for other in users.get(claim.label) or ():
            if _label(other) != me:
                shared_with.setdefault(_label(other), (other, []))[1].append(claim.label)
    mine = admitted_nodes(pod.get("spec") or {}, nodes) if shared_with else None
    problems = []
    for label in sorted(shared_with):
        other, shared = shared_with[label]
        theirs = admitted_nodes(other.get("spec") or {}, nodes)
        if mine and theirs and not mine & theirs:
            problems.append("claim %s is shared with pod %s, and no node admits both pods (nodes for this one: %s; "
                            "for the other: %s): once it is allocated for one of them on devices only that node may "
                            "use, the other cannot run" % (", ".join(sorted(shared)), label,
                                                           _nodes_text(sorted(mine)), _nodes_text(sorted(theirs))))
    return problems


def _quota_refusal(quotas, namespace, pod_name, template, charged):
    """Why a ResourceQuota refuses the claim of this template (adding the pod's earlier claims' charge), or None."""
    charge = claim_charge((template.get("spec") or {}).get("spec"))
    with_earlier = [dict(q, status=dict(q.get("status") or {}, used=_with(q, charged))) for q in quotas]
    refusals = quota_refusals(with_earlier, namespace, charge)
    for name, amount in charge.items():
        charged[name] = charged.get(name, 0) + amount
    if not refusals:
        return None
    return "the claim of %s from template %s is refused by %s: the pod waits (event FailedResourceClaimCreation)" % (
        pod_name, _label(template), "; ".join("ResourceQuota %s (%s: %s used, %s asked, hard %s)" % (
            r["quota"], r["resource"], r["used"], r["asked"], r["hard"]) for r in refusals))


def _with(quota, charged):
    """A quota's status.used with the pod's earlier template claims added."""
    used = dict((quota.get("status") or {}).get("used") or {})
    for name, amount in charged.items():
        used[name] = str(quantity(used.get(name, "0")) + amount)
    return used


def extended_resource_claim(pod, mapping, left_by_owner):
    """(search.Claim or None, the resources it covers, problems): the claim kube-scheduler would make for the pod's
    extended resources backed by DRA (mapping: ``extended.class_mapping``; empty when the feature is off). None
    when the pod asks for none, or its claim is made already (the pod's status names it: one of its claims).
    left_by_owner: ``extended.claims_by_owner`` of the cluster's claims (one left from an earlier attempt)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    resources = extended.pod_backed_resources(spec, mapping)
    if not resources or (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"):
        return None, (), []
    problems = ["claim %s for its extended resources is left from an earlier attempt: the scheduler deletes it "
                "and tries anew" % _label(claim) for claim in left_by_owner.get(meta.get("uid")) or []]
    label = "%s/%s" % (meta.get("namespace"), extended.CLAIM_NAME)
    return search.Claim(label, extended.claim_spec(spec, resources, mapping)), resources, problems


def _node_outcome(ctx, to_allocate, allocated, node, pod_spec, extended_resources=(), bound=None):
    meta = node.get("metadata") or {}
    name, labels = meta.get("name"), meta.get("labels") or {}
    refusal = pod_refusal(node, pod_spec) if pod_spec is not None else None
    if refusal is None and pod_spec is not None and bound is not None:
        refusal = fit_refusal(node, pod_spec, bound.get(name) or (), extended_resources)
    if refusal is None:
        for claim in allocated:
            if not model.allocation_admits(claim, name, labels):
                refusal = "claim %s is allocated to devices another node uses" % _label(claim)
    if refusal:
        return {"name": name, "verdict": search.DOES_NOT_FIT, "node_reason": refusal}, None
    plugin_served = extended.served_by_device_plugin(node, extended_resources)
    if plugin_served:
        return {"name": name, "verdict": search.CANNOT_TELL,
                "reason": "the node's allocatable lists %s: a device plugin serves it there, which is not modelled"
                          % ", ".join(plugin_served)}, None
    verdict, detail, node_search = search.node_verdict(ctx, to_allocate, name, labels)
    outcome = {"name": name, "verdict": verdict}
    if node_search.may_error:
        outcome["may_error"] = True
    if verdict == search.FITS:
        outcome["devices"] = ["%s %s - %s" % (claim, request.label, device.label) for claim, request, device in detail]
        warnings = search.eviction_warnings(ctx, detail)
        if warnings:
            outcome["warnings"] = warnings
    elif detail:
        outcome["reason"] = detail
    return outcome, node_search


def _request_summaries(to_allocate, searches):
    """Per request (and subrequest): the devices seen on the searched nodes with their first reason."""
    rows = []
    for ci, claim in enumerate(to_allocate):
        for ri, alternatives in enumerate(claim.requests):
            for ai, request in enumerate(alternatives):
                reasons, enough = {}, 0
                for node_search in searches:
                    found = node_search.candidates[(ci, ri, ai)]
                    reasons.update(found.reasons)
                    needed = len(found.all_devices) if found.all_devices is not None else request.count
                    enough += bool(needed) and len(found.usable) >= needed and not found.error
                rows.append(_request_row(claim, request, reasons, enough))
    return rows


def _request_row(claim, request, reasons, enough):
    excluded = {}
    for reason, dummy in reasons.values():
        if reason != search.AVAILABLE:
            excluded[reason] = excluded.get(reason, 0) + 1
    return {"claim": claim.label, "request": request.label, "device_class": request.class_name,
            "allocation_mode": request.mode, "count": request.count, "admin_access": request.admin,
            "considered": len(reasons), "excluded": excluded,
            "available": sum(1 for r, dummy in reasons.values() if r == search.AVAILABLE),
            "nodes_with_enough": enough, "_reasons": reasons}


def _verdict(outcomes, unchecked=()):
    """fits, does_not_fit or cannot_tell over the nodes. An allocator error on any searched node fails the
    pod's scheduling attempt: does_not_fit where the scheduler looks at every node, else cannot_tell when
    another node fits. A filter not modelled (`unchecked`) may refuse the erring node before the scheduler's
    DRA filter runs there (host ports, pod (anti-)affinity, topology spread come first): then the error may never
    happen, and another node that fits or cannot be told makes it cannot_tell too."""
    verdicts = set(o["verdict"] for o in outcomes)
    searched = sum(1 for o in outcomes if "node_reason" not in o)
    if search.ERROR in verdicts:
        if not verdicts & set((search.FITS, search.CANNOT_TELL)) or \
                (searched <= search.ALL_NODES_CHECKED_UP_TO and not unchecked):
            return search.DOES_NOT_FIT
        return search.CANNOT_TELL
    if search.FITS in verdicts:
        return search.CANNOT_TELL if any(o.get("may_error") for o in outcomes) else search.FITS
    return search.CANNOT_TELL if search.CANNOT_TELL in verdicts else search.DOES_NOT_FIT


def _count_by(outcomes, field):
    counts = {}
    for outcome in outcomes:
        if outcome.get(field):
            counts[outcome[field]] = counts.get(outcome[field], 0) + 1
    return counts


# Pod spec fields no node filter reads that differ between pods alike: a StatefulSet's replicas' host names.
SPEC_FIELDS_PER_POD = ("hostname", "subdomain")


def search_key(to_allocate, allocated, pod_spec, extended_resources=()):
    """What decides the searches of a pod: its spec (the node filters read it: node selection, tolerations,
    resource requests, host ports, inter-pod affinity, topology spread; its claims as the names its containers use,
    the claims themselves by their specs), its claims' specs, its claims already allocated, the extended resources
    its claim for them covers. Pods alike (a Deployment's, a Job's or a StatefulSet's pending replicas, pods that
    differ only in their claims' names) share one search (``explain``'s memo)."""
    spec = None
    if pod_spec is not None:
        spec = dict((k, v) for k, v in pod_spec.items() if k not in SPEC_FIELDS_PER_POD)
        spec["resourceClaims"] = [c.get("name") for c in pod_spec.get("resourceClaims") or ()]
    return json.dumps([spec, [c.spec_key for c in to_allocate], [_label(c) for c in allocated],
                       sorted(extended_resources)], sort_keys=True, default=repr)


def _relabelled(value, labels):
    """A copy of outcomes or rows with each claim label of an earlier pod replaced by this pod's."""
    text = json.dumps(value, default=repr)
    for old, new in labels.items():
        text = re.sub(re.escape(json.dumps(old)[1:-1]) + r"(?![\w.-])", json.dumps(new)[1:-1].replace("\\", "\\\\"),
                      text)
    return json.loads(text)


def _searched(ctx, to_allocate, allocated, nodes, pod_spec, extended_resources=(), bound=None):
    outcomes, searches = [], []
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        outcome, node_search = _node_outcome(ctx, to_allocate, allocated, node, pod_spec, extended_resources, bound)
        outcomes.append(outcome)
        if node_search is not None:
            searches.append(node_search)
    return outcomes, _request_summaries(to_allocate, searches), len(searches)


def _memoized(ctx, to_allocate, allocated, nodes, pod_spec, memo, extended_resources=(), bound=None):
    if memo is None:
        return _searched(ctx, to_allocate, allocated, nodes, pod_spec, extended_resources, bound)
    key = search_key(to_allocate, allocated, pod_spec, extended_resources)
    if key not in memo:
        memo[key] = ([c.label for c in to_allocate],
                     _searched(ctx, to_allocate, allocated, nodes, pod_spec, extended_resources, bound))
    labels, (outcomes, rows, searched) = memo[key]
    mapping = dict((old, c.label) for old, c in zip(labels, to_allocate) if old != c.label)
    if not mapping:
        return outcomes, rows, searched
    reasons = [row["_reasons"] for row in rows]
    rows = [dict(row, claim=mapping.get(row["claim"], row["claim"]), _reasons=r) for row, r in zip(rows, reasons)]
    return _relabelled(outcomes, mapping), rows, searched


def explain(ctx, subject, to_allocate, allocated, problems, nodes, pod_spec, detail=DETAIL_SUMMARY, memo=None,
            extended_resources=(), waits=(), bound=None, unchecked=(), scheduler=None, contested=False):
    """The explanation of one pod's (or one unused claim's) pending claims; see the module's RETURN. `memo` (a
    dict kept across calls with the same context) shares the searches of pods alike; `extended_resources`: the
    pod's extended resources backed by DRA, whose claim (``extended.claim_spec``) is among `to_allocate` (nodes
    where a device plugin serves one of them are answered cannot_tell). The verdict is the nodes' also when
    nothing is left to allocate (its node filters and its claims already allocated still decide), and
    does_not_fit while the pod `waits` for a claim (pod_claims). `bound`: {node: pods bound to it}, for the
    resources each node has left (kube.pod_fit.fit_refusal; None: not checked); `unchecked`: what the scheduler checks
    of the pod that is not modelled (kube.pod_fit.unchecked_filters): where the devices fit, the verdict is then
    cannot_tell; `scheduler`: kube-scheduler's own last word (kube.pod_fit.scheduler_verdict), put beside the
    explanation, and a problem where it found no node for a pod the explanation says fits; `contested`: a claim
    to allocate is shared with a pending pod no node admits together with this one (shared_claim_problems, among
    the problems): only the pod the scheduler takes first can run, so it is no plain fits either (cannot_tell); also
    set where kube-scheduler may map one of the pod's extended resources otherwise than the current DeviceClasses say
    (extended.unsure_mappings, its reason among the problems)."""
    outcomes, rows, searched = _memoized(ctx, to_allocate, allocated, nodes, pod_spec, memo, extended_resources,
                                         bound)
    verdict = search.DOES_NOT_FIT if waits else _verdict(outcomes, unchecked)
    if verdict == search.FITS and (unchecked or contested):
        verdict = search.CANNOT_TELL
    fits_on = [o["name"] for o in outcomes if o["verdict"] == search.FITS] if not waits else []
    result = dict(subject, claims=[c.label for c in to_allocate], verdict=verdict, problems=problems,
                  fits_on=fits_on,
                  cannot_tell_on=[o["name"] for o in outcomes if o["verdict"] == search.CANNOT_TELL],
                  nodes_considered=len(outcomes), nodes_searched=searched,
                  nodes_excluded=_count_by(outcomes, "node_reason"),
                  warnings=sorted(set(w for o in outcomes for w in o.get("warnings") or [])),
                  unchecked=list(unchecked), scheduler=scheduler)
    if scheduler and verdict == search.FITS and scheduler["reason"] == "Unschedulable":
        result["problems"] = list(problems) + [
            "kube-scheduler's last attempt (%s) found no node: %s - it and this explanation disagree (a view older than "
            "the cluster's now, a scheduler plugin or filter not modelled here, or a bug: the scheduler's answer is "
            "the one that counts)" % (scheduler.get("since") or "time unknown", scheduler["message"])]
    result["message"] = message(result, rows, outcomes)
    result["requests"] = [_public_row(row, detail) for row in rows]
    if detail in (DETAIL_NODES, DETAIL_DEVICES):
        result["nodes"] = outcomes
    return result


def _public_row(row, detail):
    out = dict((k, v) for k, v in row.items() if not k.startswith("_"))
    if detail == DETAIL_DEVICES:
        out["devices"] = [dict(device="%s/%s/%s" % key, reason=reason, **({"detail": info} if info else {}))
                          for key, (reason, info) in sorted(row["_reasons"].items())]
    return out


def _nodes_text(names, limit=5):
    shown = ", ".join(names[:limit])
    return shown + (" and %d more" % (len(names) - limit) if len(names) > limit else "")


def _row_text(row):
    parts = ["%d %s" % (n, REASON_TEXT.get(reason, reason)) for reason, n in
             sorted(row["excluded"].items(), key=lambda item: (-item[1], item[0]))]
    need = "all matching devices" if row["allocation_mode"] == "All" else "%s device(s)" % row["count"]
    return "request %s of %s needs %s of class %s: %d considered%s, %d available" % (
        row["request"], row["claim"], need, row["device_class"], row["considered"],
        (" (" + ", ".join(parts) + ")") if parts else "", row["available"])


def message(result, rows, outcomes):
    """One paragraph: the verdict, where, and the first request that explains it."""
    if result["verdict"] == search.FITS:
        if not result["claims"]:
            return "every claim of it is allocated"
        return "fits on %d node(s): %s%s" % (len(result["fits_on"]), _nodes_text(result["fits_on"]),
                                             "".join("; but " + p for p in result["problems"]))
    text = []
    if result["verdict"] == search.CANNOT_TELL and result["fits_on"]:
        unchecked = (", but kube-scheduler also checks what is not modelled here: %s" % ", ".join(result["unchecked"])
                     if result["unchecked"] else "")
        text.append("the devices and the node filters checked fit on %d node(s) (%s)%s" % (
            len(result["fits_on"]), _nodes_text(result["fits_on"]), unchecked))
    if result["problems"]:
        text.append("; ".join(result["problems"]))
    if result["cannot_tell_on"]:
        text.append("cannot tell on %s: %s" % (_nodes_text(result["cannot_tell_on"]), next(
            o.get("reason") for o in outcomes if o["verdict"] == search.CANNOT_TELL)))
    errors = [o for o in outcomes if o["verdict"] == search.ERROR]
    if errors:
        text.append("kube-scheduler stops with an error on %d node(s), which fails the whole attempt (%s: %s)" % (
            len(errors), errors[0]["name"], errors[0].get("reason")))
    excluded = result["nodes_excluded"]
    if excluded:
        text.append("%d of %d nodes ruled out for the pod (%s)" % (
            sum(excluded.values()), result["nodes_considered"],
            "; ".join("%d: %s" % (n, r) for r, n in sorted(excluded.items(), key=lambda i: -i[1]))))
    if not result["nodes_searched"]:
        text.append("no node is left to search for devices")
    failing = [row for row in rows if not row["nodes_with_enough"]]
    for row in failing[:2] or rows[:1]:
        text.append(_row_text(row))
    if not failing and result["nodes_searched"] and rows:
        reasons = sorted(set(o.get("reason") for o in outcomes if o.get("reason")))
        text.append("every request has enough devices on some node, but not together on one node%s" % (
            ": " + "; ".join(reasons[:2]) if reasons else " (matchAttribute constraints, shared counters or "
                                                          "devices two requests both need)"))
    return "does not fit: " + "; ".join(text) if result["verdict"] == search.DOES_NOT_FIT else "; ".join(text)
