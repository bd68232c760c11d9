# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.upgrade_plan_lines and dra.admin.upgrade_node_plan: the plan of dra_upgrade_plan_info read by
playbooks/upgrade.yml (see plugins/filter/upgrade_plan_lines.yml and upgrade_node_plan.yml); and
dra.admin.kubelet_userns_refusals and dra.admin.binary_checksum_problems, what the node_upgrade role checks on a node
before its kubelet is replaced (kubelet_userns_refusals.yml, binary_checksum_problems.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.upgrade.binaries import checksum_problems
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import UpgradeInputError
from ansible_collections.dra.admin.plugins.module_utils.upgrade.rollout import (
    kubelet_userns_problems, node_entry, plan_lines,
)


def upgrade_plan_lines(plan):
    try:
        return plan_lines(plan)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("dra.admin.upgrade_plan_lines: give the result of dra.admin.dra_upgrade_plan_info "
                                 "(missing %s)" % exc)


def upgrade_node_plan(plan, name):
    try:
        return node_entry(plan, name)
    except UpgradeInputError as exc:
        raise AnsibleFilterError("dra.admin.upgrade_node_plan: %s" % exc)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("dra.admin.upgrade_node_plan: give the result of dra.admin.dra_upgrade_plan_info "
                                 "(missing %s)" % exc)


def kubelet_userns_refusals(subids, pod_files, version):
    """`subids`: the registered output of the role's getsubids step (uids, a line '---', gids); `pod_files`: the
    results of its slurp of the pods' userns files."""
    uids, dummy, gids = (subids or "").partition("---")
    files = dict((item["source"], base64.b64decode(item["content"]).decode()) for item in pod_files or [])
    try:
        return kubelet_userns_problems(uids, gids, files, version)
    except (ValueError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("dra.admin.kubelet_userns_refusals: %s" % exc)


def binary_checksum_problems(stats, published, given=None):
    try:
        return checksum_problems(stats, published, given)
    except (AttributeError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("dra.admin.binary_checksum_problems: give the results of the stat and slurp loops "
                                 "and a mapping of binary names to sha256 digests (%s)" % exc)


class FilterModule(object):
    def filters(self):
        return {"upgrade_plan_lines": upgrade_plan_lines, "upgrade_node_plan": upgrade_node_plan,
                "kubelet_userns_refusals": kubelet_userns_refusals, "binary_checksum_problems": binary_checksum_problems}
