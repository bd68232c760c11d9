"""The filters of the roles discovery and node_doctor (plugins/filter/discovery.py, plugins/filter/node_doctor.py;
their logic in nodes/drift.py and nodes/node_check.py), on what the roles pass them: ResourceSlices recorded from the
local cluster's example driver with dra_hardware facts of the recorded trees, and the node check's result on node
states recorded from a v1.37.2 kind cluster."""
import base64
import copy
import json
import os
import sys

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.filter import discovery as discovery_filters
from ansible_collections.dra.admin.plugins.filter import node_doctor as doctor_filters
from ansible_collections.dra.admin.plugins.filter.upgrade_plan import kubelet_userns_refusals
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.common.times import epoch_seconds
from ansible_collections.dra.admin.plugins.module_utils.nodes import drift as drift_rules
from ansible_collections.dra.admin.plugins.module_utils.nodes import hardware
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check
from conftest import FIXTURES

HW = os.path.join(FIXTURES, "hardware")
sys.path.insert(0, HW)
import recorded  # noqa: E402  (unpacks the recorded trees)

EXAMPLE = [{"name": "gpu.example.com"}]
RECORDED = ["example-driver-v1.36.3-v1.json", "example-driver-v1.33.13-v1beta2.json",
            "example-driver-v1.33.13-v1beta1.json"]


def recorded_slices(name):
    with open(os.path.join(HW, "slices", name)) as handle:
        return json.load(handle)["items"]


@pytest.fixture(scope="module")
def gpu_facts():
    return hardware.discover(os.path.join(recorded.trees_dir(), "gpu-node"),
                             nvidia=hardware.nvidia_report(None, 0, "", ""))


# --- discovery --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", RECORDED)
def test_node_slices_are_the_node_s_own_and_compare_as_all_do(gpu_facts, name):
    slices = recorded_slices(name)
    mine = discovery_filters.node_slices_filter(slices, "node-000000", EXAMPLE)
    assert [s["spec"]["nodeName"] for s in mine] == ["node-000000"]
    assert drift_rules.compare_node(gpu_facts, mine, "node-000000", EXAMPLE) == \
        drift_rules.compare_node(gpu_facts, slices, "node-000000", EXAMPLE)


def test_node_slices_keep_the_current_generation_other_drivers_and_nodes_left_out():
    slices = recorded_slices(RECORDED[0])
    old = copy.deepcopy(slices[0])
    old["metadata"]["name"] += "-old"
    new = slices[0]
    new["spec"]["pool"]["generation"] = old["spec"]["pool"]["generation"] + 1
    other = copy.deepcopy(slices[0])
    other["spec"]["driver"] = "other.example.com"
    mine = discovery_filters.node_slices_filter([old] + slices + [other], "node-000000", EXAMPLE)
    assert [s["metadata"]["name"] for s in mine] == [new["metadata"]["name"]]
    assert discovery_filters.node_slices_filter(slices, "node-000000", []) == []
    assert discovery_filters.node_slices_filter([], "node-000000", EXAMPLE) == []


def test_node_slices_with_per_device_node_selection_and_each_slice_once():
    slices = recorded_slices(RECORDED[0])
    shared = copy.deepcopy(slices[0])
    spec = shared["spec"]
    spec["pool"]["name"] = "shared"
    del spec["nodeName"]
    spec["perDeviceNodeSelection"] = True
    for index, device in enumerate(spec["devices"]):
        device["nodeName"] = "node-000001" if index else "elsewhere"
    twice = EXAMPLE + EXAMPLE
    names = [s["metadata"]["name"] for s in discovery_filters.node_slices_filter([shared] + slices, "node-000001",
                                                                                 twice)]
    assert names == [shared["metadata"]["name"], slices[1]["metadata"]["name"]]
    assert discovery_filters.node_slices_filter([shared], "node-000002", EXAMPLE) == []


def test_discovery_record_of_a_compared_node(gpu_facts):
    slices = recorded_slices(RECORDED[0])
    drift = drift_rules.compare_node(gpu_facts, slices, "node-000000", EXAMPLE)
    record = discovery_filters.discovery_record_filter(gpu_facts, "node-000000", drift)
    assert record["node"] == "node-000000" and record["pci_summary"] == gpu_facts["pci_summary"]
    assert record["nvidia_gpus"] == 0 and record["hardware_errors"] == gpu_facts["errors"]
    assert record["drift"] == drift["drift"] and record["drivers"] == drift["drivers"]


def test_discovery_record_without_comparison(gpu_facts):
    record = discovery_filters.discovery_record_filter(gpu_facts, "n", {})
    assert (record["drift"], record["drivers"]) == (False, [])
    assert discovery_filters.discovery_record_filter({"errors": []}, "n")["pci_summary"] == {}
    gpus = {"nvidia": {"gpus": [{"uuid": "GPU-1"}, {"uuid": "GPU-2"}]}, "errors": []}
    assert discovery_filters.discovery_record_filter(gpus, "n")["nvidia_gpus"] == 2


def records(gpu_facts):
    slices = recorded_slices(RECORDED[0])
    published = len(slices[0]["spec"]["devices"])
    out = []
    for node in ("node-000000", "node-000001", "node-that-publishes-nothing"):
        drift = drift_rules.compare_node(gpu_facts, slices, node, EXAMPLE)
        out.append(discovery_filters.discovery_record_filter(gpu_facts, node, drift))
    return published, out


def test_drift_summary_names_the_drifting_nodes(gpu_facts):
    published, recs = records(gpu_facts)
    drifting = [r["node"] for r in recs if r["drift"]]
    assert "node-that-publishes-nothing" in drifting
    assert discovery_filters.drift_summary_filter(iter(recs)) == "%d of 3 node(s) with drift: %s" % (
        len(drifting), ", ".join(drifting))
    assert discovery_filters.drift_summary_filter([r for r in recs if not r["drift"]]).endswith("node(s) with drift")
    assert discovery_filters.drift_summary_filter([]) == "0 of 0 node(s) with drift"


def test_drift_message_counts_and_ids(gpu_facts):
    dummy, recs = records(gpu_facts)
    nothing = recs[2]
    message = discovery_filters.drift_message_filter(nothing)
    assert message.startswith("node-that-publishes-nothing: hardware and ResourceSlices disagree: "
                              "gpu.example.com 8 on the node, 0 published (8 missing, 0 extra). Check the driver's")
    by_id = dict(nothing, drivers=[dict(nothing["drivers"][0], missing=1, extra=1, missing_ids=["GPU-a"],
                                        extra_ids=["GPU-b", "GPU-c"])])
    assert "(1 missing, 1 extra; missing GPU-a; extra GPU-b GPU-c)." in discovery_filters.drift_message_filter(by_id)
    clean = dict(nothing, drivers=[dict(nothing["drivers"][0], drift=False)])
    assert "disagree:  Check" in discovery_filters.drift_message_filter(clean)


def test_discovery_filters_refuse_what_is_not_the_facts():
    with pytest.raises(AnsibleFilterError, match="dra.admin.node_slices"):
        discovery_filters.node_slices_filter([], "n", [{"no": "name"}])
    with pytest.raises(AnsibleFilterError, match="dra.admin.drift_message"):
        discovery_filters.drift_message_filter({"drivers": []})


# --- node_doctor ------------------------------------------------------------------------------

def check_result(name):
    with open(os.path.join(FIXTURES, "node-state", "v1.37.2", name + ".json")) as handle:
        rec = json.load(handle)
    states = rec["node_states"]
    cluster = node_check.cluster_facts(rec["resourceclaims"], rec["pods"], rec["resourceslices"], rec["nodes"],
                                       rec["daemonsets"], node_check.node_drivers_named(states))
    stamps = [epoch_seconds(p["metadata"]["deletionTimestamp"]) for p in rec["pods"]
              if p["metadata"].get("deletionTimestamp")]
    return node_check.check(states, cluster, max(stamps) + 60 if stamps else 2000000000)


@pytest.mark.parametrize("scenario", ["stuck", "ckpt"])
def test_node_report_picks_each_node_s_own(scenario):
    result = check_result(scenario)
    assert len(result["nodes"]) > 1
    for report in result["nodes"]:
        assert doctor_filters.node_report_filter(result["nodes"], report["node"]) is report


def test_node_report_of_a_node_the_check_does_not_have_names_those_it_has():
    result = check_result("stuck")
    with pytest.raises(AnsibleFilterError, match="dra.admin.node_report: .*no report for node gone .*nsx-worker2"):
        doctor_filters.node_report_filter(result["nodes"], "gone")
    with pytest.raises(AnsibleFilterError, match=r"it has: none"):
        doctor_filters.node_report_filter([], "gone")
    assert issubclass(node_check.NodeReportError, DraAdminError)


def test_findings_left_after_the_repairs():
    report = copy.deepcopy(doctor_filters.node_report_filter(check_result("ckpt")["nodes"], "nsx-worker2"))
    assert report["findings"]
    subject = report["findings"][0]["subject"]
    assert doctor_filters.findings_left_filter(report, None) == report["findings"]
    skipped = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
    assert doctor_filters.findings_left_filter(report, skipped) == report["findings"]
    repaired = {"changed": True, "moved": [{"kind": "cdi_spec", "path": subject, "reason": "stale"}], "refused": []}
    left = doctor_filters.findings_left_filter(report, repaired)
    assert left == [f for f in report["findings"] if f["subject"] != subject]
    with pytest.raises(AnsibleFilterError, match="dra.admin.findings_left"):
        doctor_filters.findings_left_filter("not a report", None)


def test_the_userns_filter_reads_the_roles_registered_getsubids_and_slurp_results():
    last = json.dumps({"uidMappings": [{"hostId": 2 ** 32 - 65536, "containerId": 0, "length": 65536}]})
    slurped = [{"source": "/var/lib/kubelet/pods/a/userns", "content": base64.b64encode(last.encode()).decode()}]
    subids = "0: kubelet 65536 4294901760\n---\n0: kubelet 65536 4294901760\n"
    problems = kubelet_userns_refusals(subids, slurped, "v1.38.0")
    assert len(problems) == 3 and "pods/a/userns" in problems[2]
    assert kubelet_userns_refusals("", [], "v1.38.0") == []
    with pytest.raises(AnsibleFilterError, match="kubelet_userns_refusals: getsubids printed"):
        kubelet_userns_refusals("garbage\n---\n", [], "v1.38.0")
