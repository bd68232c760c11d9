"""dra_hardware_facts run as Ansible runs it (a process with its arguments in a JSON file), with the
nvidia-smi stand-in on PATH."""
import os
import sys

import pytest
import module_harness
from conftest import ROOT, UNIT

HERE = UNIT
MODULE = os.path.join(ROOT, "plugins", "modules", "dra_hardware_facts.py")
COLLECTIONS = os.path.join(ROOT, ".tmp", "collections")
HW = os.path.join(HERE, "fixtures", "hardware")
sys.path.insert(0, HW)
import recorded  # noqa: E402  (unpacks the recorded trees)
GPU_NODE = os.path.join(recorded.trees_dir(), "gpu-node")
CPU_NODE = os.path.join(recorded.trees_dir(), "cpu-node")
STANDIN_BIN = os.path.join(HW, "bin")


def run_module(tmp_path, args, mode=None, path=None, check_mode=False):
    # The shared run_module_process (the module as Ansible runs it, a process), with the nvidia-smi stand-in first
    # on PATH (or the PATH given) and its mode in DRA_TEST_NVIDIA_SMI_MODE.
    env = dict(os.environ, PYTHONPATH=COLLECTIONS, PATH=path if path is not None else
               STANDIN_BIN + os.pathsep + os.environ["PATH"])
    env.pop("DRA_TEST_NVIDIA_SMI_MODE", None)
    if mode:
        env["DRA_TEST_NVIDIA_SMI_MODE"] = mode
    return module_harness.run_module_process(MODULE, args, tmp_path, env, check_mode)


def test_gpu_node_with_nvidia_smi_on_path(tmp_path):
    result = run_module(tmp_path, {"root": GPU_NODE})
    assert result["changed"] is False and not result.get("failed")
    hw = result["ansible_facts"]["dra_hardware"]
    assert hw["errors"] == []
    assert hw["nvidia"]["available"] and hw["nvidia"]["command"] == os.path.join(STANDIN_BIN, "nvidia-smi")
    assert len(hw["nvidia"]["gpus"]) == 8
    assert len([d for d in hw["pci_devices"] if d["type"] == "gpu"]) == 8


def test_mig_mode_is_reported(tmp_path):
    hw = run_module(tmp_path, {"root": GPU_NODE, "include": ["nvidia"]}, mode="mig")["ansible_facts"]["dra_hardware"]
    assert [g["mig_mode"] for g in hw["nvidia"]["gpus"]] == ["Enabled"] * 4 + ["Disabled"] * 4
    assert hw["sections"] == ["nvidia"] and "pci_devices" not in hw


@pytest.mark.parametrize("mode", ["error", "mismatch", "malformed"])
def test_failing_or_malformed_nvidia_smi_does_not_fail_the_module(tmp_path, mode):
    result = run_module(tmp_path, {"root": GPU_NODE}, mode=mode)
    assert not result.get("failed")
    hw = result["ansible_facts"]["dra_hardware"]
    assert [e for e in hw["errors"] if e["section"] == "nvidia"]
    assert {e["section"] for e in hw["errors"]} == {"nvidia"}
    assert len(hw["pci_devices"]) == len(os.listdir(os.path.join(GPU_NODE, "sys", "bus", "pci", "devices")))


def test_absent_nvidia_smi_is_reported_not_an_error(tmp_path):
    result = run_module(tmp_path, {"root": CPU_NODE}, path="/nonexistent-bin")
    hw = result["ansible_facts"]["dra_hardware"]
    assert not result.get("failed") and hw["errors"] == []
    assert hw["nvidia"] == {"available": False, "command": None, "gpus": [], "reason": "nvidia-smi not found on PATH"}


def test_nvidia_smi_by_path_and_skipped(tmp_path):
    # PATH without the stand-in's directory.
    by_path = run_module(tmp_path, {"root": CPU_NODE, "nvidia_smi": os.path.join(STANDIN_BIN, "nvidia-smi")},
                         path="/usr/bin:/bin")
    assert len(by_path["ansible_facts"]["dra_hardware"]["nvidia"]["gpus"]) == 8
    missing = run_module(tmp_path, {"root": CPU_NODE, "nvidia_smi": "/opt/none/nvidia-smi"})
    assert missing["ansible_facts"]["dra_hardware"]["nvidia"]["reason"] == "/opt/none/nvidia-smi not found"
    skipped = run_module(tmp_path, {"root": CPU_NODE, "nvidia_smi": ""})
    assert skipped["ansible_facts"]["dra_hardware"]["nvidia"]["reason"] == "skipped (nvidia_smi is empty)"


def test_check_mode_gives_the_same_facts(tmp_path):
    normal = run_module(tmp_path, {"root": GPU_NODE})
    checked = run_module(tmp_path, {"root": GPU_NODE}, check_mode=True)
    assert checked["ansible_facts"] == normal["ansible_facts"] and checked["changed"] is False


def test_root_that_is_not_a_directory_fails_with_a_message(tmp_path):
    result = run_module(tmp_path, {"root": str(tmp_path / "missing")})
    assert result["failed"] and "is not a directory" in result["msg"]


def test_root_without_sysfs_reports_items(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_module(tmp_path, {"root": str(empty), "nvidia_smi": ""})
    hw = result["ansible_facts"]["dra_hardware"]
    assert not result.get("failed") and hw["pci_devices"] == []
    expected = {("pci", "/sys/bus/pci/devices"), ("cpu", "/proc/cpuinfo")}
    assert {(e["section"], e["path"]) for e in hw["errors"]} == expected


def test_unknown_section_is_rejected(tmp_path):
    result = run_module(tmp_path, {"root": GPU_NODE, "include": ["pci", "usb"]})
    assert result["failed"] and "usb" in result["msg"]


def test_this_machine_module_lists_exactly_sysfs_pci_devices(tmp_path):
    bus = "/sys/bus/pci/devices"
    assert os.path.isdir(bus), "this machine exposes no PCI bus in sysfs"
    result = run_module(tmp_path, {"include": ["pci"]})
    hw = result["ansible_facts"]["dra_hardware"]
    assert hw["root"] == "/"
    assert [d["address"] for d in hw["pci_devices"]] == sorted(os.listdir(bus))
