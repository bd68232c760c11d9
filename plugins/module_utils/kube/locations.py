# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Where a ResourceSlice's devices or a ResourceClaim's allocation live: the names every report uses.

Reports keyed by node use the node's name where there is one, and one of the
markers below (``<...>``: never a valid node name) where there is none.

A slice's devices belong to the node their slice (or, with
``perDeviceNodeSelection``, each device) names in ``nodeName``. Devices offered
to many nodes are shared, not any node's own: ``allNodes`` (SLICE_ALL_NODES) or
a ``nodeSelector`` (SLICE_NODE_SELECTOR).

A claim's allocation (``node_scope``) is pinned to named nodes (CLAIM_PINNED,
matchFields on metadata.name), label-selected (CLAIM_SELECTOR), usable on every
node (CLAIM_CLUSTER_WIDE: network-attached devices) or absent
(CLAIM_UNALLOCATED).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SLICE_ALL_NODES = "<all-nodes>"
SLICE_NODE_SELECTOR = "<node-selector>"
SLICE_MARKERS = (SLICE_ALL_NODES, SLICE_NODE_SELECTOR)

CLAIM_PINNED = "node"
CLAIM_SELECTOR = "selector"
CLAIM_CLUSTER_WIDE = "cluster-wide"
CLAIM_UNALLOCATED = "unallocated"
CLAIM_SCOPES = (CLAIM_PINNED, CLAIM_SELECTOR, CLAIM_CLUSTER_WIDE, CLAIM_UNALLOCATED)


def claim_marker(scope):
    """The summary key of claims on no node: <cluster-wide> or <unallocated>."""
    return "<%s>" % scope


CLAIM_MARKERS = (claim_marker(CLAIM_CLUSTER_WIDE), claim_marker(CLAIM_UNALLOCATED))
MARKERS = frozenset(SLICE_MARKERS + CLAIM_MARKERS)


def is_marker(key):
    """Whether a report key is one of the markers above rather than a node name."""
    return key in MARKERS
