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
