# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.node_slices, dra.admin.discovery_record, dra.admin.drift_summary and dra.admin.drift_message:
what the role discovery computes around dra_hardware_facts (see their .yml documentation next to this file)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.nodes import drift


def _wrap(name, function, *args):
    try:
        return function(*args)
    except (AttributeError, KeyError, TypeError) as error:
        raise AnsibleFilterError("dra.admin.%s: unexpected input (%s: %s)" % (name, type(error).__name__, error))


def node_slices_filter(slices, node, drivers):
    return _wrap("node_slices", drift.node_slices, slices, node, drivers)


def discovery_record_filter(hardware, node, drift_facts=None):
    return _wrap("discovery_record", drift.discovery_record, node, hardware, drift_facts)


def drift_summary_filter(records):
    return _wrap("drift_summary", drift.drift_summary, records)


def drift_message_filter(record):
    return _wrap("drift_message", drift.drift_message, record)


class FilterModule(object):
    def filters(self):
        return {"node_slices": node_slices_filter, "discovery_record": discovery_record_filter,
                "drift_summary": drift_summary_filter, "drift_message": drift_message_filter}
