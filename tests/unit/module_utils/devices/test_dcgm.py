"""The DCGM exporter's series judged per GPU (devices.dcgm): the queries, the verdicts, the facts' shape that
dra_device_health_info's gpu_health takes. Prometheus' own reading of them is tested in
tests/integration/test_dcgm_health.py."""
import datetime

from ansible_collections.dra.admin.plugins.module_utils.devices import dcgm
from ansible_collections.dra.admin.plugins.module_utils.devices import gpu_health as gh
from ansible_collections.dra.admin.plugins.module_utils.devices import health as dh

A = "GPU-1b2c3d4e-0000-4000-8000-000000000001"
B = "GPU-1b2c3d4e-0000-4000-8000-000000000002"


def gpu(uuid, host="gpu-node-1"):
    return {"UUID": uuid, "Hostname": host}


def facts(**results):
    return dcgm.gpu_facts(results)


def by_uuid(nodes):
    return dict((g["uuid"], g) for n in nodes for g in n["gpus"])


def test_queries_reduce_per_gpu_and_count_an_xid_only_when_it_changed_in_the_window():
    queries = dcgm.queries(600)
    assert set(queries) == set(dcgm.SERIES)
    assert queries["DCGM_FI_DEV_ROW_REMAP_FAILURE"] == "max by (UUID, Hostname) (DCGM_FI_DEV_ROW_REMAP_FAILURE)"
    assert queries["DCGM_FI_DEV_XID_ERRORS"] == ("max by (UUID, Hostname) (last_over_time(DCGM_FI_DEV_XID_ERRORS"
                                                 "[600s]) and changes(DCGM_FI_DEV_XID_ERRORS[600s]) > 0)")


def test_each_series_reads_as_its_action():
    nodes = facts(DCGM_FI_DEV_ROW_REMAP_FAILURE=[(gpu(A), 1.0), (gpu(B), 0.0)],
                  DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=[(gpu(B), 3.0)],
                  DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS=[(gpu(A), 2.0)])
    gpus = by_uuid(nodes)
    assert (gpus[A]["condition"], gpus[A]["action"], gpus[A]["reasons"], gpus[A]["notes"]) == (
        "unhealthy", gh.REPLACE, ["row remapping failed"], ["2 row(s) remapped for uncorrectable errors"])
    ecc = "3 uncorrectable ECC error(s) since the driver loaded"
    assert (gpus[B]["action"], gpus[B]["reasons"]) == (gh.RESET_GPU, [ecc])
    assert [(n["node"], n["source"], n["available"]) for n in nodes] == [("gpu-node-1", "dcgm", True)]


def test_an_xid_reads_as_the_node_readers_code():
    gpus = by_uuid(facts(DCGM_FI_DEV_XID_ERRORS=[(gpu(A), 79.0), (gpu(B, "gpu-node-2"), 13.0)]))
    assert (gpus[A]["condition"], gpus[A]["reasons"]) == ("unhealthy", ["Xid 79: the GPU has fallen off the bus"])
    assert (gpus[B]["condition"], gpus[B]["action"], gpus[B]["node"]) == ("healthy", gh.RESTART_APP, "gpu-node-2")


def test_the_facts_are_a_health_source_as_the_nodes_facts_are():
    nodes = facts(DCGM_FI_DEV_ROW_REMAP_PENDING=[(gpu(A), 1.0)])
    assert gh.gpus_by_uuid(nodes)[A]["condition"] == "unhealthy"
    now = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)
    report = dh.device_health([], [], [], now, gpu_health=nodes)
    assert [g["uuid"] for g in report["gpus_unmatched"]] == [A]


def test_nothing_read_is_no_gpu():
    assert facts() == []
