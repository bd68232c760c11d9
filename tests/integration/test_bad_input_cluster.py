"""Bad input changes nothing, on the real cluster: every module that writes to the API gets at least three
bad inputs, fails naming the option, and the objects it would have written are as they were (the node's
labels, annotations, cordon and taints and the pods on it; DeviceTaintRules; ResourceClaims; the
kubeadm-config ConfigMap, and no backup file).

The drain's driver check: with an exclusion label that is valid but not the one the driver DaemonSet
excludes, no driver DaemonSet is found, while the example driver publishes the node's devices; the drain
fails before the first write, naming the driver and what to set, rather than succeed with the driver still
on the node.
"""
import os

import pytest
import yaml

from dra_objects import DRIVER, EXCLUSION_LABEL, claim
from test_drain import (  # noqa: F401  pylint: disable=unused-import
    DRIVER_DS, DRIVER_NS, drain_node, driver, node_state, pods_on,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KUBEADM_CONFIG = os.path.join(ROOT, "tests", "unit", "fixtures", "kubeadm-v1.36.3", "kubeadm-config.yaml")
MISTYPED = EXCLUSION_LABEL[:-1]  # a valid label key, but not the one the driver DaemonSet excludes


def node_snapshot(cluster, node):
    """What a drain writes: the node's labels, annotations, cordon and taints, and the pods on it."""
    pods = sorted((p["metadata"]["uid"], p["metadata"]["resourceVersion"], bool(p["metadata"].get("deletionTimestamp")))
                  for p in cluster.get_json("pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"])
    return node_state(cluster, node), pods


def objects(cluster, resource, *args):
    """{namespace/name: (resourceVersion, finalizers)} of every object of a resource (None when not served)."""
    res = cluster.kubectl("get", resource, "-o", "json", *args, check=False)
    if res.returncode != 0:
        assert "the server doesn't have a resource type" in res.stderr, res.stderr
        return None
    return {"%s/%s" % (o["metadata"].get("namespace", ""), o["metadata"]["name"]):
            (o["metadata"]["resourceVersion"], o["metadata"].get("finalizers"))
            for o in yaml.safe_load(res.stdout)["items"]}


def fails_naming(cluster, module, args, named, check=False):
    result = cluster.run_module(module, args, check=check, expect_failure=True)
    assert named in result["msg"], result["msg"]
    assert not result.get("changed"), result
    return result


def fails_naming_each(cluster, module, cases, check=False):
    """fails_naming for each (args, named) of cases, all of them as the tasks of one ansible-playbook run (a
    process per case saved); their results, in order."""
    cases = list(cases)
    results = cluster.run_module_batch(module, [case[0] for case in cases], check=check)
    for (args, named), result in zip(cases, results):
        case = f"{module}{' (check mode)' if check else ''} with {args!r}"
        assert result.get("failed"), f"{case} succeeded unexpectedly: {result!r:.4000}"
        assert named in result.get("msg", ""), f"{case}: {named!r} not in {result.get('msg')!r}"
        assert not result.get("changed"), f"{case} changed: {result!r:.4000}"
    return results


# --- dra_node_drain -------------------------------------------------------------------------------

def test_drain_bad_inputs_leave_the_node_and_its_pods_alone(cluster, drain_node):
    node = drain_node
    base = {"node": node, "driver_daemonsets": [f"{DRIVER_NS}/{DRIVER_DS}"]}
    before = node_snapshot(cluster, node)
    bad = [
        ({"exclusion_label": "dra.admin/driver excluded"}, "exclusion_label 'dra.admin/driver excluded'"),
        ({"exclusion_label": "-excluded"}, "exclusion_label '-excluded'"),
        ({"poll_interval": float("nan")}, "wait_sleep (alias poll_interval) must be a finite number"),
        ({"wait_timeout": -1}, "wait_timeout (alias timeout) must be a finite number"),
        ({"driver_daemonsets": [f"{DRIVER_NS}/"]}, "must be namespace/name"),
        ({"driver_pod_labels": {"app": "not a label value"}}, "driver_pod_labels[app]"),
        ({"drivers": ["GPU.example.com"]}, "drivers entry 'GPU.example.com'"),
    ]
    for check in (True, False):
        fails_naming_each(cluster, "dra.admin.dra_node_drain", [(dict(base, **extra), named) for extra, named in bad],
                          check=check)
    assert node_snapshot(cluster, node) == before


def test_drain_device_mode_names_its_own_options_and_writes_no_rule(cluster, drain_node):
    """A device-mode drain of a driver or pool nothing publishes names device_driver / device_pool (the
    options the user set), in check mode and not, and writes nothing."""
    node = drain_node
    rules_before = objects(cluster, "devicetaintrules")  # None where the release serves no DeviceTaintRule
    before = node_snapshot(cluster, node)
    bad = [({"device_driver": "typo.example.com"}, "device_driver: driver typo.example.com publishes no ResourceSlice"),
           ({"device_driver": DRIVER, "device_pool": "no-such-pool"},
            f"device_pool: driver {DRIVER} has no pool no-such-pool")]
    for check in (True, False):
        fails_naming_each(cluster, "dra.admin.dra_node_drain",
                          [(dict({"node": node}, **extra), named) for extra, named in bad], check=check)
    assert node_snapshot(cluster, node) == before and objects(cluster, "devicetaintrules") == rules_before


def test_drain_with_no_driver_pod_to_take_off_fails_before_the_first_write(cluster, drain_node):
    """The label is valid but not the driver's: no DaemonSet excludes it, so the drain would end with the
    example driver still publishing the node's devices. It fails first, and the node is untouched."""
    node = drain_node
    published = [s for s in cluster.get_json("resourceslices")["items"]
                 if s["spec"].get("driver") == DRIVER and s["spec"].get("nodeName") == node]
    assert published, f"the example driver publishes no slice for {node}: the test needs one"
    before = node_snapshot(cluster, node)
    args = {"node": node, "exclusion_label": MISTYPED, "timeout": 60, "poll_interval": 0.5}
    for check in (True, False):
        failed = fails_naming(cluster, "dra.admin.dra_node_drain", args,
                              f"driver(s) {DRIVER} publish devices of {node}, but the drain found no driver pod",
                              check=check)
        assert f"no DaemonSet keeps its pods off nodes labelled {MISTYPED}" in failed["msg"]
        assert "drivers_not_in_pods" in failed["msg"] and "Nothing was changed" in failed["msg"]
        assert failed["details"] == {"drivers_left_on_node": [DRIVER]}
    assert node_snapshot(cluster, node) == before

    # Named as not running in a pod, the driver no longer holds the drain back: check mode plans it.
    planned = cluster.run_module("dra.admin.dra_node_drain", dict(args, drivers_not_in_pods=[DRIVER]), check=True)
    assert planned["driver_pods"] == [] and planned["changed"] is True
    assert node_snapshot(cluster, node) == before


# --- dra_device_taint and dra_device_remediation -------------------------------------------------

def test_device_taint_bad_inputs_write_no_rule(cluster):
    before = objects(cluster, "devicetaintrules")
    bad = [
        ({"driver": "Not_A_Driver"}, "driver 'Not_A_Driver' must be a DNS subdomain"),
        ({"driver": DRIVER, "key": "-x/ok"}, "prefix before '/'"),
        ({"driver": DRIVER, "poll_interval": float("inf")}, "wait_sleep (alias poll_interval) must be a finite"),
        ({"driver": DRIVER, "wait_timeout": 0}, "wait_timeout must be a finite number"),
        ({"driver": DRIVER, "device": "gpu-0"}, "missing parameter(s) required by 'device': pool"),
    ]
    fails_naming_each(cluster, "dra.admin.dra_device_taint",
                      [(dict(extra, state=state), named) for extra, named in bad for state in ("tainted", "dry_run")])
    assert objects(cluster, "devicetaintrules") == before


def test_remediation_bad_inputs_write_no_rule(cluster):
    before = objects(cluster, "devicetaintrules")
    bad = [
        ({"healthy_for": -1}, "healthy_for is -1"),
        ({"wait_sleep": float("nan")}, "wait_sleep (alias poll_interval) must be a finite number"),
        ({"wait_timeout": -5}, "wait_timeout must be a finite number"),
        ({"driver": "gpu example"}, "driver 'gpu example' must be a DNS subdomain"),
    ]
    fails_naming_each(cluster, "dra.admin.dra_device_remediation", bad)
    assert objects(cluster, "devicetaintrules") == before


@pytest.mark.per_release("device_taint_rule_support", key="default_on")
def test_remediation_of_a_driver_that_publishes_nothing_fails_unless_allowed(cluster, drain_node):
    """A scheduled remediation with a misspelt driver must fail, not find nothing to do for ever, naming the
    drivers that do publish (the example driver here)."""
    assert any(s["spec"].get("driver") == DRIVER for s in cluster.get_json("resourceslices")["items"]), \
        f"the example driver publishes nothing here: the test needs it ({drain_node})"
    before = objects(cluster, "devicetaintrules")
    absent = {"driver": "typo.example.com"}
    if before is None:  # no DeviceTaintRule on this release: refused for that first, nothing written either way
        fails_naming(cluster, "dra.admin.dra_device_remediation", absent, "DeviceTaintRule")
        fails_naming(cluster, "dra.admin.dra_device_remediation", dict(absent, allow_absent_driver=True),
                     "DeviceTaintRule")
        return
    for check in (False, True):
        result = fails_naming(cluster, "dra.admin.dra_device_remediation", absent,
                              "driver 'typo.example.com' publishes no device in this cluster", check=check)
        publishing = result["msg"].split("(drivers publishing: ", 1)[1].split(")", 1)[0].split(", ")
        assert DRIVER in publishing and "allow_absent_driver: true" in result["msg"], result["msg"]
    allowed = cluster.run_module("dra.admin.dra_device_remediation", dict(absent, allow_absent_driver=True))
    assert allowed["actions"] == [] and not allowed["changed"], allowed
    assert objects(cluster, "devicetaintrules") == before


# --- dra_canary -------------------------------------------------------------------------------------

def test_canary_bad_inputs_create_nothing(cluster, namespace, drain_node):
    """Every bad input is refused before the canary writes its first object (a claim template): the
    DeviceClass, its name, the expected variables, the tolerations and the pool."""
    pools = sorted(set(s["spec"]["pool"]["name"] for s in cluster.get_json("resourceslices")["items"]
                       if s["spec"].get("driver") == DRIVER))
    assert pools, f"the example driver publishes no pool here: the test needs one ({drain_node})"
    before = objects(cluster, "resourceclaimtemplates", "-A"), objects(cluster, "pods", "-n", namespace)
    bad = [
        ({"device_classes": {DRIVER: "no-such-class"}},
         f"device_classes: DeviceClass no-such-class (for driver {DRIVER}) does not exist"),
        ({"device_classes": {DRIVER: "Bad_Class"}}, f"device_classes[{DRIVER}] 'Bad_Class' must be a DNS subdomain"),
        ({"expect_env": {"": "{claim_uid}"}}, "expect_env: a variable name is empty"),
        ({"tolerations": [{"key": "dedicated", "effect": "NoRun"}]}, "tolerations[0]: effect 'NoRun'"),
        ({"tolerations": [{"key": "dedicated", "effect": "NoSchedule", "tolerationSeconds": 5}]},
         "tolerations[0]: tolerationSeconds needs effect NoExecute"),
        ({"pools": ["no-such-pool"]}, f"pools: no pool no-such-pool of {DRIVER} (its pools: {pools[0]}"),
    ]
    for check in (True, False):
        for failed in fails_naming_each(cluster, "dra.admin.dra_canary",
                                        [(dict({"drivers": [DRIVER], "namespace": namespace}, **extra), named)
                                         for extra, named in bad], check=check):
            assert "publishes no ResourceSlice pool" not in failed["msg"], failed["msg"]
    assert (objects(cluster, "resourceclaimtemplates", "-A"), objects(cluster, "pods", "-n", namespace)) == before


# --- dra_claims_doctor ----------------------------------------------------------------------------------

def test_claims_doctor_bad_inputs_touch_no_claim(cluster, namespace):
    cluster.apply(claim(cluster.resource_version, namespace, "unused"))
    before = objects(cluster, "resourceclaims", "-A")
    assert f"{namespace}/unused" in before
    bad = [
        ({"fix": ["orphaned"], "force": True}, "force: true only applies to fix: [stuck_deletion]"),
        ({"fix": ["orphaned"], "wait": True, "wait_timeout": 0}, "wait_timeout must be a finite number"),
        ({"fix": ["orphaned"], "wait_sleep": float("nan")}, "wait_sleep must be a finite number"),
        ({"fix": ["orphaned"], "namespaces": ["Bad_Namespace"]}, "namespaces entry 'Bad_Namespace'"),
    ]
    fails_naming_each(cluster, "dra.admin.dra_claims_doctor", bad)
    assert objects(cluster, "resourceclaims", "-A") == before


# --- kubeadm_config ---------------------------------------------------------------------------------------

@pytest.fixture
def kubeadm_config_map(cluster):
    with open(KUBEADM_CONFIG) as handle:
        config_map = yaml.safe_load(handle)
    config_map["metadata"] = {"name": "kubeadm-config", "namespace": "kube-system"}
    cluster.apply(config_map)
    yield
    cluster.kubectl("delete", "configmap", "-n", "kube-system", "kubeadm-config", check=False)


def test_kubeadm_config_bad_inputs_write_nothing_and_no_backup(cluster, kubeadm_config_map, tmp_path):
    before = objects(cluster, "configmaps", "-n", "kube-system")
    backups = tmp_path / "backups"
    bad = [
        ({"extra_args": {"kube-apiserver": {"feature-gates": {"DRADeviceTaints": "yes"}}}},
         "extra_args.kube-apiserver.feature-gates: DRADeviceTaints='yes', the value must be true or false"),
        ({"extra_args": {"kube-apiserver": {"runtime-config": {"resource.k8s.io/v1beta2": "on"}}}},
         "the value must be true or false"),
        ({"extra_args": {"kubelet": {"v": "4"}}}, "'kubelet' is not a control-plane component"),
        ({"extra_args": {"kube-scheduler": {"v": ["4", "5"]}}}, "--v is given a list"),
        ({"extra_volumes": {"kube-scheduler": [{"name": "config", "hostPath": "/etc/x"}]}}, "has no mountPath"),
    ]
    for check in (True, False):
        fails_naming_each(cluster, "dra.admin.kubeadm_config",
                          [(dict(extra, backup_dir=str(backups)), named) for extra, named in bad], check=check)
    assert objects(cluster, "configmaps", "-n", "kube-system") == before
    assert not backups.exists() or not os.listdir(str(backups)), "a backup was written"
