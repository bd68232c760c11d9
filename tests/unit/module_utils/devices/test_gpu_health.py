"""GPU health as the node reads it (devices.gpu_health), on the real H100's recorded nvidia-smi -q -x report and
kernel log (tests/unit/fixtures/gpu-health/h100/) and variants of them: counters raised, flags set, Xid lines
added in the format the NVIDIA kernel driver writes them; then as the third source of device health, matched by
uuid to the devices of the ResourceSlices recorded from the real cluster (fixtures/device-health/v1.36.3)."""
import datetime
import json
import os
import re
from xml.etree import ElementTree

import pytest

from ansible_collections.dra.admin.plugins.module_utils.devices import gpu_health as gh
from ansible_collections.dra.admin.plugins.module_utils.devices import health as dh
from ansible_collections.dra.admin.plugins.module_utils.devices import remediation as rem
from conftest import FIXTURES

H100 = os.path.join(FIXTURES, "gpu-health", "h100")
UUID = "GPU-1b2c3d4e-0000-4000-8000-000000000001"
BUS = "0000:00:06"
NOW = datetime.datetime(2026, 11, 23, 17, 30, tzinfo=datetime.timezone.utc)


def text(name):
    with open(os.path.join(H100, name)) as fh:
        return fh.read()


def proc_text():
    """The /proc information file as the kernel writes it (the recording's header line is the file's path)."""
    return "\n".join(line for line in text("proc-gpu-information.txt").splitlines() if not line.startswith("=="))


def variant(**tags):
    """The recorded report with the named elements' texts replaced (the first element of each name)."""
    xml = text("nvidia-smi-q.xml")
    for tag, value in tags.items():
        xml, count = re.subn(r"<%s>[^<]*</%s>" % (tag, tag), "<%s>%s</%s>" % (tag, value, tag), xml, count=1)
        assert count == 1, tag
    return xml


def judged(xml=None, log=None, uptime="5000.00 100.00", window=3600, proc=True):
    smi = gh.parse_smi_xml(xml if xml is not None else text("nvidia-smi-q.xml")) if xml is not False else None
    kernel = text("dmesg-nvrm.txt") + (log or "")
    return gh.judge_gpus(smi, kernel, [proc_text()] if proc else [], uptime, window)


def text_of_log(extra):
    """The recorded kernel log with lines added."""
    return text("dmesg-nvrm.txt") + extra


def only_gpu(report):
    (gpu,) = report["gpus"]
    return gpu


def xid_line(seconds, code, message, bus="0000:00:06"):
    return "[%10.6f] NVRM: Xid (PCI:%s): %d, pid=1234, name=python3, %s\n" % (seconds, bus, code, message)


# --- the recorded H100 ---------------------------------------------------------------

def test_recorded_h100_is_healthy_with_every_counter_read():
    report = judged()
    gpu = only_gpu(report)
    assert (gpu["uuid"], gpu["pci_bus"], gpu["index"], gpu["name"]) == (UUID, BUS, 0, "NVIDIA H100 80GB HBM3")
    assert gpu["ecc"] == {"mode": "Enabled", "volatile": {"uncorrectable": 0, "correctable": 0},
                          "aggregate": {"uncorrectable": 0, "correctable": 0},
                          "sram_threshold_exceeded": False, "unrepairable_memory": False,
                          "channel_repair_pending": False, "tpc_repair_pending": False}
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    # H100 remaps rows; it does not retire pages (N/A in the report).
    assert gpu["retired_pages"] is None
    assert (gpu["condition"], gpu["action"], gpu["reasons"], gpu["notes"]) == ("healthy", "none", [], [])
    assert (gpu["reported"], gpu["excluded"], gpu["recovery_action"]) == (True, False, "None")
    assert report["driver_version"] == "580.159.04" and report["unhealthy"] == [] and report["xids"] == []
    assert report["pending"] == "drain"


# Every element of the recorded report's ECC, retired-pages and row-remapper sections, and where the module reads
# it (a raised value must show there), or why it does not read it. An element a newer driver adds fails the test
# until it is placed: no counter goes unread unseen.
def _ecc(period, kind):
    return lambda gpu: gpu["ecc"][period][kind]


READ = {
    "ecc_errors/volatile/sram_correctable": _ecc("volatile", "correctable"),
    "ecc_errors/volatile/sram_uncorrectable_parity": _ecc("volatile", "uncorrectable"),
    "ecc_errors/volatile/sram_uncorrectable_secded": _ecc("volatile", "uncorrectable"),
    "ecc_errors/volatile/dram_correctable": _ecc("volatile", "correctable"),
    "ecc_errors/volatile/dram_uncorrectable": _ecc("volatile", "uncorrectable"),
    "ecc_errors/aggregate/sram_correctable": _ecc("aggregate", "correctable"),
    "ecc_errors/aggregate/sram_uncorrectable_parity": _ecc("aggregate", "uncorrectable"),
    "ecc_errors/aggregate/sram_uncorrectable_secded": _ecc("aggregate", "uncorrectable"),
    "ecc_errors/aggregate/dram_correctable": _ecc("aggregate", "correctable"),
    "ecc_errors/aggregate/dram_uncorrectable": _ecc("aggregate", "uncorrectable"),
    "ecc_errors/aggregate/sram_threshold_exceeded": lambda gpu: gpu["ecc"]["sram_threshold_exceeded"],
    "ecc_errors/channel_repair_pending": lambda gpu: gpu["ecc"]["channel_repair_pending"],
    "ecc_errors/tpc_repair_pending": lambda gpu: gpu["ecc"]["tpc_repair_pending"],
    "ecc_errors/unrepairable_memory": lambda gpu: gpu["ecc"]["unrepairable_memory"],
    "retired_pages/multiple_single_bit_retirement/retired_count": lambda gpu: gpu["retired_pages"]["single_bit"],
    "retired_pages/double_bit_retirement/retired_count": lambda gpu: gpu["retired_pages"]["double_bit"],
    "retired_pages/pending_retirement": lambda gpu: gpu["retired_pages"]["pending"],
    "retired_pages/pending_blacklist": lambda gpu: gpu["retired_pages"]["pending"],
    "remapped_rows/remapped_row_corr": lambda gpu: gpu["remapped_rows"]["correctable"],
    "remapped_rows/remapped_row_unc": lambda gpu: gpu["remapped_rows"]["uncorrectable"],
    "remapped_rows/remapped_row_pending": lambda gpu: gpu["remapped_rows"]["pending"],
    "remapped_rows/remapped_row_failure": lambda gpu: gpu["remapped_rows"]["failure"],
    "gpu_recovery_action": lambda gpu: gpu["recovery_action"],
}
NOT_READ = dict([("ecc_errors/aggregate_uncorrectable_sram_sources/sram_%s" % unit,
                  "the aggregate uncorrectable SRAM count by unit; the total is read")
                 for unit in ("l2", "sm", "microcontroller", "pcie", "other")] + [
    ("retired_pages/multiple_single_bit_retirement/retired_pagelist", "page addresses"),
    ("retired_pages/double_bit_retirement/retired_pagelist", "page addresses"),
    ("remapped_rows/remapped_row_corr_inactive", "remappings a reset activates: remapped_row_pending says so"),
    ("remapped_rows/remapped_row_unc_inactive", "remappings a reset activates: remapped_row_pending says so"),
] + [("remapped_rows/row_remapper_histogram/row_remapper_histogram_%s" % level, "spare rows per bank, no fault")
     for level in ("max", "high", "partial", "low", "none")])


def recorded_root():
    """The recorded report as an element tree (without its DOCTYPE line, as the module reads it)."""
    return ElementTree.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text("nvidia-smi-q.xml")))


def leaves_kind(path):
    return "count" if path.endswith(("_count", "correctable", "_parity", "_secded", "_uncorrectable", "_corr",
                                     "_unc")) else "flag"


def recorded_leaves():
    """{path below <gpu>: text} of the recorded report's health sections' leaf elements."""
    gpu = recorded_root().find("gpu")
    out = {"gpu_recovery_action": gpu.find("gpu_recovery_action").text}
    for section in ("ecc_errors", "retired_pages", "remapped_rows"):
        def walk(node, path):
            children = list(node)
            if not children:
                out[path] = (node.text or "").strip()
            for child in children:
                walk(child, "%s/%s" % (path, child.tag))
        walk(gpu.find(section), section)
    return out


def test_every_counter_of_the_recorded_report_is_placed_and_none_is_left_unknown():
    leaves = recorded_leaves()
    assert set(leaves) == set(READ) | set(NOT_READ), sorted(set(leaves) ^ (set(READ) | set(NOT_READ)))
    assert not set(READ) & set(NOT_READ)
    gpu = only_gpu(judged())
    for path, where in READ.items():
        value = None if path.startswith("retired_pages/") and gpu["retired_pages"] is None else where(gpu)
        if leaves[path] == "N/A":
            # Only page retirement is not available, as NVML says on this GPU (H100 remaps rows instead).
            assert path.startswith("retired_pages/") and value is None, path
        else:
            assert value is not None, path


@pytest.mark.parametrize("path", sorted(READ))
def test_each_counter_of_the_recorded_report_is_read_where_it_belongs(path):
    """Raising one element of the recorded report (by its path: volatile and aggregate share names) shows in the
    module's reading of it."""
    if path == "gpu_recovery_action":
        raised, expected = "GPU Reset Required", "GPU Reset Required"
    elif leaves_kind(path) == "flag":
        raised, expected = "Yes", True
    else:
        raised, expected = "7", 7
    root = recorded_root()
    root.find("gpu/" + path).text = raised
    gpu = only_gpu(judged(ElementTree.tostring(root, encoding="unicode")))
    assert READ[path](gpu) == expected


CLEARED = "since the driver loaded (a GPU reset clears them)"


@pytest.mark.parametrize("tags,action,reason", [
    ({"dram_uncorrectable": 2}, gh.RESET_GPU, "2 uncorrectable ECC error(s) " + CLEARED),
    ({"sram_uncorrectable_secded": 1}, gh.RESET_GPU, "1 uncorrectable ECC error(s) " + CLEARED),
    ({"remapped_row_pending": "Yes"}, gh.RESET_GPU, "a row remapping is pending (a GPU reset applies it)"),
    ({"remapped_row_failure": "Yes"}, gh.FIELD_DIAG, "row remapping failed"),
    ({"unrepairable_memory": "Yes"}, gh.FIELD_DIAG, "memory that cannot be repaired (unrepairable_memory)"),
    ({"sram_threshold_exceeded": "Yes"}, gh.FIELD_DIAG,
     "uncorrectable SRAM errors past the threshold (sram_threshold_exceeded)"),
    # Blackwell's repair flags, in the element the recorded report has them (No on the H100).
    ({"channel_repair_pending": "Yes"}, gh.REBOOT, "a memory channel is marked for repair (channel_repair_pending; "
                                                   "the driver asks for a node reboot to activate it)"),
    ({"tpc_repair_pending": "Yes"}, gh.REBOOT, "a TPC is marked for repair (tpc_repair_pending; the driver asks for "
                                               "a node reboot to activate it)"),
    ({"gpu_recovery_action": "Drain and Reset"}, gh.RESET_GPU, "the driver asks for recovery action Drain and Reset"),
    ({"gpu_recovery_action": "Reset"}, gh.RESET_GPU, "the driver asks for recovery action Reset"),
    ({"gpu_recovery_action": "Reboot"}, gh.REBOOT, "the driver asks for recovery action Reboot"),
    ({"gpu_recovery_action": "Drain P2P"}, gh.DRAIN_P2P, "the driver asks for recovery action Drain P2P"),
    # NVML's actions 5-7 (nvmlDeviceGpuRecoveryAction_t), as their names read.
    ({"gpu_recovery_action": "Recover IMEX Domain"}, gh.RECOVER_IMEX,
     "the driver asks for recovery action Recover IMEX Domain"),
    ({"gpu_recovery_action": "Bus Reset"}, gh.RESET_BUS, "the driver asks for recovery action Bus Reset"),
    ({"gpu_recovery_action": "System Reboot"}, gh.REBOOT, "the driver asks for recovery action System Reboot"),
])
def test_a_raised_counter_or_flag_takes_the_gpu_out_of_service(tags, action, reason):
    gpu = only_gpu(judged(variant(**tags)))
    assert (gpu["condition"], gpu["action"], gpu["reasons"]) == ("unhealthy", action, [reason])


def test_the_worst_action_wins_and_every_reason_is_kept():
    gpu = only_gpu(judged(variant(dram_uncorrectable=3, remapped_row_failure="Yes", remapped_row_pending="Yes")))
    assert gpu["action"] == gh.FIELD_DIAG
    assert len(gpu["reasons"]) == 3


def test_a_recovery_action_the_collection_does_not_know_is_never_healthy():
    gpu = only_gpu(judged(variant(gpu_recovery_action="Quarantine")))
    assert (gpu["condition"], gpu["action"], gpu["reasons"]) == (
        "unknown", gh.LOOK_UP, ["the driver asks for recovery action Quarantine"])


@pytest.mark.parametrize("tags", [
    {"remapped_row_pending": "Yes"}, {"dram_uncorrectable": 1}, {"channel_repair_pending": "Yes"},
])
def test_the_pending_policy_allow_keeps_the_gpu_in_service_with_a_note(tags):
    xml = variant(**tags)
    drained = only_gpu(judged(xml))
    allowed = only_gpu(gh.judge_gpus(gh.parse_smi_xml(xml), text("dmesg-nvrm.txt"), [proc_text()], "5000 1", 3600,
                                     gh.PENDING_ALLOW))
    assert drained["condition"] == "unhealthy"
    assert (allowed["condition"], allowed["action"], allowed["reasons"]) == ("healthy", gh.WATCH, [])
    assert "new work may start (pending: allow)" in allowed["notes"][0]
    # A failed remapping is not pending: the policy does not soften it.
    failed = gh.judge_gpus(gh.parse_smi_xml(variant(remapped_row_failure="Yes")), "", [], "5000 1", 3600,
                           gh.PENDING_ALLOW)
    assert only_gpu(failed)["action"] == gh.FIELD_DIAG


def test_lifetime_counters_alone_are_notes():
    # The first dram_uncorrectable is the volatile one; raise the aggregate one (the second) instead.
    xml = text("nvidia-smi-q.xml")
    head, tail = xml.split("<aggregate>", 1)
    raised = tail.replace("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>4</dram_uncorrectable>", 1)
    xml = head + "<aggregate>" + raised
    xml = xml.replace("<remapped_row_unc>0</remapped_row_unc>", "<remapped_row_unc>2</remapped_row_unc>")
    gpu = only_gpu(judged(xml))
    assert (gpu["condition"], gpu["action"]) == ("healthy", gh.WATCH)
    assert gpu["notes"] == ["4 uncorrectable ECC error(s) over the GPU's life",
                            "2 row(s) remapped for uncorrectable errors"]


def test_a_gpu_before_ampere_with_a_pending_page_retirement():
    xml = variant(**{"pending_retirement": "Yes", "remapped_row_pending": "N/A"})
    xml = xml.replace("<retired_count>N/A</retired_count>", "<retired_count>3</retired_count>", 1)
    gpu = only_gpu(judged(xml))
    assert gpu["remapped_rows"] is None
    assert gpu["retired_pages"] == {"single_bit": 3, "double_bit": None, "pending": True}
    assert (gpu["condition"], gpu["action"]) == ("unhealthy", gh.RESET_GPU)


# --- Xids -------------------------------------------------------------------------

def test_an_xid_in_the_window_counts_with_its_meaning():
    report = judged(log=xid_line(4000.5, 79, "GPU has fallen off the bus."))
    gpu = only_gpu(report)
    assert (gpu["condition"], gpu["action"]) == ("unhealthy", gh.REBOOT)
    assert gpu["reasons"] == ["Xid 79: the GPU has fallen off the bus"]
    (xid,) = gpu["xids"]
    assert (xid["bus"], xid["code"], xid["age_seconds"], xid["ended_by"]) == (BUS, 79, 999, None)
    assert report["unhealthy"] == [UUID]


def test_an_xid_older_than_the_window_does_not_count():
    gpu = only_gpu(judged(log=xid_line(100.0, 48, "DBE (double bit error) ECC error."), uptime="100000.0 1.0"))
    assert (gpu["condition"], gpu["xids"]) == ("healthy", [])


def test_an_xid_without_a_time_counts_whatever_its_age():
    line = "Nov 27 05:30:01 node kernel: NVRM: Xid (PCI:0000:00:06): 95, pid=77, Uncontained: FBHUB.\n"
    gpu = only_gpu(judged(log=line, uptime="100000.0 1.0"))
    assert (gpu["action"], gpu["xids"][0]["age_seconds"]) == (gh.RESET_GPU, None)


# The catalog's immediate action (Ampere and newer): RESET_GPU codes, WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR (74),
# RESTART_BM, RESTART_APP, IGNORE (43, 45, 63, 92, 157, 160, 161 without their text), a person (54
# CHECK_MECHANICALS, 159 CHECK_UVM), no action (162), unused (1), not in the catalog (999); an NVLink5 Xid whose
# text has no unit or status to decode and is not printed Fatal (144), and the MSE Xid (150: a reset for any).
@pytest.mark.parametrize("code,action,condition", [
    (13, gh.RESTART_APP, "healthy"), (31, gh.RESTART_APP, "healthy"), (94, gh.RESTART_APP, "healthy"),
    (68, gh.RESTART_APP, "healthy"), (43, gh.NONE, "healthy"), (45, gh.NONE, "healthy"), (63, gh.NONE, "healthy"),
    (92, gh.NONE, "healthy"), (160, gh.NONE, "healthy"),
    (46, gh.RESET_GPU, "unhealthy"), (48, gh.RESET_GPU, "unhealthy"), (62, gh.RESET_GPU, "unhealthy"),
    (64, gh.RESET_GPU, "unhealthy"), (74, gh.RESET_GPU, "unhealthy"), (95, gh.RESET_GPU, "unhealthy"),
    (109, gh.RESET_GPU, "unhealthy"), (110, gh.RESET_GPU, "unhealthy"), (119, gh.RESET_GPU, "unhealthy"),
    (120, gh.RESET_GPU, "unhealthy"), (136, gh.RESET_GPU, "unhealthy"), (140, gh.RESET_GPU, "unhealthy"),
    (143, gh.RESET_GPU, "unhealthy"), (144, gh.LOOK_UP, "unknown"), (150, gh.RESET_GPU, "unhealthy"),
    (157, gh.NONE, "healthy"), (161, gh.NONE, "healthy"),
    (155, gh.RESET_GPU, "unhealthy"), (156, gh.RESET_GPU, "unhealthy"), (158, gh.RESET_GPU, "unhealthy"),
    (79, gh.REBOOT, "unhealthy"),
    (54, gh.LOOK_UP, "unknown"), (159, gh.LOOK_UP, "unknown"), (162, gh.LOOK_UP, "unknown"),
    (1, gh.LOOK_UP, "unknown"), (999, gh.LOOK_UP, "unknown"),
])
def test_what_each_code_asks_for(code, action, condition):
    gpu = only_gpu(judged(log=xid_line(4990.0, code, "message")))
    assert (gpu["action"], gpu["condition"]) == (action, condition)


def test_an_unknown_code_is_the_reason_the_gpu_is_unknown():
    gpu = only_gpu(judged(log=xid_line(4990.0, 999, "message")))
    assert gpu["reasons"] == ["Xid 999: not in NVIDIA's Xid catalog as this collection knows it (1-172): look it up "
                              "before using the GPU"]
    assert gh.gpus_by_uuid([dict(judged(log=xid_line(4990.0, 999, "m")), node="n")])[UUID]["condition"] == "unknown"


# Xid 154 as the driver prints it: "from 0x<n> (<name>) to 0x<n> (<name>)", names as NVIDIA's catalog lists them
# and as kernel logs show them.
@pytest.mark.parametrize("change,action", [
    ("from 0x0 (None) to 0x1 (GPU Reset Required)", gh.RESET_GPU),
    ("from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)", gh.RESET_GPU),
    ("from 0x0 (None) to 0x2 (Node Reboot Required)", gh.REBOOT),
    ("from 0x0 (None) to 0x4 (Drain and Reset)", gh.RESET_GPU),
    ("from 0x0 (None) to 0x3 (Drain P2P)", gh.DRAIN_P2P),
    ("from 0x0 (None) to 0x1 (PF FLR)", gh.RESET_GPU),
    ("from 0x0 (None) to 0x2 (OS Reboot)", gh.REBOOT),
    ("from 0x0 (None) to 0x5 (Recover IMEX Domain)", gh.RECOVER_IMEX),
    ("from 0x0 (None) to 0x6 (Bus Reset)", gh.RESET_BUS),
    ("from 0x0 (None) to 0x7 (System Reboot)", gh.REBOOT),
    ("from 0x0 (None) to 0x9 (Something New)", gh.LOOK_UP),
])
def test_xid_154_carries_the_new_recovery_action(change, action):
    line = "[ 4990.000000] NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed %s\n" % change
    gpu = only_gpu(judged(log=line))
    assert gpu["action"] == action
    assert gpu["condition"] == ("unknown" if action == gh.LOOK_UP else "unhealthy")


def test_the_drivers_text_asks_for_more_than_the_catalog_never_less():
    # Xid 160 is IGNORE in the catalog; the driver's repair message asks for a node reboot.
    line = ("[ 4990.000000] NVRM: Xid (PCI:0000:00:06): 160, Marking LTS 5 in FPB 1 along with its pair for repair. "
            "Perform node reboot to activate repair.\n")
    gpu = only_gpu(judged(log=line))
    assert (gpu["condition"], gpu["action"]) == ("unhealthy", gh.REBOOT)
    # Xid 79 stays a reboot whatever its text says.
    assert only_gpu(judged(log=xid_line(4990.0, 79, "reset gpu to activate")))["action"] == gh.REBOOT


# A repair or remapping the driver's text asks to activate is a pending repair: it follows the pending policy, as
# nvidia-smi's flags for the same repair do. Texts in the open kernel module's formats (ECC_ROW_REMAP_PENDING_*,
# ECC_CHANNEL_REPAIR_PENDING_* and ECC_LTS_REPAIR_PENDING_*, whose "Perform %s" is a node reboot or a GPU reset).
@pytest.mark.parametrize("code,message,drained,flag", [
    (63, "Row Remapper: New row (0x00000001f2c40000) marked for remapping, reset gpu to activate.", gh.RESET_GPU,
     {"remapped_row_pending": "Yes"}),
    (63, "Row Remapper: New row marked for remapping, reset gpu to activate.", gh.RESET_GPU,
     {"remapped_row_pending": "Yes"}),
    (160, "Marking Channel 6 in FBPA 11 along with its pair for repair. Perform node reboot to activate repair.",
     gh.REBOOT, {"channel_repair_pending": "Yes"}),
    (160, "Marking LTS 2 in FPB 7 along with its pair for repair. Perform node reboot to activate repair.", gh.REBOOT,
     {"channel_repair_pending": "Yes"}),
    (160, "Marking Channel 0 in FBPA 3 along with its pair for repair. Perform GPU reset to activate repair.",
     gh.RESET_GPU, None),
])
def test_a_repair_to_activate_follows_the_pending_policy_like_the_flag(code, message, drained, flag):
    line = "[ 4990.000000] NVRM: Xid (PCI:0000:00:06): %d, %s\n" % (code, message)
    kernel = text_of_log(line)
    gpu = only_gpu(gh.judge_gpus(gh.parse_smi_xml(text("nvidia-smi-q.xml")), kernel, [proc_text()], "5000 1", 3600))
    assert (gpu["condition"], gpu["action"]) == ("unhealthy", drained)
    allowed = only_gpu(gh.judge_gpus(gh.parse_smi_xml(text("nvidia-smi-q.xml")), kernel, [proc_text()], "5000 1",
                                     3600, gh.PENDING_ALLOW))
    assert (allowed["condition"], allowed["action"], allowed["reasons"]) == ("healthy", gh.WATCH, [])
    assert "to activate it (pending: allow: when convenient)" in allowed["notes"][0]
    if flag:
        # The same repair seen by nvidia-smi answers the same under either policy.
        for policy, expected in ((gh.PENDING_DRAIN, drained), (gh.PENDING_ALLOW, gh.WATCH)):
            flagged = gh.judge_gpus(gh.parse_smi_xml(variant(**flag)), text("dmesg-nvrm.txt"), [proc_text()],
                                    "5000 1", 3600, policy)
            assert only_gpu(flagged)["action"] == expected
    # Without the text the catalog's IGNORE stands.
    assert only_gpu(judged(log=xid_line(4990.0, code, "message")))["action"] == gh.NONE


def nvlink5_line(code, unit, severity, intr, status, link=1, pid=False):
    """An NVLink5 Xid line in the format NVIDIA's catalog gives for 144-150: <unit> <Fatal|Nonfatal> <Crosscontain>
    <injected> <link> (<intrInfo> <errorStatus> <errorDebugData>...), with or without the pid and name the driver
    prints before it for a process."""
    who = "pid=2811, name=python3, " if pid else ""
    return "[ 4990.000000] NVRM: Xid (PCI:0000:00:06): %d, %s%s %s XC0 i0 Link %02d (0x%08x 0x%08x 0x00000000 " \
           "0x00000000 0x00000000 0x00000000)\n" % (code, who, unit, severity, link, intr, status)


# NVIDIA's "Xid 144-150 Decode": the unit from IntrInfo (bits 6:0 from R575, bits 9:5 with the code less 143 in
# bits 4:0 before it), the action from the error status (NETIR_LINK_EVT: the link-down reason in bits 25:20).
@pytest.mark.parametrize("code,unit,severity,intr,status,action,condition", [
    # SAW_MVB: 0x2 and 0x10 fatal (reset), 0x1 non-fatal (IGNORE); V2 and V1 IntrInfo.
    (144, "SAW_MVB", "Fatal", 0x01, 0x02, gh.RESET_GPU, "unhealthy"),
    (144, "SAW_MVB", "Nonfatal", 0x01, 0x01, gh.NONE, "healthy"),
    (144, "SAW_MVB", "Fatal", (1 << 5) | 1, 0x10, gh.RESET_GPU, "unhealthy"),
    # RLW_REMAP: 0x1-0x20 XID_154_EVAL (the driver's Xid 154 decides: a note), 0x40 a reset, 0x100 IGNORE.
    (145, "RLW_REMAP", "Nonfatal", 0x04, 0x08, gh.WATCH, "healthy"),
    (145, "RLW_REMAP", "Fatal", 0x04, 0x40, gh.RESET_GPU, "unhealthy"),
    (145, "RLW_REMAP", "Nonfatal", (4 << 5) | 2, 0x100, gh.NONE, "healthy"),
    # RLW_RXPIPE: IGNORE, but a reset with the "action 2" bit (bit 7 in V2, bit 10 in V1).
    (145, "RLW_RXPIPE", "Nonfatal", 0x06, 0x02, gh.NONE, "healthy"),
    (145, "RLW_RXPIPE", "Nonfatal", 0x80 | 0x06, 0x02, gh.RESET_GPU, "unhealthy"),
    (145, "RLW_RXPIPE", "Nonfatal", 0x400 | (6 << 5) | 2, 0x04, gh.RESET_GPU, "unhealthy"),
    # Two status bits: the worst of them.
    (145, "RLW_SRC_TRACK", "Fatal", 0x07, 0x02 | 0x10, gh.RESET_GPU, "unhealthy"),
    # The software-reported status is IGNORE for every unit listing it.
    (146, "TLW_RX/TLW_RX_PIPE1", "Nonfatal", 0x0b, 0x80000000, gh.NONE, "healthy"),
    (146, "TLW_TX/TLW_TX_PIPE0", "Fatal", 0x0c, 0x04, gh.RESET_GPU, "unhealthy"),
    (147, "TREX", "Nonfatal", 0x0e, 0x01, gh.NONE, "healthy"),
    (148, "NVLPW_CTRL/NVLPW", "Nonfatal", 0x0f, 0x80000000, gh.NONE, "healthy"),
    # NETIR: the interrupt and every listed link-down reason but 0x26 and 0x28 ask for a reset.
    (149, "NETIR/NETIR_INT", "Fatal", 0x18, 0x0, gh.RESET_GPU, "unhealthy"),
    (149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "Fatal", (0x21 << 20) | 0x11, 0x0, gh.RESET_GPU, "unhealthy"),
    (149, "NETIR_LINK_EVT", "Fatal", (0x21 << 20) | (14 << 5) | 6, 0x0, gh.RESET_GPU, "unhealthy"),
    (149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", "Fatal", (0x28 << 20) | 0x11, 0x0, gh.NONE, "healthy"),
    (149, "NETIR_BER_EVENT", "Nonfatal", 0x13, 0x03, gh.NONE, "healthy"),
    # MFDE's status is a value: 0x3 IGNORE, 0x5 a reset.
    (149, "NETIR_MFDE_EVENT", "Nonfatal", 0x14, 0x03, gh.NONE, "healthy"),
    (149, "NETIR_MFDE_EVENT", "Fatal", 0x14, 0x05, gh.RESET_GPU, "unhealthy"),
    (150, "MSE_WATCHDOG", "Fatal", 0x0, 0x0, gh.RESET_GPU, "unhealthy"),
    # Not in the decode: printed Fatal is a reset, otherwise look it up.
    (147, "TREX", "Fatal", 0x0e, 0x40, gh.RESET_GPU, "unhealthy"),
    (149, "NETIR_MFDE_EVENT", "Nonfatal", 0x14, 0x02, gh.LOOK_UP, "unknown"),
    (149, "NETIR_LINK_EVT", "Nonfatal", (0x3f << 20) | 0x11, 0x0, gh.LOOK_UP, "unknown"),
    (146, "TLW_CTRL", "Nonfatal", 0x01, 0x01, gh.LOOK_UP, "unknown"),
])
def test_an_nvlink5_xid_answers_the_catalogs_decode(code, unit, severity, intr, status, action, condition):
    for pid in (False, True):
        gpu = only_gpu(judged(log=nvlink5_line(code, unit, severity, intr, status, pid=pid)))
        assert (gpu["action"], gpu["condition"]) == (action, condition), pid
        (xid,) = gpu["xids"]
        assert xid["code"] == code and xid["meaning"].startswith(gh.XID_NAMES[code])


def test_an_nvlink5_xid_names_its_unit_and_is_unknown_without_its_line():
    gpu = only_gpu(judged(log=nvlink5_line(149, "NETIR_LINK_EVT", "Fatal", (0x21 << 20) | (14 << 5) | 6, 0)))
    assert gpu["reasons"] == ["Xid 149: NVLink NETIR error: NETIR_LINK_EVT, link-down reason 0x21 (the catalog asks "
                              "for a GPU reset)"]
    # The DCGM exporter's series carry the code only: the decode cannot be done there.
    for code in gh.XID_NVLINK5:
        meaning, action = gh.xid_meaning({"code": code, "text": ""})
        assert action == gh.LOOK_UP and "which this reading lacks" in meaning
    # A reset-class NVLink Xid ends with a later driver load like any other.
    log = nvlink5_line(144, "SAW_MVB", "Fatal", 0x01, 0x02) + LOAD % 4995.0
    assert only_gpu(judged(log=log))["condition"] == "healthy"


LOAD = "[%10.6f] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (builder@)\n"


def test_a_driver_load_after_a_reset_class_xid_ends_it():
    log = xid_line(4000.0, 48, "DBE (double bit error) ECC error.") + LOAD % 4100.0
    gpu = only_gpu(judged(log=log))
    assert (gpu["condition"], gpu["action"]) == ("healthy", gh.NONE)
    assert gpu["notes"] == ["Xid 48: double-bit ECC error (ended: the driver loaded again at 4100 s)"]
    # A load before the Xid ends nothing; a reboot-class Xid ends only with the boot.
    assert only_gpu(judged(log=LOAD % 3900.0 + xid_line(4000.0, 48, "DBE")))["condition"] == "unhealthy"
    assert only_gpu(judged(log=xid_line(4000.0, 79, "off the bus") + LOAD % 4100.0))["action"] == gh.REBOOT


def test_a_later_recovery_action_none_on_the_same_gpu_ends_a_reset_class_xid():
    log = (xid_line(4000.0, 119, "Timeout after 6s of waiting for RPC response from GPU0 GSP!")
           + "[ 4000.100000] NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
             "(GPU Reset Required)\n"
           + "[ 4200.000000] NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x1 (GPU Reset "
             "Required) to 0x0 (None)\n")
    gpu = only_gpu(judged(log=log))
    assert (gpu["condition"], gpu["action"]) == ("healthy", gh.NONE)
    other_gpu = log.replace("PCI:0000:00:06): 154, GPU recovery action changed from 0x1", "PCI:0000:0a:00): 154, "
                            "GPU recovery action changed from 0x1")
    assert only_gpu(judged(log=other_gpu))["condition"] == "unhealthy"


def test_an_xid_on_another_bus_is_unmatched():
    report = judged(log=xid_line(4990.0, 79, "GPU has fallen off the bus.", bus="0000:0a:00"))
    assert only_gpu(report)["condition"] == "healthy"
    assert [x["bus"] for x in report["unmatched_xids"]] == ["0000:0a:00"]


# --- GPUs nvidia-smi cannot reach -----------------------------------------------------

def without_gpus(xml):
    return re.sub(r"<gpu id=.*</gpu>", "", xml, flags=re.S)


def test_a_gpu_the_kernel_knows_and_nvidia_smi_does_not_report_fell_off_the_bus():
    gpu = only_gpu(judged(without_gpus(text("nvidia-smi-q.xml"))))
    assert (gpu["reported"], gpu["condition"], gpu["action"]) == (False, "unhealthy", gh.REBOOT)
    # The UUID comes from /proc (the second recorded machine's).
    assert gpu["uuid"] == "GPU-1b2c3d4e-0000-4000-8000-000000000002" and gpu["pci_bus"] == BUS


def test_an_excluded_gpu_is_not_fallen_off_the_bus():
    """A GPU excluded with NVreg_ExcludedGpus: /proc says so, nvidia-smi does not list it."""
    proc = proc_text().replace("GPU Excluded:\t No", "GPU Excluded:\t Yes")
    assert proc != proc_text()
    smi = gh.parse_smi_xml(without_gpus(text("nvidia-smi-q.xml")))
    report = gh.judge_gpus(smi, text("dmesg-nvrm.txt"), [proc], "5000 1", 3600)
    gpu = only_gpu(report)
    assert (gpu["excluded"], gpu["condition"], gpu["action"]) == (True, "unknown", gh.LOOK_UP)
    assert report["unhealthy"] == [] and "excluded from use" in gpu["reasons"][0]


def test_without_nvidia_smi_a_known_gpu_is_unknown_unless_the_log_says_it_is_lost():
    assert only_gpu(judged(False))["condition"] == "unknown"
    lost = "[ 4990.100000] NVRM: GPU 0000:00:06.0: GPU has fallen off the bus.\n"
    assert only_gpu(judged(False, log=lost))["action"] == gh.REBOOT


def test_nvidia_smi_naming_a_gpu_it_cannot_reach():
    xml = "Unable to determine the device handle for GPU0000:00:06.0: Unknown Error\n" + without_gpus(
        text("nvidia-smi-q.xml"))
    report = judged(xml, proc=False)
    gpu = only_gpu(report) if report["gpus"] else None
    # Without /proc the bus is known only from nvidia-smi's message: no GPU entry, nothing to judge by UUID.
    assert gpu is None and gh.smi_lost_buses(gh.parse_smi_xml(xml)["messages"]) == {BUS}


def test_the_kernel_log_names_a_lost_gpus_uuid():
    log = ("[ 4990.000000] NVRM: GPU at PCI:0000:00:06: GPU-1b2c3d4e-0000-4000-8000-000000000001\n"
           + xid_line(4990.1, 79, "GPU has fallen off the bus."))
    gpu = only_gpu(judged(without_gpus(text("nvidia-smi-q.xml")), log=log, proc=False))
    assert (gpu["uuid"], gpu["action"]) == (UUID, gh.REBOOT)


@pytest.mark.parametrize("bad", ["", "No devices were found", "<?xml version=\"1.0\" ?><nvidia_smi_log><gpu>"])
def test_text_that_is_not_the_report_is_refused(bad):
    with pytest.raises(gh.GpuHealthError):
        gh.parse_smi_xml(bad)


def test_bus_ids_of_every_source_agree():
    assert gh.bus_key("00000000:00:06.0") == gh.bus_key("0000:00:06") == gh.bus_key("0000:00:06.0") == BUS
    assert gh.bus_key("0000:AB:00.0") == "0000:ab:00"
    # Domains past 0xffff (more than four hex digits) stay apart from domain 0.
    assert gh.bus_key("00010000:01:00.0") == "10000:01:00" != gh.bus_key("00000000:01:00.0")
    assert gh.bus_key("0019:01:00") == gh.bus_key("00000019:01:00.0") == "0019:01:00"


def test_kernel_lines_in_the_shapes_the_driver_prints_them():
    log = ("NVRM: Xid (0000:03:00): 14, Channel 00000001\n"
           "[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 "
           "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n"
           "[111111.111] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
           "bus.\n")
    xids = gh.parse_xid_lines(log)["xids"]
    assert [(x["bus"], x["code"], x["time"]) for x in xids] == [
        ("0000:03:00", 14, None), ("0009:01:00", 149, 171167.620236), ("0000:05:00", 79, 111111.111)]
    assert gh.parse_xid_lines(text("dmesg-nvrm.txt"))["driver_loads"] == [{"time": 0.560217, "line": 0}]


# --- a third source of device health ---------------------------------------------------

def recorded_cluster():
    rec = os.path.join(FIXTURES, "device-health", "v1.36.3")
    out = []
    for name in ("resourceslices", "resourceclaims", "pods"):
        with open(os.path.join(rec, name + ".json")) as fh:
            out.append(json.load(fh)["items"])
    return out


def published_uuid(slices, pool, device):
    for item in slices:
        if item["spec"]["pool"]["name"] == pool:
            for dev in item["spec"]["devices"]:
                if dev["name"] == device:
                    return dev["attributes"]["uuid"]["string"]
    raise AssertionError("no %s/%s" % (pool, device))


def node_facts(xml, node, uuid=None):
    """dra_gpu_health_facts' facts of one node whose GPU (the recorded H100) carries the given uuid."""
    if uuid:
        xml = xml.replace(UUID, uuid)
    facts = gh.judge_gpus(gh.parse_smi_xml(xml), text("dmesg-nvrm.txt"), [], "5000 1", 3600)
    facts.update(node=node, available=True, kernel_log_read=True, errors=[])
    return facts


def test_an_unhealthy_gpu_makes_its_device_unhealthy_and_nothing_else():
    slices, claims, pods = recorded_cluster()
    uuid = published_uuid(slices, "node-000000", "gpu-1")
    facts = node_facts(variant(remapped_row_pending="Yes"), "node-000000", uuid)
    before = dh.device_health(slices, claims, pods, NOW)
    after = dh.device_health(slices, claims, pods, NOW, gpu_health=[facts])
    device = "gpu.example.com/node-000000/gpu-1"
    changed = set(d["id"] for d in after["unhealthy"]) - set(d["id"] for d in before["unhealthy"])
    assert changed == {device}
    entry = next(d for d in after["devices"] if d["id"] == device)
    assert entry["uuid"] == uuid and entry["gpu"]["condition"] == "unhealthy"
    assert entry["reasons"] == ["GPU %s on node-000000: a row remapping is pending (a GPU reset applies it) "
                                "(reset-gpu)" % uuid]
    assert after["gpus_unmatched"] == []


def test_a_healthy_gpu_makes_its_device_healthy_and_an_unknown_one_unknown():
    slices, claims, pods = recorded_cluster()
    uuid = published_uuid(slices, "node-000001", "gpu-3")
    facts = node_facts(text("nvidia-smi-q.xml"), "node-000001", uuid)
    healthy = dh.device_health(slices, claims, pods, NOW, gpu_health=[facts])
    entry = next(d for d in healthy["devices"] if d["uuid"] == uuid)
    assert entry["condition"] == "healthy"
    unknown_facts = {"node": "node-000001", "available": False, "gpus": [
        {"uuid": uuid, "condition": "unknown", "action": "none", "reasons": [], "notes": []}]}
    unknown = dh.device_health(slices, claims, pods, NOW, gpu_health=[unknown_facts])
    entry = next(d for d in unknown["devices"] if d["uuid"] == uuid)
    assert entry["condition"] == "unknown"


def test_an_unhealthy_gpu_no_device_names_is_a_problem():
    slices, claims, pods = recorded_cluster()
    facts = node_facts(variant(remapped_row_failure="Yes"), "gpu-node-9")
    report = dh.device_health(slices, claims, pods, NOW, gpu_health=[facts])
    assert [g["uuid"] for g in report["gpus_unmatched"]] == [UUID]
    assert any(UUID in line and "no DRA device publishes its uuid" in line for line in dh.problems(report, 600))


@pytest.mark.parametrize("bad,where", [
    ("not a list", "gpu_health must be a list"),
    ([{"node": "n"}], "gpu_health[0] is not a dra_gpu_health fact"),
    ([{"gpus": [{"uuid": "GPU-x", "condition": "sick"}]}], "gpu_health[0].gpus holds"),
])
def test_bad_gpu_health_is_refused_naming_the_entry(bad, where):
    slices, claims, pods = recorded_cluster()
    with pytest.raises(dh.HealthInputError, match=re.escape(where)):
        dh.device_health(slices, claims, pods, NOW, gpu_health=bad)


def test_the_remediation_taints_the_device_of_an_unhealthy_gpu():
    slices, claims, pods = recorded_cluster()
    uuid = published_uuid(slices, "node-000000", "gpu-2")
    facts = node_facts(variant(dram_uncorrectable=1), "node-000000", uuid)

    def taints(gpu_health):
        health = dh.device_health(slices, claims, pods, NOW, gpu_health=gpu_health)
        return set(a["id"] for a in rem.plan(health["devices"], [], NOW, 600, driver="gpu.example.com")
                   if a["action"] == "taint")

    # The recorded pods already report one device Unhealthy; the GPU's reading adds exactly its own device.
    assert taints([facts]) - taints(None) == {"gpu.example.com/node-000000/gpu-2"}


def test_a_mig_device_matches_its_physical_gpu_by_parent_uuid():
    """A MIG device as NVIDIA's DRA driver publishes it (type mig, uuid MIG-..., parentUUID the GPU's), added to a
    recorded pool: the GPU read on the node (and by the DCGM exporter, whose UUID label is the physical GPU's) makes
    it unhealthy, and the GPU is not unmatched."""
    slices, claims, pods = recorded_cluster()
    slices = json.loads(json.dumps(slices))
    pool = next(s for s in slices if s["spec"]["pool"]["name"] == "node-000000")
    pool["spec"]["devices"].append({"name": "gpu-0-mig-1g-10gb-0", "attributes": {
        "type": {"string": "mig"}, "uuid": {"string": "MIG-5c6d7e8f-0000-4000-8000-000000000001"},
        "parentUUID": {"string": UUID}, "profile": {"string": "1g.10gb"}}})
    facts = node_facts(variant(remapped_row_pending="Yes"), "node-000000")
    report = dh.device_health(slices, claims, pods, NOW, gpu_health=[facts])
    entry = next(d for d in report["devices"] if d["device"] == "gpu-0-mig-1g-10gb-0")
    assert (entry["uuid"], entry["gpu_uuid"], entry["condition"]) == (
        "MIG-5c6d7e8f-0000-4000-8000-000000000001", UUID, "unhealthy")
    assert report["gpus_unmatched"] == []


def test_an_unknown_gpu_says_why_on_its_device():
    slices, claims, pods = recorded_cluster()
    uuid = published_uuid(slices, "node-000001", "gpu-3")
    facts = gh.judge_gpus(gh.parse_smi_xml(text("nvidia-smi-q.xml").replace(UUID, uuid)),
                          xid_line(4990.0, 162, "Power smoothing"), [], "5000 1", 3600)
    facts.update(node="node-000001")
    entry = next(d for d in dh.device_health(slices, claims, pods, NOW, gpu_health=[facts])["devices"]
                 if d["uuid"] == uuid)
    assert entry["condition"] == "unknown"
    assert entry["reasons"] == ["GPU %s on node-000001: Xid 162: power smoothing circuitry re-engaged (look-up)" % uuid]
