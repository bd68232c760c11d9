"""dra_dcgm_health_info against a real Prometheus scraping a page in the DCGM exporter's format, and its GPUs as a
health source of dra_device_health_info on the real local cluster.

What is real: Debian's Prometheus (its scrapes, its PromQL: an Xid code new within the window, the per-GPU
reduction), the module's HTTP queries, the API server and the example driver's ResourceSlices. What is written
here: the exporter's page, in dcgm-exporter's text format as its renderer writes it (labels gpu, UUID, pci_bus_id,
device, modelName, hostname, the driver-version label; err_code and err_msg on the Xid gauge; the recorded H100's
model and bus), with the counters the verdict needs (the default counters file lacks the uncorrectable errors
since the driver loaded and the pending remapping: dra_dcgm_health_info calls such a GPU unknown), naming as GPU
UUIDs the uuid attributes the example driver publishes - there is no GPU on this machine. The page changes while
Prometheus scrapes it: the GPU's Xid gauge goes from its err_code="0" series to a new err_code="79" one, as an
exporter's does when the GPU reports one.
"""
import http.server
import threading

import pytest

from dra_objects import DRIVER, claim_template, pod
from prometheus_server import PrometheusServer

import clusterlib  # noqa: E402  pylint: disable=wrong-import-order

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.devices.device_map import (  # noqa: E402
    XID_CONSUMERS_QUERY,
)

PAGE = """# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
{xid_rows}
# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
{dbe_rows}
# HELP DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS Number of remapped rows for uncorrectable errors
# TYPE DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS counter
{remapped_rows}
# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed
# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge
{failure_rows}
# HELP DCGM_FI_DEV_ROW_REMAP_PENDING Whether remapping of rows is pending
# TYPE DCGM_FI_DEV_ROW_REMAP_PENDING gauge
{pending_rows}
"""
XID_MESSAGES = {0: "No Error", 79: "GPU has fallen off the bus"}


class ExporterPage:
    """An HTTP server answering /metrics with the current page (changed by the test)."""

    def __init__(self):
        self.text = ""
        page = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the http.server API)
                body = page.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def labels(index, uuid, node):
    return ('gpu="%d",UUID="%s",pci_bus_id="00000000:%02X:00.0",device="nvidia%d",modelName="NVIDIA H100 80GB HBM3",'
            'hostname="%s",DCGM_FI_DRIVER_VERSION="580.159.04"' % (index, uuid, 6 + index, index, node))


def page(gpus, xid, failure):
    """The exporter's page for gpus [(uuid, node)]: the first GPU's last Xid and the second's remap failure."""
    rows = [labels(i, uuid, node) for i, (uuid, node) in enumerate(gpus)]

    def xid_row(i, row):
        code = xid if i == 0 else 0
        return 'DCGM_FI_DEV_XID_ERRORS{%s,err_code="%d",err_msg="%s"} %d' % (row, code, XID_MESSAGES[code], code)
    return PAGE.format(
        xid_rows="\n".join(xid_row(i, r) for i, r in enumerate(rows)),
        dbe_rows="\n".join("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s} 0" % r for r in rows),
        remapped_rows="\n".join("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{%s} 0" % r for r in rows),
        failure_rows="\n".join("DCGM_FI_DEV_ROW_REMAP_FAILURE{%s} %d" % (r, failure if i == 1 else 0)
                               for i, r in enumerate(rows)),
        pending_rows="\n".join("DCGM_FI_DEV_ROW_REMAP_PENDING{%s} 0" % r for r in rows))


def published_gpus(cluster, count, first=None):
    """[(uuid, node)] of the example driver's devices as its ResourceSlices publish them, `first` (a (pool, device)
    pair) first."""
    found = []
    for item in sorted(cluster.get_json("resourceslices")["items"], key=lambda s: s["metadata"]["name"]):
        spec = item["spec"]
        if spec["driver"] != DRIVER:
            continue
        for device in spec.get("devices") or []:
            uuid = ((device.get("attributes") or {}).get("uuid") or {}).get("string")
            if uuid:
                where = (uuid, spec.get("nodeName"))
                if (spec["pool"]["name"], device["name"]) == first:
                    found.insert(0, where)
                else:
                    found.append(where)
    assert len(found) >= count, found
    return found[:count]


def allocated_device(cluster, namespace, pod_name):
    """(pool, device) of the running pod's one claim, once the scheduler allocated it."""
    def allocated():
        status = cluster.get_json("pod", "-n", namespace, pod_name).get("status") or {}
        names = [s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []]
        if not names or not names[0]:
            return None
        claim = cluster.get_json("resourceclaim", "-n", namespace, names[0])
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
        return (results[0]["pool"], results[0]["device"]) if results else None
    return cluster.wait_until(allocated, 90, "pod %s's claim allocated" % pod_name)


@pytest.fixture
def exporter(cluster, tmp_path):
    """(the DCGM exporter's page, node-exporter's textfile page, Prometheus scraping both)."""
    served, textfile = ExporterPage(), ExporterPage()
    rules = tmp_path / "rules"
    rules.mkdir()
    prom = PrometheusServer([{"job_name": job, "static_configs": [{"targets": ["127.0.0.1:%d" % page.port]}]}
                             for job, page in (("dcgm-exporter", served), ("node", textfile))],
                            str(rules), str(tmp_path), cluster.wait_until)
    yield served, textfile, prom
    prom.stop()
    served.stop()
    textfile.stop()


def test_dcgm_series_become_the_health_of_the_devices_with_those_uuids(cluster, namespace, exporter):
    served, textfile, prom = exporter
    # A pod holding a device: the first GPU of the page is that device.
    cluster.apply([claim_template(cluster.resource_version, namespace, "one-gpu"),
                   pod(namespace, "holder", template="one-gpu")])
    gpus = published_gpus(cluster, 3, first=allocated_device(cluster, namespace, "holder"))
    served.text = page(gpus, xid=0, failure=0)
    # Every GPU healthy, once Prometheus has the page.
    cluster.wait_until(lambda: prom.value("count(DCGM_FI_DEV_XID_ERRORS)") == 3, 60, "the page scraped")
    quiet = cluster.run_module("dra.admin.dra_dcgm_health_info", {"prometheus_url": prom.url, "xid_window": 600})
    assert quiet["series_found"] == ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                                     "DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                                     "DCGM_FI_DEV_XID_ERRORS"]
    assert quiet["series_missing"] == ["DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_RETIRED_PENDING"]
    assert [(g["condition"], g["xids"]) for n in quiet["gpu_health"] for g in n["gpus"]] == [("healthy", [])] * 3

    # The first GPU reports Xid 79, the second a failed row remapping.
    served.text = page(gpus, xid=79, failure=1)
    cluster.wait_until(lambda: prom.value("max(DCGM_FI_DEV_XID_ERRORS)") == 79, 60, "the Xid scraped")
    read = cluster.run_module("dra.admin.dra_dcgm_health_info", {"prometheus_url": prom.url, "xid_window": 600})
    by_uuid = dict((g["uuid"], g) for n in read["gpu_health"] for g in n["gpus"])
    assert (by_uuid[gpus[0][0]]["action"], by_uuid[gpus[0][0]]["reasons"]) == (
        "reboot-node", ["Xid 79: the GPU has fallen off the bus"])
    assert (by_uuid[gpus[1][0]]["action"], by_uuid[gpus[1][0]]["reasons"]) == (
        "run-field-diagnostics", ["row remapping failed"])
    assert by_uuid[gpus[2][0]]["condition"] == "healthy"
    assert read["api_requests"] == 10  # one query per series, the new codes, the gone GPUs, the DRA labels

    health = cluster.run_module("dra.admin.dra_device_health_info",
                                {"gpu_health": read["gpu_health"], "list_devices": "all", "driver": DRIVER})
    devices = dict((d["uuid"], d) for d in health["devices"] if d["uuid"])
    assert [devices[uuid]["condition"] for uuid, dummy in gpus[:2]] == ["unhealthy", "unhealthy"]
    assert devices[gpus[0][0]]["reasons"][-1] == ("GPU %s on %s: Xid 79: the GPU has fallen off the bus "
                                                  "(reboot-node)" % gpus[0])
    assert not [r for r in devices[gpus[2][0]]["reasons"] if r.startswith("GPU ")]
    assert devices[gpus[2][0]]["gpu"]["condition"] == "healthy"
    assert health["sources"]["gpu_health"]["available"] is True
    assert 'uuid="%s"' % gpus[0][0] in health["metrics_text"]

    # The device map beside the exporter's series: the alert's join names the pod holding the Xid GPU, only it.
    textfile.text = health["metrics_text"]
    cluster.wait_until(lambda: prom.value("count(dra_admin_device_consumer_info)"), 60, "the device map scraped")
    joined = prom.api("/api/v1/query", query=XID_CONSUMERS_QUERY)["result"]
    assert [(r["metric"]["gpu_uuid"], r["metric"]["namespace"], r["metric"]["pod"], r["metric"]["err_code"])
            for r in joined] == [(gpus[0][0], namespace, "holder", "79")]

    # An Xid whose code is older than the window counts no more, although the gauge keeps it.
    def xid_gone():
        again = cluster.run_module("dra.admin.dra_dcgm_health_info", {"prometheus_url": prom.url, "xid_window": 4})
        first = [g for n in again["gpu_health"] for g in n["gpus"] if g["uuid"] == gpus[0][0]]
        return first and first[0]["xids"] == [] and "DCGM_FI_DEV_XID_ERRORS" in again["series_found"]
    cluster.wait_until(xid_gone, 90, "the Xid out of a 4 s window")


def test_no_exporter_is_said_and_refused_when_required(cluster, exporter):
    dummy, dummy2, prom = exporter
    read = cluster.run_module("dra.admin.dra_dcgm_health_info", {"prometheus_url": prom.url})
    assert read["gpu_health"] == [] and read["series_found"] == []
    failed = cluster.run_module("dra.admin.dra_dcgm_health_info", {"prometheus_url": prom.url, "require_series": True},
                                expect_failure=True)
    assert "has none of the DCGM exporter's series" in failed["msg"]
