#!/usr/bin/env python3
"""Benchmark dra_node_drain against `kubectl drain` and kubernetes.core.k8s_drain.

On a local cluster (hack/cluster/up, KWOK pod deletion honouring the grace
period), a Deployment puts --pods pods, each with a ResourceClaim from a
template, on one node (grace period --grace s), beside a driver DaemonSet
whose pods the drain label keeps off the node. Each tool drains the node in
turn (same run, same node, the node returned to service in between) and the
script records: wall time, time beyond the grace period, API requests (the
module reports them), and what the tool left behind (driver pod still on the
node, claims still allocated on it, node cordoned).

A second round adds a PodDisruptionBudget that refuses evictions for
--pdb-hold seconds, then allows them: who waits, who fails.

Usage: bench/drain.py [--pods 50] [--grace 5] [--repeat 2] [--kcm-qps 75 --kcm-burst 150]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import clusterlib  # noqa: E402
import kube  # noqa: E402  (hack/cluster/kube.py: the API client and wait helper shared with tests and hack/)
from dra_objects import EXCLUSION_LABEL, claim_template  # noqa: E402

NS = "bench-drain"
DRIVER_NS = "dra-system"
EXCLUSION = EXCLUSION_LABEL
TOLERATE = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


class Bench:
    def __init__(self, name, kubeconfig, kubectl_dir):
        self.kubeconfig = kubeconfig
        self.env = dict(os.environ, KUBECONFIG=kubeconfig, K8S_AUTH_KUBECONFIG=kubeconfig,
                        PATH=os.pathsep.join([kubectl_dir, os.path.dirname(sys.executable), os.environ["PATH"]]),
                        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
                        ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")

    def kubectl(self, *args, stdin=None, check=True):
        return kube.Kubectl(self.kubeconfig, self.env).run(*args, stdin=stdin, check=check)

    def get(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, docs):
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def module(self, name, args):
        res = subprocess.run(["ansible", "localhost", "-i", os.path.join(ROOT, "inventory", "kwok.yml"), "-m", name,
                              "-a", json.dumps(args)], env=self.env, capture_output=True, text=True, check=False)
        return json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]

    def running_on(self, node, namespace, label):
        pods = self.get("pods", "-n", namespace, "-l", label, "--field-selector", f"spec.nodeName={node}")["items"]
        return [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]

    @staticmethod
    def wait(probe, timeout, what):
        return kube.wait_for(probe, timeout, what, retry_on=())

    def claims_on(self, node):
        held = 0
        for c in self.get("resourceclaims", "-n", NS)["items"]:
            alloc = (c.get("status") or {}).get("allocation") or {}
            terms = (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
            if any(node in f.get("values", []) for t in terms for f in t.get("matchFields", [])):
                held += 1
        return held

    def restore(self, node, pods):
        self.kubectl("label", "node", node, f"{EXCLUSION}-", check=False)
        self.kubectl("annotate", "node", node, "dra.admin/cordoned-before-drain-", check=False)
        self.kubectl("uncordon", node)
        self.kubectl("scale", "deployment", "-n", NS, "workers", "--replicas=0")
        self.wait(lambda: not self.get("pods", "-n", NS, "-l", "app=workers")["items"], 120, "old pods gone")
        # The scheduler may turn a new pod away while the old pods' claims still hold the devices, and
        # then not retry it for minutes: start the new pods once those claims are gone.
        self.wait(lambda: not self.get("resourceclaims", "-n", NS)["items"], 120, "old claims gone")
        self.kubectl("scale", "deployment", "-n", NS, "workers", f"--replicas={pods}")
        self.wait(lambda: len(self.running_on(node, NS, "app=workers")) == pods, 180, f"{pods} workers running")
        self.wait(lambda: self.running_on(node, DRIVER_NS, "app=driver"), 60, "driver pod back")


def workload(node, pods, grace):
    driver = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "driver", "namespace": DRIVER_NS},
        "spec": {"selector": {"matchLabels": {"app": "driver"}}, "template": {
            "metadata": {"labels": {"app": "driver"}},
            "spec": {"tolerations": TOLERATE, "terminationGracePeriodSeconds": 1,
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchExpressions": [{"key": EXCLUSION, "operator": "DoesNotExist"}]}]}}},
                     "containers": [{"name": "plugin", "image": "registry.local.invalid/driver:bench"}]}}}}
    workers = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "workers", "namespace": NS},
        "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "workers"}}, "template": {
            "metadata": {"labels": {"app": "workers"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": TOLERATE,
                     "terminationGracePeriodSeconds": grace,
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "main", "image": "registry.local.invalid/app:bench",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}}}
    return driver, workers


def set_kcm_limits(name, qps, burst):
    """Restart kube-controller-manager with --kube-api-qps/--kube-api-burst, as the scale benchmark does
    (its flags rewritten through control_plane.command_line; returns when it leads and its controllers have started)."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "scale"))
    import components
    import run as scale_run
    cluster = components.Cluster(name)
    scale_run.restart_kcm(kube.Api(cluster.kubeconfig), cluster, {"kcm_qps": qps, "kcm_burst": burst})


def drain_with(bench, tool, node, timeout):
    started = time.perf_counter()
    requests = None
    module_s = None
    ok = True
    detail = ""
    if tool == "dra_node_drain":
        r = bench.module("dra.admin.dra_node_drain", {"node": node, "driver_daemonsets": [f"{DRIVER_NS}/driver"],
                                                      "timeout": timeout, "poll_interval": 0.5})
        ok, requests, detail = not r.get("failed"), r.get("api_requests"), r.get("msg", "") or r.get("phases")
        module_s = round(sum((r.get("phases") or {}).values()), 2)
    elif tool == "kubectl drain":
        res = bench.kubectl("drain", node, "--ignore-daemonsets", f"--timeout={timeout}s", check=False)
        ok, detail = res.returncode == 0, res.stderr.strip().splitlines()[-1:] if res.returncode else ""
    else:
        r = bench.module("kubernetes.core.k8s_drain", {"name": node, "state": "drain", "delete_options": {
            "ignore_daemonsets": True, "wait_timeout": timeout, "wait_sleep": 1}})
        ok, detail = not r.get("failed"), r.get("msg", "")
    wall = time.perf_counter() - started
    return {"ok": ok, "wall_s": round(wall, 2), "module_s": module_s, "api_requests": requests, "detail": detail}


def leftovers(bench, node):
    n = bench.get("node", node)
    return {"driver_pod_on_node": bool(bench.running_on(node, DRIVER_NS, "app=driver")),
            "claims_allocated_on_node": bench.claims_on(node),
            "cordoned": bool(n["spec"].get("unschedulable"))}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pods", type=int, default=50)
    p.add_argument("--grace", type=int, default=5)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--pdb-hold", type=int, default=10)
    p.add_argument("--port", type=int, default=23500)
    p.add_argument("--name", default="bench-drain")
    p.add_argument("--kcm-qps", type=int, help="restart kube-controller-manager with this --kube-api-qps")
    p.add_argument("--kcm-burst", type=int, help="... and this --kube-api-burst (both or neither)")
    p.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "drain.json"))
    args = p.parse_args()
    if (args.kcm_qps is None) != (args.kcm_burst is None):
        p.error("--kcm-qps and --kcm-burst go together")
    versions = clusterlib.load_versions()
    k8s = clusterlib.supported_k8s_versions(versions)[0]
    st = clusterlib.cluster_state(args.name)
    subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "up"), "--name", args.name, "--nodes", "2",
                    "--devices", str(args.pods + 10), "--port", str(args.port)], check=True, capture_output=True)
    bench = Bench(args.name, st["kubeconfig"], os.path.dirname(clusterlib.component_bin("kubernetes", k8s, "kubectl")))
    results = {"pods": args.pods, "grace_s": args.grace, "kubernetes": k8s, "cpus": os.cpu_count(), "runs": [],
               "pdb_round": [], "kcm_qps_burst": [args.kcm_qps or 20, args.kcm_burst or 30]}
    tools = ["dra_node_drain", "kubectl drain", "kubernetes.core.k8s_drain"]
    try:
        if args.kcm_qps is not None:
            set_kcm_limits(args.name, args.kcm_qps, args.kcm_burst)
        node = sorted(n["metadata"]["name"] for n in bench.get("nodes")["items"])[-1]
        for ns in (NS, DRIVER_NS):
            bench.kubectl("create", "namespace", ns, check=False)
        bench.wait(lambda: bench.kubectl("get", "sa", "default", "-n", NS, check=False).returncode == 0, 30, "sa")
        bench.apply([claim_template("v1", NS, "one-gpu")] + list(workload(node, args.pods, args.grace)))
        bench.wait(lambda: len(bench.running_on(node, NS, "app=workers")) == args.pods, 240, "workers running")
        bench.wait(lambda: bench.running_on(node, DRIVER_NS, "app=driver"), 60, "driver running")
        for rep in range(args.repeat):
            for tool in tools:
                run = drain_with(bench, tool, node, 120)
                run.update(tool=tool, repetition=rep, overhead_s=round(run["wall_s"] - args.grace, 2),
                           left=leftovers(bench, node))
                results["runs"].append(run)
                print(json.dumps(run), flush=True)
                bench.restore(node, args.pods)
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "hold", "namespace": NS},
               "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "workers"}}}}
        for tool in tools:
            bench.apply([pdb])
            # the hold counts from when the PDB is in force: its status computed for the workers
            bench.wait(lambda: (bench.get("pdb", "-n", NS, "hold").get("status") or {}).get("expectedPods")
                       == args.pods, 60, "the PodDisruptionBudget to be in force")
            relax = threading.Timer(args.pdb_hold, lambda: bench.kubectl(
                "patch", "pdb", "-n", NS, "hold", "--type=merge", "-p", '{"spec":{"maxUnavailable":null,"minAvailable":0}}'))
            relax.start()
            run = drain_with(bench, tool, node, 120)
            relax.join()
            run.update(tool=tool, pdb_hold_s=args.pdb_hold, left=leftovers(bench, node))
            results["pdb_round"].append(run)
            print(json.dumps(run), flush=True)
            bench.kubectl("delete", "pdb", "-n", NS, "hold")
            bench.restore(node, args.pods)
    finally:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "down"), "--name", args.name],
                       check=False, capture_output=True)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(results, fh, indent=2)
    print("| tool | wall s (median) | beyond grace s | module's own phases s | API requests | driver left on node "
          "| claims left | cordoned |")
    print("|---|---|---|---|---|---|---|---|")
    for tool in tools:
        runs = [r for r in results["runs"] if r["tool"] == tool]
        walls = sorted(r["wall_s"] for r in runs)
        med = walls[len(walls) // 2]
        last = runs[-1]
        mod = sorted(r["module_s"] for r in runs if r["module_s"] is not None)
        mod_text = f"{mod[len(mod) // 2]:.2f}" if mod else "-"
        print(f"| {tool} | {med:.2f} | {med - args.grace:.2f} | {mod_text} | {last['api_requests'] or '-'} | "
              f"{last['left']['driver_pod_on_node']} | {last['left']['claims_allocated_on_node']} | "
              f"{last['left']['cordoned']} |")
    print("PDB holding evictions for %ds:" % args.pdb_hold)
    for run in results["pdb_round"]:
        print(f"  {run['tool']}: ok={run['ok']} wall={run['wall_s']}s {str(run['detail'])[:160]}")


if __name__ == "__main__":
    main()
