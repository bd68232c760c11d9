#!/usr/bin/env python3
"""Benchmark dra_claims_info against `kubectl get resourceclaims -A -o json` on the same data.

Brings up a local cluster (hack/cluster/up), scales it to --nodes KWOK nodes,
publishes one ResourceSlice per node (10 devices, driver bench.example.com),
creates one pod per claim bound to a node (spec.nodeName; KWOK runs it) and
--claims ResourceClaims spread over the nodes, and writes their allocation and
reservation status the way the scheduler does (nodeSelector matchFields on
metadata.name, reservedFor the pod on that node). kube-controller-manager is
paused (SIGSTOP) while the data exists, so its claim controller does not touch
claims the scheduler did not allocate; it is resumed before teardown.

Then, in the same run and alternating, it times:
  - kubectl get resourceclaims -A -o json   (wall time, peak RSS, bytes)
  - the module process itself (python plugins/modules/dra_claims_info.py)
    with include_claims true and false   (wall time, peak RSS, API requests)
  - the same module for one node with fail_if_any_on_node (the drain gate)
  - the same module returning every claim with three keys each (claim_keys)
  - bench/claims_reads.py: the module's imports and LISTs with nothing made of them (the floor)
and writes a JSON result and prints a markdown table.

With --suite doctor it times dra_claims_doctor and dra_capacity_info instead, against
`kubectl get resourceslices,resourceclaims -A -o json`; with --suite health dra_device_health_info,
against `kubectl get resourceslices,resourceclaims,pods -A -o json`.

Usage: bench/claims_info.py [--nodes 1000] [--claims 10000] [--repeat 3] [--suite claims|doctor|explain|health]
                            [--keep] [--reuse] [--compare-with DIR]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kube  # noqa: E402  (the one API client and wait helper of tests, bench and hack/)

DRIVER = "bench.example.com"
DEVICES_PER_NODE = 10
NAMESPACES = 10


def sh(cmd, env, **kw):
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, **kw)


def child_peak(cmd, env, stdout_path):
    """Peak RSS of exactly this child, measured in a fresh helper process."""
    probe = ("import resource,subprocess,sys,time,json;"
             "t=time.perf_counter();"
             "p=subprocess.run(sys.argv[2:],stdout=open(sys.argv[1],'wb'),stderr=subprocess.PIPE);"
             "w=time.perf_counter()-t;"
             "print(json.dumps({'rc':p.returncode,'wall':w,"
             "'rss':resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024.0,"
             "'err':p.stderr.decode()[-1500:]}))")
    out = subprocess.run([sys.executable, "-c", probe, stdout_path] + cmd, env=env, capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout)
    if data["rc"] != 0:
        with open(stdout_path) as fh:
            raise RuntimeError(f"{cmd[:3]} failed: {data['err']} {fh.read()[-1500:]}")
    return data["wall"], data["rss"], os.path.getsize(stdout_path)


def make_slices(api, nodes):
    def one(node):
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"bench-{node}"},
                "spec": {"driver": DRIVER, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"dev-{i}"} for i in range(DEVICES_PER_NODE)]}}
        api.create("/apis/resource.k8s.io/v1/resourceslices", body)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, nodes))


def make_pods(api, nodes, count, name_claims=False):
    """One pod per claim, bound to the claim's node; returns their uids by index. With name_claims, each pod
    names its claim in spec.resourceClaims (a claim workload, as the drain sees it)."""
    def one(i):
        ns = f"bench-{i % NAMESPACES}"
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pod-{i}", "namespace": ns},
                "spec": {"nodeName": nodes[i % len(nodes)], "automountServiceAccountToken": False,
                         "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [{"name": "main", "image": "registry.invalid/app:none"}]}}
        if name_claims:
            body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"claim-{i}"}]
            body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
        return api.create(f"/api/v1/namespaces/{ns}/pods", body)["metadata"]["uid"]
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(count)))


def pending_pods(api):
    """Whether any benchmark pod is not Running yet (one small LIST)."""
    return bool(api.get("/api/v1/pods", {"fieldSelector": "status.phase!=Running", "limit": 1})["items"])


def make_claims(api, nodes, count, pod_uids):
    def one(i):
        ns = f"bench-{i % NAMESPACES}"
        node = nodes[i % len(nodes)]
        name = f"claim-{i}"
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns, "labels": {"bench": "claims"}},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        api.create(path, body)
        status = {"status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node,
                                         "device": f"dev-{(i // len(nodes)) % DEVICES_PER_NODE}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": f"pod-{i}", "uid": pod_uids[i]}],
        }}
        api.request("PATCH", f"{path}/{name}/status", status, ok=(200,),
                    content_type="application/merge-patch+json")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


PENDING_NAMESPACE = "bench-pending"


def make_explain_data(api, nodes, pending):
    """For the explain suite: the DeviceClass; `pending` pods with a claim of one device each, not bound (every
    device is allocated, so they stay Pending); the claim pods of the first node given a controller (as a
    ReplicaSet's pods), so the drain preview places them again."""
    api.create("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})

    def one(i):
        path = f"/apis/resource.k8s.io/v1/namespaces/{PENDING_NAMESPACE}/resourceclaims"
        api.create(path, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": f"pending-{i}", "namespace": PENDING_NAMESPACE},
                          "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}})
        api.create(f"/api/v1/namespaces/{PENDING_NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pending-{i}", "namespace": PENDING_NAMESPACE},
            "spec": {"schedulingGates": [{"name": "bench"}], "automountServiceAccountToken": False,
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"pending-{i}"}],
                     "containers": [{"name": "main", "image": "registry.invalid/app:none",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}})
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(pending)))
    owner = {"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench",
                                               "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]}}
    for pod in api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={nodes[0]}"})["items"]:
        api.merge_patch(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}", owner)


def explained(key, result):
    """What an explain-suite run answered: pods explained per verdict, or the preview's summary."""
    if key == "explain_namespace":
        return result["totals"]
    if key == "drain_preview":
        return result["preview"]["summary"]
    return None


def suites(nodes):
    """{suite: (the kubectl command compared with, {run key: (module, params)})}."""
    return {
        "claims": (["kubectl", "get", "resourceclaims", "-A", "-o", "json"], {
            "module_summary": ("dra_claims_info", {"include_claims": False}),
            "module_full": ("dra_claims_info", {"include_claims": True}),
            "module_node_gate": ("dra_claims_info", {"node": nodes[0], "include_claims": False}),
            "module_keys": ("dra_claims_info", {"claim_keys": ["state", "nodes", "orphaned"]}),
            # Not a module: the same imports and LISTs with nothing made of them, what the module cannot go below.
            "reads_only": ("bench/claims_reads.py", {}),
        }),
        # The explainer and the drain preview read slices and claims (and classes, nodes, unbound pods).
        "explain": (["kubectl", "get", "resourceslices,resourceclaims", "-A", "-o", "json"], {
            "explain_namespace": ("dra_allocation_explain_info", {"namespace": PENDING_NAMESPACE}),
            # No driver runs in a pod here: the bench driver's slices are written by the benchmark, the example
            # driver's plugin is a host process per node (hack/cluster/up).
            "drain_preview": ("dra_node_drain", {"node": nodes[0], "preview": True,
                                                 "drivers_not_in_pods": [DRIVER, "gpu.example.com"]}),
        }),
        # The claim doctor and the capacity report read slices and claims (and pods, nodes, classes).
        "doctor": (["kubectl", "get", "resourceslices,resourceclaims", "-A", "-o", "json"], {
            "claims_doctor": ("dra_claims_doctor", {}),
            "capacity_info": ("dra_capacity_info", {}),
        }),
        # Device health reads slices, claims and every live pod (their status carries the health field).
        "health": (["kubectl", "get", "resourceslices,resourceclaims,pods", "-A", "-o", "json"], {
            "device_health": ("dra_device_health_info", {}),
        }),
    }


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--claims", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--port", type=int, default=24000)
    p.add_argument("--name", default="bench-claims")
    p.add_argument("--keep", action="store_true",
                   help="leave the cluster up with its data (kube-controller-manager stays paused) for --reuse")
    p.add_argument("--reuse", action="store_true",
                   help="measure on the cluster an earlier --keep run of the same suite and sizes left up")
    p.add_argument("--compare-with", metavar="DIR", default=None,
                   help="another checkout of the collection (e.g. `git archive` of a commit): its modules are "
                        "timed too, alternating, as <key>@base")
    p.add_argument("--pending", type=int, default=100, help="explain suite: pending pods to explain")
    p.add_argument("--suite", choices=["claims", "doctor", "explain", "health"], default="claims",
                   help="claims: dra_claims_info against kubectl get resourceclaims; doctor: dra_claims_doctor and "
                        "dra_capacity_info against kubectl get resourceslices,resourceclaims; explain: "
                        "dra_allocation_explain_info of --pending pods and dra_node_drain's preview of one node, "
                        "against the same; health: dra_device_health_info against kubectl get "
                        "resourceslices,resourceclaims,pods")
    p.add_argument("--output", default=None, help="default bench/results/claims_info.json (suite doctor: "
                                                  "claims_doctor.json)")
    args = p.parse_args()
    if args.output is None:
        name = {"claims": "claims_info.json", "doctor": "claims_doctor.json",
                "explain": "allocation_explain.json", "health": "device_health.json"}[args.suite]
        args.output = os.path.join(ROOT, "bench", "results", name)
    return args


def collections_path(root):
    """A collections directory whose dra/admin is `root` (made once, under root/.tmp)."""
    link = os.path.join(root, ".tmp", "collections", "ansible_collections", "dra", "admin")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.abspath(root), link)
    return os.path.join(root, ".tmp", "collections")


def kcm_pid_of(st, name):
    pid_file = os.path.join(st["kwok_workdir"], "clusters", name, "pids", "kube-controller-manager.pid")
    with open(pid_file) as fh:
        return int(fh.read().strip())


def make_data(args, env, st, kwokctl):
    """Bring the cluster up and write the suite's data; returns (node names, setup timings, kcm pid)."""
    t0 = time.time()
    sh([sys.executable, os.path.join(ROOT, "hack", "cluster", "up"), "--name", args.name, "--nodes", "1",
        "--port", str(args.port)], env)
    sh([kwokctl, "scale", "node", "--name", args.name, "--replicas", str(args.nodes)], env)
    nodes = sorted(sh(["kubectl", "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"], env).stdout.split())
    setup = {"up_and_scale_s": round(time.time() - t0, 1)}
    namespaces = [f"bench-{i}" for i in range(NAMESPACES)] + [PENDING_NAMESPACE] * (args.suite == "explain")
    for ns in namespaces:
        sh(["kubectl", "create", "namespace", ns], env)
    for ns in namespaces:  # pods are admitted once the namespace's ServiceAccount exists
        kube.wait_for(lambda: subprocess.run(["kubectl", "get", "serviceaccount", "default", "-n", ns],
                                             env=env, capture_output=True).returncode == 0, 60,
                      f"ServiceAccount {ns}/default", retry_on=())
    api = kube.Api(st["kubeconfig"])
    t = time.time()
    pod_uids = make_pods(api, nodes, args.claims, name_claims=args.suite == "explain")
    kube.wait_for(lambda: not pending_pods(api), 900, "every benchmark pod Running",
                  retry_on=())  # KWOK has marked every pod Running
    setup["pods_s"] = round(time.time() - t, 1)
    kcm_pid = kcm_pid_of(st, args.name)
    os.kill(kcm_pid, signal.SIGSTOP)
    t = time.time()
    make_slices(api, nodes)
    setup["slices_s"] = round(time.time() - t, 1)
    t = time.time()
    make_claims(api, nodes, args.claims, pod_uids)
    setup["claims_s"] = round(time.time() - t, 1)
    if args.suite == "explain":
        make_explain_data(api, nodes, args.pending)
    return nodes, setup, kcm_pid


def measure(args, env, st, nodes):
    """Alternating runs of kubectl and every module (and those of --compare-with); returns (kubectl command, module
    keys, runs, load at start, import baseline RSS)."""
    tmp = tempfile.mkdtemp(prefix="bench-claims-")
    kubectl_cmd, argsets = suites(nodes)[args.suite]
    runs = dict((key, []) for key in ["kubectl"] + list(argsets))
    trees = [("", ROOT, env)]
    if args.compare_with:
        trees.append(("@base", args.compare_with, dict(env, PYTHONPATH=collections_path(args.compare_with))))
        runs.update((key + "@base", []) for key in argsets if not argsets[key][0].endswith(".py"))
    arg_files = {}
    for key, (dummy, params) in argsets.items():
        arg_files[key] = os.path.join(tmp, key + ".json")
        with open(arg_files[key], "w") as fh:
            json.dump({"ANSIBLE_MODULE_ARGS": dict(params, kubeconfig=st["kubeconfig"])}, fh)
    out = os.path.join(tmp, "out.json")
    load_at_start = os.getloadavg()
    for _ in range(args.repeat):
        wall, rss, size = child_peak(kubectl_cmd, env, out)
        runs["kubectl"].append({"wall_s": wall, "peak_rss_mib": rss, "json_bytes": size})
        for key in argsets:
            for suffix, root, tree_env in trees:
                if key + suffix not in runs:  # a bench/ script (the same in both trees), or an option base lacks
                    continue
                if argsets[key][0].endswith(".py"):
                    module = os.path.join(ROOT, argsets[key][0])
                else:
                    module = os.path.join(root, "plugins", "modules", argsets[key][0] + ".py")
                try:
                    wall, rss, size = child_peak([sys.executable, module, arg_files[key]], tree_env, out)
                except RuntimeError as exc:
                    if suffix and "Unsupported parameters" in str(exc):
                        runs.pop(key + suffix, None)  # an option the other checkout does not have yet
                        continue
                    raise
                with open(out) as fh:
                    result = json.load(fh)
                if result.get("failed"):
                    raise RuntimeError(f"{key}{suffix}: {result.get('msg')}")
                runs[key + suffix].append({
                    "wall_s": wall, "peak_rss_mib": rss, "output_bytes": size, "api_requests": result["api_requests"],
                    "claims": result["totals"]["total"] if args.suite == "claims" else None,
                    "explained": explained(key, result)})
    dummy, baseline_rss, _ = child_peak(
        [sys.executable, "-c", "import ansible_collections.dra.admin.plugins.module_utils.access.api"], env, out)
    return kubectl_cmd, [k for k in runs if k != "kubectl"], runs, load_at_start, baseline_rss


def report(args, k8s, setup, measured):
    """Write the JSON result and print the table."""
    kubectl_cmd, keys, runs, load_at_start, baseline_rss = measured

    def med(key, field):
        return statistics.median(r[field] for r in runs[key])

    json_mib = med("kubectl", "json_bytes") / 1048576.0
    result = {
        "suite": args.suite, "kubectl": " ".join(kubectl_cmd),
        "nodes": args.nodes, "claims": args.claims, "repeat": args.repeat, "kubernetes": k8s,
        "pods": args.claims, "compare_with": args.compare_with,
        "machine": {"cpus": os.cpu_count(), "load_avg_at_start": load_at_start, "load_avg_at_end": os.getloadavg()},
        "setup": setup, "runs": runs, "import_baseline": {"peak_rss_mib": baseline_rss},
        "summary": {"kubectl_wall_s": med("kubectl", "wall_s"), "json_mib": json_mib},
    }
    for key in keys:
        result["summary"][key] = {
            "wall_s": med(key, "wall_s"), "time_vs_kubectl": med(key, "wall_s") / med("kubectl", "wall_s"),
            "peak_rss_mib": med(key, "peak_rss_mib"), "rss_vs_json": med(key, "peak_rss_mib") / json_mib,
            "rss_above_import_vs_json": (med(key, "peak_rss_mib") - baseline_rss) / json_mib,
            "api_requests": med(key, "api_requests"),
        }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"{args.claims} claims on {args.nodes} nodes, Kubernetes {k8s}, median of {args.repeat}")
    print("| what | wall s | x kubectl | peak RSS MiB | RSS / JSON | (RSS - import) / JSON | API requests |")
    print("|---|---|---|---|---|---|---|")
    print(f"| kubectl get -A -o json ({json_mib:.1f} MiB JSON) | {med('kubectl', 'wall_s'):.2f} | 1.00 | "
          f"{med('kubectl', 'peak_rss_mib'):.0f} | {med('kubectl', 'peak_rss_mib') / json_mib:.2f} | | 1+ |")
    for key in keys:
        s = result["summary"][key]
        print(f"| {key} | {s['wall_s']:.2f} | {s['time_vs_kubectl']:.2f} | {s['peak_rss_mib']:.0f} | "
              f"{s['rss_vs_json']:.2f} | {s['rss_above_import_vs_json']:.2f} | {s['api_requests']:.0f} |")
    print(f"module import baseline: {baseline_rss:.0f} MiB RSS; setup: {setup}")
    print(f"load average at start {load_at_start}, at end {result['machine']['load_avg_at_end']}")


def main():
    args = parse_args()
    versions = clusterlib.load_versions()
    k8s = clusterlib.supported_k8s_versions(versions)[0]
    st = clusterlib.cluster_state(args.name)
    kwokctl = clusterlib.component_bin("kwok", versions["KWOK_VERSION"], "kwokctl")
    kubectl_dir = os.path.dirname(clusterlib.component_bin("kubernetes", k8s, "kubectl"))
    env = dict(os.environ, KWOK_WORKDIR=st["kwok_workdir"], KUBECONFIG=st["kubeconfig"],
               PATH=kubectl_dir + os.pathsep + os.environ["PATH"], PYTHONPATH=collections_path(ROOT))
    kcm_pid = None
    try:
        if args.reuse:  # the data of an earlier --keep run, kube-controller-manager still paused
            nodes = sorted(sh(["kubectl", "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
                              env).stdout.split())
            setup, kcm_pid = {"reused": True}, kcm_pid_of(st, args.name)
        else:
            nodes, setup, kcm_pid = make_data(args, env, st, kwokctl)
        measured = measure(args, env, st, nodes)
    finally:
        if not args.keep:
            if kcm_pid:
                try:
                    os.kill(kcm_pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "down"), "--name", args.name],
                           env=env, check=False, capture_output=True)
    report(args, k8s, setup, measured)


if __name__ == "__main__":
    main()
