"""Verify the converged local cluster: files written on the host and objects in the API."""
import json
import os

import yaml

KUBECONFIG = os.environ["MOLECULE_KUBECONFIG"]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def kubectl_json(host, *args):
    cmd = host.run("kubectl --kubeconfig %s get -o json %s" % (KUBECONFIG, " ".join(args)))
    assert cmd.rc == 0, cmd.stderr
    return json.loads(cmd.stdout)


def test_monitoring_rule_file_on_host(host):
    rules = host.file(os.path.join(ROOT, ".tmp", "monitoring", "rules"))
    assert rules.is_directory
    groups = yaml.safe_load(host.file(os.path.join(rules.path, "dra-admin.rules.yml")).content_string)["groups"]
    expressions = [r["expr"] for g in groups for r in g["rules"]]
    assert 'sum(rate(workqueue_adds_total{name="resource_claim"}[5m]))' in expressions
    dashboard = json.loads(host.file(os.path.join(rules.path, "dra-admin.json")).content_string)
    assert len(dashboard["panels"]) >= 9


def test_driver_daemonset_probes_and_drain_exclusion(host):
    ds = kubectl_json(host, "daemonsets", "-n", "dra-system")["items"]
    assert ds, "no driver DaemonSet"
    pod = ds[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["livenessProbe"]["grpc"]["service"] == "liveness"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    with open(os.path.join(ROOT, "roles", "driver", "defaults", "main.yml")) as fh:
        label = yaml.safe_load(fh)["dra_driver_exclusion_label"]
    assert all(any(e["key"] == label and e["operator"] == "DoesNotExist"
                   for e in t["matchExpressions"]) for t in terms)


def test_device_class_and_slices(host):
    classes = [c["metadata"]["name"] for c in kubectl_json(host, "deviceclasses")["items"]]
    assert "gpu.example.com" in classes
    nodes = {n["metadata"]["name"] for n in kubectl_json(host, "nodes")["items"]}
    published = {s["spec"]["nodeName"] for s in kubectl_json(host, "resourceslices")["items"]}
    assert nodes == published


def test_operator_persona_is_namespaced(host):
    bindings = kubectl_json(host, "rolebindings", "-n", "default")["items"]
    assert any(s.get("name") == "dra-operators" for b in bindings for s in b.get("subjects", []))
