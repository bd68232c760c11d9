# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_guardrails_info against the cluster: the server's version, which resource.k8s.io versions serve the
guarded resources, the policies and bindings an earlier run made; with ``wait``, the evidence that each
guardrail is in force (its policy type-checked without warnings, and for broad-device-taint a server-side dry
run of a rule it must refuse, refused). Every decision is rbac/guardrails.py's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import RESOURCE_GROUP
from ansible_collections.dra.admin.plugins.module_utils.rbac.guardrails import (
    BINDING_KIND, BROAD_DEVICE_TAINT, DEFAULT_ADMIN_GROUPS, GUARDRAIL_LABEL, POLICY_KIND, RESOURCES, enabled,
    input_errors, notes, policy_name,
    probe_rule, ref, refused_by, render, stale, type_checked, type_warnings,
)
from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL

PATHS = {POLICY_KIND: "validatingadmissionpolicies", BINDING_KIND: "validatingadmissionpolicybindings"}


class GuardrailNotInForce(DraAdminError):
    """A guardrail the run installed is not enforced within the wait."""


def serving(api):
    """{resource: [resource.k8s.io versions listing it]} for the guarded resources, from the client's one
    discovery of the group."""
    by_resource = api.versions_by_resource()
    return dict((name, by_resource.get(name, [])) for names in RESOURCES.values() for name in names)


def _path(policy_api, kind, name=None):
    return "/apis/%s/%s%s" % (policy_api, PATHS[kind], "/" + name if name else "")


def existing(api, policy_api):
    """The policies and bindings an earlier run made (managed-by and guardrail labels)."""
    query = {"labelSelector": "%s=%s,%s" % (MANAGED_BY_LABEL, MANAGED_BY, GUARDRAIL_LABEL)}
    found = []
    for kind in (BINDING_KIND, POLICY_KIND):
        for item in api.list_items(_path(policy_api, kind), query):
            item["kind"] = kind
            found.append(item)
    return found


def plan(api, params):
    """dra_guardrails_info's result without the wait: the objects to apply, the guardrails skipped or off, what
    the release enforces itself, the stale objects and every object earlier runs made."""
    errors = input_errors(params)
    if errors:
        raise InputError("; ".join(errors))
    version = api.server_version().get("gitVersion")
    served = serving(api)
    out = render(version, served, enabled(params), params["validation_actions"],
                 params.get("admin_groups") or DEFAULT_ADMIN_GROUPS)
    found = existing(api, out["policy_api_version"])
    out.update({"kubernetes_version": version, "serving": served, "notes": notes(version),
                "stale": stale(found, out["objects"]), "existing": [ref(o) for o in found]})
    return out


def probe(api, guardrail, served):
    """One look at whether a guardrail is in force: (in force, evidence text)."""
    policy = api.get_or_none(_path(served["policy_api_version"], POLICY_KIND, policy_name(guardrail)))
    if policy is None:
        return False, "policy %s is not there" % policy_name(guardrail)
    if not type_checked(policy):
        return False, "the API server has not type-checked policy %s yet" % policy_name(guardrail)
    warnings = type_warnings(policy)
    if warnings:
        raise GuardrailNotInForce("policy %s has type-checking warnings, so its expressions do not fit what this "
                                  "cluster serves: %s" % (policy_name(guardrail), "; ".join(warnings)),
                                  {"type_warnings": warnings})
    if guardrail != BROAD_DEVICE_TAINT or "Deny" not in served["validation_actions"]:
        return True, "policy %s type-checked without warnings" % policy_name(guardrail)
    version = served["serving"]["devicetaintrules"][0]
    try:
        api.request("POST", "/apis/%s/%s/devicetaintrules" % (RESOURCE_GROUP, version), {"dryRun": "All"},
                    body=probe_rule(version))
    except DraApiError as exc:
        if refused_by(str(exc), guardrail):
            return True, "a dry run of a DeviceTaintRule with an empty selector was refused by %s" % (
                policy_name(guardrail))
        raise
    return False, "a dry run of a DeviceTaintRule with an empty selector is still accepted"


def wait_in_force(api, result, params, clock=time.time, sleep=time.sleep):
    """Wait until every installed guardrail is in force (the API server loads policies asynchronously);
    GuardrailNotInForce naming what is still missing after wait_timeout."""
    deadline = clock() + params["wait_timeout"]
    evidence = {}
    pending = list(result["installed"])
    while True:
        for guardrail in list(pending):
            done, evidence[guardrail] = probe(api, guardrail, dict(result, validation_actions=params[
                "validation_actions"]))
            if done:
                pending.remove(guardrail)
        if not pending or clock() >= deadline:
            break
        sleep(params["wait_sleep"])
    if pending:
        raise GuardrailNotInForce("guardrail%s %s not in force after %ss: %s" % (
            "s" if len(pending) > 1 else "", ", ".join(pending), params["wait_timeout"],
            "; ".join(evidence[g] for g in pending)), {"in_force": evidence})
    return evidence


def run(api, params, clock=time.time, sleep=time.sleep):
    """dra_guardrails_info's result: the plan, and with wait the evidence each installed guardrail is in force
    (in_force: {guardrail: evidence})."""
    result = plan(api, params)
    if params.get("wait"):
        result["in_force"] = wait_in_force(api, result, params, clock, sleep)
    return result
