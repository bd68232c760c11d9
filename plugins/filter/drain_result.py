# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter dra.admin.drain_result: one drain result from a role's per-phase runs (see
plugins/filter/drain_result.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_progress import merge_drain_steps


def drain_result_filter(steps, waits=None):
    return merge_drain_steps(steps, waits or {})


class FilterModule(object):
    def filters(self):
        return {"drain_result": drain_result_filter}
