"""The DCGM exporter's series judged per GPU (devices.dcgm): the queries evaluated by promtool (Prometheus' own
PromQL) on series shaped as dcgm-exporter renders them - labels gpu, UUID, pci_bus_id, device, modelName,
hostname (Hostname before its rename), the driver-version label, err_code/err_msg on the Xid gauge, xid and
window_size_in_ms on the Xid count -, then the verdicts from the rows such queries answer, in the facts' shape that
dra_device_health_info's gpu_health takes. tests/integration/test_dcgm_health.py runs the module against a real
Prometheus."""
import datetime
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.devices import dcgm
from ansible_collections.dra.admin.plugins.module_utils.devices import gpu_health as gh
from ansible_collections.dra.admin.plugins.module_utils.devices import health as dh

A = "GPU-1b2c3d4e-0000-4000-8000-000000000001"
B = "GPU-1b2c3d4e-0000-4000-8000-000000000002"
C = "GPU-1b2c3d4e-0000-4000-8000-000000000003"
D = "GPU-1b2c3d4e-0000-4000-8000-000000000004"
E = "GPU-1b2c3d4e-0000-4000-8000-000000000005"
MODEL = 'modelName="NVIDIA H100 80GB HBM3", DCGM_FI_DRIVER_VERSION="580.159.04"'
MESSAGES = {0: "No Error", 13: "Graphics Engine Exception", 48: "Double Bit ECC Error",
            79: "GPU has fallen off the bus"}


def exporter_labels(index, uuid, host="hostname", node="gpu-node-1"):
    return 'gpu="%d", UUID="%s", pci_bus_id="00000000:%02X:00.0", device="nvidia%d", %s, %s="%s"' % (
        index, uuid, 6 + index, index, MODEL, host, node)


def xid_series(index, uuid, code, values, host="hostname", node="gpu-node-1", labelled=True):
    code_labels = ', err_code="%d", err_msg="%s"' % (code, MESSAGES[code]) if labelled else ""
    return {"series": "DCGM_FI_DEV_XID_ERRORS{%s%s}" % (exporter_labels(index, uuid, host, node), code_labels),
            "values": values}


def promtool_check(tmp_path, input_series, expr_tests):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not on PATH: run hack/install-test-deps (Debian package prometheus)"
    (tmp_path / "empty.rules.yml").write_text("groups: []\n")
    (tmp_path / "dcgm_test.yml").write_text(yaml.safe_dump({
        "rule_files": ["empty.rules.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input_series, "promql_expr_test": expr_tests}]}))
    res = subprocess.run([promtool, "test", "rules", "dcgm_test.yml"], cwd=str(tmp_path), capture_output=True,
                         text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


# Twenty minutes of an exporter's page, the window 10 minutes: A reports Xid 79 at 15m (its err_code="0" series
# before), scraped by two jobs; B the application's Xid 13 at 15m; C Xid 79 since the start (not new) and, on the
# exporter's count, the same code again at 18m; D from an exporter older than err_code and with Hostname: its
# value goes from 13 to 48 at 15m; E leaves the exporter at 12m.
PAGE = [
    xid_series(0, A, 0, "0x14"), xid_series(0, A, 79, "_x14 79x5"),
    dict(xid_series(0, A, 79, "_x14 79x5"), series=xid_series(0, A, 79, "")["series"][:-1] + ', job="second"}'),
    xid_series(1, B, 0, "0x14"), xid_series(1, B, 13, "_x14 13x5"),
    xid_series(2, C, 79, "79x20"),
    {"series": "DCGM_EXP_XID_ERRORS_COUNT{%s, window_size_in_ms=\"300000\", xid=\"79\"}" % exporter_labels(2, C),
     "values": "_x17 2x2"},
    {"series": "DCGM_EXP_XID_ERRORS_COUNT{%s, window_size_in_ms=\"300000\"}" % exporter_labels(2, C),
     "values": "0x20"},
    xid_series(3, D, 13, "13x14 48x5", host="Hostname", node="gpu-node-2", labelled=False),
    xid_series(4, E, 0, "0x12"),
]


def test_the_queries_find_new_codes_repeats_and_gone_gpus_on_the_exporters_series(tmp_path):
    queries = dcgm.queries(600)
    promtool_check(tmp_path, PAGE, [
        {"expr": queries[dcgm.NEW_XIDS], "eval_time": "20m", "exp_samples": [
            {"labels": '{UUID="%s", err_code="79", hostname="gpu-node-1"}' % A, "value": 79},
            {"labels": '{UUID="%s", err_code="13", hostname="gpu-node-1"}' % B, "value": 13},
            {"labels": '{UUID="%s", err_code="79", hostname="gpu-node-1"}' % C, "value": 2},
            {"labels": '{UUID="%s", Hostname="gpu-node-2"}' % D, "value": 48}]},
        # Before any new code, nothing; C's 79 alone was never new within the window.
        {"expr": queries[dcgm.NEW_XIDS], "eval_time": "12m", "exp_samples": []},
        {"expr": queries[dcgm.GONE], "eval_time": "20m", "exp_samples": [
            {"labels": '{UUID="%s", hostname="gpu-node-1"}' % E, "value": 1}]},
        {"expr": queries[dcgm.XID_ERRORS], "eval_time": "20m", "exp_samples": [
            {"labels": '{UUID="%s", hostname="gpu-node-1"}' % A, "value": 79},
            {"labels": '{UUID="%s", hostname="gpu-node-1"}' % B, "value": 13},
            {"labels": '{UUID="%s", hostname="gpu-node-1"}' % C, "value": 79},
            {"labels": '{UUID="%s", Hostname="gpu-node-2"}' % D, "value": 48}]},
    ])


def gpu(uuid, host="gpu-node-1", label="hostname"):
    return {"UUID": uuid, label: host} if host else {"UUID": uuid}


def every_series(uuid, **values):
    """The rows of every verdict series for one GPU (0 unless given), as the full counters file exports them."""
    rows = {}
    for name in (dcgm.ECC_DBE_VOL, dcgm.ROW_REMAP_PENDING, dcgm.ROW_REMAP_FAILURE, dcgm.UNCORRECTABLE_REMAPPED,
                 dcgm.XID_ERRORS):
        rows[name] = [(gpu(uuid), float(values.get(name, 0)))]
    return rows


def merged(*parts):
    out = {}
    for part in parts:
        for name, rows in part.items():
            out.setdefault(name, []).extend(rows)
    return out


def by_uuid(nodes):
    return dict((g["uuid"], g) for n in nodes for g in n["gpus"])


def test_the_rows_of_the_queries_above_read_as_the_node_readers_codes():
    results = merged(every_series(A, DCGM_FI_DEV_XID_ERRORS=79), every_series(B, DCGM_FI_DEV_XID_ERRORS=13),
                     every_series(C, DCGM_FI_DEV_XID_ERRORS=79),
                     {dcgm.NEW_XIDS: [({"UUID": A, "err_code": "79", "hostname": "gpu-node-1"}, 79.0),
                                      ({"UUID": B, "err_code": "13", "hostname": "gpu-node-1"}, 13.0),
                                      ({"UUID": C, "err_code": "79", "hostname": "gpu-node-1"}, 2.0),
                                      ({"UUID": D, "Hostname": "gpu-node-2"}, 48.0)],
                      dcgm.GONE: [({"UUID": E, "hostname": "gpu-node-1"}, 1.0)]})
    gpus = by_uuid(dcgm.gpu_facts(results))
    assert (gpus[A]["condition"], gpus[A]["reasons"], gpus[A]["xids"]) == (
        "unhealthy", ["Xid 79: the GPU has fallen off the bus"], [79])
    assert (gpus[B]["condition"], gpus[B]["action"]) == ("healthy", gh.RESTART_APP)
    assert (gpus[C]["action"], gpus[C]["xids"]) == (gh.REBOOT, [79])
    # D's exporter exports only the Xid series: 48 takes it out of service whatever else it lacks.
    assert (gpus[D]["node"], gpus[D]["condition"], gpus[D]["action"]) == ("gpu-node-2", "unhealthy", gh.RESET_GPU)
    assert (gpus[E]["condition"], gpus[E]["reasons"]) == ("unknown", [
        "gone from the exporter (reported within the window, not now): the GPU fell off the bus or the exporter on "
        "its node stopped"])


def test_each_series_reads_as_its_action():
    nodes = dcgm.gpu_facts(merged(every_series(A, DCGM_FI_DEV_ROW_REMAP_FAILURE=1,
                                               DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS=2),
                                  every_series(B, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=3)))
    gpus = by_uuid(nodes)
    assert (gpus[A]["condition"], gpus[A]["action"], gpus[A]["reasons"], gpus[A]["notes"]) == (
        "unhealthy", gh.FIELD_DIAG, ["row remapping failed"], ["2 row(s) remapped for uncorrectable errors"])
    ecc = "3 uncorrectable ECC error(s) since the driver loaded (a GPU reset clears them)"
    assert (gpus[B]["action"], gpus[B]["reasons"]) == (gh.RESET_GPU, [ecc])
    assert [(n["node"], n["source"], n["available"]) for n in nodes] == [("gpu-node-1", "dcgm", True)]
    allowed = by_uuid(dcgm.gpu_facts(every_series(B, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=3), gh.PENDING_ALLOW))[B]
    assert (allowed["condition"], allowed["action"]) == ("healthy", gh.WATCH)


def test_a_gpu_of_the_default_exporter_is_unknown_not_healthy():
    """etc/default-counters.csv exports the Xid gauge, the remapped rows and the remap failure, not the uncorrectable
    errors since the driver loaded nor a pending remapping or retirement: the verdict cannot be told."""
    default = dict((name, [(gpu(A), 0.0)]) for name in (
        dcgm.XID_ERRORS, dcgm.UNCORRECTABLE_REMAPPED, dcgm.ROW_REMAP_FAILURE, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"))
    found = by_uuid(dcgm.gpu_facts(default))[A]
    assert (found["condition"], found["action"]) == ("unknown", gh.LOOK_UP)
    assert found["reasons"] == [
        "the exporter does not export DCGM_FI_DEV_ECC_DBE_VOL_TOTAL for it: whether it has uncorrectable ECC errors "
        "since the driver loaded cannot be told",
        "the exporter does not export DCGM_FI_DEV_ROW_REMAP_PENDING or DCGM_FI_DEV_RETIRED_PENDING for it: whether it "
        "has pending row remappings or page retirements cannot be told"]
    # With the full set read, the same GPU is healthy; with a failed remapping it is unhealthy whatever is missing.
    assert by_uuid(dcgm.gpu_facts(every_series(A)))[A]["condition"] == "healthy"
    default[dcgm.ROW_REMAP_FAILURE] = [(gpu(A), 1.0)]
    assert by_uuid(dcgm.gpu_facts(default))[A]["condition"] == "unhealthy"


@pytest.mark.parametrize("labels,node", [
    ({"hostname": "gpu-node-1"}, "gpu-node-1"),           # dcgm-exporter main
    ({"Hostname": "gpu-node-1"}, "gpu-node-1"),           # up to 4.x
    ({"node": "gpu-node-1", "instance": "10.0.0.5:9400"}, "gpu-node-1"),  # --no-hostname, the scrape's node label
    ({"instance": "10.0.0.5:9400"}, None),
])
def test_the_node_is_read_from_either_hostname_label_or_the_scrapes_node(labels, node):
    rows = every_series(A)
    rows = dict((name, [(dict(labels, UUID=A), value) for dummy, value in found]) for name, found in rows.items())
    (facts,) = dcgm.gpu_facts(rows)
    assert (facts["node"], facts["gpus"][0]["node"]) == (node, node)


def test_xid_154_without_its_text_is_unknown():
    results = merged(every_series(A, DCGM_FI_DEV_XID_ERRORS=154),
                     {dcgm.NEW_XIDS: [({"UUID": A, "err_code": "154", "hostname": "gpu-node-1"}, 154.0)]})
    found = by_uuid(dcgm.gpu_facts(results))[A]
    assert (found["condition"], found["action"]) == ("unknown", gh.LOOK_UP)


def test_the_dra_labels_of_the_exporter_are_kept():
    labels = {"UUID": A, "dra_driver_name": "gpu.nvidia.com", "dra_pool_name": "gpu-node-1",
              "dra_device_name": "gpu-0-mig-1g-10gb-0", "dra_claim_namespace": "ml", "dra_claim_name": "small-gpu",
              "dra_mig_device_uuid": "MIG-5c6d7e8f-0000-4000-8000-000000000001", "namespace": "ml", "pod": "small-0"}
    found = by_uuid(dcgm.gpu_facts(merged(every_series(A), {dcgm.DRA_DEVICES: [(labels, 1.0)]})))[A]
    assert found["dra_devices"] == [{"driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0-mig-1g-10gb-0",
                                     "claim_namespace": "ml", "claim": "small-gpu",
                                     "mig_device_uuid": "MIG-5c6d7e8f-0000-4000-8000-000000000001",
                                     "namespace": "ml", "pod": "small-0"}]
    assert 'dra_device_name!=""' in dcgm.queries(600)[dcgm.DRA_DEVICES]


def test_the_facts_are_a_health_source_as_the_nodes_facts_are():
    nodes = dcgm.gpu_facts(every_series(A, DCGM_FI_DEV_ROW_REMAP_PENDING=1))
    assert gh.gpus_by_uuid(nodes)[A]["condition"] == "unhealthy"
    now = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)
    report = dh.device_health([], [], [], now, gpu_health=nodes)
    assert [g["uuid"] for g in report["gpus_unmatched"]] == [A]


def test_nothing_read_is_no_gpu():
    assert dcgm.gpu_facts({}) == []
