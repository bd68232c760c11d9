# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The DCGM exporter's series read from Prometheus (access.prometheus), judged by devices.dcgm."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices import dcgm


def read_dcgm_health(prom, window):
    """{gpu_health, series_found, series_missing, queries}: one instant query per series (a fixed number of
    requests); a series no GPU reports is missing (not collected by the exporter, or no exporter at all)."""
    queries = dcgm.queries(window)
    results = dict((name, prom.series(query)) for name, query in sorted(queries.items()))
    found = sorted(name for name, rows in results.items() if rows)
    return {"gpu_health": dcgm.gpu_facts(results), "series_found": found,
            "series_missing": sorted(set(dcgm.SERIES) - set(found)), "queries": queries}
