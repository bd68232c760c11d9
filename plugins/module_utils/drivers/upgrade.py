# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A driver DaemonSet's update strategy: seamless when it can be, maxUnavailable otherwise, with the reason.

Seamless (``maxSurge: 1, maxUnavailable: 0``: two plugin instances on a node during an
update) only when the driver hands over with kubeletplugin.RollingUpdate and its pod UID and
every selected node's kubelet is new enough.

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import VersionError, parse_minor


# kubeletplugin.RollingUpdate (two plugin instances on one node during an update) needs a
# kubelet of 1.33 or newer. A version fact: it belongs in the catalog (releases.catalog.py), which
# does not carry it yet; kept here as the single place this collection states it.
SEAMLESS_UPGRADE_MIN_KUBELET_MINOR = 33


SEAMLESS_MODES = ("auto", "required", "disabled")

# A seamless update's DaemonSet minReadySeconds: how long a new plugin pod stays Ready before the DaemonSet
# controller counts it available and stops the old one. A pod is Ready as soon as its probe reaches its sockets,
# but the kubelet registers a plugin from its plugin manager's reconciler (every second) after it sees the
# registration socket; until then the kubelet knows only the old plugin, and a claim prepared once the old one
# stopped fails (NodePrepareResources: connect: no such file or directory). On kind nodes under load the old pod
# was deleted 0.2-1.2 s after the kubelet registered the new one: no margin.
DEFAULT_HANDOVER_SECONDS = 5
HANDOVER_SECONDS_MAX = 300


class SeamlessUpgradeError(DraAdminError, ValueError):
    """A seamless upgrade was required but cannot be done on this cluster."""


def max_unavailable_problem(value):
    """None when value is a usable DaemonSet maxUnavailable (integer >= 1 or 'N%' with N 1-100)."""
    text = str(value).strip()
    match = re.match(r"^(\d+)%$", text)
    if match and 1 <= int(match.group(1)) <= 100:
        return None
    if not isinstance(value, bool) and re.match(r"^\d+$", text) and int(text) >= 1:
        return None
    return ("max_unavailable must be an integer of at least 1 or a percentage such as '25%%', got %r "
            "(0 would let no pod be replaced without a surge)" % (value,))


def handover_seconds_problem(value):
    """None when value is a usable seamless handover time (an integer of seconds, 0 to HANDOVER_SECONDS_MAX)."""
    text = str(value).strip()
    if not isinstance(value, bool) and re.match(r"^\d+$", text) and int(text) <= HANDOVER_SECONDS_MAX:
        return None
    return ("seamless_min_ready_seconds must be an integer of seconds from 0 to %d, got %r (the time a new plugin "
            "pod stays Ready before the old one stops; 0 stops the old one as soon as the new one is Ready)"
            % (HANDOVER_SECONDS_MAX, value))


def normalize_max_unavailable(value):
    text = str(value).strip()
    return text if text.endswith("%") else int(text)


def kubelet_version(node):
    return (((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")) or ""


def kubelet_minor(node):
    """The kubelet's minor version, or None when the reported version cannot be read."""
    try:
        return parse_minor(kubelet_version(node))
    except VersionError:
        return None


def old_kubelets(nodes):
    """{node: reported kubelet version} of the nodes whose kubelet cannot do seamless upgrades
    (older than 1.33, or a version that cannot be read)."""
    old = {}
    for node in nodes:
        minor = kubelet_minor(node)
        if minor is None or minor < SEAMLESS_UPGRADE_MIN_KUBELET_MINOR:
            old[(node.get("metadata") or {}).get("name")] = kubelet_version(node) or "<none>"
    return old


def decide_strategy(nodes, mode="auto", driver_supports=True, max_unavailable=1,
                    handover_seconds=DEFAULT_HANDOVER_SECONDS):
    """The DaemonSet updateStrategy for the selected nodes.

    Returns a dict: strategy (the updateStrategy), seamless (bool), min_ready_seconds (the DaemonSet's
    minReadySeconds: handover_seconds when seamless, else 0), reason (one sentence), warning (a sentence saying
    why seamless upgrades are not used, or None).
    Raises SeamlessUpgradeError when mode is 'required' and a seamless upgrade is impossible.
    """
    decision = _decide_strategy(nodes, mode, driver_supports, max_unavailable)
    decision["min_ready_seconds"] = int(handover_seconds) if decision["seamless"] else 0
    return decision


def _decide_strategy(nodes, mode, driver_supports, max_unavailable):
    fallback = {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": normalize_max_unavailable(max_unavailable)}}
    if mode == "disabled":
        return {"strategy": fallback, "seamless": False, "warning": None,
                "reason": "seamless upgrades disabled by seamless_upgrade=disabled; maxUnavailable %s"
                          % fallback["rollingUpdate"]["maxUnavailable"]}
    if not driver_supports:
        reason = ("the driver does not support seamless upgrades (it must hand over with "
                  "kubeletplugin.RollingUpdate and its pod UID)")
    else:
        old = old_kubelets(nodes)
        reason = None
        if old:
            reason = ("seamless upgrades need kubelet >= 1.%d on every selected node; %s"
                      % (SEAMLESS_UPGRADE_MIN_KUBELET_MINOR,
                         ", ".join("%s runs %s" % (name, old[name]) for name in sorted(old))))
    if reason is None:
        return {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "seamless": True, "warning": None,
                "reason": "every selected node runs kubelet >= 1.%d and the driver supports seamless upgrades: "
                          "maxSurge 1, maxUnavailable 0" % SEAMLESS_UPGRADE_MIN_KUBELET_MINOR}
    if mode == "required":
        raise SeamlessUpgradeError(
            "a seamless upgrade was required (seamless_upgrade=required) but %s. Upgrade those kubelets, "
            "exclude those nodes from the driver's selection, or set seamless_upgrade=auto to fall back to "
            "maxUnavailable" % reason)
    warning = ("not using a seamless upgrade: %s; updating with maxSurge 0, maxUnavailable %s (the driver is "
               "briefly absent on each node being updated)" % (reason, fallback["rollingUpdate"]["maxUnavailable"]))
    return {"strategy": fallback, "seamless": False, "warning": warning, "reason": reason}
