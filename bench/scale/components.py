"""The local cluster's processes: restart one with a new command line, KWOK stages, memory.

kwokctl's binary runtime keeps one pid file per component under
<state>/kwok/clusters/<name>/pids/; the command line, working directory and log
file of a running component are read from /proc. A restarted component gets
its pid file rewritten, so `hack/cluster/down` (kwokctl delete cluster) stops
it like any other.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kube  # noqa: E402  (hack/cluster/kube.py)


flags = clusterlib.collection_module("control_plane.command_line")
metrics = clusterlib.collection_module("metrics.diagnosis")
metrics_text = clusterlib.collection_module("kube.prometheus_text")
gates = clusterlib.collection_module("releases.catalog")


class Cluster:
    def __init__(self, name):
        self.name = name
        self.st = clusterlib.cluster_state(name)
        self.state = clusterlib.read_state(self.st)
        if not self.state:
            raise clusterlib.ClusterError(f"no cluster {name!r}: start it with hack/cluster/up")
        self.workdir = os.path.join(self.st["kwok_workdir"], "clusters", name)
        self.port = self.state["port"]
        self.kubeconfig = self.st["kubeconfig"]
        self.k8s_version = self.state["k8s_version"]

    # ---- processes ----

    def pidfile(self, component):
        return clusterlib.component_pidfile(self.workdir, component)

    def pid(self, component):
        return clusterlib.component_pid(self.workdir, component)

    def argv(self, component):
        return clusterlib.component_argv(self.workdir, component)

    def restart(self, component, argv=None, between=None):
        """Stop the component, call between(), start argv (default: the same command line)."""
        return clusterlib.restart_component(self.workdir, component, argv, between)

    def component_pids(self):
        pids = clusterlib.component_pids(self.workdir)
        state = clusterlib.read_state(self.st) or {}
        pids["dra-example-kubeletplugin"] = [p["pid"] for p in state.get("plugins", {}).values()]
        return pids

    def memory(self):
        """Resident (RSS) and proportional (PSS) memory per component, in MiB; plugins summed."""
        result = {}
        for component, pids in self.component_pids().items():
            rss = pss = 0.0
            alive = 0
            for pid in pids if isinstance(pids, list) else [pids]:
                values = read_smaps_rollup(pid)
                if values:
                    alive += 1
                    rss += values.get("Rss", 0) / 1024.0
                    pss += values.get("Pss", 0) / 1024.0
            result[component] = {"rss_mib": round(rss, 1), "pss_mib": round(pss, 1), "processes": alive}
        return result

    # ---- kube-controller-manager client rate limits through the collection's flag logic ----

    def kcm_flags(self):
        argv = self.argv(gates.KUBE_CONTROLLER_MANAGER)
        return argv, [flags.parse_flag(item, "kube-controller-manager command line") for item in argv[1:]]

    def kcm_command_line(self, qps=None, burst=None):
        """argv with --kube-api-qps/--kube-api-burst set (or removed: the binary's defaults), via control_plane.command_line."""
        argv, entries = self.kcm_flags()
        if qps is None:
            after = flags.change_flags(entries, remove_flags=["kube-api-qps", "kube-api-burst"])
        else:
            after = flags.change_flags(entries, set_flags={"kube-api-qps": qps, "kube-api-burst": burst})
        return [argv[0]] + [flags.render_flag(name, value) for name, value in after]

    def kcm_url(self):
        return f"https://127.0.0.1:{self.port + 1}/metrics"

    def scheduler_url(self):
        return f"https://127.0.0.1:{self.port + 2}/metrics"

    # ---- KWOK stages ----

    def kwok_config_path(self):
        return os.path.join(self.workdir, "kwok.yaml")

    def ensure_churn_stage(self, label):
        """Make KWOK's pod-complete stage complete only pods labelled `label=true`, after their run time.

        kwokctl's default pod-complete stage completes every Running pod a Job owns at once.
        The run time comes from the pod annotation `label` + "-run-time" (a Go duration).
        Returns True when kwok-controller had to be restarted.
        """
        import yaml
        path = self.kwok_config_path()
        with open(path) as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d]
        stages = [d for d in docs if d.get("kind") == "Stage" and d["metadata"]["name"] == "pod-complete"]
        if len(stages) != 1:
            raise clusterlib.ClusterError(f"expected one pod-complete Stage in {path}, found {len(stages)}")
        spec = stages[0]["spec"]
        key = '.metadata.labels["%s"]' % label
        expressions = spec["selector"]["matchExpressions"]
        if any((e.get("jq") or e).get("key") == key for e in expressions):
            return False
        expressions.append({"jq": {"key": key, "operator": "In", "values": ["true"]}})
        spec["delay"] = {"durationMilliseconds": 1000,
                         "durationFrom": {"expressionFrom": '.metadata.annotations["%s-run-time"]' % label}}
        with open(path + ".tmp", "w") as fh:
            yaml.safe_dump_all(docs, fh, sort_keys=False)
        os.replace(path + ".tmp", path)
        # The node leases name the old process as holder: a new one waits for them to expire (minutes)
        # unless they are gone.
        self.restart("kwok-controller", between=lambda: delete_node_leases(self.kubeconfig))
        # Until the new process holds a node's lease it does not run that node's pods: a run started
        # earlier measures kwok-controller's start (seconds on some pods), not the control plane.
        api = kube.Api(self.kubeconfig)
        nodes = len(api.list_all("/api/v1/nodes")[0])
        kube.wait_for(lambda: len(api.list_all("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")[0])
                      >= nodes, 180, f"kwok-controller to hold the leases of all {nodes} nodes", retry_on=(Exception,))
        return True


def delete_node_leases(kubeconfig):
    api = kube.Api(kubeconfig)
    api.delete("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")


def read_smaps_rollup(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            values = {}
            for line in fh:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    values[parts[0].rstrip(":")] = int(parts[1])
            return values
    except OSError:
        return None
