"""dra_gpu_health_facts run as Ansible runs it (a process with its arguments in a JSON file), with the nvidia-smi
stand-in replaying the real H100's recorded report (or a variant), the kernel log read by a command given, and a
/proc tree written here."""
import os

import pytest
import module_harness
from conftest import FIXTURES, ROOT

MODULE = os.path.join(ROOT, "plugins", "modules", "dra_gpu_health_facts.py")
COLLECTIONS = os.path.join(ROOT, ".tmp", "collections")
GPU = os.path.join(FIXTURES, "gpu-health")
H100 = os.path.join(GPU, "h100")
STANDIN = os.path.join(GPU, "bin", "nvidia-smi")
UUID = "GPU-1b2c3d4e-0000-4000-8000-000000000001"


def node_root(tmp_path, uptime="5000.00 100.00"):
    """A root with the recorded /proc/driver/nvidia/gpus/<bus>/information and /proc/uptime."""
    root = tmp_path / "root"
    info = root / "proc" / "driver" / "nvidia" / "gpus" / "0000:00:06.0"
    info.mkdir(parents=True, exist_ok=True)
    with open(os.path.join(H100, "proc-gpu-information.txt")) as fh:
        info.joinpath("information").write_text("".join(l for l in fh if not l.startswith("==")))
    root.joinpath("proc", "uptime").write_text(uptime + "\n")
    return str(root)


def run(tmp_path, args, xml=None, rc=0, stderr="", check_mode=False):
    env = dict(os.environ, PYTHONPATH=COLLECTIONS, DRA_TEST_SMI_XML=xml or os.path.join(H100, "nvidia-smi-q.xml"),
               DRA_TEST_SMI_RC=str(rc), DRA_TEST_SMI_STDERR=stderr)
    args = dict({"nvidia_smi": STANDIN, "kernel_log": ["cat", os.path.join(H100, "dmesg-nvrm.txt")],
                 "root": node_root(tmp_path)}, **args)
    return module_harness.run_module_process(MODULE, args, tmp_path, env, check_mode)


def test_the_recorded_h100_read_as_on_its_node(tmp_path):
    result = run(tmp_path, {"node_name": "gpu-node-1"})
    assert result["changed"] is False and not result.get("failed")
    facts = result["ansible_facts"]["dra_gpu_health"]
    assert (facts["node"], facts["available"], facts["kernel_log_read"], facts["errors"]) == (
        "gpu-node-1", True, True, [])
    (gpu,) = facts["gpus"]
    assert (gpu["uuid"], gpu["condition"], gpu["action"]) == (UUID, "healthy", "none")


def test_a_variant_with_an_xid_in_the_log(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("[ 4800.000000] NVRM: Xid (PCI:0000:00:06): 48, pid=99, name=train, DBE (double bit error).\n")
    facts = run(tmp_path, {"kernel_log": ["cat", str(log)]})["ansible_facts"]["dra_gpu_health"]
    assert facts["unhealthy"] == [UUID]
    assert facts["gpus"][0]["reasons"] == ["Xid 48: double-bit ECC error"]
    # The same in check mode: the module only reads.
    checked = run(tmp_path, {"kernel_log": ["cat", str(log)]}, check_mode=True)["ansible_facts"]["dra_gpu_health"]
    assert checked["unhealthy"] == [UUID]


def test_nvidia_smi_failing_leaves_the_kernels_gpu_unknown(tmp_path):
    no_report = tmp_path / "empty.txt"
    no_report.write_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    result = run(tmp_path, {}, xml=str(no_report), rc=9)
    facts = result["ansible_facts"]["dra_gpu_health"]
    assert not result.get("failed") and facts["available"] is False
    assert "exited with 9: NVIDIA-SMI has failed" in facts["errors"][0]
    assert [g["condition"] for g in facts["gpus"]] == ["unknown"]


def test_a_kernel_log_that_cannot_be_read_is_reported(tmp_path):
    facts = run(tmp_path, {"kernel_log": ["cat", "/nonexistent/kern.log"]})["ansible_facts"]["dra_gpu_health"]
    assert facts["kernel_log_read"] is False
    assert facts["errors"][0].startswith("cat /nonexistent/kern.log exited with 1")
    skipped = run(tmp_path, {"kernel_log": [], "nvidia_smi": ""})["ansible_facts"]["dra_gpu_health"]
    assert (skipped["kernel_log_read"], skipped["available"], skipped["errors"]) == (False, False, [])


@pytest.mark.parametrize("args,message", [
    ({"xid_window": -1}, "xid_window is -1"),
    ({"root": "/nonexistent-root"}, "root /nonexistent-root is not a directory"),
])
def test_bad_input_is_refused_naming_the_option(tmp_path, args, message):
    result = run(tmp_path, args)
    assert result.get("failed") and message in result["msg"]
