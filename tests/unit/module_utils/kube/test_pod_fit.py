"""kube.pod_fit: a pod's requests as kube-scheduler counts them (k8s.io/component-helpers' resource helpers), the
node's resources left (NodeResourcesFit), and what is not modelled."""
import copy
from fractions import Fraction

from ansible_collections.dra.admin.plugins.module_utils.kube import pod_fit


def container(name, cpu=None, memory=None, restart=None, **extra):
    requests = dict(([("cpu", cpu)] if cpu else []) + ([("memory", memory)] if memory else []))
    out = dict({"name": name, "resources": {"requests": requests}}, **extra)
    if restart:
        out["restartPolicy"] = restart
    return out


def test_requests_count_sidecars_beside_the_containers_and_the_largest_init_step():
    spec = {"containers": [container("app", "1", "1Gi"), container("log", "250m")],
            "initContainers": [container("setup", "2", "512Mi"),
                               container("proxy", "500m", "256Mi", restart="Always"),
                               container("migrate", "1500m")],
            "overhead": {"cpu": "100m"}}
    asked = pod_fit.pod_requests(spec)
    # containers 1.25 + sidecar 0.5 = 1.75 cpu; init steps: setup 2, migrate 1.5 + proxy 0.5 = 2 -> 2; + overhead.
    assert asked["cpu"] == Fraction(21, 10)
    # memory: 1Gi + 256Mi beside; steps 512Mi, 256Mi -> 1.25Gi.
    assert asked["memory"] == 2 ** 30 + 256 * 2 ** 20


def test_pod_level_requests_replace_cpu_and_memory():
    spec = {"containers": [container("app", "4", "8Gi")], "resources": {"requests": {"cpu": "1"}}}
    assert pod_fit.pod_requests(spec) == {"cpu": 1, "memory": 8 * 2 ** 30}


def node(name, **allocatable):
    left = dict({"cpu": "4", "memory": "8Gi", "pods": "3"}, **allocatable)
    return {"metadata": {"name": name}, "status": {"allocatable": left}}


def bound(name, cpu="1", phase="Running"):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container("c", cpu)]},
            "status": {"phase": phase}}


def test_fit_refusal_as_node_resources_fit_says_it():
    spec = {"containers": [container("app", "2")]}
    assert pod_fit.fit_refusal(node("n"), spec, [bound("a"), bound("done", "3", "Succeeded")]) is None
    refusal = pod_fit.fit_refusal(node("n"), spec, [bound("a"), bound("b", "1500m")])
    assert refusal == "Insufficient cpu (the pod requests 2; 1.5 of 4 free)"
    assert pod_fit.fit_refusal(node("n"), spec, [bound("a", "0"), bound("b", "0"), bound("c", "0")]).startswith(
        "Too many pods: the node allows 3, 3 are bound to it")
    gpu = {"containers": [dict(container("app"), resources={"requests": {"example.com/gpu": "1"}})]}
    assert pod_fit.fit_refusal(node("n"), gpu, []) == "Insufficient example.com/gpu (the pod requests 1; 0 of 0 free)"
    # An extended resource a DeviceClass backs is DRA's, where the node does not list it.
    assert pod_fit.fit_refusal(node("n"), gpu, [], backed_by_dra=("example.com/gpu",)) is None


def anti_affine(name, namespace="default", selector=None, node_name="n1"):
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {"nodeName": node_name, "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": selector or {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname"}]}}},
            "status": {"phase": "Running"}}


def test_unchecked_filters_name_what_is_not_modelled():
    plain = {"metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
             "spec": {"containers": [container("app", "1")]}}
    assert pod_fit.unchecked_filters(plain) == []
    busy = copy.deepcopy(plain)
    busy["spec"].update(
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone"}],
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    busy["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    assert pod_fit.unchecked_filters(busy) == [
        "required pod anti-affinity", "topology spread constraints (DoNotSchedule)", "host ports",
        "volumes the scheduler places (PersistentVolumeClaims, ephemeral volumes)"]
    # A bound pod's required anti-affinity that selects this pod (same namespace), and one that does not.
    assert pod_fit.unchecked_filters(plain, pod_fit.anti_affinity_holders([anti_affine("db")])) == [
        "the required anti-affinity of pod(s) default/db, which selects this pod"]
    assert pod_fit.unchecked_filters(plain, pod_fit.anti_affinity_holders([anti_affine("db", namespace="other")])) == []
    assert pod_fit.unchecked_filters(plain, pod_fit.anti_affinity_holders(
        [anti_affine("db", selector={"matchLabels": {"app": "x"}})])) == []
