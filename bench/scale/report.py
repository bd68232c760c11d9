#!/usr/bin/env python3
"""Turn bench/scale/run.py's JSON into scale.md and PNG plots (no cluster needed).

Usage: bench/scale/report.py [DIR]   (default: docs/benchmarks; reads scale.json and scale-samples.json)
"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
BASELINE = "no-claims"
# Kubernetes' pod startup SLO (p99 of creation to Running, stateless pods, images present), which
# clusterloader2's PodStartupLatency measurement checks: what "the DRA targets matched non-DRA" is judged by.
SLO_SECONDS = 5.0


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values):
    values = [v for v in values if v is not None]
    return (min(values), max(values)) if values else (None, None)


def num(value, digits=2):
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def cell(values, digits=2, unit=""):
    """median [min-max] over repetitions."""
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    if len(values) == 1:
        return num(values[0], digits) + unit
    lo, hi = spread(values)
    return f"{num(median(values), digits)}{unit} [{num(lo, digits)}–{num(hi, digits)}]"


def get(run, *path):
    value = run
    for key in path:
        if value is None:
            return None
        value = value.get(key) if isinstance(value, dict) else None
    return value


def metric(run, window, qid):
    m = get(run, "metrics", window, qid)
    return m.get("value") if m and m.get("state") == "ok" else None


def ratios(doc, setting, path):
    """Per repetition: the setting's value / no-claims' value in the same repetition."""
    out = []
    for rep in sorted({r["repetition"] for r in doc["runs"]}):
        this = [r for r in doc["runs"] if r["repetition"] == rep and r["setting"] == setting]
        base = [r for r in doc["runs"] if r["repetition"] == rep and r["setting"] == BASELINE]
        if this and base:
            a, b = get(this[0], *path), get(base[0], *path)
            if a is not None and b:
                out.append(a / b)
    return out


def runs_of(doc, setting):
    return [r for r in doc["runs"] if r["setting"] == setting]


def gap_sentences(doc):
    """The answer, computed: DRA/no-claims ratios at each setting, and how much of the gap 75/150 closes."""
    ids = [s["id"] for s in doc["settings"]]
    if BASELINE not in ids:
        return ["No run without claims: no ratios."]
    dra = [s for s in doc["settings"] if s["claims"]]
    lines = []
    base_p99 = {ph: [get(r, ph, "startup", "p99") for r in runs_of(doc, BASELINE)] for ph in ("fill", "churn")}
    for phase in ("fill", "churn"):
        parts = []
        for s in dra:
            rs = ratios(doc, s["id"], (phase, "startup", "p99"))
            r50 = ratios(doc, s["id"], (phase, "startup", "p50"))
            parts.append(f"{s['title']}: p99 {cell(rs, 2, '×')}, p50 {cell(r50, 2, '×')}")
        lines.append(f"- **{phase} pods**, DRA pod startup relative to no claims — " + "; ".join(parts) + ".")
    defaults = next((s for s in dra if s["kcm_qps"] is None), None)
    page = next((s for s in dra if s["kcm_qps"] == 75), None)
    if defaults and page:
        for phase in ("fill", "churn"):
            rd = median(ratios(doc, defaults["id"], (phase, "startup", "p99")))
            rp = median(ratios(doc, page["id"], (phase, "startup", "p99")))
            if rd is None or rp is None:
                continue
            lo, hi = spread(base_p99[phase])
            base_med = median(base_p99[phase])
            noise = (hi - lo) / base_med if base_med and len([v for v in base_p99[phase] if v is not None]) > 1 \
                else None
            if rd > 1 and rp < rd:
                closed = min(100.0, (rd - rp) / (rd - 1) * 100)
                text = (f"- {phase} p99: the gap at the defaults is {(rd - 1) * 100:.0f}% over no claims; "
                        f"at 75/150 it is {(rp - 1) * 100:.0f}% ({closed:.0f}% of the gap closed)")
            elif rd > 1:
                text = (f"- {phase} p99: the gap at the defaults is {(rd - 1) * 100:.0f}% over no claims; "
                        f"75/150 does not narrow it ({(rp - 1) * 100:.0f}%)")
            else:
                text = (f"- {phase} p99: no gap at the defaults ({rd:.2f}×); 75/150 is at {rp:.2f}×")
            if noise is not None:
                verdict = "within" if abs(rp - 1) <= noise else "outside"
                text += (f"; the no-claims p99 itself varied by {noise * 100:.0f}% between repetitions, so "
                         f"75/150 is {verdict} that spread")
            else:
                text += "; one repetition only: no run-to-run spread to compare with"
            lines.append(text + ".")
    lines += slo_sentences(doc)
    for s in dra:
        waits = [metric(r, "run", "kcm_rate_limiter_wait_total") for r in runs_of(doc, s["id"])]
        extra = [get(r, "churn", "startup", "p99") for r in runs_of(doc, s["id"])]
        base = [get(r, "churn", "startup", "p99") for r in runs_of(doc, BASELINE)]
        lines.append(f"- {s['title']}: kube-controller-manager's requests waited {cell(waits, 1, ' s')} in total in "
                     f"its client-side rate limiter; churn p99 {cell(extra, 2, ' s')} against "
                     f"{cell(base, 2, ' s')} without claims.")
    return lines


def slo_sentences(doc):
    """Each setting's p99 pod startup against the 5 s SLO, per phase: met in every repetition, in some, or none."""
    lines = []
    for s in doc["settings"]:
        parts = []
        for phase in ("fill", "churn"):
            values = [get(r, phase, "startup", "p99") for r in runs_of(doc, s["id"])]
            values = [v for v in values if v is not None]
            if not values:
                continue
            met = sum(1 for v in values if v <= SLO_SECONDS)
            verdict = ("meets it" if met == len(values) else "misses it" if met == 0
                       else f"meets it in {met} of {len(values)} repetitions")
            parts.append(f"{phase} p99 {cell(values, 2, ' s')} {verdict}")
        if parts:
            lines.append(f"- Against the {SLO_SECONDS:g} s pod-startup SLO — {s['title']}: " + "; ".join(parts) + ".")
    return lines


def duration_section(doc):
    """How long each setting's run took, what paced it, and what three repetitions cost."""
    rows = ["| setting | run (s) | run + cleanup + kcm restart (s) | rate-limiter wait in kcm (s) "
            "| CPU seconds, control plane | control-plane CPU cores used (mean) |", "|" + "---|" * 6]
    per_rep = {}
    for s in doc["settings"]:
        rs = runs_of(doc, s["id"])
        if not rs:
            continue
        cpu = [sum((r.get("cpu_seconds") or {}).values()) for r in rs]
        cores = [c / r["run_seconds"] for c, r in zip(cpu, rs) if r.get("run_seconds")]
        rows.append("| " + " | ".join([
            s["title"], cell([r.get("run_seconds") for r in rs], 0), cell([r.get("wall_seconds") for r in rs], 0),
            cell([metric(r, "run", "kcm_rate_limiter_wait_total") for r in rs], 0), cell(cpu, 0),
            cell(cores, 2)]) + " |")
        for r in rs:
            per_rep[r["repetition"]] = per_rep.get(r["repetition"], 0.0) + r.get("wall_seconds", 0.0)
    c = doc["cluster"]
    parallel = c.get("parallel", 1)
    reps = sorted(per_rep)
    text = [f"One repetition of the {len(doc['settings'])} settings took {cell([v / 60 for v in per_rep.values()], 1)}"
            f" min; the whole command {doc['total_seconds'] / 60:.1f} min for {len(reps)} repetition(s)"
            + (f", {parallel} at a time on {parallel} clusters" if parallel > 1 else ", one after the other")
            + f" (starting the cluster(s): {c['up_seconds']:.0f} s)."]
    limited = [s for s in doc["settings"] if s["kcm_qps"] is None]
    if limited and reps:
        paced = sum(median([r.get("run_seconds") for r in runs_of(doc, s["id"])]) or 0 for s in limited)
        text.append(
            f"The {len(limited)} runs with kube-controller-manager at its defaults take {paced / 60:.1f} min of "
            "every repetition (cleanup not counted): their pace is set by its client-side rate limiter (the "
            "wait column: each controller has its own client at 20 QPS), not by the CPU, so they take as long "
            "on a faster "
            f"machine. Three repetitions one after the other therefore need at least {3 * paced / 60:.0f} min "
            "anywhere; `--parallel 3` runs them at once on three clusters (three rate limiters), which takes "
            "about one repetition's time when the machine has the CPU for three (the CPU column, times "
            "three).")
    return rows, text


def table_startup(doc):
    head = ("| setting | kcm QPS/Burst | fill p50 (s) | fill p90 (s) | fill p99 (s) | fill p99 ÷ no claims "
            "| churn p50 (s) | churn p90 (s) | churn p99 (s) | churn p99 ÷ no claims |")
    rows = [head, "|" + "---|" * 10]
    for s in doc["settings"]:
        rs = runs_of(doc, s["id"])
        if not rs:
            continue
        qps = f"{rs[0]['kcm_qps']}/{rs[0]['kcm_burst']}" + (" (defaults)" if s["kcm_qps"] is None else "")
        row = [s["title"], qps]
        for phase in ("fill", "churn"):
            for q in ("p50", "p90", "p99"):
                row.append(cell([get(r, phase, "startup", q) for r in rs]))
            row.append("1" if s["id"] == BASELINE else cell(ratios(doc, s["id"], (phase, "startup", "p99")), 2, "×"))
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def table_metrics(doc):
    head = ("| setting | claim allocation p50 / p99 (s) | create→scheduled p99, fill / churn (s) "
            "| resource_claim adds/s (mean, peak 10 s) | depth max | work duration p99 (s) "
            "| scheduler SLI p99 (s) | algorithm p99 (s) | kcm requests/s | kcm rate-limiter wait (s) "
            "| kcm CPU (s) | run (s) |")
    rows = [head, "|" + "---|" * 12]
    for s in doc["settings"]:
        rs = runs_of(doc, s["id"])
        if not rs:
            continue
        row = [s["title"],
               cell([get(r, "claim_allocation", "p50") for r in rs]) + " / " +
               cell([get(r, "claim_allocation", "p99") for r in rs]),
               cell([get(r, "fill", "create_to_scheduled", "p99") for r in rs]) + " / " +
               cell([get(r, "churn", "create_to_scheduled", "p99") for r in rs]),
               cell([metric(r, "run", "workqueue_add_rate") for r in rs], 1) + ", " +
               cell([r.get("workqueue_add_rate_peak") for r in rs], 1),
               cell([get(r, "workqueue_depth", "max") for r in rs], 0),
               cell([metric(r, "run", "workqueue_work_duration_p99") for r in rs], 3),
               cell([metric(r, "run", "scheduler_e2e_p99") for r in rs]),
               cell([metric(r, "run", "scheduler_algorithm_p99") for r in rs], 3),
               cell([metric(r, "run", "kcm_request_rate") for r in rs], 1),
               cell([metric(r, "run", "kcm_rate_limiter_wait_total") for r in rs], 1),
               cell([get(r, "cpu_seconds", "kube-controller-manager") for r in rs], 1),
               cell([r.get("run_seconds") for r in rs], 0)]
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def table_runs(doc):
    rows = ["| # | repetition | setting | fill p99 (s) | churn p99 (s) | fill phase (s) | churn phase (s) "
            "| Job creation rate achieved (/s) | load average (1 min) mean / max | complete |",
            "|" + "---|" * 10]
    for index, r in enumerate(doc["runs"], 1):
        complete = "yes" if r.get("fill_complete") and r.get("churn_complete") else "**no**"
        rows.append("| " + " | ".join([
            str(index), str(r["repetition"]), r["setting"], num(get(r, "fill", "startup", "p99")),
            num(get(r, "churn", "startup", "p99")), num(r.get("fill_phase_seconds"), 0),
            num(r.get("churn_seconds"), 0),
            num(r.get("fill_create_rate"), 1) + " / " + num(r.get("churn_create_rate"), 1),
            num(get(r, "load1", "mean"), 1) + " / " + num(get(r, "load1", "max"), 1), complete]) + " |")
    return "\n".join(rows)


def table_memory(doc):
    idle = doc["cluster"]["idle_memory"]
    peaks = [r.get("memory_peak") for r in doc["runs"] if r.get("memory_peak")]
    rows = ["| component | processes | idle RSS (MiB) | idle PSS (MiB) | peak PSS during runs (MiB) |",
            "|---|---|---|---|---|"]
    for name, m in idle.items():
        peak = max((p["components"].get(name, {}).get("pss_mib", 0) for p in peaks), default=None)
        rows.append(f"| {name} | {m['processes']} | {m['rss_mib']:.0f} | {m['pss_mib']:.0f} | "
                    f"{num(peak, 0)} |")
    total_rss = sum(m["rss_mib"] for m in idle.values())
    total_pss = sum(m["pss_mib"] for m in idle.values())
    peak_total = max((p["pss_mib_total"] for p in peaks), default=None)
    rows.append(f"| **total** | {sum(m['processes'] for m in idle.values())} | {total_rss:.0f} | "
                f"{total_pss:.0f} | {num(peak_total, 0)} |")
    return "\n".join(rows)


def plots(doc, samples, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = dict(zip([s["id"] for s in doc["settings"]], ["#444444", "#d62728", "#1f77b4", "#2ca02c"]))
    titles = {s["id"]: s["title"] for s in doc["settings"]}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    panels = (("fill", "long-lived (fill) pods: creation → Running"),
              ("churn", "churn pods: creation → Running"),
              ("claim_allocation", "ResourceClaim: creation → allocated"))
    for ax, (key, title) in zip(axes, panels):
        for s in doc["settings"]:
            values = []
            for raw in samples["runs"]:
                if raw["setting"] == s["id"]:
                    values.extend(raw["claim_allocation"] if key == "claim_allocation" else raw["startup"][key])
            values = sorted(v for v in values if v > 0)
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, ys, where="post", color=colours[s["id"]], label=titles[s["id"]])
        ax.set_xscale("log")
        ax.set_xlabel("seconds (log scale)")
        ax.set_ylabel("fraction")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("Pod startup and claim allocation latency, all repetitions pooled", fontsize=11)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scale-startup-cdf.png"), dpi=90)
    plt.close(fig)

    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    seen = set()
    for raw in samples["runs"]:
        s = raw["setting"]
        series = raw["series"]
        if not series:
            continue
        first = s not in seen
        seen.add(s)
        style = dict(color=colours.get(s, "black"), alpha=0.9 if first else 0.45, linewidth=1.3 if first else 0.9,
                     linestyle="-" if first else "--", label=titles.get(s, s) if first else None)
        axes[0].plot([p["t"] for p in series], [p["depth"] for p in series], **style)
        rate_t, rate_v = [], []
        for a, b in zip(series, series[1:]):
            if b["t"] > a["t"]:
                rate_t.append(b["t"])
                rate_v.append((b["adds"] - a["adds"]) / (b["t"] - a["t"]))
        axes[1].plot(rate_t, rate_v, **style)
    axes[0].set_ylabel("workqueue_depth{name=resource_claim}")
    axes[1].set_ylabel("resource_claim adds/s")
    axes[1].set_xlabel("seconds since the first Job was created (dashed: later repetitions)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("kube-controller-manager ResourceClaim workqueue over each run", fontsize=11)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scale-workqueue.png"), dpi=90)
    plt.close(fig)


def markdown(doc):
    m, v, w, c = doc["machine"], doc["versions"], doc["workload"], doc["cluster"]
    loads = [get(r, "load1", "mean") for r in doc["runs"]]
    load_max = max((get(r, "load1", "max") or 0 for r in doc["runs"]), default=None)
    idle_pss = sum(x["pss_mib"] for x in c["idle_memory"].values())
    idle_rss = sum(x["rss_mib"] for x in c["idle_memory"].values())
    peaks = [r["memory_peak"]["pss_mib_total"] for r in doc["runs"] if r.get("memory_peak")]
    reps = doc["repetitions_done"]
    out = [
        "# Scale benchmark: DRA pod startup and kube-controller-manager QPS/Burst",
        "",
        "Generated by `bench/scale/run.py` (see [bench/README.md](" + doc.get("_readme_link", "../../bench/README.md")
        + "#scale)); every number "
        "below comes from the run recorded in [scale.json](scale.json) (per-pod latencies and time series in "
        "[scale-samples.json](scale-samples.json)).",
        "",
        f"- **When / command**: {doc['started']}, `{doc['command']}` "
        f"({doc['total_seconds'] / 60:.1f} min in total, cluster start included).",
        f"- **Machine**: {m.get('cpus')} CPUs ({m.get('cpu_model')}), {m.get('memory_total_gib')} GiB, "
        f"{m.get('os')}, kernel {m.get('kernel')}, Python {m.get('python')}, benchmark niceness {m.get('nice')}.",
        f"- **Load average** (1 min) during the runs: mean {num(median(loads), 1)} (per-run means "
        f"{num(spread(loads)[0], 1)}–{num(spread(loads)[1], 1)}), highest {num(load_max, 1)}; before the "
        f"start {doc['load_average_before'][0]:.1f}.",
        f"- **Versions**: Kubernetes {v['kubernetes']} (kube-apiserver, kube-controller-manager, kube-scheduler), "
        f"etcd {v['etcd']}, KWOK {v['kwok']}, dra-example-kubeletplugin {v['dra_example_driver']}, "
        f"{v['resource_api']}.",
        f"- **Cluster**: {c['nodes']} KWOK nodes, one real dra-example-kubeletplugin process per node, "
        f"{c['devices']} devices in ResourceSlices.",
        f"- **Memory of the {c['nodes']}-node cluster**: {idle_pss / 1024:.2f} GiB PSS idle "
        f"({idle_rss / 1024:.2f} GiB RSS, which counts the shared pages of the {c['nodes']} driver processes "
        f"{c['nodes']} times); at most {num(max(peaks) / 1024 if peaks else None)} GiB PSS during the runs.",
        f"- **Workload per run**: {w['fill_jobs']} long-lived Jobs (one pod, one device each) created at "
        f"{w['job_creation_qps']:g}/s and waited for until all run; then {w['churn_jobs']} churn Jobs "
        f"(parallelism 1, {w['churn_completions']} completions, each pod completed by KWOK "
        f"{w['churn_run_time']} after it runs) created at {w['job_creation_qps']:g}/s, until all "
        f"{w['churn_jobs'] * w['churn_completions']} churn pods succeeded. With claims, each pod has its own "
        "ResourceClaim from a ResourceClaimTemplate. Fresh namespace and freshly restarted "
        "kube-controller-manager per run; kube-scheduler at its defaults (50/100) throughout."
        + (f" Before its first run, each cluster ran {w['warm_up_jobs']} Jobs with claims, not measured (the first "
           "pods after a cluster starts are scheduled up to seconds late)." if w.get("warm_up_jobs") else
           " No warm-up run: the first run after the cluster start includes its start-up effects."),
        f"- **Repetitions**: {reps} of the {doc['repetitions_requested']} requested"
        + (f" — {doc['repetitions_note']}." if doc.get("repetitions_note") else ".")
        + (f" They ran {c.get('parallel')} at a time, each on its own identical cluster, every setting started "
           "on all of them together (so they share the CPU)."
           if c.get("parallel", 1) > 1 else " They ran one after the other on one cluster.")
        + (" The settings ran in the same order on every cluster (the order rotates between waves of "
           f"{c.get('parallel')} repetitions)." if c.get("parallel", 1) > 1 else
           " The order of the settings rotates between repetitions.")
        + " Cells show the median over repetitions "
          "and [min–max]; a ratio is computed within each repetition (same cluster, minutes apart) and then "
          "summarised the same way.",
        "",
        "## The answer on this machine",
        "",
    ]
    out += gap_sentences(doc)
    duration_rows, duration_text = duration_section(doc)
    out += ["", "Absolute times are this 2-CPU machine's, not the page's cluster's: compare the ratios, and each "
            "setting against the SLO.", "",
            "## Pod startup latency (creation → Running)", "", table_startup(doc), "",
            "## The page's metrics, per run window", "",
            "Computed from two scrapes of each component's /metrics (start and end of the run) with the page's "
            "queries (`plugins/module_utils/metrics/diagnosis.py`), the window being the run instead of `[5m]`; the depth "
            f"and peak add rate come from scrapes every {w['sample_interval']:g} s. kcm requests/s and the "
            "rate-limiter wait are summed over all of kube-controller-manager's clients "
            "(`rest_client_rate_limiter_duration_seconds`): the wait is the time requests spent queued by the "
            "client-side limiter that QPS/Burst configure.", "", table_metrics(doc), "",
            "![latency CDFs](scale-startup-cdf.png)", "", "![workqueue depth and add rate](scale-workqueue.png)",
            "", "## Every run", "", table_runs(doc), "",
            "## How long it takes", "", "\n".join(duration_rows), "", " ".join(duration_text), "",
            f"## Memory of the {c['nodes']}-node cluster", "",
            "PSS (proportional set size) shares pages used by several processes among them; RSS counts them in "
            "each process.", "", table_memory(doc), "",
            "## How this differs from the page's test", "",
            "- KWOK nodes have no kubelet: nobody calls the driver's NodePrepareResources, so the kubelet and "
            "kubeletplugin metrics of the page stay empty and \"Running\" is set by KWOK's pod-ready stage. "
            "The path measured is the control plane's: ResourceClaim creation by kube-controller-manager, "
            "allocation and binding by kube-scheduler, deallocation after a churn pod ends.",
            f"- Churn pods run {w['churn_run_time']} instead of upstream's 30 s, so that the four settings fit the "
            "time budget: the churn phase asks kube-controller-manager for more claims per second than the "
            "page's test did, which makes its QPS matter more in the churn phase.",
            "- Each controller in kube-controller-manager has its own client with the same QPS/Burst, so "
            "the Job controller is throttled at 20/30 as well (see the rate-limiter column of the no-claims "
            "row): churn pods are created later, which the creation → Running latency does not include but "
            "the phase durations do. The run without claims uses the defaults only; it is the baseline of "
            "every ratio.",
            "- Latencies are measured from watch events as they arrive at the benchmark process (the API's "
            "timestamps have a resolution of one second).",
            ]
    errors = [(r["setting"], r["repetition"], e) for r in doc["runs"] for e in r.get("errors", [])]
    if errors:
        out += ["", "## Scrape and watch errors during runs", ""]
        out += [f"- {s} rep {rep}: {e}" for s, rep, e in errors[:20]]
    return "\n".join(out) + "\n"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "docs", "benchmarks")
    with open(os.path.join(out, "scale.json")) as fh:
        doc = json.load(fh)
    with open(os.path.join(out, "scale-samples.json")) as fh:
        samples = json.load(fh)
    doc["_readme_link"] = os.path.relpath(os.path.join(REPO_ROOT, "bench", "README.md"), os.path.abspath(out))
    with open(os.path.join(out, "scale.md"), "w") as fh:
        fh.write(markdown(doc))
    plots(doc, samples, out)
    print(f"wrote {out}/scale.md, scale-startup-cdf.png, scale-workqueue.png")


if __name__ == "__main__":
    main()
