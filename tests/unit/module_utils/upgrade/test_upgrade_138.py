"""upgrade.behaviour and upgrade.stored_versions: what 1.37.1, 1.37.2 and 1.38 change, on objects of their own
(shaped as the API returns them), and the allocator's reading of a rule without selector per release."""
import base64
import gzip
import json

import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import taint_rules
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.upgrade import behaviour, checks_service, stored_versions

MANIFESTS = """\
apiVersion: resource.k8s.io/v1beta1
kind: DeviceClass
metadata:
  name: gpu
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
---
apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: team-a}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
---
apiVersion: resource.k8s.io/v1alpha3
kind: DeviceTaintRule
metadata: {name: old-rule}
spec: {deviceSelector: {driver: gpu.example.com}, taint: {key: k, effect: NoSchedule}}
"""


def ids(found):
    return sorted(set(f["id"] for f in found))


def of(found, fid):
    return [f for f in found if f["id"] == fid]


def test_manifest_documents_name_line_document_and_fix():
    uses = stored_versions.text_uses(MANIFESTS, "gitops/dra.yaml", 38)
    assert [(u["document"], u["line"], u["kind"], u["name"], u["api_version"], u["removed_in"]) for u in uses] == [
        ("0", 1, "DeviceClass", "gpu", "resource.k8s.io/v1beta1", "1.38"),
        ("2", 13, "ResourceClaimTemplate", "team-a/one-gpu", "resource.k8s.io/v1beta2", "1.39"),
        ("3", 18, "DeviceTaintRule", "old-rule", "resource.k8s.io/v1alpha3", "1.39")]
    # Three releases ahead of v1beta2's removal: only v1beta1, which 1.37 still serves, is named.
    assert [u["api_version"] for u in stored_versions.text_uses(MANIFESTS, "f", 37)] == ["resource.k8s.io/v1beta1"]
    assert stored_versions.replacement("v1.38", "deviceclasses") == "v1"
    assert stored_versions.replacement("v1.38", "devicetaintrules") == "v1"
    assert stored_versions.replacement("v1.36", "devicetaintrules") == "v1beta2"


def test_manifest_findings_breaking_for_the_target_warning_for_the_next():
    facts = {"manifest_texts": {"gitops/dra.yaml": MANIFESTS}}
    found = behaviour.stored_version_findings(facts, "v1.38", 38)
    by = dict((f["evidence"]["api_version"], f) for f in found)
    assert by["resource.k8s.io/v1beta1"]["severity"] == "breaking"
    assert "DeviceClass gpu (gitops/dra.yaml, line 1, document 0)" in by["resource.k8s.io/v1beta1"]["message"]
    assert "DeviceClass: v1" in by["resource.k8s.io/v1beta1"]["fix"]
    assert by["resource.k8s.io/v1beta2"]["severity"] == "warning"
    assert by["resource.k8s.io/v1alpha3"]["severity"] == "warning"


def test_a_list_and_json_are_read_item_by_item():
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "ok"}},
        {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "node-1-gpu"}}]})
    assert [(u["document"], u["name"]) for u in stored_versions.text_uses(text, "l.json", 38)] == [
        ("0.items[1]", "node-1-gpu")]


def test_a_file_that_is_not_yaml_is_named_not_passed():
    found = behaviour.stored_version_findings({"manifest_texts": {"bad.yaml": "a: [b\n"}}, "v1.38", 38)
    assert ids(found) == ["stored-api-version-unread"] and "bad.yaml" in found[0]["message"]


def test_last_applied_annotation():
    applied = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass", "metadata": {"name": "gpu"}}
    objects = [{"kind": "DeviceClass", "apiVersion": "resource.k8s.io/v1", "metadata": {
        "name": "gpu", "annotations": {stored_versions.LAST_APPLIED: json.dumps(applied)}}},
        {"kind": "DeviceClass", "metadata": {"name": "other", "annotations": {stored_versions.LAST_APPLIED: "{"}}}]
    found = behaviour.stored_version_findings({"last_applied_objects": objects}, "v1.38", 38)
    assert [f["subject"] for f in found] == [
        "DeviceClass gpu annotation kubectl.kubernetes.io/last-applied-configuration (resource.k8s.io/v1beta1)"]


def helm_secret(manifest, api_base64_twice=True):
    release = {"name": "gpu-driver", "namespace": "drivers", "version": 3, "manifest": manifest,
               "info": {"status": "deployed"}}
    helm = base64.b64encode(gzip.compress(json.dumps(release).encode("utf-8")))
    data = base64.b64encode(helm).decode("ascii") if api_base64_twice else helm.decode("ascii")
    return {"kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.gpu-driver.v3", "namespace": "drivers",
                         "labels": {"owner": "helm", "status": "deployed", "name": "gpu-driver", "version": "3"}},
            "data": {"release": data}}


def test_helm_release_manifest():
    for twice in (True, False):
        found = behaviour.stored_version_findings({"helm_secrets": [helm_secret(MANIFESTS, twice)]}, "v1.38", 38)
        v1beta1 = [f for f in found if f["evidence"]["api_version"] == "resource.k8s.io/v1beta1"][0]
        assert v1beta1["subject"].startswith("Helm release drivers/gpu-driver (revision 3)")
        assert "upgrade the chart" in v1beta1["fix"]
    broken = dict(helm_secret(""), data={"release": "bm90IGd6aXA="})
    found = behaviour.stored_version_findings({"helm_secrets": [broken], "helm_error": "403"}, "v1.38", 38)
    assert ids(found) == ["stored-api-version-unread"]
    assert "drivers/sh.helm.release.v1.gpu-driver.v3" in found[0]["message"] and "403" in found[0]["message"]


def test_manifest_paths_read_recursively_and_missing_paths_fail(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yaml").write_text(MANIFESTS)
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "dra.yml").write_text(MANIFESTS)
    (tmp_path / "README.md").write_text("not read")
    texts, errors = checks_service.read_manifests([str(tmp_path)])
    assert list(texts) == [str(tmp_path / "apps" / "dra.yml")] and errors == []
    with pytest.raises(behaviour.checks.UpgradeInputError, match="manifest_paths: .*nope not found"):
        checks_service.manifest_path_errors([str(tmp_path / "nope")])


# --- a DeviceTaintRule without deviceSelector ---------------------------------------------------

def rule(name, effect="NoExecute", selector=None, key="maintenance"):
    spec = {"taint": {"key": key, "value": "now", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": spec}


@pytest.mark.parametrize("version, reader", [
    ("v1.36.6", taint_rules.ALLOCATOR), ("v1.37.0", taint_rules.ALLOCATOR),
    ("v1.37.1", taint_rules.ALLOCATOR_NO_SELECTOR_NONE), ("v1.38.0", taint_rules.ALLOCATOR_NO_SELECTOR_NONE),
    (None, taint_rules.ALLOCATOR)])
def test_allocator_reader_per_release(version, reader):
    assert taint_rules.allocator_reader(version) == reader
    no_selector, empty = rule("r"), rule("r", selector={})
    selects = taint_rules.rule_selects(no_selector, "d", "p", "dev", reader=reader)
    assert selects is (reader == taint_rules.ALLOCATOR)
    assert taint_rules.rule_selects(empty, "d", "p", "dev", reader=reader) is True  # {} selects every device


def test_rule_without_selector_before_and_after():
    facts = {"taint_rules": [rule("everything"), rule("scoped", selector={"driver": "gpu.example.com"}),
                             rule("marker", effect="None")]}
    found = behaviour.findings(facts, "v1.37.0", "v1.38")
    rules = of(found, "taint-rule-without-selector")
    assert [f["subject"] for f in rules] == ["DeviceTaintRule everything", "DeviceTaintRule marker"]
    text = rules[0]["message"]
    assert "keeps every device of the cluster from new allocations (NoExecute)" in text
    assert "evicts no pod" in text and "1.37.1" in text and "does nothing" in text
    assert "deviceSelector: {}" in rules[0]["fix"]
    # Before 1.35 the eviction controller read the tracker too: such a rule evicted the devices' pods.
    old = behaviour.taint_rule_findings(facts, "v1.34.2", "v1.35", 35)
    assert old == []  # 1.35.0 reads it as 1.34 did: no change to report yet
    # A cluster already on 1.37.1 has the new reading: nothing changes for it.
    assert of(behaviour.findings(facts, "v1.37.1", "v1.38"), "taint-rule-without-selector") == []


# --- NoExecute taints and DRA-backed extended resources -------------------------------------------

def resource_slice(taints=()):
    return {"kind": "ResourceSlice", "metadata": {"name": "node-1-gpu"}, "spec": {
        "driver": "gpu.example.com", "pool": {"name": "node-1"}, "nodeName": "node-1",
        "devices": [{"name": "gpu-0", "taints": list(taints)}, {"name": "gpu-1"}]}}


def extended_claim(device, name="pod-a-extended-resources-x", tolerations=None, annotated=True):
    annotations = {"resource.kubernetes.io/extended-resource-claim": "true"} if annotated else {}
    result = {"request": "container-0-request-0", "driver": "gpu.example.com", "pool": "node-1", "device": device}
    if tolerations:
        result["tolerations"] = tolerations
    return {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "team-a", "annotations": annotations},
            "status": {"allocation": {"devices": {"results": [result]}},
                       "reservedFor": [{"resource": "pods", "name": "pod-a", "uid": "u-1"}]}}


def test_no_execute_rule_newly_evicts_extended_resource_pods():
    facts = {"taint_rules": [rule("drain-gpu-0", selector={"driver": "gpu.example.com", "device": "gpu-0"})],
             "resource_slices": [resource_slice()],
             "claims": [extended_claim("gpu-0"), extended_claim("gpu-1", name="other"),
                        extended_claim("gpu-0", name="tolerant", tolerations=[{"key": "maintenance",
                                                                               "operator": "Exists"}]),
                        extended_claim("gpu-0", name="ordinary", annotated=False)]}
    found = of(behaviour.findings(facts, "v1.37.0", "v1.38"), "extended-resource-eviction")
    assert [(f["subject"], f["evidence"]["claim"]) for f in found] == [("team-a/pod-a",
                                                                        "team-a/pod-a-extended-resources-x")]
    assert found[0]["severity"] == "breaking"
    assert "DeviceTaintRule drain-gpu-0" in found[0]["message"] and "1.37.2" in found[0]["message"]
    assert of(behaviour.findings(facts, "v1.37.2", "v1.38"), "extended-resource-eviction") == []


def test_slice_taint_and_rule_without_selector():
    slice_taint = {"key": "health", "value": "bad", "effect": "NoExecute"}
    facts = {"taint_rules": [rule("all")], "resource_slices": [resource_slice([slice_taint])],
             "claims": [extended_claim("gpu-0"), extended_claim("gpu-1", name="b")]}
    found = of(behaviour.findings(facts, "v1.36.3", "v1.37.2"), "extended-resource-eviction")
    # The slice's own taint evicts; the rule without selector selects nothing for the eviction controller.
    assert len(found) == 1 and "ResourceSlice node-1-gpu" in found[0]["message"]
    assert "DeviceTaintRule all" not in found[0]["message"]


# --- gRPC liveness probes without startupProbe -----------------------------------------------------

def daemonset(name, startup):
    container = {"name": "plugin", "livenessProbe": {"grpc": {"port": 51515, "service": "liveness"},
                                                     "periodSeconds": 10, "failureThreshold": 3}}
    if startup:
        container["startupProbe"] = dict(container["livenessProbe"], failureThreshold=600, periodSeconds=1)
    sidecar = {"name": "sidecar", "livenessProbe": {"httpGet": {"port": 8080}}}
    return {"kind": "DaemonSet", "metadata": {"name": name, "namespace": "drivers"},
            "spec": {"template": {"spec": {"containers": [container, sidecar]}}}}


def test_grpc_liveness_without_startup_probe():
    facts = {"daemonsets": [daemonset("bare", False), daemonset("fine", True), daemonset("not-a-driver", False)],
             "driver_accounts": [{"namespace": "drivers", "daemonset": "bare", "driver": "gpu.example.com",
                                  "service_account": "x"},
                                 {"namespace": "drivers", "daemonset": "fine", "driver": "gpu.example.com",
                                  "service_account": "x"}]}
    found = of(behaviour.findings(facts, "v1.37.2", "v1.38"), "grpc-probe-without-startup")
    assert [f["subject"] for f in found] == ["DaemonSet drivers/bare"]
    assert found[0]["evidence"]["containers"] == ["plugin"] and "0 + 3 x 10 s" in found[0]["message"]
    assert of(behaviour.findings(facts, "v1.36.3", "v1.37"), "grpc-probe-without-startup") == []


def test_the_driver_role_renders_a_startup_probe():
    from ansible_collections.dra.admin.plugins.module_utils.drivers.manifests import probes
    liveness, startup = probes(51515)
    assert liveness["grpc"]["port"] == startup["grpc"]["port"] == 51515


# --- names qualified with the driver's own domain --------------------------------------------------

def a_slice(name, driver, attributes, capacity=None):
    return {"metadata": {"name": name}, "spec": {"driver": driver, "nodeName": "n1", "pool": {"name": "n1"},
                                                 "devices": [{"name": "d0", "attributes": attributes,
                                                              "capacity": capacity or {}}]}}


def test_names_qualified_with_the_drivers_own_domain_are_named_for_138():
    qualified = {"gpu.example.com/model": {"string": "h100"}, "index": {"int": 0}}
    slices = [a_slice("gpu-n1", "gpu.example.com", qualified, {"gpu.example.com/memory": {"value": "80Gi"}}),
              a_slice("gpu-n2", "gpu.example.com", {"model": {"string": "h100"}}),
              # Another driver's domain is a name of its own, not a redundant one.
              a_slice("nic-n1", "nic.example.com", {"gpu.example.com/model": {"string": "h100"}})]
    found = of(behaviour.findings({"resource_slices": slices}, "v1.37.2", "v1.38"), "self-qualified-names")
    assert [f["subject"] for f in found] == ["driver gpu.example.com"] and found[0]["severity"] == "warning"
    assert found[0]["evidence"] == {"driver": "gpu.example.com", "slices": ["gpu-n1"],
                                    "names": ["gpu.example.com/memory", "gpu.example.com/model"]}
    assert "memory, model" in found[0]["fix"]
    assert of(behaviour.findings({"resource_slices": slices}, "v1.36.3", "v1.37"), "self-qualified-names") == []


# --- the kubelet downgrade note, and the release tables -------------------------------------------

def test_kubelet_downgrade_note_for_138():
    found = of(behaviour.findings({}, "v1.37.2", "v1.38"), "kubelet-downgrade")
    assert len(found) == 1 and found[0]["severity"] == "info" and "checkpoint" in found[0]["message"]
    assert of(behaviour.findings({}, "v1.36.3", "v1.37"), "kubelet-downgrade") == []


def test_patch_tables():
    table = catalog.TAINT_RULE_NO_SELECTOR_NONE_FROM
    assert [catalog.has_patch_change(table, v) for v in ("v1.36.9", "v1.37.0", "v1.37.1", "v1.38.0-rc.0")] == [
        False, False, True, True]
    assert catalog.patch_change_from(catalog.EXTENDED_RESOURCE_TAINT_EVICTION_FROM) == "1.37.2, 1.38.0"
