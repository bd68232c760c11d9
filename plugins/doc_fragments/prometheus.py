# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""How the modules that query Prometheus reach it (their argument spec: plugins/module_utils/access/prometheus.py,
connection_options). Each module documents its own prometheus_url."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  bearer_token:
    description:
      - Bearer token sent to O(prometheus_url).
    type: str
  headers:
    description:
      - Extra HTTP headers sent to O(prometheus_url) (for example a tenant header).
    type: dict
    default: {}
  validate_certs:
    description:
      - Verify the TLS certificate of O(prometheus_url).
    type: bool
    default: true
  ca_path:
    description:
      - CA bundle to verify O(prometheus_url) with.
    type: path
"""
