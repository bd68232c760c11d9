#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_dcgm_health_info
short_description: Read the health of the cluster's NVIDIA GPUs from the DCGM exporter's series in Prometheus
version_added: 0.3.0
description:
  - Queries Prometheus for the series of NVIDIA's DCGM exporter, per GPU (label C(UUID), the physical GPU's also on
    a MIG instance's series; the node from the exporter's C(hostname) or C(Hostname), else from the scrape's C(node),
    C(kubernetes_node) or C(kubernetes_pod_node_name)), and returns each GPU's health in the shape of
    M(dra.admin.dra_gpu_health_facts)' facts, one entry per node, ready for the
    O(dra.admin.dra_device_health_info#module:gpu_health) option of M(dra.admin.dra_device_health_info) and
    M(dra.admin.dra_device_remediation) - the same verdicts and actions, from the cluster's monitoring instead of
    each node.
  - An Xid counts when its code is new within O(xid_window) seconds on C(DCGM_FI_DEV_XID_ERRORS) (the exporter's
    default series, one series per code with labels C(err_code) and C(err_msg); a code that was already there is not
    new), or when C(DCGM_EXP_XID_ERRORS_COUNT) (when the exporter's counters enable it, labelled C(xid)) counted it;
    the code's meaning and action are those of M(dra.admin.dra_gpu_health_facts). Xids carry no text here; Xid 154
    makes the GPU C(unknown) until its node's C(gpu_recovery_action) is read, and an NVLink5 Xid (144-150), whose
    action NVIDIA's catalog decodes from the kernel line, until its node is read with
    M(dra.admin.dra_gpu_health_facts).
  - C(DCGM_FI_DEV_ROW_REMAP_FAILURE) above 0 asks to run the field diagnostics; C(DCGM_FI_DEV_ROW_REMAP_PENDING),
    C(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL) and C(DCGM_FI_DEV_RETIRED_PENDING) above 0 for a GPU reset (O(pending));
    C(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS) is a note.
  - The exporter's default counters do not export C(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL), C(DCGM_FI_DEV_ROW_REMAP_PENDING)
    or C(DCGM_FI_DEV_RETIRED_PENDING); a GPU without the series its verdict needs (uncorrectable errors since the
    driver loaded, a pending remapping or retirement, Xids) is C(unknown), never C(healthy), unless another series
    makes it C(unhealthy). A GPU the exporter reported within O(xid_window) and no more is C(unknown) too.
  - With the exporter's C(--kubernetes-enable-dra), each GPU lists the DRA devices and claims the exporter names
    (C(dra_devices) of each GPU in RV(gpu_health)).
  - A series no GPU reports is listed in RV(series_missing), not an error. A fixed number of queries, whatever the
    number of GPUs.
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.prometheus
options:
  prometheus_url:
    description:
      - Base URL of the Prometheus HTTP API that scrapes the DCGM exporter (for example
        V(http://prometheus-operated.monitoring.svc:9090)).
    type: str
    required: true
  timeout:
    description:
      - Seconds each HTTP request may take.
    type: float
    default: 10
  xid_window:
    description:
      - Seconds within which a new Xid code counts, and a GPU no longer reported is a finding.
    type: int
    default: 3600
  pending:
    description:
      - What a pending row remapping or page retirement and uncorrectable ECC errors since the driver loaded ask for,
        as the option of the same name of M(dra.admin.dra_gpu_health_facts).
      - V(drain) takes the GPU out of service until a reset applies it (DCGM's answer); V(allow) keeps it in service
        with a note (NVIDIA's error recovery flags page says new work may start).
    type: str
    choices: [drain, allow]
    default: drain
  require_series:
    description:
      - Fail when Prometheus has none of the DCGM series (no exporter scraped), rather than return no GPU.
    type: bool
    default: false
seealso:
  - module: dra.admin.dra_gpu_health_facts
  - module: dra.admin.dra_device_health_info
"""

EXAMPLES = r"""
- name: The GPUs' health from the DCGM exporter
  dra.admin.dra_dcgm_health_info:
    prometheus_url: http://prometheus-operated.monitoring.svc:9090
  register: dcgm

- name: Take the unhealthy GPUs' devices out of service
  dra.admin.dra_device_remediation:
    effect: NoSchedule
    gpu_health: "{{ dcgm.gpu_health }}"
"""

RETURN = r"""
gpu_health:
  description:
    - One entry per node (the exporter's C(hostname) or C(Hostname), else the scrape's node label; null without
      any), as the C(dra_gpu_health) fact of M(dra.admin.dra_gpu_health_facts) - C(node), C(available), C(source)
      (C(dcgm)), C(pending) and C(gpus), each with C(uuid), C(node), C(condition) (C(healthy), C(unhealthy) or
      C(unknown)), C(action), C(reasons), C(notes), C(findings), C(xids) (the codes new in the window), the
      C(series) values read and C(dra_devices) (C(driver), C(pool), C(device), C(claim_namespace), C(claim),
      C(mig_device_uuid), C(namespace), C(pod) from the exporter's DRA labels; empty without them).
  returned: always
  type: list
  elements: dict
  sample:
    - node: gpu-node-1
      available: true
      source: dcgm
      gpus:
        - uuid: GPU-1b2c3d4e-0000-4000-8000-000000000001
          condition: unhealthy
          action: reboot-node
          reasons: ["Xid 79: the GPU has fallen off the bus"]
          notes: []
          xids: [79]
series_found:
  description: The DCGM series at least one GPU reports.
  returned: always
  type: list
  elements: str
series_missing:
  description: The DCGM series no GPU reports (the exporter does not collect them, or no exporter is scraped).
  returned: always
  type: list
  elements: str
queries:
  description: The PromQL query per series, and those of the new Xid codes (C(new_xids)), the GPUs gone from the
    exporter (C(gone)) and the DRA labels (C(dra_devices)).
  returned: always
  type: dict
api_requests:
  description: Number of HTTP requests made.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import (
    DraAdminError, InputError, fails_on_error,
)
from ansible_collections.dra.admin.plugins.module_utils.access.http import Http, hide_url_credentials
from ansible_collections.dra.admin.plugins.module_utils.access.prometheus import Prometheus, connection_options
from ansible_collections.dra.admin.plugins.module_utils.devices.dcgm_service import read_dcgm_health
from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import PENDING_DRAIN, PENDING_POLICIES


def argument_spec():
    return dict(
        prometheus_url=dict(type="str", required=True),
        **connection_options(),
        timeout=dict(type="float", default=10),
        xid_window=dict(type="int", default=3600),
        pending=dict(type="str", choices=list(PENDING_POLICIES), default=PENDING_DRAIN),
        require_series=dict(type="bool", default=False),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    hide_url_credentials(module, [params["prometheus_url"]])
    http = Http(params["timeout"])
    with fails_on_error(module) as failure:
        if params["xid_window"] < 1:
            raise InputError("xid_window is %d; give the seconds an Xid counts, 1 or more" % params["xid_window"])
        if not params["prometheus_url"].startswith(("http://", "https://")):
            raise InputError("prometheus_url %r is not an http(s) URL: give the Prometheus HTTP API's base URL"
                             % params["prometheus_url"])
        failure.keep(api_requests=lambda: http.requests)
        prom = Prometheus(http, params["prometheus_url"], token=params["bearer_token"], headers=params["headers"],
                          validate_certs=params["validate_certs"], ca_path=params["ca_path"])
        result = read_dcgm_health(prom, params["xid_window"], params["pending"])
        if params["require_series"] and not result["series_found"]:
            raise DraAdminError("Prometheus at %s has none of the DCGM exporter's series (%s): is the exporter "
                                "scraped?" % (params["prometheus_url"], ", ".join(result["series_missing"])), result)
    module.exit_json(changed=False, api_requests=http.requests, **result)


if __name__ == "__main__":
    main()
