#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: component_reader
short_description: The identity that may only read the control-plane components' /metrics and /configz, and a short-lived token of it
version_added: 0.1.0
description:
  - Makes, where they are missing or differ, the ServiceAccount C(dra-admin-component-reader) (in O(namespace)), the
    ClusterRole C(dra.admin:component-reader), which allows only C(get) on the non-resource URLs C(/metrics) and
    C(/configz), and the ClusterRoleBinding between them; then asks the API server for a token of that account
    (TokenRequest) that expires after O(token_seconds).
  - kube-apiserver authorizes those URLs itself; kube-controller-manager and kube-scheduler ask kube-apiserver
    (SubjectAccessReview), so the token reads what the restart steps need and nothing else - no resource of the
    API, no C(/logs), no C(/debug).
  - Used by the internal role dra.admin.component_restart (entry point C(reader)) before a component is changed,
    while kube-apiserver still answers; the token is written only to a file on tmpfs on the component's host.
  - RV(token) is a credential. Run the task with C(no_log) and never register it into a report.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.actiongroup_k8s
options:
  namespace:
    description:
      - Namespace of the reader's ServiceAccount.
    type: str
    default: kube-system
  token_seconds:
    description:
      - Seconds the token lives; the API server refuses less than 600 (10 minutes), which is what a smaller value
        becomes.
    type: int
    default: 960
  token:
    description:
      - Ask for a token. V(false) only makes the RBAC objects what they must be.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details:
      - Reports the objects it would make or change; asks for no token.
  diff_mode:
    support: none
notes:
  - The RBAC objects carry the label C(app.kubernetes.io/managed-by=dra.admin). A ClusterRoleBinding with another
    roleRef is deleted and made again (the API does not change a roleRef).
  - A token request creates nothing stored, so it is not counted as a change; the task reports a change only
    when an object was made or changed.
"""

EXAMPLES = r"""
- name: A token of the component reader (no_log - it is a credential)
  dra.admin.component_reader:
    token_seconds: 900
  register: reader
  no_log: true
"""

RETURN = r"""
objects:
  description: The objects made (C(create)), changed (C(update)) or made again (C(replace)); in check mode those
    that would be.
  returned: always
  type: list
  elements: dict
  sample: [{kind: ClusterRole, name: "dra.admin:component-reader", action: create}]
user:
  description: The user name the token authenticates as.
  returned: always
  type: str
  sample: system:serviceaccount:kube-system:dra-admin-component-reader
token:
  description: The bearer token (empty in check mode and with O(token=false)). A credential; see the description.
  returned: always
  type: str
expiration_timestamp:
  description: When the token expires, as the API server says (RFC 3339); empty without a token.
  returned: always
  type: str
  sample: "2026-05-01T10:15:00Z"
api_requests:
  description: Number of requests made to the API server.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import AnsibleK8SModule, DraApi, auth_argument_spec
from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_reader import (
    reader_user, token_seconds,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_reader_service import (
    ensure, request_token,
)


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        namespace=dict(type="str", default="kube-system"),
        token_seconds=dict(type="int", default=960, no_log=False),
        token=dict(type="bool", default=True, no_log=False),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    with fails_on_error(module) as failure:
        seconds = token_seconds(None, params["token_seconds"])
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        objects = ensure(api, params["namespace"], module.check_mode)
        issued = {"token": "", "expiration_timestamp": ""}
        if params["token"] and not module.check_mode:
            issued = request_token(api, params["namespace"], seconds)
    module.exit_json(changed=bool(objects), objects=objects, user=reader_user(params["namespace"]),
                     api_requests=api.requests, **issued)


if __name__ == "__main__":
    main()
