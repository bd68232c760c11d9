# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A driver's identity bound to its own driver name and node, for ResourceSlices.

RBAC gives a kubelet plugin create, update and delete on every ResourceSlice: one compromised plugin pod could forge
or delete any node's slices, for any driver, and steer workloads onto devices it invents. A ValidatingAdmissionPolicy
narrows what the driver's identity may write (the rule NVIDIA's and Intel's driver charts ship, here for any
driver):

- only slices whose ``spec.driver`` is its own driver (on create, and before and after an update or a delete);
- a slice with ``spec.nodeName`` only for the node its token is bound to: the
  ``authentication.kubernetes.io/node-name`` extra the API server puts in a pod-bound service account token's user
  info (from 1.30; GA, on by default, 1.32);
- a slice without ``spec.nodeName`` (``allNodes``, ``nodeSelector``, ``perDeviceNodeSelection``: a network-attached
  pool) only where the user says the driver publishes such slices (``cluster_slices``).

The policy matches only the identities given (``matchConditions`` on the user name), so nothing else is slowed or
refused: administrators, the kubelet (it deletes a driver's slices of its node) and other drivers keep what RBAC
gives them.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.rbac.guardrails import BINDING_KIND, POLICY_KIND, cel_string
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import RESOURCE_GROUP
# The policy's (and its binding's) name: this prefix and the driver name (a DNS subdomain already).
NAME_PREFIX = "dra-kubeletplugin."
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


def policy_name(driver):
    return NAME_PREFIX + driver


def service_account_user(namespace, name):
    """The user name the API server gives a service account's tokens."""
    return "system:serviceaccount:%s:%s" % (namespace, name)


def _identity_condition(users):
    names = ", ".join(cel_string(u) for u in sorted(set(users)))
    return "request.userInfo.username in [%s]" % names


# The node the request's token is bound to, '' when the token names none (not a pod's projected token).
_BOUND_NODE = ("has(request.userInfo.extra) && %(k)s in request.userInfo.extra && "
               "size(request.userInfo.extra[%(k)s]) > 0 ? request.userInfo.extra[%(k)s][0] : ''"
               % {"k": cel_string(NODE_NAME_EXTRA)})
# The slice as it is and, for an update, as it was; for a delete, as it was.
_SLICES = ("request.operation == 'CREATE' ? [object] : request.operation == 'DELETE' ? [oldObject] : "
           "[object, oldObject]")
_NODE_LOCAL = "has(s.spec.nodeName) && s.spec.nodeName != ''"


def validations(driver, cluster_slices):
    """The policy's validations: its own driver; node-local slices of its own node; cluster-scoped slices only when
    `cluster_slices`."""
    elsewhere = "true" if cluster_slices else "false"
    return [
        {"expression": "variables.slices.all(s, s.spec.driver == %s)" % cel_string(driver),
         "messageExpression": ("%s + request.userInfo.username + ' may write only ResourceSlices of driver ' + %s + "
                               "', not of ' + variables.slices.map(s, s.spec.driver).filter(d, d != %s)[0]"
                               % (cel_string("dra.admin: "), cel_string(driver), cel_string(driver))),
         "reason": "Forbidden"},
        {"expression": ("variables.slices.all(s, %s ? variables.node != '' && s.spec.nodeName == variables.node : %s)"
                        % (_NODE_LOCAL, elsewhere)),
         "messageExpression": (
             "%s + request.userInfo.username + (variables.node == '' ? ' has no node in its token' : "
             "' is bound to node ' + variables.node) + ': it may write only the ResourceSlices of that node' + %s"
             % (cel_string("dra.admin: "), cel_string(
                 "" if cluster_slices else " (slices without spec.nodeName are not allowed for this driver: "
                 "set dra_driver_cluster_slices: true if it publishes them)"))),
         "reason": "Forbidden"},
    ]


def slice_policy(api_version, driver, users, cluster_slices=False, labels=None):
    """[ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding] binding the identities `users` (user names, a
    service account's as service_account_user gives it) to ResourceSlices of `driver` on their own node."""
    name = policy_name(driver)
    meta = {"name": name, "labels": dict(labels or {})}
    policy = {
        "apiVersion": api_version, "kind": POLICY_KIND, "metadata": dict(meta),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": [{
                "apiGroups": [RESOURCE_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": ["resourceslices"]}]},
            "matchConditions": [{"name": "the-drivers-identity", "expression": _identity_condition(users)}],
            "variables": [{"name": "node", "expression": _BOUND_NODE}, {"name": "slices", "expression": _SLICES}],
            "validations": validations(driver, cluster_slices),
        },
    }
    policy_binding = {"apiVersion": api_version, "kind": BINDING_KIND, "metadata": dict(meta),
                      "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return [policy, policy_binding]
