# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The plan of a rolling upgrade (or node maintenance): which nodes, in which order, what each needs, what
stops it before anything is changed, and the control-plane flags carried to the target release.

- ``maintenance`` (no target): every chosen node is taken through the drain, the user's node work, the
  verification and back; ``upgrade`` (a target ``vX.Y.Z``, the cluster's minor or the next): the control-plane
  nodes first, then the workers, and a node already at the target without the drain's marks is ``done``.
- kubeadm upgrades one minor at a time and never down: any other target is refused, naming the field. A
  pre-release (``v1.38.0-beta.0``) is a target only when asked for (a test cluster on day zero); kubeadm then gets
  the flag of its stage (``kubeadm_apply_flags``).
- The breaking findings of the upgrade check stop the run, but those the upgrade itself settles: a control-plane
  gate the target removes or locks is left out of kubeadm-config's flags before ``kubeadm upgrade apply``
  renders the new manifests (the rule of what a target refuses is ``checks.gate_verdict``).

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.dra.admin.plugins.module_utils.control_plane.command_line import parse_map, render_map
from ansible_collections.dra.admin.plugins.module_utils.control_plane.kubeadm_config import SECTIONS
from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import kubelet_version
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import (
    CONTROL_PLANE, UpgradeInputError, gate_verdict,
)

MAINTENANCE = "maintenance"
UPGRADE = "upgrade"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
# What each node needs: the whole run, the steps after the kubelet (a run stopped there), or nothing.
ACTION_UPGRADE = "upgrade"
ACTION_FINISH = "finish"
ACTION_MAINTAIN = "maintain"
ACTION_DONE = "done"
# Findings the upgrade settles itself (control-plane gates re-planned for the target).
SETTLED_FINDINGS = ("feature-gate-removed", "feature-gate-locked")
RESOURCE_GROUP_PREFIX = catalog.RESOURCE_GROUP + "/"
# kubeadm upgrade apply's flag that lets it reach each stage of pre-release (cmd/kubeadm/app/phases/upgrade/policy.go).
KUBEADM_PRE_RELEASE_FLAGS = {"alpha": "--allow-experimental-upgrades", "beta": "--allow-experimental-upgrades",
                             "rc": "--allow-release-candidate-upgrades"}


def release_target(current, target, allow_pre_release=False):
    """The target as kubeadm takes it (`vX.Y.Z`, or `vX.Y.Z-beta.N` with `allow_pre_release`), or "" for
    maintenance; UpgradeInputError naming target_version for a target kubeadm cannot reach from the cluster's release
    `current`."""
    if not target:
        return ""
    wanted, now = catalog.release_order(target), catalog.release_order(current)
    if catalog.is_pre_release(target) and not allow_pre_release:
        raise UpgradeInputError("target_version: %s is a pre-release: set allow_pre_release (the playbook's "
                                "dra_upgrade_allow_pre_release) to upgrade a test cluster to it, or give a released "
                                "version" % target)
    if not catalog.names_one_version(target):
        raise UpgradeInputError("target_version: %r is not a released version: give one such as v1.%d.0 (kubeadm "
                                "upgrades to an exact patch release)" % (target, now[1] + 1 if now else 37))
    try:
        catalog.require_upgrade_target(target)
    except catalog.VersionError as exc:
        raise UpgradeInputError("target_version: %s" % exc)
    if now and wanted < now:
        raise UpgradeInputError("target_version: %s is older than the cluster (%s): Kubernetes is never downgraded "
                                "(the kubelet's checkpoints change between releases); give %s or newer"
                                % (target, current, current))
    if now and wanted[1] > now[1] + 1:
        raise UpgradeInputError("target_version: kubeadm upgrades one minor release at a time: the cluster runs %s, "
                                "so upgrade to a v1.%d release first" % (current, now[1] + 1))
    return "v" + target.lstrip("v")


def kubeadm_apply_flags(target):
    """What `kubeadm upgrade apply` needs besides the version to reach `target`: the flag of its pre-release stage,
    none for a release."""
    flag = KUBEADM_PRE_RELEASE_FLAGS.get(catalog.pre_release_stage(target))
    return [flag] if flag else []


# The kernel's invalid user and group ID (man 7 user_namespaces): no user-namespace range may reach it.
INVALID_ID = 2 ** 32 - 1


def getsubids_range(output):
    """(first ID, count) from `getsubids kubelet`'s one line ('0: kubelet 65536 4294901760'); None for no output;
    ValueError for anything else, as the kubelet refuses it."""
    lines = [line for line in (output or "").strip().splitlines() if line.strip()]
    if not lines:
        return None
    fields = lines[0].split()
    if len(lines) != 1 or len(fields) != 4 or not (fields[2].isdigit() and fields[3].isdigit()):
        raise ValueError("getsubids printed %r, not one line 'N: kubelet FIRST COUNT'" % output)
    return int(fields[2]), int(fields[3])


def pod_userns_range(text):
    """(first host ID, length) of a pod's user namespace from the kubelet's `userns` file in the pod's directory."""
    mapping = (json.loads(text).get("uidMappings") or [{}])[0]
    return int(mapping.get("hostId", 0)), int(mapping.get("length", 0))


def kubelet_userns_problems(subuids, subgids, pod_files, target):
    """Why the target's kubelet would refuse to start on the node: the kubelet user's subordinate ID range (the
    output of `getsubids kubelet` and `getsubids -g kubelet`, "" where the user or getsubids is missing) or a pod's
    recorded range (`pod_files`: {path: the userns file's text}) reaching the invalid ID, which the kubelet refuses
    from catalog.KUBELET_USERNS_RANGE_CHECKED_FROM. Each problem names its fix; [] for an older target."""
    if catalog.parse_minor(target) < catalog.KUBELET_USERNS_RANGE_CHECKED_FROM:
        return []
    problems = []
    for name, output in (("/etc/subuid", subuids), ("/etc/subgid", subgids)):
        found = getsubids_range(output)
        if found and found[0] + found[1] > INVALID_ID:
            problems.append(
                "the kubelet user's range in %s (first %d, count %d) reaches ID %d, and the %s kubelet refuses to "
                "start: lower the count by at least one idsPerPod (65536 by default) before the upgrade"
                % (name, found[0], found[1], INVALID_ID, target))
    for path, text in sorted((pod_files or {}).items()):
        first, length = pod_userns_range(text)
        if first + length > INVALID_ID:
            problems.append(
                "the pod directory of %s holds the ID range %d-%d, which reaches ID %d, and the %s kubelet refuses "
                "to start: delete that pod (or drain the node) so the kubelet removes its directory, then run again"
                % (path, first, first + length - 1, INVALID_ID, target))
    return problems


def node_name(node):
    return (node.get("metadata") or {}).get("name")


def is_control_plane(node):
    return CONTROL_PLANE_LABEL in ((node.get("metadata") or {}).get("labels") or {})


def drain_marks(node, exclusion_label, cordon_annotation):
    """What a drain left on the node: its driver exclusion label, its cordon annotation."""
    meta = node.get("metadata") or {}
    marks = []
    if exclusion_label in (meta.get("labels") or {}):
        marks.append("label %s" % exclusion_label)
    if cordon_annotation in (meta.get("annotations") or {}):
        marks.append("annotation %s" % cordon_annotation)
    return marks


def node_action(node, mode, target, marks):
    """What the node needs; UpgradeInputError when its kubelet is newer than the target."""
    if mode == MAINTENANCE:
        return ACTION_MAINTAIN
    have = catalog.release_order(kubelet_version(node))
    if have is None:
        raise UpgradeInputError("nodes: node %s reports kubelet version %r, not a Kubernetes release (a KWOK or "
                                "virtual node): leave it out of the inventory groups control_plane and dra_nodes"
                                % (node_name(node), kubelet_version(node)))
    if have > catalog.release_order(target):
        raise UpgradeInputError("target_version: node %s already runs kubelet %s, newer than %s: give %s or newer"
                                % (node_name(node), kubelet_version(node), target, kubelet_version(node)))
    if have < catalog.release_order(target):
        return ACTION_UPGRADE
    return ACTION_FINISH if marks else ACTION_DONE


def order_nodes(nodes, names=None):
    """(control-plane nodes, workers), each in the order `names` gives (else by name); UpgradeInputError naming
    `nodes` for a name the cluster does not know."""
    by_name = dict((node_name(n), n) for n in nodes)
    if names:
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise UpgradeInputError("nodes: the cluster has no node %s: give the names `kubectl get nodes` shows"
                                    % ", ".join(unknown))
        chosen = [by_name[name] for i, name in enumerate(names) if name not in names[:i]]
    else:
        chosen = [by_name[name] for name in sorted(by_name)]
    return [n for n in chosen if is_control_plane(n)], [n for n in chosen if not is_control_plane(n)]


def batches(names, size):
    """The workers in batches of `size` (UpgradeInputError naming batch_size when it is below 1)."""
    if size < 1:
        raise UpgradeInputError("batch_size: give 1 or more nodes at a time, got %d" % size)
    return [list(names[i:i + size]) for i in range(0, len(names), size)]


def blockers(findings, carry_flags=True):
    """The breaking findings the upgrade does not settle itself: any of them refuses the run. Without
    `carry_flags` (another tool renders kubeadm's configuration) the upgrade settles none."""
    return [f for f in findings if f["severity"] == "breaking" and not (carry_flags and settled_by_upgrade(f))]


def settled_by_upgrade(found):
    evidence = found.get("evidence") or {}
    return found["id"] in SETTLED_FINDINGS and evidence.get("component") in CONTROL_PLANE


def extra_args_map(section, flag):
    """A kubeadm extraArgs map flag's entries, from a map (v1beta3) or a list of {name, value} (v1beta4)."""
    args = (section or {}).get("extraArgs")
    if isinstance(args, dict):
        return parse_map(args.get(flag))
    for item in args or []:
        if isinstance(item, dict) and item.get("name") == flag:
            return parse_map(item.get("value"))
    return parse_map("")


def gate_dropped(name, value, target_minor, component=None):
    """Why the target refuses `name=value` on `component` (it would not start), or None when it is kept."""
    try:
        verdict = gate_verdict(name, catalog.gate_value(value), target_minor, component)
    except ValueError:
        return None
    return verdict[2] if verdict and verdict[1] == "breaking" else None


def runtime_entry_dropped(entry, target):
    """Why the target does not serve a --runtime-config entry of resource.k8s.io, or None."""
    if not entry.startswith(RESOURCE_GROUP_PREFIX):
        return None
    api_version = entry[len(RESOURCE_GROUP_PREFIX):]
    served = [r for r in ("resourceclaims", "resourceslices", "devicetaintrules")
              if catalog.api_serving(target, api_version, r)]
    return None if served else "Kubernetes %s does not serve %s" % (target, entry)


def carried_flags(cluster_configuration, target):
    """kubeadm-config's control-plane feature gates and runtime-config carried to the target: {"extra_args":
    {component: {flag: new map or None}} for the kubeadm_config module, "dropped": [{component, flag, entry,
    why}]}. Only the flags that lose an entry are named."""
    target_minor = catalog.require_upgrade_target(target)
    extra_args, dropped = {}, []
    for component, section_name in sorted(SECTIONS.items()):
        section = (cluster_configuration or {}).get(section_name) or {}
        for flag in ("feature-gates", "runtime-config"):
            entries = extra_args_map(section, flag)
            kept = type(entries)()
            for entry, value in entries.items():
                why = (gate_dropped(entry, value, target_minor, component) if flag == "feature-gates"
                       else runtime_entry_dropped(entry, target))
                if why:
                    dropped.append({"component": component, "flag": flag, "entry": entry, "why": why})
                else:
                    kept[entry] = value
            if len(kept) != len(entries):
                extra_args.setdefault(component, {})[flag] = render_map(kept) if kept else None
    return {"extra_args": extra_args, "dropped": dropped}


def node_plan(node, mode, target, exclusion_label, cordon_annotation):
    marks = drain_marks(node, exclusion_label, cordon_annotation)
    return {"node": node_name(node), "kubelet_version": kubelet_version(node),
            "control_plane": is_control_plane(node), "drain_marks": marks,
            "action": node_action(node, mode, target, marks)}


def summary_line(plan):
    """One line: what the run will do."""
    todo = [n["node"] for n in plan["control_plane"] + plan["workers"] if n["action"] != ACTION_DONE]
    done = [n["node"] for n in plan["control_plane"] + plan["workers"] if n["action"] == ACTION_DONE]
    if plan["refused"]:
        return "refused: %s" % "; ".join(plan["refused"])
    what = ("upgrade to %s" % plan["target_version"]) if plan["mode"] == UPGRADE else "node maintenance"
    return "%s: %d node(s) to take through (%s)%s" % (
        what, len(todo), ", ".join(todo) or "none", "; already done: %s" % ", ".join(done) if done else "")


def kubeadm_steps(entries, mode, control_plane_version, target):
    """Set each entry's `kubeadm_step`: `apply` on the first control-plane node to upgrade while the control plane
    (kubeadm-config's kubernetesVersion) is older than the target (kubeadm renders the new control plane there
    once), `node` everywhere else, None in maintenance. Returns why the workers must not start, or None: the control
    plane older than the target with no control-plane node in the run to apply it (a kubelet is never newer than
    kube-apiserver)."""
    running = catalog.release_order(control_plane_version) or (0,)
    apply_due = mode == UPGRADE and running < catalog.release_order(target)
    for entry in entries:
        entry["kubeadm_step"] = None if mode == MAINTENANCE else "node"
        if apply_due and entry["control_plane"] and entry["action"] == ACTION_UPGRADE:
            entry["kubeadm_step"] = "apply"
            apply_due = False
    if apply_due and any(e["action"] == ACTION_UPGRADE for e in entries):
        return ("the control plane runs %s, older than %s, and no control-plane node of the run upgrades it: add the "
                "control-plane nodes (inventory group control_plane) so kubeadm upgrade apply runs before any worker"
                % (control_plane_version or "an unknown release", target))
    return None


def node_entry(plan, name):
    """The plan's entry of one node; UpgradeInputError when the plan does not name it."""
    for entry in plan["control_plane"] + plan["workers"]:
        if entry["node"] == name:
            return entry
    raise UpgradeInputError("the plan names no node %s: an inventory host of the upgrade must be named as its node "
                            "(kubectl get nodes)" % name)


def plan_lines(plan):
    """The plan as lines for a person: the summary, then per node its action, kubeadm step and drain preview."""
    lines = [plan["summary"]]
    for dropped in plan["carried_flags"]["dropped"]:
        lines.append("kubeadm-config %(component)s --%(flag)s: %(entry)s left out (%(why)s)" % dropped)
    for entry in plan["control_plane"] + plan["workers"]:
        line = "%s %s (kubelet %s): %s" % ("control plane" if entry["control_plane"] else "worker", entry["node"],
                                           entry["kubelet_version"] or "unknown", entry["action"])
        if entry.get("kubeadm_step") and entry["action"] == ACTION_UPGRADE:
            line += ", kubeadm upgrade %s" % entry["kubeadm_step"]
        if entry["drain_marks"]:
            line += ", left by a drain: %s" % ", ".join(entry["drain_marks"])
        if entry.get("drain_preview"):
            line += "; drain preview: %s" % entry["drain_preview"]["summary"]
        lines.append(line)
    return lines
