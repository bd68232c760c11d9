# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Guardrails: ValidatingAdmissionPolicies (and their bindings) that refuse dangerous DRA objects whoever
writes them (kubectl apply, other tools), not only dra.admin's own modules.

- ``broad-device-taint``: a DeviceTaintRule whose deviceSelector names no driver (it can match every
  device of the cluster), or a NoExecute one without both driver and pool, unless the rule carries the
  override annotation ``dra.admin/allow-broad-taint`` with a reason. Checked on CREATE, and on UPDATE when
  the spec changes or the old object carried the override (so removing it is checked too): metadata edits of
  a rule made before the policy stay possible.
- ``admin-access``: a ResourceClaim or ResourceClaimTemplate with ``adminAccess: true`` in any request
  (v1beta1 and v1alpha3 flat on the request, v1beta2 and v1 under ``exactly``; ``firstAvailable``
  subrequests too) outside a namespace labelled with the release's admin-access label (``upgrade.checks``
  knows the rename). CREATE only: the claim spec is immutable. kube-apiserver refuses the same itself from
  1.33 (``ADMIN_LABEL_ENFORCED_FROM``), before validating admission runs: there the policy repeats that check
  (and acts only on 1.32, or should the API server's own check go).

Every policy matches every served version of its resources (``matchPolicy: Equivalent`` converts a request
in any other version); the expressions read only fields every version has, and reach the fields that differ
between versions through ``dyn()``, so the API server's type checker has nothing to warn about.

Pure functions: the cluster's version and served versions come in as data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    RESOURCE_GROUP, admission_policy_api_version, parse_minor,
)
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import (
    ADMIN_LABEL_ENFORCED_FROM, admin_access_label,
)

BROAD_DEVICE_TAINT = "broad-device-taint"
ADMIN_ACCESS = "admin-access"
GUARDRAILS = (BROAD_DEVICE_TAINT, ADMIN_ACCESS)
GUARDRAIL_LABEL = "dra.admin/guardrail"
OVERRIDE_ANNOTATION = "dra.admin/allow-broad-taint"
NAME_PREFIX = "dra-admin-guardrail-"
POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
KINDS = (POLICY_KIND, BINDING_KIND)
VALIDATION_ACTIONS = ("Deny", "Warn", "Audit")
DEFAULT_ACTIONS = ("Deny",)
# The resources each guardrail matches.
RESOURCES = {BROAD_DEVICE_TAINT: ("devicetaintrules",), ADMIN_ACCESS: ("resourceclaims", "resourceclaimtemplates")}
PROBE_NAME = NAME_PREFIX + "probe"


def policy_name(guardrail):
    return NAME_PREFIX + guardrail


def option_name(guardrail):
    """The module option (and, with dra_guardrails_ in front, the role knob) that switches a guardrail."""
    return guardrail.replace("-", "_")


def enabled(params):
    """{guardrail: bool} from the module's switches (a switch left out is on)."""
    return dict((g, params.get(option_name(g)) is not False) for g in GUARDRAILS)


def input_errors(params):
    """Problems of the guardrails' parameters (validation_actions: list), each naming the field and the fix."""
    errors = []
    actions = list(params.get("validation_actions") or [])
    bad = [a for a in actions if a not in VALIDATION_ACTIONS]
    if not actions or bad:
        errors.append("validation_actions %r: give one or more of %s (for example [Deny], or [Warn, Audit] to "
                      "report without refusing)" % (actions, ", ".join(VALIDATION_ACTIONS)))
    elif "Deny" in actions and "Warn" in actions:
        errors.append("validation_actions %r: Deny and Warn cannot be used together (the API server refuses "
                      "the binding): use [Deny] or [Deny, Audit], or [Warn, Audit]" % (actions,))
    elif len(set(actions)) != len(actions):
        errors.append("validation_actions %r: each action once" % (actions,))
    return errors


def _labels(guardrail):
    return {MANAGED_BY_LABEL: MANAGED_BY, GUARDRAIL_LABEL: guardrail}


def _override_unset(obj):
    return ("!has(%(o)s.metadata.annotations) || !('%(a)s' in %(o)s.metadata.annotations) || "
            "%(o)s.metadata.annotations['%(a)s'] == ''" % {"o": obj, "a": OVERRIDE_ANNOTATION})


def _rule(versions, operations, resources):
    return {"apiGroups": [RESOURCE_GROUP], "apiVersions": list(versions), "operations": list(operations),
            "resources": list(resources)}


def _policy(api_version, guardrail, rules, spec):
    body = {"failurePolicy": "Fail", "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": rules}}
    body.update(spec)
    return {"apiVersion": api_version, "kind": POLICY_KIND,
            "metadata": {"name": policy_name(guardrail), "labels": _labels(guardrail)}, "spec": body}


def binding(api_version, guardrail, actions):
    """The binding of a guardrail's policy: every object, with the given validationActions."""
    return {"apiVersion": api_version, "kind": BINDING_KIND,
            "metadata": {"name": policy_name(guardrail), "labels": _labels(guardrail)},
            "spec": {"policyName": policy_name(guardrail), "validationActions": list(actions)}}


def broad_taint_messages():
    """The broad-device-taint validations' messages, without the rule's kind and name (the message expressions
    put them in front; the static message says only the kind)."""
    tail = ("(dra.admin guardrail %s, ValidatingAdmissionPolicy %s). To taint that many devices on purpose, "
            "annotate the rule %s: \"<reason>\"" % (BROAD_DEVICE_TAINT, policy_name(BROAD_DEVICE_TAINT),
                                                    OVERRIDE_ANNOTATION))
    return {
        "driver": "spec.deviceSelector names no driver, so the rule can match every device of every driver: name "
                  "the driver (and pool, device) in spec.deviceSelector " + tail,
        "noexecute": "a NoExecute taint must name both driver and pool in spec.deviceSelector (NoExecute evicts "
                     "every pod using a matched device): name the pool, or use effect NoSchedule " + tail,
    }


def _named(prefix_expr, message):
    """A messageExpression: the static message with the object's kind and name put in front."""
    return "%s + ' ' + %s" % (prefix_expr, _cel_string(message))


def _cel_string(text):
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")


def broad_taint_policy(api_version, versions):
    """The broad-device-taint ValidatingAdmissionPolicy for DeviceTaintRules served in `versions`."""
    messages = broad_taint_messages()
    name = "(has(object.metadata.name) ? object.metadata.name : '')"
    prefix = "'DeviceTaintRule ' + %s + ':'" % name
    has_driver = "has(variables.selector.driver) && variables.selector.driver != ''"
    has_pool = "has(variables.selector.pool) && variables.selector.pool != ''"
    spec = {
        "matchConditions": [
            {"name": "no-override", "expression": _override_unset("object")},
            {"name": "spec-or-override-changed",
             "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec || !(%s)"
                           % _override_unset("oldObject")},
        ],
        "variables": [{"name": "selector", "expression": "has(object.spec.deviceSelector) ? "
                                                         "dyn(object.spec.deviceSelector) : dyn({})"}],
        "validations": [
            {"expression": has_driver, "message": "DeviceTaintRule: " + messages["driver"],
             "messageExpression": _named(prefix, messages["driver"]), "reason": "Forbidden"},
            {"expression": "!has(object.spec.taint.effect) || object.spec.taint.effect != 'NoExecute' || "
                           "(%s && %s)" % (has_driver, has_pool),
             "message": "DeviceTaintRule: " + messages["noexecute"], "messageExpression": _named(prefix, messages["noexecute"]),
             "reason": "Forbidden"},
        ],
    }
    return _policy(api_version, BROAD_DEVICE_TAINT, [_rule(versions, ("CREATE", "UPDATE"),
                                                           RESOURCES[BROAD_DEVICE_TAINT])], spec)


def admin_access_message(label):
    return ("requests adminAccess (access to every device of a node, in use or not) in a namespace without the "
            "label %s=true (dra.admin guardrail %s, ValidatingAdmissionPolicy %s). Create it in a namespace "
            "labelled %s=true (kubectl label namespace <namespace> %s=true), or drop adminAccess"
            % (label, ADMIN_ACCESS, policy_name(ADMIN_ACCESS), label, label))


# A request's adminAccess: flat (v1alpha3, v1beta1), under exactly (v1beta2, v1), and on firstAvailable
# subrequests should a version ever carry it there; dyn() keeps the type checker from judging fields one
# version lacks.
_ADMIN_REQUESTED = (
    "variables.requests.exists(r, (has(dyn(r).adminAccess) && dyn(r).adminAccess == true) || "
    "(has(dyn(r).exactly) && has(dyn(r).exactly.adminAccess) && dyn(r).exactly.adminAccess == true) || "
    "(has(dyn(r).firstAvailable) && dyn(r).firstAvailable.exists(s, "
    "has(dyn(s).adminAccess) && dyn(s).adminAccess == true)))")


def admin_access_policy(api_version, versions, label):
    """The admin-access ValidatingAdmissionPolicy for ResourceClaims and templates served in `versions`."""
    message = admin_access_message(label)
    devices = "(object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec)"
    spec = {
        "variables": [
            {"name": "devices", "expression": "has(%s.devices) ? dyn(%s.devices) : dyn({})" % (devices, devices)},
            {"name": "requests", "expression": "has(variables.devices.requests) ? variables.devices.requests : []"},
            {"name": "adminAccess", "expression": _ADMIN_REQUESTED},
        ],
        "validations": [{
            "expression": "!variables.adminAccess || (has(namespaceObject.metadata.labels) && '%s' in "
                          "namespaceObject.metadata.labels && namespaceObject.metadata.labels['%s'] == 'true')"
                          % (label, label),
            "message": "ResourceClaim " + message,
            "messageExpression": _named("object.kind + ' ' + object.metadata.namespace + '/' + "
                                        "(has(object.metadata.name) ? object.metadata.name : '') + ':'",
                                        message),
            "reason": "Forbidden"}],
    }
    return _policy(api_version, ADMIN_ACCESS, [_rule(versions, ("CREATE",), RESOURCES[ADMIN_ACCESS])], spec)


def _skip(guardrail, reason):
    return {"guardrail": guardrail, "reason": reason}


def _broad_taint(api_version, version, serving):
    versions = serving.get("devicetaintrules") or []
    if not versions:
        return None, _skip(BROAD_DEVICE_TAINT, (
            "skipped: Kubernetes %s does not serve DeviceTaintRule (resource.k8s.io devicetaintrules in no served "
            "version), so there is nothing to guard; once it is switched on (role dra.admin.feature_gates with "
            "dra_feature_gates_device_taints: true) run the role again" % version))
    return broad_taint_policy(api_version, versions), None


def _admin_access(api_version, version, serving):
    versions = sorted(set(serving.get("resourceclaims") or []) | set(serving.get("resourceclaimtemplates") or []))
    if not versions:
        return None, _skip(ADMIN_ACCESS, (
            "skipped: Kubernetes %s does not serve ResourceClaims (resource.k8s.io is off), so there is nothing "
            "to guard; switch DRA on (role dra.admin.feature_gates) and run the role again" % version))
    return admin_access_policy(api_version, versions, admin_access_label(version)), None


_BUILDERS = {BROAD_DEVICE_TAINT: _broad_taint, ADMIN_ACCESS: _admin_access}


def notes(version):
    """What the API server enforces itself on this release, per guardrail (the role reports it)."""
    label = admin_access_label(version)
    if parse_minor(version) >= ADMIN_LABEL_ENFORCED_FROM:
        admin = ("kube-apiserver %s refuses adminAccess outside namespaces labelled %s=true itself (since 1.%d), "
                 "before admission policies run: there guardrail %s repeats that check and never acts first" % (
                     version, label, ADMIN_LABEL_ENFORCED_FROM, ADMIN_ACCESS))
    else:
        admin = ("kube-apiserver %s does not check the namespace of an adminAccess claim (it does from 1.%d): "
                 "guardrail %s is the only check (label %s=true)" % (version, ADMIN_LABEL_ENFORCED_FROM,
                                                                     ADMIN_ACCESS, label))
    return {BROAD_DEVICE_TAINT: "no Kubernetes release refuses broad DeviceTaintRules itself",
            ADMIN_ACCESS: admin}


def render(version, serving, enabled, actions=DEFAULT_ACTIONS):
    """The guardrails for a cluster of `version` serving `serving` ({resource: [resource.k8s.io versions]}).

    enabled: {guardrail: bool} (a guardrail left out is on). Returns objects (each policy, then its binding),
    installed (guardrail names), not_applicable ([{guardrail, reason}]: on but not applicable here; not
    `skipped`, a key Ansible reserves) and disabled.
    """
    api_version = admission_policy_api_version(version)
    objects, installed, not_applicable, disabled = [], [], [], []
    for guardrail in GUARDRAILS:
        if not (enabled or {}).get(guardrail, True):
            disabled.append(guardrail)
            continue
        policy, skip = _BUILDERS[guardrail](api_version, version, serving)
        if skip:
            not_applicable.append(skip)
            continue
        objects.extend([policy, binding(api_version, guardrail, actions)])
        installed.append(guardrail)
    return {"policy_api_version": api_version, "objects": objects, "installed": installed, "not_applicable": not_applicable,
            "disabled": disabled}


def ref(obj):
    """{kind, name, guardrail} of a policy or binding (cluster-scoped)."""
    meta = obj.get("metadata") or {}
    return {"kind": obj.get("kind"), "name": meta.get("name"), "guardrail": (meta.get("labels") or {}).get(
        GUARDRAIL_LABEL)}


def is_ours(obj):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY and bool(labels.get(GUARDRAIL_LABEL))


def stale(existing, objects):
    """The guardrails' objects an earlier run made (managed-by and guardrail labels) that `objects` does not
    hold (a guardrail switched off or no longer applicable): bindings first, then policies."""
    wanted = set((o["kind"], o["metadata"]["name"]) for o in objects)
    found = [ref(o) for o in existing if is_ours(o) and (o.get("kind"), o["metadata"]["name"]) not in wanted]
    return sorted(found, key=lambda r: (KINDS.index(r["kind"]) * -1, r["name"]))


def probe_rule(api_version):
    """A DeviceTaintRule the broad-device-taint guardrail refuses (empty selector), for a server-side dry run
    that shows the policy is in force: never stored."""
    return {"apiVersion": "%s/%s" % (RESOURCE_GROUP, api_version), "kind": "DeviceTaintRule",
            "metadata": {"name": PROBE_NAME, "labels": _labels(BROAD_DEVICE_TAINT)},
            "spec": {"deviceSelector": {}, "taint": {"key": "dra.admin/guardrail-probe", "effect": "NoSchedule"}}}


def refused_by(message, guardrail):
    """Whether an API error message is the refusal of `guardrail`'s policy."""
    return policy_name(guardrail) in (message or "")


def type_warnings(policy):
    """The type checker's warnings of a policy read back ([] when none), as 'field: warning' lines."""
    checking = ((policy.get("status") or {}).get("typeChecking") or {})
    return ["%s: %s" % (w.get("fieldRef"), w.get("warning")) for w in checking.get("expressionWarnings") or []]


def type_checked(policy):
    """Whether the API server's type checker has looked at this generation of a policy."""
    status = policy.get("status") or {}
    return status.get("observedGeneration") == (policy.get("metadata") or {}).get("generation") and \
        "typeChecking" in status
