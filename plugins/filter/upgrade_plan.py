# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.upgrade_plan_lines and dra.admin.upgrade_node_plan: the plan of dra_upgrade_plan_info read by
playbooks/upgrade.yml (see plugins/filter/upgrade_plan_lines.yml and upgrade_node_plan.yml); and
dra.admin.binary_checksum_problems, role node_upgrade's check of the binaries it installs
(plugins/filter/binary_checksum_problems.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.upgrade.binaries import checksum_problems
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import UpgradeInputError
from ansible_collections.dra.admin.plugins.module_utils.upgrade.rollout import node_entry, plan_lines


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


def binary_checksum_problems(stats, published, given=None):
    try:
        return checksum_problems(stats, published, given)
    except (AttributeError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("dra.admin.binary_checksum_problems: give the results of the stat and slurp loops "
                                 "and a mapping of binary names to sha256 digests (%s)" % exc)


class FilterModule(object):
    def filters(self):
        return {"upgrade_plan_lines": upgrade_plan_lines, "upgrade_node_plan": upgrade_node_plan,
                "binary_checksum_problems": binary_checksum_problems}
