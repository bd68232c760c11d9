# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the node knows against what the API says: the findings of the node doctor, the single safe next
step of each, and which node-side repairs are provably safe.

Pure. Input: every node's ``dra_node_state`` (nodes/node_state_service.py) and the cluster read once
(nodes/node_check_service.py: claims, pods, slices, nodes, DaemonSets, compacted here by ``compact_claim`` and
``compact_pod``). Output per node: findings, repairs (``cdi_spec`` and ``socket``: moved to a backup directory by
dra_node_state_repair, each re-checked on the node first) and the pods a force delete would be safe for.

Provably stale, and so repairable:
- a CDI spec all of whose claim UIDs are gone from the API, that no running container uses and that the
  kubelet's checkpoint no longer holds (otherwise the kubelet will still ask the driver to unprepare it);
- a socket (registration or plugin data directory) that does not answer, of a driver with no running pod on
  the node (by the pod UID in a rolling-update name, or by the driver's DaemonSet).
Everything else is reported with its next step and left alone: the kubelet's checkpoint belongs to the kubelet
(it unprepares entries of pods that are gone through their driver, every 60 s), a stuck pod's fix is its driver
back, a force delete only when asked and only when the node shows the claims unprepared and no container running.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import allocation_nodes
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import pod_claim_refs
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import node_publishers
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.common.times import epoch_seconds
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import select_nodes_for_daemonset
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import daemonset_excludes
from ansible_collections.dra.admin.plugins.module_utils.drivers.checks import driver_accounts

STALE_CHECKPOINT_CLAIM = "stale_checkpoint_claim"
STALE_CDI_SPEC = "stale_cdi_spec"
DEAD_SOCKET = "dead_socket"
SOCKET_WITHOUT_POD = "socket_without_driver_pod"
DRIVER_WITHOUT_SOCKET = "driver_without_socket"
POD_STUCK_TERMINATING = "pod_stuck_terminating"
UNREADABLE = "unreadable_node_state"
KINDS = (STALE_CHECKPOINT_CLAIM, STALE_CDI_SPEC, DEAD_SOCKET, SOCKET_WITHOUT_POD, DRIVER_WITHOUT_SOCKET,
         POD_STUCK_TERMINATING, UNREADABLE)

# A pod counts as stuck this long after its deletion timestamp (which already includes its grace period).
STUCK_AFTER_SECONDS = 30
RECONCILE_SECONDS = 60  # the kubelet DRA manager's reconcile period (pkg/kubelet/cm/dra, not configurable)

REASON_CONTAINER_RUNNING = "container still running"
REASON_DRIVER_GONE = "driver gone"
REASON_UNPREPARE_FAILING = "unprepare failing"
REASON_UNPREPARED = "unprepared, waiting for the kubelet"
REASON_UNKNOWN = "node state unknown"


# --- the cluster, compacted -----------------------------------------------------------------------

def compact_claim(claim, node_labels):
    meta = claim.get("metadata") or {}
    status = claim.get("status") or {}
    dummy, nodes = allocation_nodes(claim, node_labels)
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return {"uid": meta.get("uid"), "namespace": meta.get("namespace"), "name": meta.get("name"),
            "allocated": bool(status.get("allocation")), "nodes": nodes,
            "reserved_for": sorted(r.get("uid") for r in status.get("reservedFor") or [] if r.get("uid")),
            "drivers": sorted(set(r.get("driver") for r in results if r.get("driver"))),
            "deleting": bool(meta.get("deletionTimestamp"))}


def compact_pod(pod):
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    owner = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "DaemonSet" and o.get("controller")]
    running = [c.get("name") for c in status.get("containerStatuses") or [] if "running" in (c.get("state") or {})]
    return {"uid": meta.get("uid"), "namespace": meta.get("namespace"), "name": meta.get("name"),
            "node": spec.get("nodeName"), "phase": status.get("phase"),
            "deletion_timestamp": meta.get("deletionTimestamp"),
            "daemonset": "%s/%s" % (meta.get("namespace"), owner[0]["name"]) if owner else None,
            "claims": sorted(set(claim or name for name, claim, dummy in pod_claim_refs(pod) if claim or name)),
            "running_containers": running}


# --- drivers and their DaemonSets -------------------------------------------------------------------

def driver_daemonsets(daemonsets, drivers):
    """{driver: [DaemonSet object]} of the DaemonSets that run each driver's kubelet plugin."""
    by_key = dict(("%s/%s" % ((d.get("metadata") or {}).get("namespace"), (d.get("metadata") or {}).get("name")), d)
                  for d in daemonsets or [])
    out = {}
    for entry in driver_accounts(daemonsets, drivers):
        out.setdefault(entry["driver"], []).append(by_key["%s/%s" % (entry["namespace"], entry["daemonset"])])
    return out


def bring_back_step(driver, node_obj, daemonsets_of_driver):
    """The single next step to bring a driver back on a node, naming its DaemonSet and why it is not there."""
    if not daemonsets_of_driver:
        return ("no DaemonSet in the cluster runs driver %s: reinstall it (role dra.admin.driver, or the driver's "
                "chart) so that its kubelet plugin registers on the node again" % driver)
    steps = []
    for ds in daemonsets_of_driver:
        meta = ds.get("metadata") or {}
        name = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        dummy, excluded = select_nodes_for_daemonset([node_obj], ds) if node_obj else ([], {})
        why = list(excluded.values())
        labels = ((node_obj or {}).get("metadata") or {}).get("labels") or {}
        keys = sorted(k for k, v in labels.items() if v == "true" and daemonset_excludes(ds, k))
        node_name = ((node_obj or {}).get("metadata") or {}).get("name")
        if why and keys:
            steps.append("DaemonSet %s (driver %s) does not run on this node: it carries the label %s=true, which "
                         "the DaemonSet's node affinity excludes (the drain's exclusion label): remove it with "
                         "`kubectl label node %s %s-` (or return the node to service with the drain role)"
                         % (name, driver, keys[0], node_name, keys[0]))
        elif why:
            steps.append("DaemonSet %s (driver %s) does not run on this node: %s; make it run here again"
                         % (name, driver, why[0]))
        else:
            steps.append("DaemonSet %s (driver %s) selects this node but its pod is not running there: look at "
                         "`kubectl -n %s get pods -o wide` and the DaemonSet's events"
                         % (name, driver, meta.get("namespace")))
    return "; ".join(steps)


# --- per node ---------------------------------------------------------------------------------------

def _registered(state):
    """{driver: [socket entries]} of the node's registration sockets that name a driver."""
    out = {}
    for entry in state["registration"]["sockets"]:
        if entry.get("driver"):
            out.setdefault(entry["driver"], []).append(entry)
    return out


def _answering_drivers(state):
    return set(d for d, entries in _registered(state).items() if any(e.get("answers") for e in entries))


def _driver_pods(node, pods, daemonsets_by_driver):
    """{driver: [running, not deleting pods of its DaemonSets on the node]}."""
    out = {}
    for driver, sets in daemonsets_by_driver.items():
        keys = set("%s/%s" % ((d.get("metadata") or {}).get("namespace"), (d.get("metadata") or {}).get("name"))
                   for d in sets)
        out[driver] = [p for p in pods if p["node"] == node and p["daemonset"] in keys
                       and p["phase"] == "Running" and not p["deletion_timestamp"]]
    return out


def _running_pod_uids(state):
    containers = state["containers"]
    if not containers["available"]:
        return None
    return set(c["pod_uid"] for c in containers["items"] if c.get("pod_uid"))


def finding(kind, node, subject, message, next_step, repair=None, **extra):
    out = {"kind": kind, "node": node, "subject": subject, "message": message, "next_step": next_step,
           "repair": repair}
    out.update(extra)
    return out


class NodeView(object):
    """One node's state with the cluster facts it is compared with."""

    def __init__(self, state, cluster):
        self.state = state
        self.node = state["node"]
        self.cluster = cluster
        self.node_obj = cluster["nodes"].get(self.node)
        self.answering = _answering_drivers(state)
        self.driver_pods = _driver_pods(self.node, cluster["pods"], cluster["daemonsets_by_driver"])
        self.running_uids = _running_pod_uids(state)
        self.checkpoint_claims = state["checkpoint"].get("claims") or []
        self.held_uids = set(c["uid"] for c in self.checkpoint_claims)

    def bring_back(self, driver):
        return bring_back_step(driver, self.node_obj, self.cluster["daemonsets_by_driver"].get(driver) or [])

    def on_node(self, claim):
        pods = self.cluster["pods_by_uid"]
        return self.node in claim["nodes"] or any((pods.get(uid) or {}).get("node") == self.node
                                                  for uid in claim["reserved_for"])


def _checkpoint_step(view, entry, gone_drivers):
    if gone_drivers:
        return "bring driver %s back on the node (%s); the kubelet then unprepares the claim itself" % (
            ", ".join(gone_drivers), view.bring_back(gone_drivers[0]))
    if not view.state["kubelet_running"]:
        return ("start the kubelet (systemctl start kubelet): its DRA manager unprepares claims of pods that are gone "
                "through driver %s, which answers on the node" % ", ".join(sorted(entry["drivers"])))
    return ("nothing to do but wait: the kubelet unprepares claims of pods that are gone every %d s through driver %s; "
            "if the entry stays, that driver's NodeUnprepareResources fails: read its plugin's log on the node"
            % (RECONCILE_SECONDS, ", ".join(sorted(entry["drivers"]))))


def checkpoint_findings(view):
    out = []
    claims = view.cluster["claims_by_uid"]
    for entry in view.checkpoint_claims:
        claim = claims.get(entry["uid"])
        if claim is not None and view.on_node(claim):
            continue
        why = ("gone from the API" if claim is None else "no longer allocated to or reserved on this node")
        gone = sorted(d for d in entry["drivers"] if d not in view.answering)
        running = sorted(u for u in entry["pod_uids"] if view.running_uids and u in view.running_uids)
        message = "the kubelet holds claim %s/%s (%s) prepared, %s%s" % (
            entry["namespace"], entry["name"], entry["uid"], why,
            "; container(s) of pod %s still run" % ", ".join(running) if running else "")
        out.append(finding(STALE_CHECKPOINT_CLAIM, view.node, entry["uid"], message,
                           _checkpoint_step(view, entry, gone), claim=entry, drivers_gone=gone,
                           pods_running=running))
    return out


def cdi_findings(view):
    out = []
    claims = view.cluster["claims_by_uid"]
    for spec in view.state["cdi_specs"]:
        uids = spec.get("claim_uids") or []
        if spec.get("format") != "cdi" or not uids or any(u in claims for u in uids):
            continue
        held = sorted(u for u in uids if u in view.held_uids)
        users = spec.get("used_by")
        if users is None:
            step, safe = ("cannot tell which containers use it (%s): check with crictl on the node"
                          % view.state["containers"]["reason"], False)
        elif users:
            step, safe = ("container(s) %s still use it: their pod must stop first (the kubelet stops containers of "
                          "pods that are gone)" % ", ".join(c[:13] for c in users), False)
        elif held:
            step, safe = ("the kubelet still holds claim %s prepared: it will ask the driver to unprepare it, which "
                          "removes the spec; see the stale checkpoint finding" % ", ".join(held), False)
        else:
            step, safe = "move it to the backup directory (repair; reversible)", True
        repair = {"kind": "cdi_spec", "path": spec["path"], "claim_uids": uids,
                  "reason": "claim(s) %s gone from the API, no running container uses it" % ", ".join(uids)}
        out.append(finding(STALE_CDI_SPEC, view.node, spec["path"],
                           "CDI spec %s names claim(s) %s, gone from the API" % (spec["path"], ", ".join(uids)),
                           step, repair if safe else None, used_by=users))
    return out


def _socket_driver_pod(view, entry, driver):
    """(has a running pod on the node, evidence) for a socket's driver."""
    pods = view.cluster["pods_by_uid"]
    if entry.get("pod_uid"):
        pod = pods.get(entry["pod_uid"])
        alive = bool(pod and pod["node"] == view.node and pod["phase"] == "Running" and not pod["deletion_timestamp"])
        return alive, "pod %s %s" % (entry["pod_uid"], "runs on the node" if alive else "is not running on the node")
    mine = view.driver_pods.get(driver) or []
    return bool(mine), ("pod %s runs on the node" % mine[0]["name"] if mine
                        else "no pod of the driver's DaemonSet runs on the node")


def _node_sockets(view):
    """[(entry, driver, where)] of the registration sockets and plugin directory sockets."""
    out = [(e, e.get("driver"), "registration") for e in view.state["registration"]["sockets"]]
    for directory in view.state["plugin_dirs"]:
        out += [(e, directory["name"], "plugin") for e in directory["sockets"] if e.get("dra")]
    return out


def socket_findings(view):
    out = []
    dra = view.cluster["dra_drivers"]
    for entry, driver, where in _node_sockets(view):
        if not driver or driver not in dra:
            continue  # hashed names and other plugins (CSI) are not this check's
        alive, evidence = _socket_driver_pod(view, entry, driver)
        if entry.get("answers") and alive:
            continue
        if entry.get("answers"):
            out.append(finding(SOCKET_WITHOUT_POD, view.node, entry["path"],
                               "%s socket %s of driver %s answers, but %s" % (where, entry["path"], driver, evidence),
                               "something outside Kubernetes serves driver %s here (or its pod's state lags): find "
                               "the process behind the socket (ss -xlp) before anything else" % driver))
            continue
        repair = None
        if not alive:
            step = "move it to the backup directory (repair; reversible)"
            repair = {"kind": "socket", "path": entry["path"], "driver": driver,
                      "reason": "does not answer (%s); %s" % (entry.get("error"), evidence)}
        else:
            step = ("the driver's pod runs but this socket does not answer: restart the pod (kubectl delete pod) so "
                    "its plugin listens again")
        out.append(finding(DEAD_SOCKET, view.node, entry["path"],
                           "%s socket %s of driver %s does not answer (%s); %s" % (
                               where, entry["path"], driver, entry.get("error"), evidence), step, repair))
    return out


def driver_findings(view):
    out = []
    for driver in sorted(view.cluster["node_drivers"].get(view.node) or ()):
        if driver in view.answering:
            continue
        out.append(finding(DRIVER_WITHOUT_SOCKET, view.node, driver,
                           "driver %s publishes ResourceSlices for the node but has no answering registration socket "
                           "there: the kubelet cannot prepare or unprepare its claims" % driver,
                           view.bring_back(driver)))
    return out


def _stuck_reason(view, pod):
    """(reason, next step, force delete safe) for a pod stuck terminating on this node."""
    held = [c for c in view.checkpoint_claims if pod["uid"] in c["pod_uids"]]
    if view.running_uids is None or view.state["checkpoint"].get("format") in (None, "unknown"):
        return REASON_UNKNOWN, ("the node's containers or checkpoint cannot be read (%s): fix that first" % (
            view.state["containers"]["reason"] or view.state["checkpoint"].get("error"))), False
    if pod["uid"] in view.running_uids:
        step = ("the kubelet is down: start it" if not view.state["kubelet_running"] else
                "wait for the kubelet to stop it; if it does not, read the kubelet's log for the pod")
        return REASON_CONTAINER_RUNNING, step, False
    gone = sorted(set(d for c in held for d in c["drivers"] if d not in view.answering))
    if gone:
        return REASON_DRIVER_GONE, "bring driver %s back: %s" % (", ".join(gone), view.bring_back(gone[0])), False
    if held:
        return REASON_UNPREPARE_FAILING, (
            "driver %s answers but unpreparing claim %s fails: read the driver plugin's log on the node" % (
                ", ".join(sorted(set(d for c in held for d in c["drivers"]))),
                ", ".join("%s/%s" % (c["namespace"], c["name"]) for c in held))), False
    return REASON_UNPREPARED, ("its claims are unprepared and no container runs on the node: the kubelet should "
                               "finish the deletion; a force delete is safe (dra_node_doctor_force_delete)"), True


def stuck_pod_findings(view, now):
    out, force = [], []
    for pod in view.cluster["pods"]:
        if pod["node"] != view.node or not pod["deletion_timestamp"] or not pod["claims"]:
            continue
        since = epoch_seconds(pod["deletion_timestamp"])
        if since is None or now - since < STUCK_AFTER_SECONDS:
            continue
        reason, step, safe = _stuck_reason(view, pod)
        key = "%s/%s" % (pod["namespace"], pod["name"])
        out.append(finding(POD_STUCK_TERMINATING, view.node, key,
                           "pod %s is stuck terminating for %d s with claims %s: %s" % (
                               key, now - since, ", ".join(pod["claims"]), reason), step, reason=reason,
                           pod_uid=pod["uid"]))
        if safe:
            force.append({"namespace": pod["namespace"], "name": pod["name"], "uid": pod["uid"]})
    return out, force


def unreadable_findings(view):
    out = []
    checkpoint = view.state["checkpoint"]
    if checkpoint.get("format") == "unknown" or checkpoint.get("checksum_ok") is False:
        out.append(finding(UNREADABLE, view.node, checkpoint["path"], "the kubelet's DRA checkpoint: %s" % (
            checkpoint.get("error")), "read it by hand; nothing was concluded from it"))
    for spec in view.state["cdi_specs"]:
        if spec.get("format") == "unknown":
            out.append(finding(UNREADABLE, view.node, spec["path"], "CDI spec: %s" % spec.get("error"),
                               "read it by hand; it is left alone"))
    return out


def check_node(state, cluster, now):
    view = NodeView(state, cluster)
    findings = []
    for step in (checkpoint_findings, cdi_findings, socket_findings, driver_findings, unreadable_findings):
        findings.extend(step(view))
    stuck, force = stuck_pod_findings(view, now)
    findings.extend(stuck)
    return {"node": view.node, "findings": findings, "repairs": [f["repair"] for f in findings if f["repair"]],
            "force_delete_safe": force, "kubelet_running": state["kubelet_running"],
            "answering_drivers": sorted(view.answering)}


def node_drivers_named(states):
    """Drivers the nodes themselves name as DRA drivers: in the kubelet's checkpoint, or by a plugin data
    directory holding a DRA socket (a driver whose slices are gone is still known by them)."""
    out = set()
    for state in states:
        for entry in state["checkpoint"].get("claims") or []:
            out.update(entry["drivers"])
        out.update(d["name"] for d in state["plugin_dirs"] if any(s.get("dra") for s in d["sockets"]))
    return out


def cluster_facts(claims, pods, slices, nodes, daemonsets, extra_drivers=()):
    """The cluster as the checks read it (claims and pods compacted, indexes by uid); `extra_drivers`: the
    drivers the nodes name (node_drivers_named)."""
    labels = dict(((n.get("metadata") or {}).get("name"), (n.get("metadata") or {}).get("labels") or {}) for n in nodes)
    publishers = node_publishers(slices)
    node_drivers = dict((name, set(d for d, dummy in keys)) for name, keys in publishers["named"].items())
    dra_drivers = set(d for d, dummy in publishers["pools"]) | set(
        (s.get("spec") or {}).get("driver") for s in slices) | set(extra_drivers)
    compact_claims = [compact_claim(c, labels) for c in claims]
    compact_pods = [p if "running_containers" in p else compact_pod(p) for p in pods]
    return {"claims_by_uid": dict((c["uid"], c) for c in compact_claims), "pods": compact_pods,
            "pods_by_uid": dict((p["uid"], p) for p in compact_pods),
            "nodes": dict(((n.get("metadata") or {}).get("name"), n) for n in nodes),
            "node_drivers": node_drivers, "dra_drivers": dra_drivers,
            "daemonsets_by_driver": driver_daemonsets(daemonsets, dra_drivers)}


def check(states, cluster, now):
    """Per node report and the totals."""
    reports = [check_node(s, cluster, now) for s in sorted(states, key=lambda s: s["node"])]
    counts = dict((k, 0) for k in KINDS)
    for report in reports:
        for item in report["findings"]:
            counts[item["kind"]] += 1
    return {"nodes": reports, "counts": counts, "findings": sum(counts.values()),
            "repairs": sum(len(r["repairs"]) for r in reports)}


# --- what the role node_doctor reads of the check (filters dra.admin.node_report, dra.admin.findings_left) ---

class NodeReportError(DraAdminError, ValueError):
    """A node the check has no report for; the message names it and the nodes it has."""


def node_report(reports, node):
    """The report of one node among ``check``'s ``nodes``."""
    for report in reports or []:
        if report.get("node") == node:
            return report
    names = ", ".join(sorted(str(r.get("node")) for r in reports or [])) or "none"
    raise NodeReportError("the node check has no report for node %s (it has: %s); run dra_node_state_info on the "
                          "node first and pass its dra_node_state in node_states" % (node, names))


def findings_left(report, repaired=None):
    """The report's findings that a repair did not take care of: those whose subject is not a path
    dra_node_state_repair moved or removed (``repaired``: its result, or none when it did not run)."""
    done = set(item.get("path") for item in (repaired or {}).get("moved") or [])
    return [item for item in report.get("findings") or [] if item.get("subject") not in done]
