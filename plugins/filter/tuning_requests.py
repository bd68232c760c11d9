# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter dra.admin.tuning_requests: what control_plane_tuning writes for each component (see
plugins/filter/tuning_requests.yml for its documentation)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.control_plane.tuning import tuning_requests


def tuning_requests_filter(components, controller_manager, scheduler, scheduler_config):
    return tuning_requests(components, controller_manager, scheduler, scheduler_config)


class FilterModule(object):
    def filters(self):
        return {"tuning_requests": tuning_requests_filter}
