"""Role dra.admin.discovery against the real example driver's ResourceSlices.

Each KWOK node is paired with a recorded hardware tree (tests/unit/fixtures/
hardware/): one with as many GPUs as the driver publishes for it, one with
fewer, one with more; an inventory host whose node name the cluster does not
know stands for a node whose driver publishes nothing. The drift numbers the
role reports must follow from what the driver really published.
"""
import json
import os
import subprocess
import sys

import pytest
import yaml

from dra_objects import DRIVER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HW = os.path.join(ROOT, "tests", "unit", "fixtures", "hardware")
sys.path.insert(0, HW)
import recorded  # noqa: E402  (unpacks the recorded trees)
RECORDED_GPU_NODE = os.path.join(recorded.trees_dir(), "gpu-node")
RECORDED_GPUS = 8
sys.path.insert(0, HW)
import make_trees  # noqa: E402

# The checkout as ansible_collections.dra.admin (hack/cluster/clusterlib.py keeps the link).
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.nodes import drift  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.kube import slices as slice_rules

PLAYBOOK = """
- name: Discovery
  hosts: dra_nodes
  gather_facts: false
  roles:
    - role: dra.admin.discovery
  tasks:
    - name: Save the result
      ansible.builtin.copy:
        content: "{{ dra_discovery | to_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
"""


def published_per_node(cluster):
    """{node: device names} of the example driver, newest pool generation only, straight from the API."""
    slices = [s for s in cluster.get_json("resourceslices")["items"] if s["spec"]["driver"] == DRIVER]
    newest = {}
    for s in slices:
        pool = s["spec"]["pool"]
        newest[pool["name"]] = max(newest.get(pool["name"], 0), int(pool["generation"]))
    names = {}
    for s in slices:
        if int(s["spec"]["pool"]["generation"]) == newest[s["spec"]["pool"]["name"]]:
            names.setdefault(s["spec"]["nodeName"], []).extend(d["name"] for d in s["spec"]["devices"])
    return names


def ansible_playbook():
    beside = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return beside if os.path.exists(beside) else "ansible-playbook"


@pytest.fixture
def drift_setup(cluster, tmp_path):
    """Inventory pairing nodes with trees of known GPU counts; returns (inventory, expected per host)."""
    published = published_per_node(cluster)
    nodes = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])
    assert len(nodes) >= 3, "the drift scenarios need three nodes"
    assert all(published.get(n) for n in nodes), "every node must publish devices: %s" % published
    hosts, expected = {}, {}

    def add(host, node, gpus):
        if gpus == RECORDED_GPUS:
            root = RECORDED_GPU_NODE
        else:
            root = str(tmp_path / "trees" / host)
            make_trees.gpu_node(root, gpus)
        hosts[host] = {"dra_discovery_node_name": node, "dra_discovery_root": root}
        n = len(published.get(node, []))
        expected[host] = {"node": node, "hardware": gpus, "published": n, "matching": min(gpus, n),
                          "missing": max(0, gpus - n), "extra": max(0, n - gpus),
                          "published_names": sorted(published.get(node, []))}

    add("equal", nodes[0], len(published[nodes[0]]))
    add("fewer-gpus", nodes[1], max(0, len(published[nodes[1]]) - 3))
    add("more-gpus", nodes[2], len(published[nodes[2]]) + 2)
    add("no-slices", "node-that-publishes-nothing", RECORDED_GPUS)
    inventory = {"all": {"children": {"dra_nodes": {
        "hosts": hosts,
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "dra_discovery_nvidia_smi": "", "dra_discovery_drivers": [{"name": DRIVER}]}}}}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    (tmp_path / "discovery.yml").write_text(PLAYBOOK)
    out = tmp_path / "out"
    out.mkdir()
    return str(path), expected


def run(cluster, tmp_path, inventory, *extra, json_output=False):
    env = dict(cluster.env)
    if json_output:
        env.update(ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    cmd = [ansible_playbook(), "-i", inventory, str(tmp_path / "discovery.yml"), "-e", "out_dir=%s" % (tmp_path / "out")]
    return subprocess.run(cmd + list(extra), env=env, capture_output=True, text=True, cwd=ROOT, check=False)


def test_drift_numbers_follow_what_the_driver_publishes(cluster, tmp_path, drift_setup):
    inventory, expected = drift_setup
    res = run(cluster, tmp_path, inventory)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    for host, want in expected.items():
        with open(tmp_path / "out" / (host + ".json")) as handle:
            got = json.load(handle)
        assert got["node"] == want["node"]
        (entry,) = got["drivers"]
        assert entry["driver"] == DRIVER and entry["method"] == "count"
        for key in ("hardware", "published", "matching", "missing", "extra", "published_names"):
            assert entry[key] == want[key], "%s: %s is %r, expected %r" % (host, key, entry[key], want[key])
        assert got["drift"] is bool(want["missing"] or want["extra"])
        assert got["pci_summary"].get("gpu", {}).get("physical", 0) == want["hardware"]
    statuses = {}
    for host in expected:
        with open(tmp_path / "out" / (host + ".json")) as handle:
            statuses[host] = json.load(handle)["drivers"][0]["status"]
    assert statuses == {"equal": "clean", "fewer-gpus": "extra", "more-gpus": "missing", "no-slices": "no_slices"}
    # The per-node report is printed.
    assert "%s: CLEAN - %d on the node" % (DRIVER, expected["equal"]["hardware"]) in res.stdout


def test_fail_on_drift_fails_exactly_the_drifting_nodes(cluster, tmp_path, drift_setup):
    inventory, expected = drift_setup
    res = run(cluster, tmp_path, inventory, "-e", '{"dra_discovery_fail_on_drift": true}', json_output=True)
    assert res.returncode != 0
    stats = json.loads(res.stdout)["stats"]
    failed = sorted(h for h, s in stats.items() if s.get("failures"))
    assert failed == sorted(h for h, e in expected.items() if e["missing"] or e["extra"])
    assert "equal" not in failed and "no-slices" in failed


def test_example_driver_devices_carry_the_attributes_the_profile_reads(cluster):
    """The real slices in the served API version, through the same code the module uses."""
    node = sorted(published_per_node(cluster))[0]
    slices = cluster.get_json("resourceslices")["items"]
    profile = drift.driver_profile(DRIVER)
    devices = drift.published_devices(slice_rules.slices_for_node(slices, node, DRIVER), node, profile)
    assert len(devices) == len(published_per_node(cluster)[node])
    for device in devices:
        assert {"index", "uuid", "model", "driverVersion"} <= set(device["attributes"]), device
    assert sorted(d["attributes"]["index"] for d in devices) == list(range(len(devices)))
