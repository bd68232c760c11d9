"""Hardware discovery from recorded sysfs/procfs trees, bad trees, and this machine's own sysfs."""
import filecmp
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.dra.admin.plugins.module_utils.nodes import hardware
from conftest import UNIT

HERE = UNIT
HW = os.path.join(HERE, "fixtures", "hardware")
sys.path.insert(0, HW)
import recorded  # noqa: E402  (unpacks the recorded trees)
TREES = recorded.trees_dir()
GPU_NODE = os.path.join(TREES, "gpu-node")
CPU_NODE = os.path.join(TREES, "cpu-node")
STANDIN = os.path.join(HW, "bin", "nvidia-smi")
GPU_ADDRESSES = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                 "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]

sys.path.insert(0, HW)
import make_trees  # noqa: E402


def by_address(facts):
    return {d["address"]: d for d in facts["pci_devices"]}


def copy_tree(source, tmp_path):
    dest = str(tmp_path / "node")
    shutil.copytree(source, dest, symlinks=True)
    return dest


def device_dir(root, address):
    return os.path.realpath(os.path.join(root, "sys", "bus", "pci", "devices", address))


# --- the recorded trees ---------------------------------------------------------

def _compare_trees(left, right):
    """Differences between two trees: entries, file contents and symlink targets."""
    diffs = []
    for dirpath, dirnames, filenames in os.walk(left):
        rel = os.path.relpath(dirpath, left)
        other = os.path.join(right, rel)
        for name in sorted(dirnames + filenames):
            a, b = os.path.join(dirpath, name), os.path.join(other, name)
            if not os.path.lexists(b):
                diffs.append("only in committed tree: " + os.path.join(rel, name))
            elif os.path.islink(a) or os.path.islink(b):
                if not (os.path.islink(a) and os.path.islink(b)) or os.readlink(a) != os.readlink(b):
                    diffs.append("symlink differs: " + os.path.join(rel, name))
            elif os.path.isfile(a) and not filecmp.cmp(a, b, shallow=False):
                diffs.append("content differs: " + os.path.join(rel, name))
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(os.listdir(other)) if os.path.isdir(other) else []:
            if not os.path.lexists(os.path.join(dirpath, name)):
                diffs.append("only in generated tree: " + os.path.join(rel, name))
    return diffs


def test_committed_trees_are_what_the_generator_writes(tmp_path):
    make_trees.main([str(tmp_path)])
    for name in ("gpu-node", "cpu-node"):
        assert _compare_trees(os.path.join(TREES, name), str(tmp_path / name)) == []


def test_sysfs_links_in_trees_are_relative_symlinks():
    bus = os.path.join(GPU_NODE, "sys", "bus", "pci", "devices")
    for address in os.listdir(bus):
        link = os.path.join(bus, address)
        assert os.path.islink(link) and not os.readlink(link).startswith("/")
        assert os.path.isdir(link)
    for address in GPU_ADDRESSES:
        for name in ("driver", "iommu_group"):
            link = os.path.join(bus, address, name)
            assert os.path.islink(link) and not os.readlink(link).startswith("/")
            assert os.path.isdir(link), "%s of %s points nowhere" % (name, address)


def test_gpu_node_lists_every_pci_function_once():
    facts = hardware.discover(GPU_NODE, nvidia=None)
    listed = sorted(os.listdir(os.path.join(GPU_NODE, "sys", "bus", "pci", "devices")))
    assert [d["address"] for d in facts["pci_devices"]] == listed
    assert facts["errors"] == []


def test_gpu_node_gpus_with_numa_iommu_render_nodes_and_names():
    facts = hardware.discover(GPU_NODE)
    gpus = [d for d in facts["pci_devices"] if d["type"] == "gpu"]
    assert [g["address"] for g in gpus] == GPU_ADDRESSES
    assert {(g["vendor_id"], g["device_id"], g["class"], g["class_name"]) for g in gpus} == {
        ("10de", "2330", "0x030200", "3D controller")}
    assert {g["vendor_name"] for g in gpus} == {"NVIDIA Corporation"}
    assert {g["device_name"] for g in gpus} == {"GH100 [H100 SXM5 80GB]"}
    assert {g["driver"] for g in gpus} == {"nvidia"}
    assert [g["numa_node"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    groups = [g["iommu_group"] for g in gpus]
    assert all(isinstance(i, int) for i in groups) and len(set(groups)) == 8
    assert [g["render_nodes"] for g in gpus] == [["renderD%d" % n] for n in range(128, 136)]
    assert facts["pci_summary"]["gpu"] == {"functions": 8, "physical": 8, "virtual": 0}
    rendered = {r["name"]: r["pci_address"] for r in facts["render_nodes"]}
    assert rendered == dict(("renderD%d" % (128 + i), a) for i, a in enumerate(GPU_ADDRESSES))
    assert all(r["path"].startswith("/dev/dri/renderD") for r in facts["render_nodes"])


def test_bmc_display_and_nvswitches_are_not_gpus():
    devices = by_address(hardware.discover(GPU_NODE))
    bmc = devices["0000:02:00.0"]
    assert (bmc["type"], bmc["class_name"], bmc["driver"]) == ("bmc_vga", "VGA compatible controller", "ast")
    assert bmc["device_name"] == "ASPEED Graphics Family" and bmc["render_nodes"] == []
    switches = [d for d in devices.values() if d["device_id"] == "22a3"]
    assert len(switches) == 4 and {s["type"] for s in switches} == {"bridge"}
    assert {s["device_name"] for s in switches} == {"GH100 [H100 NVSwitch]"}


def test_gpu_node_sriov_nic_and_its_virtual_functions():
    devices = by_address(hardware.discover(GPU_NODE))
    pf = devices["0000:4b:00.0"]
    vfs = ["0000:4b:01.%d" % i for i in range(4)]
    assert pf["type"] == "network" and pf["driver"] == "ice" and not pf["virtual_function"]
    assert pf["sriov"] == {"total_vfs": 128, "num_vfs": 4, "vfs": vfs}
    assert pf["device_name"] == "Ethernet Controller E810-C for QSFP"
    assert pf["net_interfaces"] == ["ens6f0"]
    for index, address in enumerate(vfs):
        vf = devices[address]
        assert (vf["physfn"], vf["virtual_function"], vf["driver"], vf["sriov"]) == ("0000:4b:00.0", True, "iavf", None)
        assert vf["device_name"] == "Ethernet Adaptive Virtual Function"
        assert vf["net_interfaces"] == ["ens6f0v%d" % index]


def test_gpu_node_infiniband_hca_and_rdma_ports():
    facts = hardware.discover(GPU_NODE)
    hca = by_address(facts)["0000:29:00.0"]
    assert (hca["type"], hca["class_name"], hca["driver"]) == ("infiniband", "Infiniband controller", "mlx5_core")
    assert (hca["vendor_name"], hca["device_name"]) == ("Mellanox Technologies", "MT2910 Family [ConnectX-7]")
    assert hca["rdma_devices"] == ["mlx5_0"] and hca["net_interfaces"] == ["ibp41s0"]
    assert facts["rdma_devices"] == [{
        "name": "mlx5_0", "pci_address": "0000:29:00.0", "node_guid": "b83f:d203:00a1:2b40", "fw_ver": "28.39.1002",
        "ports": [{"port": 1, "state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand",
                   "rate": "400 Gb/sec (4X NDR)"}]}]


def test_gpu_node_names_come_from_misc_pci_ids_and_unknown_devices_stay_unnamed():
    facts = hardware.discover(GPU_NODE)
    assert facts["pci_ids"] == "/usr/share/misc/pci.ids"
    host = by_address(facts)["0000:00:00.0"]
    assert (host["vendor_name"], host["device_name"]) == ("Intel Corporation", None)
    assert host["driver"] is None and host["iommu_group"] is None


def test_gpu_node_cpu_and_numa_summary():
    facts = hardware.discover(GPU_NODE)
    assert facts["cpu"] == {"logical_cpus": 224, "sockets": 2, "cores": 112, "vendor": "GenuineIntel",
                            "model": "Intel(R) Xeon(R) Platinum 8480+", "online": "0-223", "online_cpus": 224}
    assert facts["numa"] == {"available": True, "nodes": [
        {"id": 0, "cpulist": "0-55,112-167", "cpus": 112, "memory_kb": 1056462848},
        {"id": 1, "cpulist": "56-111,168-223", "cpus": 112, "memory_kb": 1056462848}]}


def test_cpu_node_has_no_accelerators():
    facts = hardware.discover(CPU_NODE)
    assert facts["errors"] == []
    types = {d["type"] for d in facts["pci_devices"]}
    assert not types & {"gpu", "infiniband", "accelerator"}
    assert "bmc_vga" in types
    assert facts["render_nodes"] == [] and facts["rdma_devices"] == []
    assert os.listdir(os.path.join(CPU_NODE, "dev", "dri")) == ["card0"]
    nic = by_address(facts)["0000:41:00.0"]
    assert nic["sriov"] == {"total_vfs": 64, "num_vfs": 0, "vfs": []}
    assert facts["pci_ids"] == "/usr/share/hwdata/pci.ids"
    assert nic["device_name"] == "Ethernet Controller X710 for 10GbE SFP+"
    assert facts["cpu"]["logical_cpus"] == 64 and facts["cpu"]["sockets"] == 1
    assert [n["cpus"] for n in facts["numa"]["nodes"]] == [64]


def test_include_limits_sections():
    facts = hardware.discover(GPU_NODE, include=["numa"])
    assert facts["sections"] == ["numa"]
    assert "pci_devices" not in facts and "cpu" not in facts and facts["numa"]["available"]


# --- decoding and lookups ----------------------------------------------------------

@pytest.mark.parametrize("code,vendor,expected", [
    (0x030000, "10de", ("gpu", "VGA compatible controller")),
    (0x030000, "1a03", ("bmc_vga", "VGA compatible controller")),
    (0x030200, "1002", ("gpu", "3D controller")),
    (0x038000, "8086", ("gpu", "Display controller")),
    (0x020000, "8086", ("network", "Ethernet controller")),
    (0x020700, "15b3", ("infiniband", "Infiniband controller")),
    (0x120000, "1e52", ("accelerator", "Processing accelerators")),
    (0x0b4000, "8086", ("accelerator", "Co-processor")),
    (0x010802, "144d", ("storage", "Non-Volatile memory controller")),
    (0x0c0330, "8086", ("usb", "USB controller")),
    (0x128000, "1234", ("accelerator", "Processing accelerators")),
    (0xff0000, "1af4", ("other", None)),
])
def test_pci_class_decoding(code, vendor, expected):
    decoded = hardware.decode_pci_class(code, vendor)
    assert (decoded["type"], decoded["class_name"]) == expected
    assert decoded["class"] == "0x%06x" % code and decoded["prog_if"] == "%02x" % (code & 0xFF)


def test_pci_ids_lookup_skips_subsystem_lines_and_stops_past_wanted_vendors(tmp_path):
    ids = tmp_path / "pci.ids"
    ids.write_text("# comment\n0001  First\n10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n"
                   "\t\t10de 16c1  H100 SXM5 80GB\n1af4  Red Hat, Inc.\n\t1041  Virtio network device\n"
                   "20de  Past the wanted vendors\n10de  Out-of-order entry that must not be read\n"
                   "\t10de  Not a device either\nC 03  Display controller\n\t00  VGA compatible controller\n")
    vendors, devices = hardware.lookup_pci_names(str(ids), {"10de": {"2330", "10de"}, "1af4": {"1041", "1042"}})
    assert vendors == {"10de": "NVIDIA Corporation", "1af4": "Red Hat, Inc."}
    assert devices == {("10de", "2330"): "GH100 [H100 SXM5 80GB]", ("1af4", "1041"): "Virtio network device"}


def test_pci_ids_class_section_is_not_read_as_vendors(tmp_path):
    ids = tmp_path / "pci.ids"
    ids.write_text("8086  Intel Corporation\nC 03  Display controller\n\t00  VGA compatible controller\n")
    vendors, devices = hardware.lookup_pci_names(str(ids), {"c 03": {"00"}, "8086": {"0000"}})
    assert vendors == {"8086": "Intel Corporation"} and devices == {}


def test_no_pci_ids_installed_leaves_names_empty(tmp_path):
    root = copy_tree(CPU_NODE, tmp_path)
    os.remove(os.path.join(root, "usr", "share", "hwdata", "pci.ids"))
    facts = hardware.discover(root)
    assert facts["pci_ids"] is None and facts["errors"] == []
    assert {d["vendor_name"] for d in facts["pci_devices"]} == {None}
    assert {d["device_name"] for d in facts["pci_devices"]} == {None}


@pytest.mark.parametrize("text,cpus", [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("5", [5]), ("", [])])
def test_cpulist(text, cpus):
    assert hardware.parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["0-x", "3-1", "1,,2", "a"])
def test_bad_cpulist_raises_value_error(text):
    with pytest.raises(ValueError):
        hardware.parse_cpulist(text)


# --- bad trees: reported per item, never raised -------------------------------------

def errors_for(facts, section=None, item=None):
    return [e for e in facts["errors"] if (section is None or e["section"] == section)
            and (item is None or e["item"] == item)]


def test_root_without_sysfs_is_reported_not_raised(tmp_path):
    facts = hardware.discover(str(tmp_path))
    assert facts["pci_devices"] == [] and facts["render_nodes"] == [] and facts["rdma_devices"] == []
    assert facts["numa"] == {"available": False, "nodes": []}
    pci = errors_for(facts, "pci")
    assert len(pci) == 1 and pci[0]["path"] == "/sys/bus/pci/devices" and "missing" in pci[0]["error"]
    cpu = errors_for(facts, "cpu")
    assert [e["path"] for e in cpu] == ["/proc/cpuinfo"]
    assert facts["cpu"]["logical_cpus"] == 0


def test_nonexistent_root_is_one_error():
    facts = hardware.discover("/nonexistent/root/for/discovery")
    assert [e["section"] for e in facts["errors"]] == ["root"]
    assert "pci_devices" not in facts


def test_directory_where_a_file_is_expected(tmp_path):
    root = copy_tree(GPU_NODE, tmp_path)
    class_file = os.path.join(device_dir(root, "0000:18:00.0"), "class")
    os.remove(class_file)
    os.mkdir(class_file)
    facts = hardware.discover(root)
    broken = by_address(facts)["0000:18:00.0"]
    assert broken["type"] is None and broken["class"] is None
    assert broken["vendor_id"] == "10de" and broken["driver"] == "nvidia"
    errors = errors_for(facts, "pci", "0000:18:00.0")
    assert errors == [{"section": "pci", "item": "0000:18:00.0", "error": "is a directory, expected a file",
                       "path": "/sys/bus/pci/devices/0000:18:00.0/class"}]
    assert len(facts["errors"]) == 1
    assert [d["address"] for d in facts["pci_devices"] if d["type"] == "gpu"] == GPU_ADDRESSES[1:]


def test_dangling_device_symlink_keeps_the_entry_and_reports_it(tmp_path):
    root = copy_tree(GPU_NODE, tmp_path)
    shutil.rmtree(device_dir(root, "0000:2a:00.0"))
    facts = hardware.discover(root)
    listed = sorted(os.listdir(os.path.join(root, "sys", "bus", "pci", "devices")))
    assert [d["address"] for d in facts["pci_devices"]] == listed
    entry = by_address(facts)["0000:2a:00.0"]
    assert entry["readable"] is False and entry["type"] is None
    assert [e["item"] for e in errors_for(facts, "pci")] == ["0000:2a:00.0"]
    # The DRM class entry of that GPU now points nowhere as well.
    render = {r["name"]: r["pci_address"] for r in facts["render_nodes"]}
    assert render["renderD129"] is None and [e["item"] for e in errors_for(facts, "render_nodes")] == ["renderD129"]


def test_dangling_attribute_symlink(tmp_path):
    root = copy_tree(GPU_NODE, tmp_path)
    numa = os.path.join(device_dir(root, "0000:9a:00.0"), "numa_node")
    os.remove(numa)
    os.symlink("../gone/numa_node", numa)
    facts = hardware.discover(root)
    assert by_address(facts)["0000:9a:00.0"]["numa_node"] is None
    assert by_address(facts)["0000:9a:00.0"]["type"] == "gpu"
    assert [e["error"] for e in facts["errors"]] == ["no such file (dangling symlink or removed device)"]


def test_file_that_cannot_be_opened(tmp_path):
    root = copy_tree(GPU_NODE, tmp_path)
    vendor = os.path.join(device_dir(root, "0000:ab:00.0"), "vendor")
    if os.geteuid() == 0:
        # root reads mode-000 files; a symlink loop fails for every user.
        os.remove(vendor)
        os.symlink("vendor", vendor)
    else:
        os.chmod(vendor, 0)
    facts = hardware.discover(root)
    gpu = by_address(facts)["0000:ab:00.0"]
    assert gpu["vendor_id"] is None and gpu["device_id"] == "2330" and gpu["type"] == "gpu"
    errors = errors_for(facts, "pci", "0000:ab:00.0")
    assert len(errors) == 1 and errors[0]["path"].endswith("/0000:ab:00.0/vendor")


def test_malformed_values_are_reported(tmp_path):
    root = copy_tree(GPU_NODE, tmp_path)
    gpu = device_dir(root, "0000:ba:00.0")
    with open(os.path.join(gpu, "device"), "w") as handle:
        handle.write("0xzz\n")
    with open(os.path.join(gpu, "numa_node"), "w") as handle:
        handle.write("one\n")
    with open(os.path.join(root, "sys", "devices", "system", "node", "node1", "cpulist"), "w") as handle:
        handle.write("56-x\n")
    facts = hardware.discover(root)
    entry = by_address(facts)["0000:ba:00.0"]
    assert entry["device_id"] is None and entry["numa_node"] is None and entry["type"] == "gpu"
    assert sorted(e["error"] for e in errors_for(facts, "pci")) == ["not an integer: '0xzz'", "not an integer: 'one'"]
    node1 = facts["numa"]["nodes"][1]
    assert node1["cpulist"] == "56-x" and node1["cpus"] is None
    assert len(errors_for(facts, "numa", "node1")) == 1


def test_driver_link_that_is_a_file(tmp_path):
    root = copy_tree(CPU_NODE, tmp_path)
    link = os.path.join(device_dir(root, "0000:41:00.0"), "driver")
    os.remove(link)
    with open(link, "w") as handle:
        handle.write("i40e\n")
    facts = hardware.discover(root)
    assert by_address(facts)["0000:41:00.0"]["driver"] is None
    assert [e["error"] for e in facts["errors"]] == ["expected a symlink"]


# --- nvidia-smi ------------------------------------------------------------------

def run_standin(mode):
    env = dict(os.environ, DRA_TEST_NVIDIA_SMI_MODE=mode)
    res = subprocess.run([STANDIN] + hardware.NVIDIA_SMI_ARGS, env=env, capture_output=True, encoding="utf-8",
                         errors="replace", check=False)
    return hardware.nvidia_report(STANDIN, res.returncode, res.stdout, res.stderr)


def test_nvidia_smi_normal_output():
    report = run_standin("normal")
    assert report["available"] and report["errors"] == [] and report["reason"] is None
    assert [g["index"] for g in report["gpus"]] == list(range(8))
    assert len({g["uuid"] for g in report["gpus"]}) == 8
    assert all(g["uuid"].startswith("GPU-") for g in report["gpus"])
    assert {(g["name"], g["memory_mib"], g["mig_mode"]) for g in report["gpus"]} == {
        ("NVIDIA H100 80GB HBM3", 81559, "Disabled")}


def test_nvidia_smi_mig_enabled():
    report = run_standin("mig")
    assert [g["mig_mode"] for g in report["gpus"]] == ["Enabled"] * 4 + ["Disabled"] * 4
    assert report["errors"] == []


@pytest.mark.parametrize("mode,rc,message", [
    ("error", 9, "couldn't communicate with the NVIDIA driver"),
    ("mismatch", 18, "Driver/library version mismatch"),
    ("no-devices", 6, "No devices were found"),
])
def test_nvidia_smi_failures_make_the_section_unavailable(mode, rc, message):
    report = run_standin(mode)
    assert not report["available"] and report["gpus"] == []
    assert report["reason"].startswith("nvidia-smi exited with %d: " % rc) and message in report["reason"]
    assert len(report["errors"]) == 1 and report["errors"][0]["error"] == report["reason"]


def test_nvidia_smi_lost_gpu_keeps_the_other_rows():
    report = run_standin("gpu-lost")
    assert report["available"] and [g["index"] for g in report["gpus"]] == [0, 1, 2, 3, 4, 6, 7]
    assert [e["error"] for e in report["errors"]] == [
        "nvidia-smi: Unable to determine the device handle for GPU0000:AB:00.0: Unknown Error"]


def test_nvidia_smi_malformed_rows_are_reported_per_line():
    report = run_standin("malformed")
    # A row with one bad value keeps the GPU (its uuid is good) without that value.
    assert [g["index"] for g in report["gpus"]] == [0, 4, 5]
    assert report["gpus"][1]["memory_mib"] is None and report["gpus"][1]["mig_mode"] == "Disabled"
    assert report["gpus"][2]["memory_mib"] is None and report["gpus"][2]["mig_mode"] is None
    by_line = dict((e["item"], e["error"]) for e in report["errors"])
    assert sorted(by_line) == ["line 2", "line 3", "line 4", "line 5", "line 7"]
    assert by_line["line 2"].startswith("expected 5 comma-separated fields")
    assert by_line["line 3"].startswith("index is not a number")
    assert by_line["line 4"].startswith("uuid does not look like")
    assert by_line["line 5"].startswith("memory.total is not a number")


def test_nvidia_smi_standin_rejects_other_queries():
    res = subprocess.run([STANDIN, "-L"], capture_output=True, text=True, check=False)
    assert res.returncode == 2


def test_nvidia_product_name_with_a_comma():
    gpus, problems = hardware.parse_nvidia_smi("0, GPU-1, Quadro RTX 8000, Rev A, 48601, [N/A]\n")
    assert problems == [] and gpus[0]["name"] == "Quadro RTX 8000, Rev A" and gpus[0]["memory_mib"] == 48601


def test_nvidia_section_when_tool_is_absent():
    facts = hardware.discover(CPU_NODE, nvidia=hardware.nvidia_report(None, 0, "", ""))
    assert facts["nvidia"] == {"available": False, "command": None, "gpus": [], "reason": "nvidia-smi not found"}
    assert facts["errors"] == []


def test_nvidia_errors_join_the_fact_error_list():
    facts = hardware.discover(GPU_NODE, include=["nvidia"], nvidia=run_standin("error"))
    assert "errors" not in facts["nvidia"] and [e["section"] for e in facts["errors"]] == ["nvidia"]


# --- a large tree and the real machine -----------------------------------------------

def test_large_generated_tree(tmp_path):
    made = make_trees.large_tree(str(tmp_path), 256)
    facts = hardware.discover(str(tmp_path), include=["pci", "render_nodes", "rdma"])
    assert made == 256 and len(facts["pci_devices"]) == 256 and facts["errors"] == []
    virtual = [d for d in facts["pci_devices"] if d["virtual_function"]]
    parents = {d["physfn"] for d in virtual}
    assert virtual and all(by_address(facts)[p]["sriov"]["num_vfs"] == 7 for p in parents)
    assert sum(1 for d in facts["pci_devices"] if d["vendor_name"]) > 0


def test_this_machine_pci_devices_are_exactly_sysfs():
    bus = "/sys/bus/pci/devices"
    assert os.path.isdir(bus), "this machine exposes no PCI bus in sysfs"
    facts = hardware.discover("/", include=["pci"])
    assert [d["address"] for d in facts["pci_devices"]] == sorted(os.listdir(bus))
    for device in facts["pci_devices"]:
        with open(os.path.join(bus, device["address"], "vendor")) as handle:
            assert device["vendor_id"] == "%04x" % int(handle.read(), 16)
        with open(os.path.join(bus, device["address"], "class")) as handle:
            assert device["class"] == "0x%06x" % int(handle.read(), 16)
        driver = os.path.join(bus, device["address"], "driver")
        expected = os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None
        assert device["driver"] == expected
    assert [e for e in facts["errors"] if e["section"] == "pci"] == []


@pytest.mark.parametrize("gpus", [0, 1, 3, 12])
def test_generated_gpu_node_with_other_gpu_counts(tmp_path, gpus):
    make_trees.gpu_node(str(tmp_path), gpus)
    facts = hardware.discover(str(tmp_path))
    found = [d for d in facts["pci_devices"] if d["type"] == "gpu"]
    assert len(found) == gpus and facts["errors"] == []
    assert len(facts["render_nodes"]) == gpus
    assert sorted(d["numa_node"] for d in found) == [0] * ((gpus + 1) // 2) + [1] * (gpus // 2)
