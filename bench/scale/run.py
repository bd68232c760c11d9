#!/usr/bin/env python3
"""Scale benchmark: the good-practices page's 100-node DRA test on the local cluster.

One command: starts (or reuses) hack/cluster clusters with KWOK nodes and one
real dra-example-kubeletplugin per node, then for each repetition runs the
workload under four settings, in the same cluster, with kube-controller-manager
restarted for each run. --parallel repetitions run at the same time, each on
its own cluster, the settings in lockstep:

  no-claims     the same Jobs without ResourceClaims (kube-controller-manager defaults)
  dra-defaults  DRA, kube-controller-manager --kube-api-qps/--kube-api-burst unset (20/30)
  dra-75-150    DRA, the page's 75/150 (from the collection's tuning rule, set with control_plane.command_line)
  dra-200-400   DRA, 200/400

Workload per run (fresh namespace): fill Jobs (one pod, one device each) created
at --qps until `--fill-percent` of the devices are taken and every fill pod
runs; then churn Jobs (parallelism 1, --churn-completions pods in a row, each
completed by KWOK after --churn-run-time) for the remaining devices, created at
--qps, until every churn pod succeeded.

Writes <out>/scale.json (summary), <out>/scale-samples.json (per-pod
latencies and time series), then <out>/scale.md and the PNG plots
(bench/scale/report.py, which can be re-run on the JSON alone).

Usage: bench/scale/run.py [--nodes 100] [--repetitions 3] [--parallel 1] [--budget-minutes 30] ...
"""
import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import os
import queue as queue_module
import platform
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "hack", "cluster"))
import components  # noqa: E402
import kube  # noqa: E402  (hack/cluster/kube.py: the API client and wait helper shared with tests and hack/)
import workload  # noqa: E402
from components import clusterlib, gates, metrics, metrics_text  # noqa: E402

REPO_ROOT = components.REPO_ROOT
KCM = gates.KUBE_CONTROLLER_MANAGER


def settings():
    """The four settings; 75/150 is what the collection's rule recommends from kube-controller-manager's defaults."""
    page_qps, page_burst = metrics.target_kcm_rate_limits(metrics.DEFAULT_KCM_QPS, metrics.DEFAULT_KCM_BURST)
    return [
        {"id": "no-claims", "title": "no claims", "claims": False, "kcm_qps": None, "kcm_burst": None},
        {"id": "dra-defaults", "title": "DRA, kcm %d/%d (defaults)" % (metrics.DEFAULT_KCM_QPS,
                                                                       metrics.DEFAULT_KCM_BURST),
         "claims": True, "kcm_qps": None, "kcm_burst": None},
        {"id": "dra-%d-%d" % (page_qps, page_burst), "title": "DRA, kcm %d/%d" % (page_qps, page_burst),
         "claims": True, "kcm_qps": page_qps, "kcm_burst": page_burst},
        {"id": "dra-200-400", "title": "DRA, kcm 200/400", "claims": True, "kcm_qps": 200, "kcm_burst": 400},
    ]


def effective_rate_limits(setting):
    if setting["kcm_qps"] is None:
        return metrics.DEFAULT_KCM_QPS, metrics.DEFAULT_KCM_BURST
    return setting["kcm_qps"], setting["kcm_burst"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--name", default="bench-scale", help="cluster name (hack/cluster/up --name)")
    p.add_argument("--port", type=int, default=26000, help="kube-apiserver port of a new cluster")
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--devices", type=int, default=8, help="devices per node (the driver's --num-devices)")
    p.add_argument("--fill-percent", type=int, default=90)
    p.add_argument("--churn-completions", type=int, default=10)
    p.add_argument("--churn-run-time", default="5s", help="how long KWOK keeps a churn pod running")
    p.add_argument("--fill-jobs", type=int, default=None, help="override the number of fill Jobs")
    p.add_argument("--churn-jobs", type=int, default=None, help="override the number of churn Jobs")
    p.add_argument("--qps", type=float, default=10.0, help="Job creation rate")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--parallel", type=int, default=1,
                   help="repetitions run at the same time, each on its own cluster (named <name>-1, -2, ...), "
                        "the settings in lockstep; needs that many times the CPU. 1: one after the other on <name>")
    p.add_argument("--budget-minutes", type=float, default=30.0,
                   help="start another repetition only if it is expected to end within this (whole command)")
    p.add_argument("--settings", default=None, help="comma-separated subset of the setting ids")
    p.add_argument("--warm-up-jobs", type=int, default=50,
                   help="Jobs with claims run (not measured) on each cluster before its first repetition")
    p.add_argument("--sample-interval", type=float, default=2.0, help="seconds between /metrics scrapes")
    p.add_argument("--phase-timeout", type=float, default=600.0, help="seconds a phase may take")
    p.add_argument("--keep-cluster", action="store_true", help="leave the cluster running afterwards")
    p.add_argument("--out", default=os.path.join(REPO_ROOT, "docs", "benchmarks"))
    p.add_argument("--no-report", action="store_true", help="write the JSON only")
    args = p.parse_args()
    total = args.nodes * args.devices
    if args.fill_jobs is None:
        args.fill_jobs = total * args.fill_percent // 100
    if args.churn_jobs is None:
        args.churn_jobs = total - args.fill_jobs
    if args.parallel < 1 or args.repetitions < 1:
        p.error("--parallel and --repetitions must be at least 1")
    args.parallel = min(args.parallel, args.repetitions)
    if args.fill_jobs + args.churn_jobs > total:
        p.error(f"{args.fill_jobs} fill + {args.churn_jobs} churn Jobs need more than the {total} devices")
    return args


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------

def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(values):
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": percentile(values, 0.5), "p90": percentile(values, 0.9),
            "p99": percentile(values, 0.99), "max": max(values), "mean": sum(values) / len(values)}


# ---------------------------------------------------------------------------
# recorders fed by the watches
# ---------------------------------------------------------------------------

class Pods:
    def __init__(self):
        self.lock = threading.Lock()
        self.pods = {}
        self.counts = {}

    def on_event(self, kind, obj, now):
        meta = obj.get("metadata", {})
        with self.lock:
            rec = self.pods.get(meta.get("uid"))
            if rec is None:
                rec = {"role": meta.get("labels", {}).get(workload.ROLE_LABEL, "?"), "created": now,
                       "seen_as": kind, "scheduled": None, "running": None, "succeeded": None, "failed": None}
                self.pods[meta.get("uid")] = rec
            if obj.get("spec", {}).get("nodeName") and rec["scheduled"] is None:
                rec["scheduled"] = now
            phase = obj.get("status", {}).get("phase")
            for state, key in (("Running", "running"), ("Succeeded", "succeeded"), ("Failed", "failed")):
                if phase == state and rec[key] is None:
                    rec[key] = now
                    self.counts[(rec["role"], key)] = self.counts.get((rec["role"], key), 0) + 1

    def count(self, role, key):
        with self.lock:
            return self.counts.get((role, key), 0)

    def latencies(self, role, start, end):
        with self.lock:
            recs = [r for r in self.pods.values() if r["role"] == role and r["seen_as"] == "ADDED"]
            return [r[end] - r[start] for r in recs if r[start] is not None and r[end] is not None]


class Claims:
    def __init__(self):
        self.lock = threading.Lock()
        self.claims = {}

    def on_event(self, kind, obj, now):
        meta = obj.get("metadata", {})
        with self.lock:
            rec = self.claims.setdefault(meta.get("uid"), {"created": now, "seen_as": kind, "allocated": None,
                                                           "deleted": None})
            if (obj.get("status") or {}).get("allocation") and rec["allocated"] is None:
                rec["allocated"] = now
            if kind == "DELETED" and rec["deleted"] is None:
                rec["deleted"] = now

    def allocation_latencies(self):
        with self.lock:
            return [r["allocated"] - r["created"] for r in self.claims.values()
                    if r["seen_as"] == "ADDED" and r["allocated"] is not None]

    def total(self):
        with self.lock:
            return len(self.claims)


# ---------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------

KEEP_PREFIXES = ("rest_client_rate_limiter_duration_seconds", "scheduler_pod_scheduling_sli_duration_seconds",
                 "scheduler_scheduling_algorithm_duration_seconds", "leader_election_master_status",
                 "scheduler_schedule_attempts_total")
QUEUES = ('name="resource_claim"', 'name="job"')


def filtered(text):
    """Only the lines the benchmark reads: parsing all of kube-controller-manager's metrics costs CPU."""
    keep = []
    for line in text.splitlines():
        if line.startswith("workqueue_"):
            if any(q in line for q in QUEUES):
                keep.append(line)
        elif line.startswith(KEEP_PREFIXES):
            keep.append(line)
    return "\n".join(keep)


def scrape(api, cluster):
    """Samples of kube-controller-manager and kube-scheduler, each labelled endpoint=<component>."""
    samples = []
    for component, url in ((KCM, cluster.kcm_url()), (gates.KUBE_SCHEDULER, cluster.scheduler_url())):
        for sample in metrics_text.parse_text(filtered(api.metrics_text(url))).samples:
            sample.labels["endpoint"] = component
            samples.append(sample)
    return samples


def total(samples, name, matchers=()):
    return sum(s.value for s in metrics_text.select(samples, name, matchers))


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Sampler(threading.Thread):
    """Scrapes every interval: resource_claim workqueue depth and adds, load average; memory every 15th time."""

    def __init__(self, api, cluster, interval, t0):
        super().__init__(name="sampler", daemon=True)
        self.api, self.cluster, self.interval, self.t0 = api, cluster, interval, t0
        self.stopped = threading.Event()
        self.series = []
        self.memory = []
        self.errors = []

    def run(self):
        tick = 0
        while not self.stopped.is_set():
            started = time.monotonic()
            try:
                samples = scrape(self.api, self.cluster)
                wq = (("name", "=", "resource_claim"),)
                self.series.append({
                    "t": round(started - self.t0, 2),
                    "depth": total(samples, "workqueue_depth", wq),
                    "adds": total(samples, "workqueue_adds_total", wq),
                    "job_depth": total(samples, "workqueue_depth", (("name", "=", "job"),)),
                    "rate_limiter_wait": total(samples, "rest_client_rate_limiter_duration_seconds_sum",
                                               (("endpoint", "=", KCM),)),
                    "load1": os.getloadavg()[0]})
            except Exception as exc:  # a failed scrape is a gap in the series, reported
                self.errors.append(f"{time.strftime('%H:%M:%S')} {exc}")
            if tick % 15 == 0:
                self.memory.append({"t": round(started - self.t0, 2), "components": self.cluster.memory()})
            tick += 1
            self.stopped.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self):
        self.stopped.set()
        self.join(timeout=30)


def window_measurements(first, second, interval):
    """The page's queries over one window (two scrapes), plus p50/p90 of the scheduler SLI and the limiter."""
    result = {}
    for qid in ("workqueue_add_rate", "workqueue_work_duration_p99", "scheduler_e2e_p99",
                "scheduler_algorithm_p99"):
        result[qid] = metrics.measure_scrapes(metrics.QUERY_BY_ID[qid], first, second, interval)
    for q in (0.5, 0.9):
        query = dict(metrics.QUERY_BY_ID["scheduler_e2e_p99"], quantile=q)
        result["scheduler_e2e_p%d" % int(q * 100)] = metrics.measure_scrapes(query, first, second, interval)
    limiter = dict(metrics.QUERY_BY_ID["workqueue_work_duration_p99"],
                   metric="rest_client_rate_limiter_duration_seconds", matchers=(),
                   target_matchers=(("endpoint", "=", KCM),))
    result["kcm_rate_limiter_wait_p99"] = metrics.measure_scrapes(limiter, first, second, interval)
    kcm = (("endpoint", "=", KCM),)
    waited = total(second, "rest_client_rate_limiter_duration_seconds_sum", kcm) - \
        total(first, "rest_client_rate_limiter_duration_seconds_sum", kcm)
    requests_made = total(second, "rest_client_rate_limiter_duration_seconds_count", kcm) - \
        total(first, "rest_client_rate_limiter_duration_seconds_count", kcm)
    result["kcm_rate_limiter_wait_total"] = metrics.measurement(waited, window="%gs" % interval)
    result["kcm_requests"] = metrics.measurement(requests_made, window="%gs" % interval)
    result["kcm_request_rate"] = metrics.measurement(requests_made / interval if interval > 0 else None,
                                                     window="%gs" % interval)
    return result


# ---------------------------------------------------------------------------
# one run
# ---------------------------------------------------------------------------

def restart_kcm(api, cluster, setting):
    argv = cluster.kcm_command_line(setting["kcm_qps"], setting["kcm_burst"])
    # A new process waits for the old one's lease to expire (15 s) unless the lease is gone.
    cluster.restart(KCM, argv, between=lambda: api.delete(
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"))

    def leader():
        samples = metrics_text.parse_text(filtered(api.metrics_text(cluster.kcm_url()))).samples
        return total(samples, "leader_election_master_status", (("name", "=", KCM),)) == 1
    kube.wait_for(leader, 90, "kube-controller-manager to become leader", retry_on=(Exception,))

    def controllers_started():
        # Controllers register their health checks when they start, after leader election.
        text = api.session().get(cluster.kcm_url().replace("/metrics", "/healthz?verbose"), verify=False,
                                 timeout=10).text
        return all(f"[+]{c} ok" in text for c in ("resourceclaim-controller", "job-controller",
                                                  "garbage-collector-controller"))
    kube.wait_for(controllers_started, 90, "kube-controller-manager's controllers to start", retry_on=(Exception,))
    return argv


def wait_quiet(api, cluster, timeout=60):
    """Until kube-controller-manager's resource_claim and job queues are empty twice in a row."""
    streak = [0]

    def quiet():
        samples = metrics_text.parse_text(filtered(api.metrics_text(cluster.kcm_url()))).samples
        empty = total(samples, "workqueue_depth", (("name", "=~", "resource_claim|job"),)) == 0
        streak[0] = streak[0] + 1 if empty else 0
        return streak[0] >= 2
    kube.wait_for(quiet, timeout, "kube-controller-manager's queues to drain", interval=1.0, retry_on=(Exception,))


def cleanup(api, ns):
    """Remove the run's objects without waiting on kube-controller-manager (which is restarted next)."""
    api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs", params={"propagationPolicy": "Background"})
    paths = (f"/api/v1/namespaces/{ns}/pods", f"/apis/resource.k8s.io/{{v}}/namespaces/{ns}/resourceclaims")
    version = resource_api_version(api)

    def emptied():
        remaining = 0
        for template in paths:
            path = template.format(v=version)
            items, _ = api.list_all(path)
            remaining += len(items)
            stuck = [i["metadata"]["name"] for i in items if i["metadata"].get("finalizers")]
            with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
                list(pool.map(lambda n: api.merge_patch(f"{path}/{n}", {"metadata": {"finalizers": None}}), stuck))
            if items:
                api.delete(path, params={"gracePeriodSeconds": "0"})
        return remaining == 0
    kube.wait_for(emptied, 300, f"namespace {ns} to have no pods or claims left", interval=1.0, retry_on=())


_RESOURCE_VERSION = {}


def resource_api_version(api):
    if "v" not in _RESOURCE_VERSION:
        group = api.get("/apis/resource.k8s.io")
        served = [v["version"] for v in group.get("versions", [])]
        _RESOURCE_VERSION["v"] = components.gates.preferred_api_version(served)
    return _RESOURCE_VERSION["v"]


def wait_count(pods, role, key, expected, timeout, what):
    """True once `expected` pods of the role reached `key`, False at the timeout; ClusterError when one failed."""
    def reached():
        if pods.count(role, key) >= expected:
            return True
        if pods.count(role, "failed"):
            raise clusterlib.GaveUp(f"{what}: a {role} pod failed")
        return False
    try:
        return kube.wait_for(reached, timeout, what, interval=0.25)
    except kube.WaitTimeout:
        return False


def run_once(api, cluster, args, setting, rep, device_class):
    ns = f"bench-r{rep}-{setting['id']}"
    result = {"setting": setting["id"], "repetition": rep, "namespace": ns}
    t_begin = time.monotonic()
    steps = result["setup_seconds"] = {}
    argv = restart_kcm(api, cluster, setting)
    steps["restart_kcm"] = round(time.monotonic() - t_begin, 1)
    result["kcm_flags"] = [a for a in argv[1:] if a.startswith("--kube-api-")]
    result["kcm_qps"], result["kcm_burst"] = effective_rate_limits(setting)
    wait_quiet(api, cluster)
    steps["queues_drained"] = round(time.monotonic() - t_begin, 1)
    api.ensure("/api/v1/namespaces", workload.namespace(ns))
    kube.wait_for(lambda: api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default", ok=(200,)), 60,
                  f"the default ServiceAccount in {ns}", retry_on=(Exception,))
    version = resource_api_version(api)
    if setting["claims"]:
        api.create(f"/apis/resource.k8s.io/{version}/namespaces/{ns}/resourceclaimtemplates",
                   workload.claim_template(version, device_class))

    steps["namespace_ready"] = round(time.monotonic() - t_begin, 1)
    pods, claims = Pods(), Claims()
    _, pods_rv = api.list_all(f"/api/v1/namespaces/{ns}/pods")
    _, claims_rv = api.list_all(f"/apis/resource.k8s.io/{version}/namespaces/{ns}/resourceclaims")
    watches = [kube.Watch(api, f"/api/v1/namespaces/{ns}/pods", pods_rv, pods.on_event, "pods"),
               kube.Watch(api, f"/apis/resource.k8s.io/{version}/namespaces/{ns}/resourceclaims", claims_rv,
                          claims.on_event, "claims")]
    for w in watches:
        w.start()
    t0 = time.monotonic()
    sampler = Sampler(api, cluster, args.sample_interval, t0)
    pids = cluster.component_pids()
    cpu_before = {c: cpu_seconds(p) for c, p in pids.items() if not isinstance(p, list)}
    scrapes = {"start": (time.monotonic(), scrape(api, cluster))}
    sampler.start()
    jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    try:
        fill = [workload.job(f"long-{i:04d}", "fill", setting["claims"]) for i in range(args.fill_jobs)]
        took, rate = workload.create_paced(api, jobs_path, fill, args.qps)
        result["fill_create_seconds"], result["fill_create_rate"] = took, rate
        ok = wait_count(pods, "fill", "running", args.fill_jobs, args.phase_timeout, "fill")
        result["fill_complete"] = ok
        result["fill_seconds"] = time.monotonic() - t0
        scrapes["fill_end"] = (time.monotonic(), scrape(api, cluster))
        t_churn = time.monotonic()
        churn = [workload.job(f"churn-{i:03d}", "churn", setting["claims"], args.churn_completions,
                              args.churn_run_time) for i in range(args.churn_jobs)]
        took, rate = workload.create_paced(api, jobs_path, churn, args.qps)
        result["churn_create_seconds"], result["churn_create_rate"] = took, rate
        expected = args.churn_jobs * args.churn_completions
        ok = wait_count(pods, "churn", "succeeded", expected, args.phase_timeout, "churn")
        result["churn_complete"] = ok
        result["churn_seconds"] = time.monotonic() - t_churn
        scrapes["end"] = (time.monotonic(), scrape(api, cluster))
    finally:
        sampler.stop()
        for w in watches:
            w.stop()
    cpu_after = {c: cpu_seconds(p) for c, p in pids.items() if not isinstance(p, list)}
    result["cpu_seconds"] = {c: round(cpu_after[c] - cpu_before[c], 2) for c in cpu_before
                             if cpu_before[c] is not None and cpu_after.get(c) is not None}
    result["fill_phase_seconds"] = scrapes["fill_end"][0] - scrapes["start"][0]
    result["run_seconds"] = scrapes["end"][0] - scrapes["start"][0]

    samples = {}
    for role in ("fill", "churn"):
        samples[role] = {
            "startup": pods.latencies(role, "created", "running"),
            "create_to_scheduled": pods.latencies(role, "created", "scheduled"),
            "scheduled_to_running": pods.latencies(role, "scheduled", "running")}
        result[role] = {k: summary(v) for k, v in samples[role].items()}
        result[role]["pods_running"] = pods.count(role, "running")
        result[role]["pods_succeeded"] = pods.count(role, "succeeded")
    samples["claim_allocation"] = claims.allocation_latencies()
    result["claim_allocation"] = summary(samples["claim_allocation"])
    result["claims_seen"] = claims.total()
    windows = {}
    for name, a, b in (("run", "start", "end"), ("fill", "start", "fill_end"), ("churn", "fill_end", "end")):
        (ta, sa), (tb, sb) = scrapes[a], scrapes[b]
        windows[name] = window_measurements(sa, sb, tb - ta)
    result["metrics"] = windows
    series = sampler.series
    result["workqueue_depth"] = {"max": max((p["depth"] for p in series), default=None),
                                 "mean": (sum(p["depth"] for p in series) / len(series)) if series else None}
    result["workqueue_add_rate_peak"] = peak_rate(series, "adds", 10.0)
    result["job_workqueue_depth_max"] = max((p["job_depth"] for p in series), default=None)
    loads = [p["load1"] for p in series]
    result["load1"] = {"min": min(loads, default=None), "max": max(loads, default=None),
                       "mean": (sum(loads) / len(loads)) if loads else None}
    result["memory_peak"] = memory_peak(sampler.memory)
    result["errors"] = sampler.errors + [e for w in watches for e in w.errors]
    log(f"  {setting['id']} rep {rep}: fill p50/p99 {fmt(result['fill']['startup'].get('p50'))}/"
        f"{fmt(result['fill']['startup'].get('p99'))} s, churn p50/p99 {fmt(result['churn']['startup'].get('p50'))}/"
        f"{fmt(result['churn']['startup'].get('p99'))} s, run {result['run_seconds']:.0f} s, "
        f"load {fmt(result['load1']['mean'])}")
    t_cleanup = time.monotonic()
    cleanup(api, ns)
    result["cleanup_seconds"] = round(time.monotonic() - t_cleanup, 1)
    result["wall_seconds"] = time.monotonic() - t_begin
    raw = {"setting": setting["id"], "repetition": rep,
           "startup": {r: [round(x, 4) for x in sorted(samples[r]["startup"])] for r in ("fill", "churn")},
           "claim_allocation": [round(x, 4) for x in sorted(samples["claim_allocation"])],
           "series": series, "memory": sampler.memory}
    return result, raw


def peak_rate(series, key, window):
    best = None
    for i, point in enumerate(series):
        for j in range(i + 1, len(series)):
            if series[j]["t"] - point["t"] >= window:
                dt = series[j]["t"] - point["t"]
                rate = (series[j][key] - point[key]) / dt
                best = rate if best is None else max(best, rate)
                break
    return best


def memory_peak(memory):
    if not memory:
        return None
    peak = max(memory, key=lambda m: sum(c["pss_mib"] for c in m["components"].values()))
    return {"pss_mib_total": round(sum(c["pss_mib"] for c in peak["components"].values()), 1),
            "rss_mib_total": round(sum(c["rss_mib"] for c in peak["components"].values()), 1),
            "components": peak["components"]}


def fmt(value):
    return "n/a" if value is None else f"{value:.2f}"


# ---------------------------------------------------------------------------
# machine and versions
# ---------------------------------------------------------------------------

def machine():
    info = {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                                     None)
        with open("/proc/meminfo") as fh:
            mem = dict((ln.split(":")[0], ln.split(":")[1].strip()) for ln in fh)
        info["memory_total_gib"] = round(int(mem["MemTotal"].split()[0]) / 1024 / 1024, 1)
        with open("/etc/os-release") as fh:
            info["os"] = next((ln.split("=", 1)[1].strip().strip('"') for ln in fh if ln.startswith("PRETTY_NAME")),
                              None)
    except (OSError, KeyError, StopIteration):
        pass
    info["nice"] = os.nice(0)
    return info


def versions(cluster):
    pinned = clusterlib.load_versions()
    return {"kubernetes": cluster.k8s_version, "etcd": pinned.get("ETCD_VERSION"),
            "kwok": pinned.get("KWOK_VERSION"), "dra_example_driver": pinned.get("DRA_EXAMPLE_DRIVER_VERSION"),
            "resource_api": None}


def cluster_names_and_ports(args):
    """One cluster per concurrent repetition: <name>-1, <name>-2, ... on port blocks that do not overlap."""
    if args.parallel == 1:
        return [(args.name, args.port)]
    stride = -(-(100 + 2 * args.nodes + 5) // 100) * 100  # control plane, then 2 driver ports per node
    return [(f"{args.name}-{i + 1}", args.port + i * stride) for i in range(args.parallel)]


def ensure_cluster(args, name, port):
    st = clusterlib.cluster_state(name)
    state = clusterlib.read_state(st)
    if state and len(state.get("plugins", {})) != args.nodes:
        raise clusterlib.ClusterError(f"cluster {name!r} has {len(state.get('plugins', {}))} nodes, not "
                                      f"{args.nodes}: stop it with hack/cluster/down --name {name}")
    started = time.monotonic()
    cmd = [sys.executable, os.path.join(REPO_ROOT, "hack", "cluster", "up"), "--name", name,
           "--nodes", str(args.nodes), "--devices", str(args.devices), "--port", str(port),
           "--timeout", "600"]
    log("cluster: " + " ".join(cmd[1:]))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return (not state), time.monotonic() - started


def prepare_cluster(name):
    cluster = components.Cluster(name)
    if cluster.ensure_churn_stage(workload.CHURN_LABEL):
        log(f"{name}: kwok-controller restarted with a pod-complete stage for churn pods only")
    return cluster


def repetition_worker(args, cluster_name, rep, order, device_class, barrier, queue):
    """One repetition on one cluster, in its own process; each setting starts when every worker is ready."""
    try:
        cluster = components.Cluster(cluster_name)
        api = kube.Api(cluster.kubeconfig)
        warm_up(api, cluster, args, device_class)
        for setting in order:
            barrier.wait()
            result, raw = run_once(api, cluster, args, setting, rep, device_class)
            result["cluster"] = cluster_name
            queue.put(("run", result, raw))
        queue.put(("done", rep, None))
    except threading.BrokenBarrierError:
        queue.put(("done", rep, None))  # another repetition failed and said why
    except Exception as exc:  # reported by the parent, which stops the other workers
        barrier.abort()
        queue.put(("error", rep, f"{cluster_name}: {type(exc).__name__}: {exc}"))


def warm_up(api, cluster, args, device_class):
    """An unmeasured run of --warm-up-jobs Jobs with claims: the first pods after a cluster starts were
    scheduled up to seconds late, which would land in whichever setting runs first."""
    if args.warm_up_jobs <= 0:
        return
    small = argparse.Namespace(**dict(vars(args), fill_jobs=args.warm_up_jobs, churn_jobs=0))
    setting = next(s for s in settings() if s["id"] == "dra-200-400")
    result, _ = run_once(api, cluster, small, setting, 0, device_class)
    if not result.get("fill_complete"):
        raise clusterlib.ClusterError(f"{cluster.name}: the warm-up Jobs did not all run")


def run_wave(args, clusters, reps, order, device_class):
    """Repetitions `reps` at the same time, one per cluster, the settings in lockstep."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(reps))
    queue = ctx.Queue()
    procs = {rep: ctx.Process(target=repetition_worker, name=f"rep-{rep}",
                              args=(args, name, rep, order, device_class, barrier, queue))
             for rep, name in zip(reps, clusters)}
    for proc in procs.values():
        proc.start()
    runs, raws, errors, pending = [], [], [], set(reps)
    while pending:
        try:
            kind, first, second = queue.get(timeout=5)
        except queue_module.Empty:
            # A worker killed before it could report: counted once, then no longer waited for.
            for rep in [r for r in pending if procs[r].exitcode not in (0, None)]:
                barrier.abort()
                errors.append(f"{procs[rep].name} exited with {procs[rep].exitcode}")
                pending.discard(rep)
            continue
        if kind == "run":
            runs.append(first)
            raws.append(second)
        else:
            pending.discard(first)
            if kind == "error":
                errors.append(second)
    for proc in procs.values():
        proc.join(timeout=60)
    if errors:
        raise clusterlib.ClusterError("; ".join(errors))
    ids = [s["id"] for s in order]
    runs.sort(key=lambda r: (ids.index(r["setting"]), r["repetition"]))
    return runs, raws


def restore_and_stop(args, clusters, runs):
    for name in clusters:
        try:
            cluster = components.Cluster(name)
            api = kube.Api(cluster.kubeconfig)
            # Back to the defaults: the next user of a kept cluster gets what hack/cluster/up made.
            restart_kcm(api, cluster, {"kcm_qps": None, "kcm_burst": None})
            for ns in sorted({r["namespace"] for r in runs if r.get("cluster") == name}):
                api.delete(f"/api/v1/namespaces/{ns}")
        except Exception as exc:  # reported; the cluster is stopped below anyway unless kept
            log(f"{name}: could not restore kube-controller-manager's defaults: {exc}")
        if not args.keep_cluster:
            subprocess.run([sys.executable, os.path.join(REPO_ROOT, "hack", "cluster", "down"), "--name", name],
                           check=False, stdout=subprocess.DEVNULL)


def main():
    args = parse_args()
    t_start = time.monotonic()
    wall_start = datetime.datetime.now(datetime.timezone.utc)
    chosen = settings()
    if args.settings:
        wanted = args.settings.split(",")
        unknown = set(wanted) - {s["id"] for s in chosen}
        if unknown:
            raise clusterlib.ClusterError(f"unknown setting(s) {', '.join(sorted(unknown))}; known: "
                                          f"{', '.join(s['id'] for s in chosen)}")
        chosen = [s for s in chosen if s["id"] in wanted]
    load_before = os.getloadavg()
    placement = cluster_names_and_ports(args)
    created, up_seconds = False, 0.0
    for name, port in placement:
        fresh, took = ensure_cluster(args, name, port)
        created, up_seconds = created or fresh, up_seconds + took
    clusters = [name for name, _ in placement]
    first = [prepare_cluster(name) for name in clusters][0]
    api = kube.Api(first.kubeconfig)
    device_class = first.state.get("driver", "gpu.example.com")
    slices, _ = api.list_all(f"/apis/resource.k8s.io/{resource_api_version(api)}/resourceslices")
    devices = sum(len(s["spec"].get("devices") or []) for s in slices)
    idle_memory = first.memory()
    log(f"{len(clusters)} cluster(s) of {len(first.state['plugins'])} nodes, {devices} devices each; "
        f"{args.fill_jobs} fill Jobs, {args.churn_jobs} churn Jobs x {args.churn_completions}")

    runs, raws = [], []
    repetitions_done = 0
    stop_reason = None
    wave_seconds = []
    try:
        for wave, start in enumerate(range(1, args.repetitions + 1, args.parallel)):
            reps = list(range(start, min(start + args.parallel, args.repetitions + 1)))
            if wave_seconds:
                per_wave = sum(wave_seconds) / len(wave_seconds)
                unit = f"wave of {args.parallel} repetitions" if args.parallel > 1 else "repetition"
                projected = time.monotonic() - t_start + per_wave + 60
                if projected > args.budget_minutes * 60:
                    stop_reason = (f"repetition {reps[0]} was not started: at {per_wave:.0f} s per "
                                   f"{unit} it would end {projected / 60:.1f} min after the start, over the "
                                   f"{args.budget_minutes:g}-minute budget")
                    log(stop_reason)
                    break
            # Rotate the order between waves so that no setting always runs first or last.
            order = chosen[wave % len(chosen):] + chosen[:wave % len(chosen)]
            log(f"repetition(s) {', '.join(map(str, reps))} on {', '.join(clusters[:len(reps)])}: "
                f"{', '.join(s['id'] for s in order)}")
            t_wave = time.monotonic()
            wave_runs, wave_raws = run_wave(args, clusters[:len(reps)], reps, order, device_class)
            wave_seconds.append(time.monotonic() - t_wave)
            runs += wave_runs
            raws += wave_raws
            repetitions_done = reps[-1]
    finally:
        restore_and_stop(args, clusters, runs)

    ver = versions(first)
    ver["resource_api"] = f"resource.k8s.io/{resource_api_version(api)}"
    doc = {
        "benchmark": "scale",
        "started": wall_start.isoformat(timespec="seconds"),
        "command": " ".join([os.path.relpath(sys.argv[0], REPO_ROOT)] + sys.argv[1:]),
        "machine": machine(), "versions": ver,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cluster": {"name": args.name, "clusters": clusters, "parallel": args.parallel,
                    "nodes": len(first.state["plugins"]), "devices": devices,
                    "created_by_this_run": created, "up_seconds": round(up_seconds, 1),
                    "idle_memory": idle_memory},
        "workload": {"fill_jobs": args.fill_jobs, "churn_jobs": args.churn_jobs,
                     "churn_completions": args.churn_completions, "churn_run_time": args.churn_run_time,
                     "job_creation_qps": args.qps, "fill_percent": args.fill_percent,
                     "sample_interval": args.sample_interval, "warm_up_jobs": args.warm_up_jobs},
        "settings": chosen,
        "repetitions_requested": args.repetitions, "repetitions_done": repetitions_done,
        "repetitions_note": stop_reason,
        "wave_seconds": [round(x, 1) for x in wave_seconds],
        "total_seconds": round(time.monotonic() - t_start, 1),
        "runs": runs,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scale.json"), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
    with open(os.path.join(args.out, "scale-samples.json"), "w") as fh:
        json.dump({"runs": raws}, fh, separators=(",", ":"))
    log(f"results in {args.out}/scale.json ({doc['total_seconds'] / 60:.1f} min)")
    if not args.no_report:
        subprocess.run([sys.executable, os.path.join(HERE, "report.py"), args.out], check=True)


if __name__ == "__main__":
    try:
        main()
    except (clusterlib.ClusterError, kube.ApiError) as exc:
        print(f"[bench] ERROR: {exc}", file=sys.stderr)
        sys.exit(1)
