# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""RBAC personas for DRA, rendered for the resources a cluster serves.

- cluster admin: owns DeviceClasses, ResourceSlices and, where served, DeviceTaintRules and
  ResourcePoolStatusRequests; reads ResourceClaims and ResourceClaimTemplates everywhere.
- driver: what a node-local kubelet plugin needs: ResourceSlices, ResourceClaims read and
  status, Nodes get; with the granular ResourceClaim status authorization (1.36+) also
  ``associated-node:update/patch`` on ``resourceclaims/driver`` for its own driver names only.
- operator: ResourceClaims and ResourceClaimTemplates in the namespaces given (RoleBindings
  to a ClusterRole that holds only namespaced rules); nothing cluster-scoped.

The identities of the collection's own jobs (one ServiceAccount each, for the AWX job templates of
playbooks/awx_configure.yml; JOB_IDENTITIES):

- reader: what the reports read (health, upgrade check, node doctor): DRA objects, nodes, pods, namespaces,
  events, quotas, DaemonSets, PodDisruptionBudgets, StorageVersions, kube-apiserver's /metrics, and
  SubjectAccessReviews (a question, not a write); no Secret, no ConfigMap, no nodes/proxy, no write.
- canary: the reader's rights, and in the canary's namespace only (a RoleBinding) the probes' pods, claim
  templates and claims; the namespace itself get only (its labels are the privileged identity's).
- devices: the reader's rights, DeviceTaintRules written and pods evicted (device maintenance and remediation).
- maintenance: the reader's rights, nodes patched (cordon, the driver's exclusion label) and pods evicted (drain).
- privileged (PRIVILEGED): not made here; the administrator's own credential, for site, upgrade and driver upgrade.

Pure functions: served resources come in as the names the API discovery lists.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    RESOURCE_GROUP, VersionError, gate_info, parse_minor,
)
from ansible_collections.dra.admin.plugins.module_utils.rbac.slice_policy import service_account_user, slice_policy

PERSONAS = ("admin", "driver", "operator")
PERSONA_LABEL = "dra.admin/persona"
RBAC_API = "rbac.authorization.k8s.io/v1"

READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]
ALL = READ + WRITE

# Cluster-scoped resource.k8s.io resources the cluster admin owns (each only where served).
ADMIN_OWNED = ("deviceclasses", "resourceslices", "devicetaintrules", "resourcepoolstatusrequests")
# Namespaced resources: operators manage them, admins read them.
CLAIM_RESOURCES = ("resourceclaims", "resourceclaimtemplates")
# The authorization-only subresource checked for status.devices writes when
# DRAResourceClaimGranularStatusAuthorization is on (not listed by discovery).
DRIVER_STATUS_SUBRESOURCE = "resourceclaims/driver"
GRANULAR_STATUS_GATE = "DRAResourceClaimGranularStatusAuthorization"
ASSOCIATED_NODE_VERBS = ["associated-node:patch", "associated-node:update"]
# The ClusterRole (and binding) of a driver's own kubelet plugin is this prefix and the driver name.
KUBELET_PLUGIN_ROLE_PREFIX = "dra-kubeletplugin:"
# The jobs' identities, least first; PRIVILEGED is the administrator's credential (never rendered here).
JOB_IDENTITIES = ("reader", "canary", "devices", "maintenance")
PRIVILEGED = "privileged"
# A job identity's long-lived token: a Secret of this type naming the ServiceAccount (the token controller fills it).
TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
TOKEN_SECRET_SUFFIX = "-token"


def granular_status(kubernetes_version):
    """Whether the release has the granular ResourceClaim status authorization (the catalog decides;
    a release newer than the catalog keeps it)."""
    try:
        return gate_info(kubernetes_version, GRANULAR_STATUS_GATE) is not None
    except VersionError:
        try:
            return parse_minor(kubernetes_version) >= 36
        except VersionError:
            return True


def _rule(resources, verbs, group=RESOURCE_GROUP, names=None):
    rule = {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
    if names:
        rule["resourceNames"] = sorted(names)
    return rule


def admin_rules(served):
    """Rules of the cluster-admin persona for the served resource names."""
    served = set(served)
    owned = [r for r in ADMIN_OWNED if r in served]
    owned_status = ["%s/status" % r for r in owned if "%s/status" % r in served]
    claims = [r for r in CLAIM_RESOURCES if r in served]
    rules = []
    if owned:
        rules.append(_rule(owned, ALL))
    if owned_status:
        rules.append(_rule(owned_status, ["get", "update", "patch"]))
    if claims:
        rules.append(_rule(claims, READ))
    return rules


def driver_rules(served, drivers, granular_status=True):
    """Rules a node-local kubelet plugin needs (the dra-example-driver chart asks for the same).

    drivers: driver names the identity may write claim status for (resourceNames of
    resourceclaims/driver); granular_status: the cluster's release knows
    DRAResourceClaimGranularStatusAuthorization (1.36+).
    """
    served = set(served)
    rules = []
    if "resourceslices" in served:
        rules.append(_rule(["resourceslices"], ["get", "list", "watch", "create", "update", "patch", "delete"]))
    if "resourceclaims" in served:
        rules.append(_rule(["resourceclaims"], READ))
    if "resourceclaims/status" in served:
        rules.append(_rule(["resourceclaims/status"], ["get", "update", "patch"]))
        if granular_status and drivers:
            rules.append(_rule([DRIVER_STATUS_SUBRESOURCE], ASSOCIATED_NODE_VERBS, names=drivers))
    rules.append(_rule(["nodes"], ["get"], group=""))
    return rules


def operator_rules(served):
    """Namespaced rules only: claims and claim templates, not their status."""
    claims = [r for r in CLAIM_RESOURCES if r in set(served)]
    return [_rule(claims, ALL)] if claims else []


def reader_rules(served):
    """The reports' reads (identity reader): every served resource.k8s.io resource and what the reports join
    them with; nothing that holds secrets (Secrets, ConfigMaps) and no nodes/proxy (it reaches the kubelet's API)."""
    dra = sorted(r for r in set(served) if "/" not in r)
    rules = [_rule(dra, READ)] if dra else []
    return rules + [
        _rule(["events", "namespaces", "nodes", "pods", "resourcequotas"], READ, group=""),
        _rule(["daemonsets"], READ, group="apps"),
        _rule(["poddisruptionbudgets"], READ, group="policy"),
        _rule(["storageversions"], READ, group="internal.apiserver.k8s.io"),
        # The upgrade check asks whether drivers and schedulers hold what the target needs: a question, no write.
        _rule(["subjectaccessreviews"], ["create"], group="authorization.k8s.io"),
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
    ]


def eviction_rule():
    return _rule(["pods/eviction"], ["create"], group="")


def devices_rules(served):
    """Identity devices: the reader's rules, DeviceTaintRules written (where served), pods evicted."""
    rules = reader_rules(served)
    if "devicetaintrules" in set(served):
        rules.append(_rule(["devicetaintrules"], ["create", "update", "patch", "delete"]))
    return rules + [eviction_rule()]


def maintenance_rules(served):
    """Identity maintenance: the reader's rules, nodes patched (cordon, annotations, exclusion label), pods
    evicted."""
    return reader_rules(served) + [_rule(["nodes"], ["patch", "update"], group=""), eviction_rule()]


def canary_rules(served):
    """Identity canary, bound in the canary's namespace only: its probes' pods, claim templates and claims
    (claims are made by the controller from the template and deleted by the probe), the namespace read."""
    served = set(served)
    rules = [_rule(["pods"], ["create", "delete"] + READ, group=""),
             _rule(["namespaces"], ["get"], group="")]
    if "resourceclaimtemplates" in served:
        rules.append(_rule(["resourceclaimtemplates"], ["create", "delete"] + READ))
    if "resourceclaims" in served:
        rules.append(_rule(["resourceclaims"], ["delete"] + READ))
    return rules


def persona_name(prefix, persona, driver=None):
    if persona in JOB_IDENTITIES:
        return "%sjob-%s" % (prefix, persona)
    name = "%s%s" % (prefix, {"admin": "cluster-admin", "driver": "driver", "operator": "operator"}[persona])
    return "%s:%s" % (name, driver) if driver else name


def labels(persona):
    return {MANAGED_BY_LABEL: MANAGED_BY, PERSONA_LABEL: "job-" + persona if persona in JOB_IDENTITIES else persona}


def subjects(entry):
    """RBAC subjects of a persona entry: users, groups, service_accounts ('namespace/name')."""
    result = []
    for user in entry.get("users") or []:
        result.append({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user})
    for group in entry.get("groups") or []:
        result.append({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group})
    for account in entry.get("service_accounts") or []:
        namespace, name = (str(account).split("/", 1) + [""])[:2]
        if not name or not namespace:
            raise InputError("service account %r must be written namespace/name" % (account,))
        result.append({"kind": "ServiceAccount", "namespace": namespace, "name": name})
    return result


def cluster_role(name, rules, object_labels):
    return {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": {"name": name, "labels": object_labels},
            "rules": rules}


def cluster_role_binding(name, role, subject_list, object_labels):
    return {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": object_labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subject_list}


def role_binding(name, namespace, role, subject_list, object_labels):
    return {"apiVersion": RBAC_API, "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace, "labels": object_labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subject_list}


def service_account(name, namespace, object_labels):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": object_labels}}


def namespace_object(name, object_labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": object_labels}}


def token_secret(account, namespace, object_labels):
    """A long-lived token of `account` (what an AWX "OpenShift or Kubernetes API Bearer Token" credential holds)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": TOKEN_SECRET_TYPE,
            "metadata": {"name": account + TOKEN_SECRET_SUFFIX, "namespace": namespace, "labels": object_labels,
                         "annotations": {"kubernetes.io/service-account.name": account}}}


JOB_RULES = {"reader": reader_rules, "devices": devices_rules, "maintenance": maintenance_rules}


def job_objects(served, namespace, canary_namespace, prefix="dra-"):
    """The jobs' identities (JOB_IDENTITIES): the namespace `namespace` holding one ServiceAccount and its token
    Secret per identity; a ClusterRole per identity with its rules, bound cluster-wide, except the canary's,
    which is bound in `canary_namespace` only (a RoleBinding), the canary reading the rest as the reader does."""
    if not namespace:
        return []
    if not canary_namespace:
        raise InputError("jobs.canary_namespace is required with jobs.namespace: the namespace the canary probes "
                         "run in (role dra.admin.canary's dra_canary_namespace)")
    objects = [namespace_object(namespace, {MANAGED_BY_LABEL: MANAGED_BY})]
    for identity in JOB_IDENTITIES:
        name = persona_name(prefix, identity)
        object_labels = labels(identity)
        bound = subjects({"service_accounts": ["%s/%s" % (namespace, name)]})
        objects += [service_account(name, namespace, object_labels), token_secret(name, namespace, object_labels)]
        if identity == "canary":
            objects += [cluster_role(name, canary_rules(served), object_labels),
                        role_binding(name, canary_namespace, name, bound, object_labels),
                        cluster_role_binding(name, persona_name(prefix, "reader"), bound, object_labels)]
        else:
            objects += [cluster_role(name, JOB_RULES[identity](served), object_labels),
                        cluster_role_binding(name, name, bound, object_labels)]
    return objects


def kubelet_plugin_objects(driver, namespace, account, served, granular_status, object_labels, policy_api_version=None,
                           cluster_slices=False):
    """The RBAC a driver's own kubelet plugin runs with (role dra.admin.driver, built-in template): its
    ServiceAccount `account` in `namespace`, and a ClusterRole named dra-kubeletplugin:<driver> with the
    driver persona's rules, bound to it; with `policy_api_version` (where ResourceSlices are served), the
    ValidatingAdmissionPolicy that holds the account to its own driver's slices of its own node (rbac.slice_policy;
    `cluster_slices`: it may also write slices without a node name).

    The objects carry `object_labels` (the driver's), not the persona label: dra_rbac_plan_info would
    otherwise count them among its own objects and report them stale.
    """
    name = KUBELET_PLUGIN_ROLE_PREFIX + driver
    bound = subjects({"service_accounts": ["%s/%s" % (namespace, account)]})
    objects = [service_account(account, namespace, object_labels),
               cluster_role(name, driver_rules(served, [driver], granular_status), object_labels),
               cluster_role_binding(name, name, bound, object_labels)]
    if policy_api_version and "resourceslices" in set(served):
        objects.extend(slice_policy(policy_api_version, driver, [service_account_user(namespace, account)],
                                    cluster_slices, object_labels))
    return objects


def validate_personas(admins, drivers, operators):
    """Problems with the persona inputs, as messages."""
    problems = []
    for label, entries in (("admins", [admins or {}]), ("drivers", drivers or []), ("operators", operators or [])):
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                problems.append("%s[%d] must be a mapping" % (label, index))
                continue
            try:
                subjects(entry)
            except ValueError as exc:
                problems.append("%s[%d]: %s" % (label, index, exc))
    for index, entry in enumerate(drivers or []):
        if isinstance(entry, dict) and not entry.get("driver"):
            problems.append("drivers[%d]: driver (the DRA driver name) is required" % index)
    for index, entry in enumerate(operators or []):
        if isinstance(entry, dict) and not entry.get("namespaces"):
            problems.append("operators[%d]: namespaces is required (operators get nothing cluster-scoped)" % index)
    return problems


def render(served, admins=None, drivers=None, operators=None, prefix="dra-", granular_status=True, jobs=None):
    """Every RBAC object of the personas: ClusterRoles, ClusterRoleBindings, RoleBindings; with jobs
    ({namespace, canary_namespace}, namespace set) also the jobs' identities (job_objects), first.

    admins: {users, groups, service_accounts}; drivers: [{driver, users, groups,
    service_accounts}]; operators: [{namespaces, users, groups, service_accounts}].
    A persona without subjects still gets its ClusterRole (so it can be bound by hand).
    """
    problems = validate_personas(admins, drivers, operators)
    if problems:
        raise InputError("; ".join(problems))
    jobs = jobs or {}
    objects = job_objects(served, jobs.get("namespace"), jobs.get("canary_namespace"), prefix)
    admin_name = persona_name(prefix, "admin")
    objects.append(cluster_role(admin_name, admin_rules(served), labels("admin")))
    admin_subjects = subjects(admins or {})
    if admin_subjects:
        objects.append(cluster_role_binding(admin_name, admin_name, admin_subjects, labels("admin")))
    for entry in drivers or []:
        name = persona_name(prefix, "driver", entry["driver"])
        objects.append(cluster_role(name, driver_rules(served, [entry["driver"]], granular_status), labels("driver")))
        entry_subjects = subjects(entry)
        if entry_subjects:
            objects.append(cluster_role_binding(name, name, entry_subjects, labels("driver")))
    operator_name = persona_name(prefix, "operator")
    objects.append(cluster_role(operator_name, operator_rules(served), labels("operator")))
    bindings = {}
    for entry in operators or []:
        for namespace in entry.get("namespaces") or []:
            bindings.setdefault(namespace, [])
            for subject in subjects(entry):
                if subject not in bindings[namespace]:
                    bindings[namespace].append(subject)
    for namespace in sorted(bindings):
        if bindings[namespace]:
            objects.append(role_binding(operator_name, namespace, operator_name, bindings[namespace],
                                        labels("operator")))
    return objects


def object_key(obj):
    meta = obj.get("metadata") or {}
    return (obj.get("kind"), meta.get("namespace") or "", meta.get("name"))


def stale_objects(existing, wanted):
    """Objects this collection made earlier (existing, with the managed-by label) that the
    personas no longer render: [{kind, namespace, name}]."""
    keep = set(object_key(o) for o in wanted)
    stale = []
    for obj in existing:
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY:
            continue
        if PERSONA_LABEL not in (meta.get("labels") or {}):
            continue
        if object_key(obj) not in keep:
            stale.append({"kind": obj.get("kind"), "namespace": meta.get("namespace") or "", "name": meta.get("name")})
    return sorted(stale, key=lambda s: (s["kind"], s["namespace"], s["name"]))
