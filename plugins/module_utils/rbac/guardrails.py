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

- ``admin-access-label``: adding, changing or removing the release's admin-access label on a Namespace (CREATE
  with the label, or UPDATE changing its value) by anyone outside the admin persona's groups (``admin_groups``).
  The label lets every claim of the namespace request adminAccess, so a tenant allowed to edit its own
  namespace's labels (namespace-admin tools, self-service platforms) could otherwise give itself access to every
  device (kubernetes#141293). Other label edits, and namespaces without the label, are not affected.

- ``device-count``: on releases whose kube-scheduler crashes on it (``catalog.scheduler_count_overflow``), a
  ResourceClaim or ResourceClaimTemplate with a request (or ``firstAvailable`` subrequest) asking for more devices
  than one claim may hold (``ALLOCATION_RESULTS_MAX_SIZE``): such a claim can never be allocated, and a few such
  counts summing past the native int crash kube-scheduler (kubernetes#141307). With every count at most the limit
  no sum can overflow. CREATE only (the spec is immutable).

Every policy matches every served version of its resources (``matchPolicy: Equivalent`` converts a request
in any other version); the expressions read only fields every version has, and reach the fields that differ
between versions through ``dyn()``, so the API server's type checker has nothing to warn about.

Pure functions: the cluster's version and served versions come in as data.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    ADMIN_LABEL_ENFORCED_FROM, ADMIN_LABEL_RENAMED_IN, ALLOCATION_RESULTS_MAX_SIZE, NEW_ADMIN_LABEL, OLD_ADMIN_LABEL,
    RESOURCE_GROUP, admin_access_label,
    admission_policy_api_version, parse_minor, scheduler_count_overflow, scheduler_count_overflow_fixed_in,
)

BROAD_DEVICE_TAINT = "broad-device-taint"
ADMIN_ACCESS = "admin-access"
ADMIN_ACCESS_LABEL = "admin-access-label"
DEVICE_COUNT = "device-count"
GUARDRAILS = (BROAD_DEVICE_TAINT, ADMIN_ACCESS, ADMIN_ACCESS_LABEL, DEVICE_COUNT)
# The groups that may set the admin-access label by default: kubeadm's cluster administrators (admin.conf) and
# system:masters (super-admin.conf); the role's dra_guardrails_label_admin_groups names the admin persona's.
DEFAULT_ADMIN_GROUPS = ("system:masters", "kubeadm:cluster-admins")
GUARDRAIL_LABEL = "dra.admin/guardrail"
OVERRIDE_ANNOTATION = "dra.admin/allow-broad-taint"
NAME_PREFIX = "dra-admin-guardrail-"
POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
KINDS = (POLICY_KIND, BINDING_KIND)
VALIDATION_ACTIONS = ("Deny", "Warn", "Audit")
DEFAULT_ACTIONS = ("Deny",)
# The resource.k8s.io resources each guardrail matches (admin-access-label matches core Namespaces).
RESOURCES = {BROAD_DEVICE_TAINT: ("devicetaintrules",), ADMIN_ACCESS: ("resourceclaims", "resourceclaimtemplates"),
             DEVICE_COUNT: ("resourceclaims", "resourceclaimtemplates")}
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
    groups = params.get("admin_groups")
    if groups is not None and (not groups or any(not isinstance(g, str) or not g.strip() for g in groups)):
        errors.append("admin_groups %r: give the admin persona's groups (non-empty names), for example "
                      "[system:masters, kubeadm:cluster-admins]; switch the guardrail off with "
                      "admin_access_label: false instead of leaving the list empty" % (groups,))
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
    return "%s + ' ' + %s" % (prefix_expr, cel_string(message))


def cel_string(text):
    """A CEL string literal of `text` (single-quoted, backslashes and quotes escaped)."""
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")


def _in_groups(groups):
    return "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in [%s]))" % ", ".join(
        cel_string(g) for g in groups)


def broad_taint_policy(api_version, versions, groups=DEFAULT_ADMIN_GROUPS):
    """The broad-device-taint ValidatingAdmissionPolicy for DeviceTaintRules served in `versions`; the override
    annotation counts only when a member of `groups` (the admin persona) writes the rule."""
    messages = broad_taint_messages()
    name = "(has(object.metadata.name) ? object.metadata.name : '')"
    prefix = "'DeviceTaintRule ' + %s + ':'" % name
    has_driver = "has(variables.selector.driver) && variables.selector.driver != ''"
    has_pool = "has(variables.selector.pool) && variables.selector.pool != ''"
    spec = {
        "matchConditions": [
            {"name": "no-override", "expression": "(%s) || !%s" % (_override_unset("object"), _in_groups(groups))},
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


# A claim's or a template's requests (the template nests the claim's spec), and the kind namespace/name: that
# starts a message about either.
_CLAIM_DEVICES = "(object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec)"
_CLAIM_PREFIX = ("object.kind + ' ' + object.metadata.namespace + '/' + "
                 "(has(object.metadata.name) ? object.metadata.name : '') + ':'")


def _claim_request_variables():
    """The variables `devices` and `requests` of a policy on ResourceClaims and ResourceClaimTemplates."""
    devices = "has(%s.devices) ? dyn(%s.devices) : dyn({})" % (_CLAIM_DEVICES, _CLAIM_DEVICES)
    return [{"name": "devices", "expression": devices},
            {"name": "requests", "expression": "has(variables.devices.requests) ? variables.devices.requests : []"}]


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
    spec = {
        "variables": _claim_request_variables() + [{"name": "adminAccess", "expression": _ADMIN_REQUESTED}],
        "validations": [{
            "expression": "!variables.adminAccess || (has(namespaceObject.metadata.labels) && '%s' in "
                          "namespaceObject.metadata.labels && namespaceObject.metadata.labels['%s'] == 'true')"
                          % (label, label),
            "message": "ResourceClaim " + message,
            "messageExpression": _named(_CLAIM_PREFIX, message),
            "reason": "Forbidden"}],
    }
    return _policy(api_version, ADMIN_ACCESS, [_rule(versions, ("CREATE",), RESOURCES[ADMIN_ACCESS])], spec)


def admin_label_message(labels, groups):
    return ("only the admin persona (groups %s) may add, change or remove the labels %s: they let every "
            "ResourceClaim of the namespace request adminAccess, access to every device of a node, in use or not "
            "(the first before Kubernetes 1.%d, the second from it, so both are guarded on every release: dra.admin "
            "guardrail %s, ValidatingAdmissionPolicy %s). Ask a cluster administrator to label the namespace"
            % (", ".join(groups), " and ".join(labels), ADMIN_LABEL_RENAMED_IN, ADMIN_ACCESS_LABEL,
               policy_name(ADMIN_ACCESS_LABEL)))


def _label_value(obj, label):
    return "(has(%(o)s.metadata.labels) && '%(l)s' in %(o)s.metadata.labels ? %(o)s.metadata.labels['%(l)s'] : " \
           "'')" % {"o": obj, "l": label}


def admin_label_policy(api_version, labels, groups):
    """The admin-access-label ValidatingAdmissionPolicy: the labels on a Namespace set, changed or removed only by
    a member of `groups`, through the namespace itself or its status and finalize subresources (whose updates keep
    the labels they are sent)."""
    message = admin_label_message(labels, groups)
    changes = []
    for label in labels:
        before = "(request.operation == 'UPDATE' ? %s : '')" % _label_value("oldObject", label)
        changes.append("%s != %s" % (_label_value("object", label), before))
    spec = {
        "matchConditions": [{"name": "label-changed", "expression": " || ".join(changes)}],
        "validations": [{
            "expression": _in_groups(groups),
            "message": "Namespace: " + message,
            "messageExpression": _named("'Namespace ' + object.metadata.name + ' (user ' + "
                                        "(has(request.userInfo.username) ? request.userInfo.username : '') + '):'",
                                        message),
            "reason": "Forbidden"}],
    }
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["namespaces", "namespaces/status", "namespaces/finalize"]}]
    return _policy(api_version, ADMIN_ACCESS_LABEL, rules, spec)


def device_count_message(version):
    return ("asks for more than %d devices in one request, more than one claim can ever hold; on Kubernetes %s "
            "kube-scheduler crashes when such counts sum past its integer range (kubernetes#141307, fixed in %s) "
            "(dra.admin guardrail %s, ValidatingAdmissionPolicy %s). Ask for at most %d devices per request and "
            "claim, or upgrade" % (ALLOCATION_RESULTS_MAX_SIZE, version, scheduler_count_overflow_fixed_in(),
                                   DEVICE_COUNT, policy_name(DEVICE_COUNT), ALLOCATION_RESULTS_MAX_SIZE))


# A request's counts: flat (v1alpha3, v1beta1) or under exactly (v1beta2, v1), and each firstAvailable
# subrequest's; a count left out is 1, and allocationMode All has none.
_COUNT_OVER = (
    "variables.requests.exists(r, (has(dyn(r).count) && dyn(r).count > %(max)d) || "
    "(has(dyn(r).exactly) && has(dyn(r).exactly.count) && dyn(r).exactly.count > %(max)d) || "
    "(has(dyn(r).firstAvailable) && dyn(r).firstAvailable.exists(s, has(dyn(s).count) && dyn(s).count > %(max)d)))"
    % {"max": ALLOCATION_RESULTS_MAX_SIZE})


def device_count_policy(api_version, versions, version):
    """The device-count ValidatingAdmissionPolicy for ResourceClaims and templates served in `versions`."""
    message = device_count_message(version)
    spec = {
        "variables": _claim_request_variables(),
        "validations": [{
            "expression": "!(%s)" % _COUNT_OVER,
            "message": "ResourceClaim " + message,
            "messageExpression": _named(_CLAIM_PREFIX, message),
            "reason": "Forbidden"}],
    }
    return _policy(api_version, DEVICE_COUNT, [_rule(versions, ("CREATE",), RESOURCES[DEVICE_COUNT])], spec)


def _device_count(api_version, version, serving, dummy_groups):
    versions = sorted(set(serving.get("resourceclaims") or []) | set(serving.get("resourceclaimtemplates") or []))
    if not scheduler_count_overflow(version):
        return None, _skip(DEVICE_COUNT, (
            "not needed: kube-scheduler %s checks device counts without overflowing (kubernetes#141307, fixed in "
            "%s and 1.38)" % (version, scheduler_count_overflow_fixed_in())))
    if not versions:
        return None, _skip(DEVICE_COUNT, (
            "skipped: Kubernetes %s does not serve ResourceClaims (resource.k8s.io is off), so there is nothing "
            "to guard; switch DRA on (role dra.admin.feature_gates) and run the role again" % version))
    return device_count_policy(api_version, versions, version), None


def _skip(guardrail, reason):
    return {"guardrail": guardrail, "reason": reason}


def _broad_taint(api_version, version, serving, groups):
    versions = serving.get("devicetaintrules") or []
    if not versions:
        return None, _skip(BROAD_DEVICE_TAINT, (
            "skipped: Kubernetes %s does not serve DeviceTaintRule (resource.k8s.io devicetaintrules in no served "
            "version), so there is nothing to guard; once it is switched on (role dra.admin.feature_gates with "
            "dra_feature_gates_device_taints: true) run the role again" % version))
    return broad_taint_policy(api_version, versions, groups), None


def _admin_access(api_version, version, serving, dummy_groups):
    versions = sorted(set(serving.get("resourceclaims") or []) | set(serving.get("resourceclaimtemplates") or []))
    if not versions:
        return None, _skip(ADMIN_ACCESS, (
            "skipped: Kubernetes %s does not serve ResourceClaims (resource.k8s.io is off), so there is nothing "
            "to guard; switch DRA on (role dra.admin.feature_gates) and run the role again" % version))
    return admin_access_policy(api_version, versions, admin_access_label(version)), None


def _admin_label(api_version, version, serving, groups):
    if not serving.get("resourceclaims"):
        return None, _skip(ADMIN_ACCESS_LABEL, (
            "skipped: Kubernetes %s does not serve ResourceClaims (resource.k8s.io is off), so the admin-access "
            "label grants nothing; switch DRA on (role dra.admin.feature_gates) and run the role again" % version))
    return admin_label_policy(api_version, [OLD_ADMIN_LABEL, NEW_ADMIN_LABEL], groups), None


# Each guardrail's builder: (api_version, version, serving, admin groups) -> (policy, skip).
_BUILDERS = {BROAD_DEVICE_TAINT: _broad_taint, ADMIN_ACCESS: _admin_access, ADMIN_ACCESS_LABEL: _admin_label,
             DEVICE_COUNT: _device_count}


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
            ADMIN_ACCESS: admin,
            ADMIN_ACCESS_LABEL: ("no Kubernetes release limits who may label a namespace %s=true beyond RBAC's "
                                 "update on namespaces" % label),
            DEVICE_COUNT: ("kube-scheduler %s %s" % (version, "crashes on device counts that overflow when summed "
                                                     "(kubernetes#141307): guardrail %s is the only check"
                                                     % DEVICE_COUNT if scheduler_count_overflow(version) else
                                                     "checks device counts without overflowing itself"))}


def render(version, serving, enabled, actions=DEFAULT_ACTIONS, admin_groups=DEFAULT_ADMIN_GROUPS):
    """The guardrails for a cluster of `version` serving `serving` ({resource: [resource.k8s.io versions]}).

    enabled: {guardrail: bool} (a guardrail left out is on); admin_groups: the groups that may set the admin-access
    label (admin-access-label). Returns objects (each policy, then its binding),
    installed (guardrail names), not_applicable ([{guardrail, reason}]: on but not applicable here; not
    `skipped`, a key Ansible reserves) and disabled.
    """
    api_version = admission_policy_api_version(version)
    objects, installed, not_applicable, disabled = [], [], [], []
    for guardrail in GUARDRAILS:
        if not (enabled or {}).get(guardrail, True):
            disabled.append(guardrail)
            continue
        policy, skip = _BUILDERS[guardrail](api_version, version, serving, list(admin_groups or DEFAULT_ADMIN_GROUPS))
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
