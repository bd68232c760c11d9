# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.node_report and dra.admin.findings_left: what the role node_doctor reads of
dra_node_state_check_info's result for one node (see their .yml documentation next to this file)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check


def node_report_filter(reports, node):
    try:
        return node_check.node_report(reports, node)
    except node_check.NodeReportError as error:
        raise AnsibleFilterError("dra.admin.node_report: %s" % error)


def findings_left_filter(report, repaired=None):
    try:
        return node_check.findings_left(report, repaired)
    except (AttributeError, TypeError) as error:
        raise AnsibleFilterError("dra.admin.findings_left: unexpected input (%s)" % error)


class FilterModule(object):
    def filters(self):
        return {"node_report": node_report_filter, "findings_left": findings_left_filter}
