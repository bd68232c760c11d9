# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_driver_status_info against the cluster: a driver's DaemonSet, the nodes and the driver's
ResourceSlices read through api.DraApi, once or until the driver is ready (judged by status)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.drivers import status
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError


def observe(api, params):
    path = "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (params["namespace"], params["daemonset_name"])
    daemonset = api.get_or_none(path)
    if daemonset is None:
        raise DraApiError("DaemonSet %s/%s does not exist: install the driver first (role dra.admin.driver)"
                          % (params["namespace"], params["daemonset_name"]))
    nodes = list(api.list_items("/api/v1/nodes"))
    slices = api.list_items(api.resource_path("resourceslices"), {"fieldSelector": "spec.driver=%s" % params["driver"]})
    return status.observed(daemonset, nodes, slices, params["driver"])


def run(api, params, clock=time.time, sleep=time.sleep):
    """dra_driver_status_info's result: one look, or with wait looks every wait_sleep seconds until the driver
    is ready or wait_timeout has passed."""
    started = clock()
    since = params.get("since") or started
    progress = []
    last_text = None
    while True:
        seen = observe(api, params)
        elapsed = clock() - started
        state = status.progress_state(seen)
        if state != last_text:
            progress.append("%ds %s" % (int(elapsed), state))
            last_text = state
        if not params["wait"] or status.is_done(seen) or elapsed >= params["wait_timeout"]:
            break
        sleep(params["wait_sleep"])
    if params["wait"] or status.is_done(seen):  # a look without waiting ends the progress only when done
        progress.append("%ds %s" % (int(clock() - started), status.final_line(params, seen)))
    return status.status(seen, params, progress, clock() - since, since)
