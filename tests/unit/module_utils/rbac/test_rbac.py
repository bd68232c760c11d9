"""RBAC personas rendered for what a cluster serves."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.access.api import served_resource_names
from ansible_collections.dra.admin.plugins.module_utils.rbac import personas as r

# Discovery of resource.k8s.io/v1 on 1.36 (names only), and v1beta2 with DeviceTaintRules switched on.
V1_36 = {"resources": [{"name": n} for n in (
    "deviceclasses", "resourceclaims", "resourceclaims/status", "resourceclaimtemplates", "resourceslices")]}
V1BETA2_TAINTS = {"resources": [{"name": n} for n in (
    "deviceclasses", "devicetaintrules", "devicetaintrules/status", "resourceclaims", "resourceclaims/status",
    "resourceclaimtemplates", "resourceslices")]}


def rules_by_resource(rules):
    out = {}
    for rule in rules:
        for resource in rule["resources"]:
            out[(rule["apiGroups"][0], resource, tuple(rule.get("resourceNames") or ()))] = set(rule["verbs"])
    return out


def test_served_names_are_unioned_over_versions():
    assert served_resource_names([V1_36, V1BETA2_TAINTS, None]) == sorted(
        {"deviceclasses", "devicetaintrules", "devicetaintrules/status", "resourceclaims", "resourceclaims/status",
         "resourceclaimtemplates", "resourceslices"})


def test_admin_owns_cluster_scoped_and_reads_claims():
    rules = rules_by_resource(r.admin_rules(served_resource_names([V1_36])))
    assert rules[("resource.k8s.io", "deviceclasses", ())] == set(r.ALL)
    assert rules[("resource.k8s.io", "resourceslices", ())] == set(r.ALL)
    assert rules[("resource.k8s.io", "resourceclaims", ())] == {"get", "list", "watch"}
    assert ("resource.k8s.io", "devicetaintrules", ()) not in rules, "not served: not granted"


def test_admin_gets_device_taint_rules_only_where_served():
    rules = rules_by_resource(r.admin_rules(served_resource_names([V1_36, V1BETA2_TAINTS])))
    assert rules[("resource.k8s.io", "devicetaintrules", ())] == set(r.ALL)
    assert rules[("resource.k8s.io", "devicetaintrules/status", ())] == {"get", "update", "patch"}


def test_driver_rules_with_and_without_granular_status():
    served = served_resource_names([V1_36])
    rules = rules_by_resource(r.driver_rules(served, ["gpu.example.com"], granular_status=True))
    assert rules[("resource.k8s.io", "resourceclaims/driver", ("gpu.example.com",))] == {
        "associated-node:update", "associated-node:patch"}
    assert rules[("", "nodes", ())] == {"get"}
    assert rules[("resource.k8s.io", "resourceclaims", ())] == {"get", "list", "watch"}
    assert "create" in rules[("resource.k8s.io", "resourceslices", ())]
    assert ("resource.k8s.io", "deviceclasses", ()) not in rules
    old = rules_by_resource(r.driver_rules(served, ["gpu.example.com"], granular_status=False))
    assert not any(k[1] == "resourceclaims/driver" for k in old)


def test_operator_rules_are_namespaced_resources_only():
    rules = r.operator_rules(served_resource_names([V1_36, V1BETA2_TAINTS]))
    assert rules == [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"],
                      "verbs": r.ALL}]


def test_granular_status_comes_from_the_catalog():
    assert r.granular_status("v1.36.3") is True
    assert r.granular_status("v1.33.13") is False
    assert r.granular_status("v1.40.0") is True


def test_render_objects_and_bindings():
    objects = r.render(served_resource_names([V1_36]),
                       admins={"groups": ["admins"]},
                       drivers=[{"driver": "gpu.example.com", "service_accounts": ["dra-system/gpu"]}],
                       operators=[{"namespaces": ["team-a", "team-b"], "users": ["alice"]},
                                  {"namespaces": ["team-b"], "groups": ["ops"]}])
    keys = [r.object_key(o) for o in objects]
    assert keys == [("ClusterRole", "", "dra-cluster-admin"), ("ClusterRoleBinding", "", "dra-cluster-admin"),
                    ("ClusterRole", "", "dra-driver:gpu.example.com"),
                    ("ClusterRoleBinding", "", "dra-driver:gpu.example.com"),
                    ("ClusterRole", "", "dra-operator"), ("RoleBinding", "team-a", "dra-operator"),
                    ("RoleBinding", "team-b", "dra-operator")]
    team_b = objects[-1]
    assert [s["name"] for s in team_b["subjects"]] == ["alice", "ops"]
    assert objects[3]["subjects"] == [{"kind": "ServiceAccount", "namespace": "dra-system", "name": "gpu"}]
    assert not any(o["kind"] == "ClusterRoleBinding" and "operator" in o["metadata"]["name"] for o in objects)


def test_bad_persona_inputs_are_refused_together():
    with pytest.raises(ValueError) as err:
        r.render([], admins={"service_accounts": ["no-namespace"]}, drivers=[{"users": ["x"]}],
                 operators=[{"users": ["y"]}])
    message = str(err.value)
    assert "namespace/name" in message and "driver (the DRA driver name)" in message and "namespaces is required" in message


def test_stale_objects_only_ours():
    wanted = r.render([], operators=[{"namespaces": ["a"], "users": ["u"]}])
    existing = wanted + [
        r.role_binding("dra-operator", "gone", "dra-operator", [], r.labels("operator")),
        {"kind": "RoleBinding", "metadata": {"name": "other", "namespace": "x", "labels": {}}},
        {"kind": "ClusterRole", "metadata": {"name": "dra-kubeletplugin:x",
                                             "labels": {"app.kubernetes.io/managed-by": "dra.admin"}}},
    ]
    assert r.stale_objects(existing, wanted) == [{"kind": "RoleBinding", "namespace": "gone", "name": "dra-operator"}]


DRIVER_LABELS = {"app.kubernetes.io/name": "gpu-example-com-kubeletplugin",
                 "app.kubernetes.io/component": "kubeletplugin", "app.kubernetes.io/managed-by": "dra.admin",
                 "dra.admin/driver": "gpu.example.com"}


def test_kubelet_plugin_objects_are_the_driver_persona_bound_to_the_plugins_service_account():
    served = served_resource_names([V1_36])
    objects = r.kubelet_plugin_objects("gpu.example.com", "dra-system", "gpu-example-com-kubeletplugin", served,
                                       True, DRIVER_LABELS)
    name = "dra-kubeletplugin:gpu.example.com"
    assert objects == [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "gpu-example-com-kubeletplugin", "namespace": "dra-system", "labels": DRIVER_LABELS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name, "labels": DRIVER_LABELS},
         "rules": r.driver_rules(served, ["gpu.example.com"], True)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": DRIVER_LABELS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": "gpu-example-com-kubeletplugin",
                       "namespace": "dra-system"}]},
    ]
    rules = rules_by_resource(objects[1]["rules"])
    assert rules[("resource.k8s.io", "resourceclaims/driver", ("gpu.example.com",))] == {
        "associated-node:patch", "associated-node:update"}


def test_kubelet_plugin_objects_are_not_taken_for_stale_personas():
    objects = r.kubelet_plugin_objects("gpu.example.com", "dra-system", "sa", [], True, DRIVER_LABELS)
    assert r.stale_objects(objects, r.render([])) == []


# --- the jobs' identities ----------------------------------------------------------------------------------------

TAINTS_SERVED = served_resource_names([V1_36, V1BETA2_TAINTS])
WRITE_VERBS = set(r.WRITE) | {"create", "escalate", "bind", "impersonate", "*"}


def verbs_on(rules, group, resource):
    return set(v for rule in rules if group in rule.get("apiGroups", []) and resource in rule.get("resources", [])
               for v in rule["verbs"])


def test_reader_reads_every_served_dra_resource_and_writes_nothing():
    rules = r.reader_rules(TAINTS_SERVED)
    for resource in ("deviceclasses", "devicetaintrules", "resourceclaims", "resourceclaimtemplates", "resourceslices"):
        assert verbs_on(rules, "resource.k8s.io", resource) == {"get", "list", "watch"}, resource
    assert verbs_on(rules, "resource.k8s.io", "resourceclaims/status") == set(), "subresources are not listed"
    for rule in rules:
        assert "*" not in rule.get("resources", []) + rule.get("apiGroups", []) + rule["verbs"], rule
        written = set(rule["verbs"]) & WRITE_VERBS
        # The one create is a question to the authorizer (the upgrade check's), which stores nothing.
        assert not written or (rule.get("resources") == ["subjectaccessreviews"] and written == {"create"}), rule
    named = set(res for rule in rules for res in rule.get("resources", []))
    assert not named & {"secrets", "configmaps", "nodes/proxy", "pods/exec", "serviceaccounts/token"}
    assert {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in rules


def test_devices_and_maintenance_add_only_their_writes_to_the_reader():
    reader = r.reader_rules(TAINTS_SERVED)
    devices = r.devices_rules(TAINTS_SERVED)
    maintenance = r.maintenance_rules(TAINTS_SERVED)
    assert devices[:len(reader)] == reader and maintenance[:len(reader)] == reader
    assert devices[len(reader):] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"], "verbs": ["create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
    assert maintenance[len(reader):] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch", "update"]},
                                         {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
    # Where DeviceTaintRules are not served, there is nothing to grant on them.
    assert verbs_on(r.devices_rules(served_resource_names([V1_36])), "resource.k8s.io", "devicetaintrules") == set()


def test_canary_rules_write_probes_and_read_its_namespace_only():
    rules = r.canary_rules(TAINTS_SERVED)
    assert verbs_on(rules, "", "pods") == {"create", "delete", "get", "list", "watch"}
    assert verbs_on(rules, "resource.k8s.io", "resourceclaimtemplates") == {"create", "delete", "get", "list", "watch"}
    assert verbs_on(rules, "resource.k8s.io", "resourceclaims") == {"delete", "get", "list", "watch"}
    # Its namespace's labels (Pod Security, admin access) are the privileged identity's.
    assert verbs_on(rules, "", "namespaces") == {"get"}


def test_job_objects_bind_each_identity_and_the_canary_in_its_namespace_only():
    objects = r.job_objects(TAINTS_SERVED, "dra-admin-jobs", "dra-canary")
    keys = [r.object_key(o) for o in objects]
    assert keys[0] == ("Namespace", "", "dra-admin-jobs")
    for identity in r.JOB_IDENTITIES:
        name = "dra-job-" + identity
        assert ("ServiceAccount", "dra-admin-jobs", name) in keys
        assert ("ClusterRole", "", name) in keys
        secret = next(o for o in objects if r.object_key(o) == ("Secret", "dra-admin-jobs", name + "-token"))
        assert secret["type"] == "kubernetes.io/service-account-token" and "data" not in secret
        assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": name}
    bindings = dict((r.object_key(o), o) for o in objects if o["kind"].endswith("Binding"))
    subject = [{"kind": "ServiceAccount", "namespace": "dra-admin-jobs", "name": "dra-job-canary"}]
    canary_role = bindings[("RoleBinding", "dra-canary", "dra-job-canary")]
    assert canary_role["roleRef"]["name"] == "dra-job-canary" and canary_role["subjects"] == subject
    # Cluster-wide the canary reads as the reader does, and holds nothing else.
    canary_cluster = bindings[("ClusterRoleBinding", "", "dra-job-canary")]
    assert canary_cluster["roleRef"]["name"] == "dra-job-reader" and canary_cluster["subjects"] == subject
    for identity in ("reader", "devices", "maintenance"):
        binding = bindings[("ClusterRoleBinding", "", "dra-job-" + identity)]
        assert binding["roleRef"]["name"] == "dra-job-" + identity
    assert all(o["metadata"]["labels"][r.PERSONA_LABEL].startswith("job-") for o in objects[1:])


def test_job_objects_need_the_canary_namespace_and_are_none_without_a_namespace():
    assert r.job_objects(TAINTS_SERVED, "", "dra-canary") == []
    with pytest.raises(r.InputError, match="jobs.canary_namespace is required"):
        r.job_objects(TAINTS_SERVED, "dra-admin-jobs", "")


def test_render_puts_the_jobs_first_and_prunes_them_once_gone():
    served = served_resource_names([V1_36])
    with_jobs = r.render(served, jobs={"namespace": "dra-admin-jobs", "canary_namespace": "dra-canary"})
    without = r.render(served)
    assert with_jobs[0]["kind"] == "Namespace" and with_jobs[-len(without):] == without
    stale = r.stale_objects(with_jobs, without)
    # The RBAC objects go with the jobs (personas_service lists only RBAC kinds: the accounts, their tokens and the
    # namespace stay, with no binding left to use).
    assert sorted(s["name"] for s in stale if s["kind"] == "ClusterRole") == [
        "dra-job-canary", "dra-job-devices", "dra-job-maintenance", "dra-job-reader"]
