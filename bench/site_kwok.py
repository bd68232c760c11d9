#!/usr/bin/env python3
"""Time `playbooks/site.yml` run a second time (nothing to change) on KWOK clusters of several sizes.

For each size in --nodes: a local cluster (hack/cluster/up: a real control plane, KWOK nodes, the example driver's
kubelet plugin as a host process per node publishing --devices devices) with inventory/kwok.yml, site.yml run once to
bring it to the good-practices state, then --repeat more runs timed. Each run's wall time, changed and ok counts per
host (the json callback's stats) and the seconds per role (its task durations, summed by the role in the task name)
are recorded; the cost per additional node is the difference of the medians over the difference of the sizes.

On KWOK the control plane runs as host processes and the nodes have no host to log in to: the plays of the
control_plane and dra_nodes groups have no host here (their per-host cost is measured on the kind demo, bench/README.md);
what grows with the nodes is the cluster-facing part (preflight's and the driver's reads, discovery's comparison,
monitoring).

Usage: bench/site_kwok.py [--nodes 3 100] [--repeat 3] [--devices 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402


def playbook_env(kubeconfig, kubectl_dir):
    return dict(os.environ, KUBECONFIG=kubeconfig, K8S_AUTH_KUBECONFIG=kubeconfig,
                PATH=os.pathsep.join([kubectl_dir, os.path.dirname(sys.executable), os.environ["PATH"]]),
                ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
                ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")


def role_seconds(result):
    """{role (or "play: <name>" for a task of no role): seconds} from the json callback's task durations."""
    totals = {}
    for play in result.get("plays") or []:
        for task in play.get("tasks") or []:
            name = task["task"]["name"]
            role = name.split(" : ", 1)[0] if " : " in name else "play: " + play["play"]["name"]
            d = task["task"].get("duration") or {}
            if d.get("start") and d.get("end"):
                seconds = iso_seconds(d["end"]) - iso_seconds(d["start"])
                totals[role] = round(totals.get(role, 0.0) + seconds, 2)
    return totals


def iso_seconds(stamp):
    """Seconds since the epoch of the json callback's ISO time (2026-11-28T16:20:01.123456Z)."""
    return datetime.strptime(stamp.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


def run_site(env):
    started = time.perf_counter()
    res = subprocess.run(["ansible-playbook", "-i", os.path.join(ROOT, "inventory", "kwok.yml"),
                          os.path.join(ROOT, "playbooks", "site.yml")], env=env, capture_output=True, text=True,
                         check=False, cwd=ROOT)
    wall = round(time.perf_counter() - started, 2)
    try:
        result = json.loads(res.stdout)
    except ValueError:
        raise SystemExit("site.yml printed no JSON (rc %d): %s" % (res.returncode, res.stderr[-2000:]))
    stats = result.get("stats") or {}
    if res.returncode or any(s.get("failures") or s.get("unreachable") for s in stats.values()):
        raise SystemExit("site.yml failed (rc %d): %s" % (res.returncode, json.dumps(stats)))
    return {"wall_s": wall, "load_avg": os.getloadavg(),
            "changed": dict((h, s.get("changed")) for h, s in stats.items()),
            "ok": dict((h, s.get("ok")) for h, s in stats.items()), "roles_s": role_seconds(result)}


def measure(size, args, k8s, kubectl_dir):
    name = "%s-%d" % (args.name, size)
    st = clusterlib.cluster_state(name)
    up = [sys.executable, os.path.join(ROOT, "hack", "cluster", "up"), "--name", name, "--nodes", str(size),
          "--devices", str(args.devices), "--port", str(args.port), "--timeout", str(args.up_timeout)]
    started = time.perf_counter()
    subprocess.run(up, check=True, capture_output=True)
    out = {"nodes": size, "up_s": round(time.perf_counter() - started, 1)}
    try:
        env = playbook_env(st["kubeconfig"], kubectl_dir)
        out["first"] = run_site(env)
        out["second"] = [run_site(env) for _ in range(args.repeat)]
    finally:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "down"), "--name", name],
                       check=False, capture_output=True)
    out["second_median_s"] = statistics.median(r["wall_s"] for r in out["second"])
    print(json.dumps({"nodes": size, "first_s": out["first"]["wall_s"],
                      "second_s": [r["wall_s"] for r in out["second"]],
                      "changed": [r["changed"] for r in out["second"]]}), flush=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[3, 100])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--port", type=int, default=25000)
    p.add_argument("--name", default="bench-site")
    p.add_argument("--up-timeout", type=int, default=600)
    p.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "site_kwok.json"))
    args = p.parse_args()
    versions = clusterlib.load_versions()
    k8s = clusterlib.supported_k8s_versions(versions)[0]
    kubectl_dir = os.path.dirname(clusterlib.component_bin("kubernetes", k8s, "kubectl"))
    sizes = [measure(size, args, k8s, kubectl_dir) for size in args.nodes]
    result = {"kubernetes": k8s, "cpus": os.cpu_count(), "devices_per_node": args.devices, "sizes": sizes}
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        result["seconds_per_additional_node"] = round(
            (large["second_median_s"] - small["second_median_s"]) / (large["nodes"] - small["nodes"]), 3)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(result, fh, indent=2)
    print("| nodes | first run s | second run s (each) | median | changed | load avg |")
    print("|---|---|---|---|---|---|")
    for s in sizes:
        print("| %d | %.1f | %s | %.1f | %s | %s |" % (
            s["nodes"], s["first"]["wall_s"], ", ".join("%.1f" % r["wall_s"] for r in s["second"]),
            s["second_median_s"], sorted(set(c for r in s["second"] for c in r["changed"].values())),
            ", ".join("%.1f" % r["load_avg"][0] for r in s["second"])))
    if "seconds_per_additional_node" in result:
        print("cost per additional node: %.3f s" % result["seconds_per_additional_node"])


if __name__ == "__main__":
    main()
