# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter dra.admin.wait_retries: the rounds of a role's until-loop wait (see plugins/filter/wait_retries.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_retries


def wait_retries_filter(timeout, delay, elapsed=0):
    try:
        return wait_retries(timeout, delay, elapsed)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("dra.admin.wait_retries: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"wait_retries": wait_retries_filter}
