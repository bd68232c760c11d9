#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: component_metrics_info
short_description: Read from a component's /metrics whether it restarted and runs with the wanted feature gates
version_added: 0.1.0
description:
  - Reads one C(/metrics) endpoint of a Kubernetes component (kube-apiserver, kube-controller-manager,
    kube-scheduler, kubelet) and reports its process start time (C(process_start_time_seconds)) and its feature
    gates (C(kubernetes_feature_enabled)).
  - With O(started_after) and O(feature_gates), RV(ready) says whether the change was taken - a process that
    started at or after that time, and every wanted gate with the wanted value - so a task can wait for it
    with C(until).
  - With O(configz_expected), it also reads the component's C(/configz) and RV(ready) needs every pattern matched
    there too (RV(configz_missing)).
  - An endpoint that cannot be read (the component is restarting) is not a failure of this module - RV(ready)
    is false and RV(error) says why - so that C(until) keeps trying.
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.platform
options:
  url:
    description:
      - Full URL of the endpoint, for example V(https://127.0.0.1:10257/metrics).
    type: str
    required: true
  token:
    description:
      - A bearer token for the endpoint, sent in the C(Authorization) header and never returned or logged (role
        dra.admin.component_restart passes the short-lived token of M(dra.admin.component_reader), so no token file is
        written on the host).
      - Mutually exclusive with O(token_file).
    type: str
  token_file:
    description:
      - A file on the host holding a bearer token for the endpoint. Its content is sent in the C(Authorization) header
        as a bearer token, never returned.
    type: path
  client_cert:
    description:
      - PEM client certificate for the endpoint.
    type: path
  client_key:
    description:
      - PEM private key of O(client_cert).
    type: path
  ca_path:
    description:
      - CA bundle to verify the endpoint with.
    type: path
  validate_certs:
    description:
      - Verify the endpoint's TLS certificate.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for the answer; a finite number above 0.
    type: float
    default: 10
  feature_gates:
    description:
      - Gates the component must report, name to V(true) or V(false).
    type: dict
    default: {}
  configz_url:
    description:
      - Full URL of the component's C(/configz); by default O(url) with its path replaced by C(/configz).
    type: str
  configz_expected:
    description:
      - Regular expressions (Python's) the C(/configz) answer must all match, for example V("qps":\\s*50).
    type: list
    elements: str
    default: []
  started_after:
    description:
      - Seconds since the epoch, on the clock of C(process_start_time_seconds) (C(/proc/stat) btime plus the
        process's start ticks); the process must have started at or after it.
    type: float
attributes:
  platform:
    support: full
    platforms: posix
    details:
      - Runs where the endpoint answers, usually the control-plane node itself (V(https://127.0.0.1:...)).
"""

EXAMPLES = r"""
- name: A token of the identity that may only read /metrics and /configz
  dra.admin.component_reader:
    token_seconds: 600
  register: reader
  no_log: true

- name: Wait until kube-scheduler runs again with DRADeviceTaints on
  dra.admin.component_metrics_info:
    url: https://127.0.0.1:10259/metrics
    token: "{{ reader.token }}"
    validate_certs: false  # kubeadm's kube-scheduler serves a certificate it signed itself at start-up
    feature_gates:
      DRADeviceTaints: true
    started_after: "{{ before.stdout | float }}"
  register: scheduler
  until: scheduler.ready
  retries: 60
  delay: 5
"""

RETURN = r"""
ready:
  description: Whether the endpoint answered, the process started at or after O(started_after) (when given) and
    every gate of O(feature_gates) has the wanted value.
  returned: always
  type: bool
status:
  description: HTTP status of the answer (null when there was none).
  returned: always
  type: int
  sample: 200
error:
  description: Why the endpoint could not be read or parsed (empty when it could).
  returned: always
  type: str
start_time:
  description: The process's C(process_start_time_seconds) (null when not reported).
  returned: always
  type: float
  sample: 1795303523.49
new_process:
  description: Whether the process started at or after O(started_after); null without O(started_after).
  returned: always
  type: bool
feature_gates:
  description: Every gate the component reports, name to whether it is enabled.
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: true, DRADeviceTaints: false}
configz_missing:
  description: The patterns of O(configz_expected) the C(/configz) answer does not (yet) match (all of them when it
    could not be read).
  returned: always
  type: list
  elements: str
missing_gates:
  description: The wanted gates the component does not (yet) report with the wanted value, as C(Gate=true).
  returned: always
  type: list
  elements: str
  sample: [DRADeviceTaints=true]
api_requests:
  description: Number of HTTP requests the module made.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.dra.admin.plugins.module_utils.common.errors import (
    InputError, fails_on_error, raise_input_errors,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_metrics import (
    component_state, configz_missing, configz_patterns, configz_url, wanted_gates,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import ParseError
from ansible_collections.dra.admin.plugins.module_utils.access.http import Http, SourceError, hide_url_credentials
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_parameter_errors


def argument_spec():
    return dict(
        url=dict(type="str", required=True),
        token=dict(type="str", no_log=True),
        token_file=dict(type="path", no_log=False),
        client_cert=dict(type="path"),
        client_key=dict(type="path", no_log=False),
        ca_path=dict(type="path"),
        validate_certs=dict(type="bool", default=True),
        timeout=dict(type="float", default=10),
        feature_gates=dict(type="dict", default={}),
        configz_url=dict(type="str"),
        configz_expected=dict(type="list", elements="str", default=[]),
        started_after=dict(type="float"),
    )


def token_headers(token, token_file):
    """{"Authorization": "Bearer ..."} from the token given or the token file on this host, {} without either;
    InputError naming token_file when it cannot be read or is empty."""
    if token:
        return {"Authorization": "Bearer " + token}
    if not token_file:
        return {}
    try:
        with open(token_file, "rb") as handle:
            token = to_native(handle.read()).strip()
    except (IOError, OSError) as exc:
        raise InputError("token_file %s cannot be read (%s): give the file the token was written to" % (
            token_file, exc.strerror or exc))
    if not token:
        raise InputError("token_file %s is empty: write the reader's token into it (module "
                         "dra.admin.component_reader)" % token_file)
    return {"Authorization": "Bearer " + token}


def _get(params, http, url, headers):
    return http.get(url, headers, params["validate_certs"], params["ca_path"], params["client_cert"],
                    params["client_key"])


def read(params, http, headers=None):
    """The module's result for one read of the endpoint (and of /configz when patterns are expected there)."""
    expected = params.get("configz_expected") or []
    result = dict(ready=False, status=None, error="", start_time=None, new_process=None, feature_gates={},
                  missing_gates=[], configz_missing=list(expected))
    try:
        text = _get(params, http, params["url"], headers)
        result["status"] = 200
        result.update(component_state(text, params["feature_gates"], params["started_after"]))
    except SourceError as exc:
        result.update(status=exc.status, error=to_native(exc))
        return result
    except ParseError as exc:
        result.update(status=200, error="%s is not in the metrics text format: %s" % (params["url"], exc))
        return result
    if expected and result["ready"]:
        where = params.get("configz_url") or configz_url(params["url"])
        try:
            result["configz_missing"] = configz_missing(_get(params, http, where, headers), expected)
        except SourceError as exc:
            result.update(status=exc.status, error=to_native(exc))
        result["ready"] = not result["configz_missing"] and not result["error"]
    return result


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           mutually_exclusive=[("token", "token_file")])
    hide_url_credentials(module, [module.params["url"]])
    with fails_on_error(module):
        raise_input_errors(wait_parameter_errors(module.params, timeouts=("timeout",), intervals=()))
        wanted_gates(module.params["feature_gates"])
        configz_patterns(module.params["configz_expected"])
        headers = token_headers(module.params["token"], module.params["token_file"])
        http = Http(module.params["timeout"])
        result = read(module.params, http, headers)
    module.exit_json(changed=False, api_requests=http.requests, **result)


if __name__ == "__main__":
    main()
