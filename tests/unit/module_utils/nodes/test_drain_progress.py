"""What a phase-by-phase wait reports (nodes/drain_progress.py; the line from common/progress.py, the rounds from common/waits.py): the drain's
next wait and what it still waits for, on pods recorded from the real cluster (Kubernetes v1.36.3: tests/unit/fixtures/recorded), the progress
line, the rounds of an until-loop, and the one drain result made of the per-phase runs."""
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.nodes.drain import plan_drain
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import pod_key
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_progress import (
    CLAIM_PODS_GONE, CLAIMS_RELEASED, DRIVER_PODS_GONE, OTHER_PODS_GONE, drain_waiting_for, merge_drain_steps,
    WAIT_TEXT, drain_progress,
)
from ansible_collections.dra.admin.plugins.module_utils.common.progress import progress_line
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_retries
from conftest import FIXTURES

REC = os.path.join(FIXTURES, "recorded")
DRIVER = "dra-system/gpu-example-com-kubeletplugin"


def recorded(name):
    with open(os.path.join(REC, name)) as fh:
        return json.load(fh)["items"]


def node_pods(node):
    """The recorded scenario's workload pods and the driver's pods on `node`, as the drain lists them."""
    pods = [o for o in recorded("scenario-shared-pool.json") if o["kind"] == "Pod"]
    pods += [dict(p, kind="Pod") for p in recorded("driver-pods.json")]
    return [p for p in pods if p["spec"].get("nodeName") == node]


def waiting_for(pods, held=(), label_set=False):
    plan = plan_drain(pods, driver_daemonsets=[DRIVER])
    keys = dict((k, [pod_key(p) for p in plan[k]]) for k in ("claim_pods", "other_pods", "driver_pods"))
    return drain_waiting_for(keys["claim_pods"], keys["other_pods"], list(held), keys["driver_pods"], label_set)


def test_a_node_with_a_claim_pod_waits_for_it_first_then_the_claims_then_the_driver():
    pods = node_pods("node-000000")
    claim_pod = "it-test-drain-leaves-a-claim-shared-with-a/on-b-76b98c8c-7zthd"
    assert waiting_for(pods, held=["ns/shared"]) == (CLAIM_PODS_GONE, [claim_pod])
    # The claim pod gone: the claim it held is what is left, before the driver is told to leave.
    drivers = [p for p in pods if p["metadata"]["namespace"] == "dra-system"]
    assert waiting_for(drivers, held=["ns/shared"]) == (CLAIMS_RELEASED, ["ns/shared"])
    assert waiting_for(drivers) == (DRIVER_PODS_GONE, ["dra-system/gpu-example-com-kubeletplugin-k9k75"])
    assert waiting_for(drivers, label_set=True) == (DRIVER_PODS_GONE, ["dra-system/gpu-example-com-kubeletplugin-k9k75"])
    assert waiting_for([], label_set=True) == (None, [])


def test_the_driver_label_is_still_to_set_on_a_node_without_driver_pods():
    assert waiting_for([]) == (DRIVER_PODS_GONE, [])


def test_other_pods_come_after_the_claim_pods_and_before_the_claims():
    pods = node_pods("node-000002")
    other = dict(pods[0], spec=dict(pods[0]["spec"], resourceClaims=[]), status={})
    other["metadata"] = dict(other["metadata"], name="web-0", uid="uid-web-0")
    assert waiting_for(pods + [other], held=["ns/c"])[0] == CLAIM_PODS_GONE
    assert waiting_for([other], held=["ns/c"]) == (OTHER_PODS_GONE, [pod_key(other)])


def test_the_progress_line_names_the_first_pending_and_counts_the_rest():
    pending = ["ns/p%d" % i for i in range(7)]
    line = progress_line(CLAIM_PODS_GONE, pending, 12.3, WAIT_TEXT)
    assert line == ("waiting for the evicted pods that use ResourceClaims to be gone: 7 pending "
                    "(ns/p0, ns/p1, ns/p2, ns/p3, ns/p4, and 2 more), 12.3s so far")
    assert progress_line(None, [], 40.0, WAIT_TEXT) == "nothing left to wait for, 40.0s so far"
    assert progress_line(CLAIMS_RELEASED, ["ns/c"], None, WAIT_TEXT) == \
        "waiting for the ResourceClaims on the node to be released: 1 pending (ns/c)"


def test_progress_counts_the_seconds_from_the_start_of_the_drain():
    out = drain_progress(DRIVER_PODS_GONE, ["dra-system/d"], 1000.0, 1004.26)
    assert out["elapsed"] == 4.3 and out["pending_count"] == 1 and out["waiting_for"] == DRIVER_PODS_GONE
    assert out["progress"].endswith("1 pending (dra-system/d), 4.3s so far")
    assert drain_progress(None, [], None, 5.0)["elapsed"] is None


@pytest.mark.parametrize("timeout, delay, elapsed, rounds", [
    (900, 1.0, 0, 900), (900, 2.0, 100.5, 400), (10, 3, 0, 4), (10, 1, 30, 1), (600, 0.5, None, 1200)])
def test_the_rounds_end_about_the_timeout_after_the_start(timeout, delay, elapsed, rounds):
    assert wait_retries(timeout, delay, elapsed) == rounds


@pytest.mark.parametrize("delay", [0, -1, float("inf"), float("nan")])
def test_a_delay_that_is_no_time_is_refused(delay):
    with pytest.raises(ValueError, match="delay"):
        wait_retries(60, delay)


def test_the_per_phase_runs_make_one_drain_result():
    plan = {"node": "node-000000", "was_cordoned": False, "eviction_order": ["ns/a"], "claim_pods": ["ns/a"],
            "other_pods": [], "driver_pods": ["dra-system/d"], "skipped_pods": [], "claims_held_at_start": ["ns/c"],
            "daemonset_claims": [], "non_pod_claims": []}
    first = dict(plan, changed=True, phases={"preflight": 0.1, "cordon": 0.05, "evict_claim_pods": 0.2},
                 events=["   0.1s cordoned node-000000", "   0.3s eviction of 1 claim pod(s) asked"], elapsed=0.4,
                 started=1000.0, waiting_for=CLAIM_PODS_GONE, pending=["ns/a"], api_requests=9)
    second = dict(plan, changed=False, phases={"preflight": 0.1, "cordon": 0.0}, events=[], elapsed=6.0,
                  claim_pods=[], eviction_order=[], api_requests=5)
    third = dict(plan, changed=True, phases={"preflight": 0.1, "cordon": 0.0, "remove_driver": 0.02},
                 events=["   9.1s labelled node-000000"], elapsed=9.2, api_requests=6)
    waits = {CLAIM_PODS_GONE: {"elapsed": 5.4, "attempts": 6, "progress": "nothing left to wait for"},
             OTHER_PODS_GONE: {"elapsed": 6.2, "attempts": 1},
             CLAIMS_RELEASED: {"elapsed": 8.0, "attempts": 3},
             DRIVER_PODS_GONE: {"elapsed": 12.2, "attempts": 4}}
    out = merge_drain_steps([first, second, third], waits)
    assert out["eviction_order"] == ["ns/a"] and out["claim_pods"] == ["ns/a"] and out["changed"] is True
    assert out["phases"] == {"preflight": 0.3, "cordon": 0.05, "evict_claim_pods": 5.2, "evict_other_pods": 0.2,
                             "wait_claims_released": 1.8, "remove_driver": 3.02}
    assert [e.split("s ", 1)[1] for e in out["events"]] == [
        "cordoned node-000000", "eviction of 1 claim pod(s) asked", "claim_pods_gone after 6 round(s)",
        "other_pods_gone after 1 round(s)", "claims_released after 3 round(s)", "labelled node-000000",
        "driver_pods_gone after 4 round(s)"]
    assert out["api_requests"] == 20
    for key in ("waiting_for", "pending", "elapsed", "started"):
        assert key not in out


def test_skipped_runs_are_left_out_and_nothing_ran_is_no_result():
    only = {"node": "n", "eviction_order": [], "changed": True, "phases": {"preflight": 0.1}, "events": []}
    out = merge_drain_steps([only, {"skipped": True}], {CLAIM_PODS_GONE: {"skipped": True}})
    assert out["changed"] is True and out["phases"] == {"preflight": 0.1}
    assert merge_drain_steps([{"skipped": True}], {}) == {}
