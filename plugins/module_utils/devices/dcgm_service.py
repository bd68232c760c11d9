# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The DCGM exporter's series read from Prometheus (access.prometheus), judged by devices.dcgm."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices import dcgm
from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import PENDING_DRAIN


def read_dcgm_health(prom, window, pending=PENDING_DRAIN):
    """{gpu_health, series_found, series_missing, queries}: one instant query each (a fixed number of requests,
    whatever the number of GPUs); a series no GPU reports is missing (not collected by the exporter, or no exporter
    at all)."""
    queries = dcgm.queries(window)
    results = dict((name, prom.series(query)) for name, query in sorted(queries.items()))
    found = sorted(name for name in dcgm.SERIES if results.get(name))
    return {"gpu_health": dcgm.gpu_facts(results, pending), "series_found": found,
            "series_missing": sorted(set(dcgm.SERIES) - set(found)), "queries": queries}
