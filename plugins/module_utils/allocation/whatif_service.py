# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The what-if of a drain or a device taint against the API: the explainer's fixed reads (without pods), then
``whatif.preview`` on the pods the operation would evict."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.allocation import explain, whatif
from ansible_collections.dra.admin.plugins.module_utils.kube.cel import Environment
from ansible_collections.dra.admin.plugins.module_utils.allocation.explain_service import read_cluster, scheduler_features
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import parse_minor


def eviction_previewer(api, extra_rules=()):
    """A function (evicted pods, removed nodes) -> whatif.preview, on the cluster read once here (the explainer's
    fixed reads, with the DeviceTaintRules added): each call starts from that state, so one read serves a preview
    per node."""
    cluster = read_cluster(api, None, with_pods=False)
    cluster["rules"] = list(cluster["rules"]) + list(extra_rules)
    features, dummy = scheduler_features(api, cluster["server_version"])
    env = Environment(parse_minor(cluster["server_version"]))

    def preview(evicted_pods, removed_nodes=()):
        ctx = explain.context(env, cluster, features)
        return whatif.preview(ctx, cluster["claims"], cluster["nodes"], list(evicted_pods), removed_nodes)
    return preview


def preview_evictions(api, evicted_pods, removed_nodes=(), extra_rules=()):
    """whatif.preview of the evicted pods with the nodes removed and the DeviceTaintRules added."""
    return eviction_previewer(api, extra_rules)(evicted_pods, removed_nodes)
