# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.device_taint_result and dra.admin.remediation_result: one module result from a role's write
and its until-loop's last round (see plugins/filter/device_taint_result.yml and remediation_result.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices.taint_progress import (
    merge_remediation_steps, merge_taint_steps,
)


def device_taint_result_filter(step, wait=None):
    return merge_taint_steps(step, wait)


def remediation_result_filter(step, wait=None):
    return merge_remediation_steps(step, wait)


class FilterModule(object):
    def filters(self):
        return {"device_taint_result": device_taint_result_filter, "remediation_result": remediation_result_filter}
