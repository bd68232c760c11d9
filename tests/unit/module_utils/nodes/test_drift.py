"""Drift between recorded node hardware and ResourceSlices, in every served API shape."""
import copy
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.dra.admin.plugins.module_utils.nodes import drift as drift_rules
from ansible_collections.dra.admin.plugins.module_utils.nodes import hardware
from ansible_collections.dra.admin.plugins.module_utils.kube import slices as slice_rules
from conftest import UNIT

HERE = UNIT
HW = os.path.join(HERE, "fixtures", "hardware")
sys.path.insert(0, HW)
import recorded  # noqa: E402  (unpacks the recorded trees)
GPU_NODE = os.path.join(recorded.trees_dir(), "gpu-node")
CPU_NODE = os.path.join(recorded.trees_dir(), "cpu-node")
STANDIN = os.path.join(HW, "bin", "nvidia-smi")
NODE = "gpu-node-17"

sys.path.insert(0, HW)
import make_trees  # noqa: E402


def nvidia(mode):
    env = dict(os.environ, DRA_TEST_NVIDIA_SMI_MODE=mode)
    res = subprocess.run([STANDIN] + hardware.NVIDIA_SMI_ARGS, env=env, capture_output=True, encoding="utf-8",
                         errors="replace", check=False)
    return hardware.nvidia_report(STANDIN, res.returncode, res.stdout, res.stderr)


@pytest.fixture(scope="module")
def gpu_facts():
    return hardware.discover(GPU_NODE, nvidia=nvidia("normal"))


@pytest.fixture(scope="module")
def cpu_facts():
    return hardware.discover(CPU_NODE, nvidia=hardware.nvidia_report(None, 0, "", ""))


def attributes(api_version, values):
    kinds = {str: "string", int: "int", bool: "bool"}
    out = {}
    for name, value in values.items():
        kind = "version" if name == "driverVersion" else kinds[type(value)]
        out[name] = {kind: value}
    return out


def device(api_version, name, values):
    if api_version == "v1beta1":
        return {"name": name, "basic": {"attributes": attributes(api_version, values)}}
    return {"name": name, "attributes": attributes(api_version, values)}


def example_slice(api_version, node, count, generation=1, driver="gpu.example.com", pool=None, slice_count=1,
                  start=0):
    """A slice shaped as the example driver publishes it."""
    devices = [device(api_version, "gpu-%d" % i, {"index": i, "uuid": "gpu-%08x-0000-0000-0000-%012d" % (i, i),
                                                  "model": "LATEST-GPU-MODEL", "driverVersion": "1.0.0"})
               for i in range(start, start + count)]
    return {"apiVersion": "resource.k8s.io/%s" % api_version, "kind": "ResourceSlice",
            "metadata": {"name": "%s-%s-%d-%d" % (node, driver, generation, start)},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": slice_count},
                     "devices": devices}}


def nvidia_slice(api_version, node, uuids, mig_uuids=()):
    devices = [device(api_version, "gpu-%d" % i, {"type": "gpu", "uuid": u, "index": i,
                                                  "productName": "NVIDIA H100 80GB HBM3"})
               for i, u in enumerate(uuids)]
    devices += [device(api_version, "gpu-0-mig-%d" % i, {"type": "mig", "uuid": u, "parentUUID": uuids[0]})
                for i, u in enumerate(mig_uuids)]
    return {"apiVersion": "resource.k8s.io/%s" % api_version, "kind": "ResourceSlice",
            "metadata": {"name": node + "-gpu.nvidia.com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


API_VERSIONS = ["v1", "v1beta2", "v1beta1"]
EXAMPLE = [{"name": "gpu.example.com"}]
NVIDIA = [{"name": "gpu.nvidia.com"}]


def only(result):
    assert len(result["drivers"]) == 1
    return result["drivers"][0]


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_equal_counts_are_clean(gpu_facts, api_version):
    result = drift_rules.compare_node(gpu_facts, [example_slice(api_version, NODE, 8)], NODE, EXAMPLE)
    entry = only(result)
    assert result["drift"] is False and result["node"] == NODE
    assert (entry["method"], entry["hardware"], entry["published"], entry["matching"], entry["missing"],
            entry["extra"], entry["status"]) == ("count", 8, 8, 8, 0, 0, "clean")
    assert entry["published_names"] == ["gpu-%d" % i for i in range(8)]


@pytest.mark.parametrize("published,missing,extra,status", [
    (6, 2, 0, "missing"), (10, 0, 2, "extra"), (1, 7, 0, "missing")])
def test_count_drift_numbers(gpu_facts, published, missing, extra, status):
    entry = only(drift_rules.compare_node(gpu_facts, [example_slice("v1", NODE, published)], NODE, EXAMPLE))
    assert (entry["hardware"], entry["published"], entry["matching"], entry["missing"], entry["extra"]) == (
        8, published, min(8, published), missing, extra)
    assert entry["drift"] is True and entry["status"] == status


def test_driver_publishing_nothing_on_a_gpu_node(gpu_facts):
    other = example_slice("v1", "other-node", 8)
    result = drift_rules.compare_node(gpu_facts, [other], NODE, EXAMPLE)
    entry = only(result)
    assert (entry["slices"], entry["published"], entry["missing"], entry["status"]) == (0, 0, 8, "no_slices")
    assert result["drift"] is True


def test_gpus_published_for_a_node_without_accelerators(cpu_facts):
    entry = only(drift_rules.compare_node(cpu_facts, [example_slice("v1", NODE, 8)], NODE, EXAMPLE))
    assert (entry["hardware"], entry["published"], entry["extra"], entry["status"]) == (0, 8, 8, "extra")
    assert entry["hardware_addresses"] == []


def test_node_without_hardware_or_slices_is_clean(cpu_facts):
    entry = only(drift_rules.compare_node(cpu_facts, [], NODE, EXAMPLE))
    assert (entry["hardware"], entry["published"], entry["status"], entry["drift"]) == (0, 0, "clean", False)


def test_only_the_newest_pool_generation_counts(gpu_facts):
    slices = [example_slice("v1", NODE, 8, generation=1), example_slice("v1", NODE, 6, generation=2)]
    entry = only(drift_rules.compare_node(gpu_facts, slices, NODE, EXAMPLE))
    assert (entry["slices"], entry["published"], entry["missing"]) == (1, 6, 2)


def test_pool_split_over_slices_and_incomplete_pool_note(gpu_facts):
    split = [example_slice("v1", NODE, 4, slice_count=2), example_slice("v1", NODE, 4, slice_count=2, start=4)]
    entry = only(drift_rules.compare_node(gpu_facts, split, NODE, EXAMPLE))
    assert (entry["slices"], entry["published"], entry["status"], entry["notes"]) == (2, 8, "clean", [])
    entry = only(drift_rules.compare_node(gpu_facts, split[:1], NODE, EXAMPLE))
    assert entry["missing"] == 4 and len(entry["notes"]) == 1 and "incomplete (1 of 2 slices)" in entry["notes"][0]


def test_other_nodes_and_drivers_are_ignored(gpu_facts):
    slices = [example_slice("v1", NODE, 8), example_slice("v1", "other-node", 3),
              example_slice("v1", NODE, 5, driver="net.example.com")]
    entry = only(drift_rules.compare_node(gpu_facts, slices, NODE, EXAMPLE))
    assert (entry["slices"], entry["published"], entry["status"]) == (1, 8, "clean")


def test_drivers_default_to_those_in_the_slices(gpu_facts):
    slices = [example_slice("v1", "other-node", 8), example_slice("v1", NODE, 2, driver="net.example.com")]
    result = drift_rules.compare_node(gpu_facts, slices, NODE)
    assert [d["driver"] for d in result["drivers"]] == ["gpu.example.com", "net.example.com"]
    assert result["drivers"][0]["status"] == "no_slices"


def test_profile_for_sriov_virtual_functions(gpu_facts):
    profile = [{"name": "sriovnetwork.example.com", "pci_types": ["network"], "functions": "virtual",
                "pci_vendors": ["0x8086"]}]
    slices = [example_slice("v1", NODE, 4, driver="sriovnetwork.example.com")]
    entry = only(drift_rules.compare_node(gpu_facts, slices, NODE, profile))
    assert entry["hardware_addresses"] == ["0000:4b:01.%d" % i for i in range(4)] and entry["status"] == "clean"


def test_profile_by_pci_address(gpu_facts):
    profile = [{"name": "rdma.example.com", "pci_types": ["infiniband"], "id_attribute": "pciBusID",
                "hardware_id": "pci_address"}]
    published = example_slice("v1", NODE, 0, driver="rdma.example.com")
    published["spec"]["devices"] = [device("v1", "hca-0", {"pciBusID": "0000:29:00.0"}),
                                    device("v1", "hca-1", {"pciBusID": "0000:c3:00.0"})]
    entry = only(drift_rules.compare_node(gpu_facts, [published], NODE, profile))
    assert entry["method"] == "id"
    assert (entry["matching_ids"], entry["missing_ids"], entry["extra_ids"]) == (["0000:29:00.0"], [], ["0000:c3:00.0"])


# --- matching by NVIDIA GPU uuid ----------------------------------------------------------

@pytest.fixture(scope="module")
def uuids(gpu_facts):
    return [g["uuid"] for g in gpu_facts["nvidia"]["gpus"]]


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_uuids_all_published_is_clean(gpu_facts, uuids, api_version):
    entry = only(drift_rules.compare_node(gpu_facts, [nvidia_slice(api_version, NODE, uuids)], NODE, NVIDIA))
    assert entry["method"] == "id" and entry["status"] == "clean"
    assert entry["matching_ids"] == sorted(uuids) and entry["notes"] == []


def test_uuid_not_published_is_missing_by_id(gpu_facts, uuids):
    entry = only(drift_rules.compare_node(gpu_facts, [nvidia_slice("v1", NODE, uuids[:3] + uuids[4:])], NODE, NVIDIA))
    assert (entry["missing_ids"], entry["extra_ids"], entry["matching"], entry["status"]) == (
        [uuids[3]], [], 7, "missing")


def test_swapped_gpu_shows_missing_and_extra(gpu_facts, uuids):
    published = uuids[:7] + ["GPU-00000000-dead-beef-0000-000000000000"]
    entry = only(drift_rules.compare_node(gpu_facts, [nvidia_slice("v1", NODE, published)], NODE, NVIDIA))
    assert entry["missing_ids"] == [uuids[7]] and entry["extra_ids"] == [published[7]]
    assert entry["status"] == "missing_and_extra" and (entry["missing"], entry["extra"]) == (1, 1)


def test_mig_devices_do_not_count_as_gpus(gpu_facts, uuids):
    mig = ["MIG-%d0000000-0000-0000-0000-000000000000" % i for i in range(3)]
    entry = only(drift_rules.compare_node(gpu_facts, [nvidia_slice("v1beta1", NODE, uuids, mig)], NODE, NVIDIA))
    assert entry["published"] == 8 and entry["status"] == "clean"


def test_lost_gpu_still_published_is_extra(uuids):
    facts = hardware.discover(GPU_NODE, nvidia=nvidia("gpu-lost"))
    entry = only(drift_rules.compare_node(facts, [nvidia_slice("v1", NODE, uuids)], NODE, NVIDIA))
    assert entry["extra_ids"] == [uuids[5]] and entry["status"] == "extra"
    assert "PCI lists 8 gpu function(s), nvidia-smi 7 GPU(s)" in entry["notes"]


def test_mig_enabled_is_noted(uuids):
    facts = hardware.discover(GPU_NODE, nvidia=nvidia("mig"))
    entry = only(drift_rules.compare_node(facts, [nvidia_slice("v1", NODE, uuids)], NODE, NVIDIA))
    assert entry["status"] == "clean" and len([n for n in entry["notes"] if "MIG is enabled" in n]) == 4


def test_without_nvidia_smi_falls_back_to_counting(uuids):
    facts = hardware.discover(GPU_NODE, nvidia=nvidia("error"))
    entry = only(drift_rules.compare_node(facts, [nvidia_slice("v1", NODE, uuids[:6])], NODE, NVIDIA))
    assert (entry["method"], entry["hardware"], entry["missing"]) == ("count", 8, 2)
    assert entry["notes"][0].startswith("nvidia-smi gave no GPU list (nvidia-smi exited with 9")


def test_published_devices_without_the_id_attribute_fall_back_to_counting(gpu_facts, uuids):
    published = nvidia_slice("v1", NODE, uuids)
    for dev in published["spec"]["devices"][:2]:
        del dev["attributes"]["uuid"]
    entry = only(drift_rules.compare_node(gpu_facts, [published], NODE, NVIDIA))
    assert entry["method"] == "count" and entry["status"] == "clean"
    assert entry["notes"] == ["some published devices have no 'uuid' attribute: compared by count"]


def test_attribute_qualified_with_the_driver_domain(gpu_facts, uuids):
    published = nvidia_slice("v1", NODE, uuids)
    for dev in published["spec"]["devices"]:
        dev["attributes"]["gpu.nvidia.com/uuid"] = dev["attributes"].pop("uuid")
    assert only(drift_rules.compare_node(gpu_facts, [published], NODE, NVIDIA))["method"] == "id"


def test_per_device_node_selection(gpu_facts, uuids):
    published = nvidia_slice("v1", NODE, uuids)
    spec = published["spec"]
    del spec["nodeName"]
    spec["perDeviceNodeSelection"] = True
    for index, dev in enumerate(spec["devices"]):
        dev["nodeName"] = NODE if index < 5 else "elsewhere"
    entry = only(drift_rules.compare_node(gpu_facts, [published], NODE, NVIDIA))
    assert entry["published"] == 5 and entry["missing_ids"] == sorted(uuids[5:])


def test_device_attributes_of_each_kind():
    dev = {"attributes": {"a": {"string": "x"}, "b": {"int": 3}, "c": {"bool": False}, "d": {"version": "1.2.3"},
                          "example.com/e": {"string": "y"}}}
    assert slice_rules.device_attributes(dev, "example.com") == {"a": "x", "b": 3, "c": False, "d": "1.2.3",
                                                                 "example.com/e": "y", "e": "y"}
    assert slice_rules.device_attributes({"basic": {"attributes": {"a": {"int": 1}}}}) == {"a": 1}
    assert slice_rules.device_attributes({"name": "bare"}) == {}


def test_given_profile_overrides_known_one():
    profile = drift_rules.driver_profile("gpu.nvidia.com", {"name": "gpu.nvidia.com", "id_attribute": None,
                                                            "pci_vendors": ["10DE"]})
    assert profile["pci_vendors"] == ["10de"] and profile["device_match"] == {"type": "gpu"}
    assert profile["id_attribute"] == "uuid"  # None means "not given"
    assert drift_rules.driver_profile("unknown.example.com")["pci_types"] == ["gpu"]


def test_facts_without_pci_section_are_noted(uuids):
    facts = hardware.discover(GPU_NODE, include=["cpu"])
    entry = only(drift_rules.compare_node(facts, [example_slice("v1", NODE, 8)], NODE, EXAMPLE))
    assert entry["hardware"] == 0 and "pci section not discovered: hardware count unknown" in entry["notes"]


# --- through the module --------------------------------------------------------------------

def test_module_compares_when_given_slices(tmp_path, uuids):
    root = os.path.dirname(os.path.dirname(HERE))
    args = {"root": GPU_NODE, "nvidia_smi": STANDIN, "node_name": NODE,
            "compare_slices": [nvidia_slice("v1", NODE, uuids[:7]), example_slice("v1", NODE, 8)],
            "drivers": [{"name": "gpu.nvidia.com", "pci_vendors": ["10de"], "id_attribute": "uuid",
                         "device_match": {"type": "gpu"}}, {"name": "gpu.example.com"}]}
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, ".tmp", "collections"))
    res = subprocess.run([sys.executable, os.path.join(root, "plugins", "modules", "dra_hardware_facts.py"),
                          str(args_file)], env=env, capture_output=True, text=True, check=False)
    result = json.loads(res.stdout)
    drift = result["ansible_facts"]["dra_hardware_drift"]
    assert drift["node"] == NODE and drift["drift"] is True
    nvidia_entry, example_entry = drift["drivers"]
    assert (nvidia_entry["method"], nvidia_entry["missing_ids"]) == ("id", [uuids[7]])
    assert (example_entry["method"], example_entry["status"]) == ("count", "clean")


def test_module_requires_node_name_with_slices(tmp_path):
    root = os.path.dirname(os.path.dirname(HERE))
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"root": CPU_NODE, "compare_slices": []}}))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, ".tmp", "collections"))
    res = subprocess.run([sys.executable, os.path.join(root, "plugins", "modules", "dra_hardware_facts.py"),
                          str(args_file)], env=env, capture_output=True, text=True, check=False)
    result = json.loads(res.stdout)
    assert result["failed"] and "node_name" in result["msg"]


def test_inputs_are_not_modified(gpu_facts, uuids):
    slices = [nvidia_slice("v1", NODE, uuids), example_slice("v1beta1", NODE, 3)]
    before_slices, before_facts = copy.deepcopy(slices), copy.deepcopy(gpu_facts)
    drift_rules.compare_node(gpu_facts, slices, NODE, NVIDIA + EXAMPLE)
    assert slices == before_slices and gpu_facts == before_facts


# --- slices recorded from the local cluster's example driver ---------------------------------

RECORDED = ["example-driver-v1.36.3-v1.json", "example-driver-v1.33.13-v1beta2.json",
            "example-driver-v1.33.13-v1beta1.json"]


def recorded(name):
    with open(os.path.join(HW, "slices", name)) as handle:
        return json.load(handle)["items"]


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_slices_against_recorded_trees(gpu_facts, cpu_facts, name):
    slices = recorded(name)
    nodes = sorted(s["spec"]["nodeName"] for s in slices)
    assert nodes == ["node-000000", "node-000001"]
    published = len(slices[0]["spec"]["devices"])
    entry = only(drift_rules.compare_node(gpu_facts, slices, "node-000000", EXAMPLE))
    assert (entry["published"], entry["hardware"]) == (published, 8)
    assert entry["status"] == ("clean" if published == 8 else "missing" if published < 8 else "extra")
    entry = only(drift_rules.compare_node(cpu_facts, slices, "node-000001", EXAMPLE))
    assert (entry["extra"], entry["status"]) == (published, "extra")


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_devices_expose_their_attributes(name):
    slices = recorded(name)
    profile = drift_rules.driver_profile("gpu.example.com")
    devices = drift_rules.published_devices(slice_rules.slices_for_node(slices, "node-000001", "gpu.example.com"),
                                            "node-000001", profile)
    assert [d["attributes"]["index"] for d in devices] == list(range(len(devices)))
    assert all(d["attributes"]["uuid"].startswith("gpu-") and d["attributes"]["model"] for d in devices)
    assert {d["attributes"]["driverVersion"] for d in devices} == {"1.0.0"}


def test_recorded_slice_republished_with_fewer_devices(tmp_path):
    slices = recorded(RECORDED[0])
    newer = copy.deepcopy([s for s in slices if s["spec"]["nodeName"] == "node-000000"][0])
    newer["spec"]["pool"]["generation"] += 1
    newer["spec"]["devices"] = newer["spec"]["devices"][:5]
    make_trees.gpu_node(str(tmp_path), 5)
    facts = hardware.discover(str(tmp_path), include=["pci"])
    entry = only(drift_rules.compare_node(facts, slices + [newer], "node-000000", EXAMPLE))
    assert (entry["hardware"], entry["published"], entry["status"]) == (5, 5, "clean")
    entry = only(drift_rules.compare_node(facts, slices, "node-000000", EXAMPLE))
    assert (entry["extra"], entry["status"]) == (3, "extra")
