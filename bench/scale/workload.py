"""The page's scale-test workload as API objects, and paced creation.

Long-lived Jobs: one pod, one device each (90% of the devices). Churn Jobs: one
pod at a time, `completions` pods in a row, each completed by KWOK after the
run time (the pod-complete stage selects on CHURN_LABEL). With claims, every
pod gets its own ResourceClaim from a ResourceClaimTemplate.
"""
import threading
import time

CHURN_LABEL = "bench.dra.admin/churn"
ROLE_LABEL = "bench.dra.admin/role"
TEMPLATE = "single-gpu"


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
                                                                  "labels": {"bench.dra.admin/scale": "true"}}}


def claim_template(api_version, device_class):
    if api_version == "v1beta1":
        request = {"name": "gpu", "deviceClassName": device_class}
    else:  # v1beta2 and v1 nest the request under `exactly`
        request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE},
            "spec": {"spec": {"devices": {"requests": [request]}}}}


def job(name, role, with_claim, completions=1, run_time=None):
    labels = {ROLE_LABEL: role}
    annotations = {}
    if run_time is not None:
        labels[CHURN_LABEL] = "true"
        annotations[CHURN_LABEL + "-run-time"] = run_time
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    pod_spec = {"restartPolicy": "Never", "containers": [container]}
    if with_claim:
        container["resources"] = {"claims": [{"name": "gpu"}]}
        pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {ROLE_LABEL: role}},
            "spec": {"parallelism": 1, "completions": completions, "completionMode": "Indexed",
                     "backoffLimit": 0,
                     "template": {"metadata": {"labels": labels, "annotations": annotations},
                                  "spec": pod_spec}}}


def create_paced(api, path, objects, qps, workers=4):
    """POST objects on a fixed schedule of `qps` per second, as clusterloader2's qpsLoad does.

    A few workers share the schedule, so one slow response does not delay the next request.
    Returns (seconds from the first to the last request, achieved rate).
    """
    start = time.monotonic()
    lock = threading.Lock()
    state = {"next": 0, "last": start, "error": None}

    def worker():
        while True:
            with lock:
                index = state["next"]
                if index >= len(objects) or state["error"]:
                    return
                state["next"] = index + 1
            delay = start + index / qps - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                api.create(path, objects[index])
            except Exception as exc:  # reported after the other workers stop
                state["error"] = exc
                return
            with lock:
                state["last"] = max(state["last"], time.monotonic())

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(workers, len(objects)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if state["error"]:
        raise state["error"]
    took = state["last"] - start
    return took, ((len(objects) - 1) / took if took > 0 and len(objects) > 1 else float("nan"))
