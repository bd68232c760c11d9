# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_driver_plan_info against the cluster: the nodes, the server's version and what resource.k8s.io
serves read through api.DraApi, a local chart's Chart.yaml read from this host, the plan made by
drivers_plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.dra.admin.plugins.module_utils.drivers import plan as drivers_plan
from ansible_collections.dra.admin.plugins.module_utils.access.files import read_text


def local_chart(chart_ref):
    """The Chart.yaml of a chart directory on this host (a mapping), or None."""
    path = os.path.join(str(chart_ref or ""), "Chart.yaml")
    if not os.path.isfile(path):
        return None
    import yaml
    return yaml.safe_load(read_text(path)) or {}


def plan(api, params, warn):
    """dra_driver_plan_info's result; warn(text) is called with each warning."""
    params, kind, supports = drivers_plan.prepared(params, local_chart)
    nodes = list(api.list_items("/api/v1/nodes"))
    placed = drivers_plan.placement(nodes, params, kind, supports)
    for warning in placed["warnings"]:
        warn(warning)
    version = api.server_version().get("gitVersion")
    served = api.served_resources()
    api_version = api.resource_api_version()
    return drivers_plan.plan_result(params, kind, placed, version, served, api_version)
