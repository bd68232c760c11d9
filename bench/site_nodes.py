#!/usr/bin/env python3
"""Time site.yml's kubelet feature-gate plays (nothing to change) as the DRA nodes grow, on the kind demo.

The kind demo (`make up`) has two workers. To see what each additional DRA node costs, the inventory here lists
--hosts N hosts in the dra_nodes group, each an alias of one of the two worker containers (ansible_host: the
container; the podman connection reaches it), and runs `site.yml --tags feature_gates --limit
'dra_nodes:!control_plane'`: the kubelet plays alone, on N hosts whose kubelets need no change (the demo's
kubelets are already as site.yml leaves them). Each alias does the same work a real node would: the version, the
catalog's check, the kubelet configuration read in check mode.

For each N, --repeat runs are timed (wall time, and the seconds of each play from the json callback); with
--compare-with DIR the same runs of the collection checked out in DIR (e.g. a `git worktree` of an earlier commit)
alternate with this checkout's. The cost per additional node is the difference of the medians over the difference
of the sizes. Ansible runs with its default forks (5) unless --forks is given.

Usage: bench/site_nodes.py [--hosts 2 10 20] [--repeat 2] [--forks 5] [--compare-with DIR] [--name dra-admin]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
from site_kwok import iso_seconds  # noqa: E402  (bench/ is the script's directory)


def inventory_with_aliases(name, hosts):
    """inventory/local.yml's groups for the kind cluster `name`, dra_nodes being `hosts` aliases of its workers."""
    with open(os.path.join(ROOT, "inventory", "local.yml")) as fh:
        inventory = yaml.safe_load(fh)
    nodes = inventory["all"]["children"]["kind_nodes"]["children"]
    workers = [w.replace("dra-admin", name, 1) for w in nodes["dra_nodes"]["hosts"]]
    nodes["control_plane"]["hosts"] = {name + "-control-plane": None}
    nodes["dra_nodes"]["hosts"] = dict(("dra-node-%03d" % i, {"ansible_host": workers[i % len(workers)]})
                                       for i in range(hosts))
    inventory["all"]["vars"]["dra_monitoring_rules_dir"] = os.path.join(ROOT, ".tmp", "monitoring", "rules")
    return inventory


def play_seconds(result):
    """{play name: seconds} from the json callback's play durations."""
    out = {}
    for play in result.get("plays") or []:
        d = play["play"].get("duration") or {}
        if d.get("start") and d.get("end"):
            out[play["play"]["name"]] = round(iso_seconds(d["end"]) - iso_seconds(d["start"]), 2)
    return out


def run_plays(tree, inventory_file, env, forks):
    env = dict(env, ANSIBLE_COLLECTIONS_PATH=os.path.join(tree, ".tmp", "collections"),
               ANSIBLE_CONFIG=os.path.join(tree, "ansible.cfg"))
    cmd = ["ansible-playbook", "-i", inventory_file, os.path.join(tree, "playbooks", "site.yml"),
           "--tags", "feature_gates", "--limit", "dra_nodes:!control_plane"]
    if forks:
        cmd += ["--forks", str(forks)]
    started = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    try:
        result = json.loads(res.stdout)
    except ValueError:
        raise RuntimeError("site.yml's output is not the json callback's (rc=%d): %s %s"
                           % (res.returncode, res.stdout[-2000:], res.stderr[-2000:]))
    if res.returncode != 0:
        raise RuntimeError("site.yml failed (rc=%d): %s" % (res.returncode, res.stderr[-2000:]))
    changed = sum(s.get("changed", 0) for s in result["stats"].values())
    return {"wall_s": round(wall, 2), "changed": changed, "hosts": len(result["stats"]), "plays": play_seconds(result)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, nargs="+", default=[2, 10, 20])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--forks", type=int, default=None)
    p.add_argument("--name", default="dra-admin", help="the kind cluster (make up's CLUSTER_NAME)")
    p.add_argument("--compare-with", default=None, help="another checkout whose site.yml runs alternately")
    p.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "site_nodes.json"))
    args = p.parse_args()
    kubeconfig = os.path.join(clusterlib.CACHE_ROOT, "state", args.name, "kubeconfig")
    if not os.path.exists(kubeconfig):
        raise SystemExit("no kind cluster %s (%s): bring the demo up first (make up)" % (args.name, kubeconfig))
    env = dict(os.environ, K8S_AUTH_KUBECONFIG=kubeconfig, KUBECONFIG=kubeconfig,
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]),
               CONTAINERS_CONF=os.path.join(ROOT, "hack", "cluster", "kind", "containers.conf"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    trees = [("this", ROOT)] + ([("base", os.path.abspath(args.compare_with))] if args.compare_with else [])
    tmp = tempfile.mkdtemp(prefix="bench-site-nodes-")
    runs = dict(("%s/%d" % (label, n), []) for label, _ in trees for n in args.hosts)
    load_at_start = os.getloadavg()
    for n in args.hosts:
        inventory_file = os.path.join(tmp, "inventory-%d.yml" % n)
        with open(inventory_file, "w") as fh:
            yaml.safe_dump(inventory_with_aliases(args.name, n), fh)
        for _ in range(args.repeat):
            for label, tree in trees:
                run = run_plays(tree, inventory_file, env, args.forks)
                runs["%s/%d" % (label, n)].append(run)
                print("%s, %d hosts: %.1f s, changed=%d, %s" % (label, n, run["wall_s"], run["changed"], run["plays"]),
                      flush=True)
    summary = {}
    for label, _ in trees:
        medians = dict((n, statistics.median(r["wall_s"] for r in runs["%s/%d" % (label, n)])) for n in args.hosts)
        lo, hi = min(args.hosts), max(args.hosts)
        summary[label] = {"median_wall_s": medians,
                          "seconds_per_additional_node": round((medians[hi] - medians[lo]) / (hi - lo), 3)
                          if hi > lo else None}
    result = {"cluster": args.name, "hosts": args.hosts, "repeat": args.repeat, "forks": args.forks or 5,
              "compare_with": args.compare_with, "machine": {"cpus": os.cpu_count(), "load_avg_at_start": load_at_start,
                                                            "load_avg_at_end": os.getloadavg()},
              "runs": runs, "summary": summary}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    for label, s in summary.items():
        print("%s: median wall %s; %.3f s per additional node" % (
            label, ", ".join("%d hosts %.1f s" % (n, s["median_wall_s"][n]) for n in args.hosts),
            s["seconds_per_additional_node"] or 0.0))
    print("written to %s" % args.output)


if __name__ == "__main__":
    main()
