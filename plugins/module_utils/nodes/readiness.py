# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether a node is back after its own work (a kubelet upgrade, a GPU driver, a reboot): Ready, its kubelet at
the expected version, each DRA driver's pod ready on it, and the same devices published for it as before.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import kubelet_version
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import names_one_version
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_names, pool_key, slices_for_node


def ready_condition(node):
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition
    return {}


def expected_release(version):
    """The release a kubelet must report, as it reports it: 'v1.37.2' (kubespray's kube_version '1.37.2' taken as
    that; a pre-release such as v1.38.0-beta.0 as well); "" for any. ValueError for anything else."""
    if not version:
        return ""
    if not names_one_version(version):
        raise ValueError("%r is not a release: give one such as v1.37.2" % version)
    return "v" + version.lstrip("v")


def same_release(have, want):
    """Whether a kubelet's version (v1.37.2, or v1.37.2-3+abc from a distribution) is the release `want`."""
    return have == want or have.startswith(want + "-") or have.startswith(want + "+")


def node_problems(node, expected_version=""):
    """What keeps the node itself from being back: not Ready (with the kubelet's reason), another version."""
    problems = []
    ready = ready_condition(node)
    if ready.get("status") != "True":
        problems.append("node %s is not Ready (%s: %s)" % (
            node["metadata"]["name"], ready.get("reason") or "no Ready condition", ready.get("message") or "-"))
    have = kubelet_version(node)
    if expected_version and not same_release(have, expected_version):
        problems.append("node %s runs kubelet %s, not %s"
                        % (node["metadata"]["name"], have or "(unknown)", expected_version))
    return problems


def published_devices(slices, node, drivers):
    """{driver: sorted 'pool/device'} each driver publishes for the node (its own slices, the newest
    generation)."""
    found = dict((driver, set()) for driver in drivers)
    for item in slices_for_node(slices, node):
        driver, pool = pool_key(item)
        if driver in found:
            found[driver].update("%s/%s" % (pool, name) for name in device_names(item) if name)
    return dict((driver, sorted(names)) for driver, names in found.items())


def device_problems(node, devices, expected):
    """Each driver that no longer publishes the devices it had for the node, or publishes new ones (`expected`:
    {driver: [...]}, from a look before the node's work). A driver without devices in the expectation is not
    judged: a node it never served (a control-plane node its DaemonSet leaves out) publishes nothing, rightly, and
    a node a stopped run left drained has had its slices removed by the kubelet, so nothing is known of before."""
    problems = []
    for driver in sorted(devices):
        if not (expected or {}).get(driver):
            continue
        have = set(devices[driver])
        missing, new = set(expected[driver]) - have, have - set(expected[driver])
        if missing and not have:
            problems.append("%s publishes no device for %s (it had %s)" % (driver, node, ", ".join(sorted(missing))))
        elif missing:
            problems.append("%s no longer publishes %s for %s" % (driver, ", ".join(sorted(missing)), node))
        if new:
            problems.append("%s publishes %s for %s, which it did not before" % (driver, ", ".join(sorted(new)), node))
    return problems


# A klog line ("E1127 21:33:34.123456 ...": E error, F fatal; I and W are not errors), and the words of the lines
# a kubelet that refuses to start writes before klog runs (its flag parsing, cobra's "Error:").
_KLOG_LINE = re.compile(r"^([IWEF])\d{4} ")
_FATAL_WORDS = ("unknown flag", "failed to run kubelet", "command failed", "error:", "invalid")
KUBELET_ERRORS_KEPT = 5


def kubelet_errors(lines, keep=KUBELET_ERRORS_KEPT):
    """The last `keep` error lines of a kubelet's journal (klog errors, and the lines of a kubelet that refuses
    to start), oldest first."""
    found = []
    for line in lines or []:
        line = line.strip()
        klog = _KLOG_LINE.match(line)
        if (klog and klog.group(1) in "EF") or (not klog and any(word in line.lower() for word in _FATAL_WORDS)):
            found.append(line)
    return found[-keep:]
