"""The catalog's verdict on every DRA feature gate, true and false, against the real binaries.

For each pinned release (hack/cluster/versions.env) every gate the catalog lists and every DRA
gate kube-apiserver --help lists is set to true and to false; the catalog's verdict (the
feature_gates role's check and dra_version_info) must be the verdict of kube-apiserver,
kube-controller-manager, kube-scheduler and kubelet started with the gates the role would
write. hack/cluster/gatematrix.py says what counts as refused and accepted. The only
differences allowed are gatematrix.EXCEPTIONS (docs/decisions.md says why), and each of them
must still occur. `make test` runs it per pinned release once the release is built (`make
gate-matrix-test RELEASE=...`); `make gate-matrix` runs the same comparison for every release from 1.32.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import gatematrix  # noqa: E402

VERSIONS = clusterlib.supported_k8s_versions()
WORKERS = int(os.environ.get("DRA_GATE_MATRIX_WORKERS", "2"))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")


def binaries(version):
    try:
        return gatematrix.pinned_binaries(version)
    except gatematrix.MatrixError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def harness():
    try:
        harness = gatematrix.Harness(gatematrix.etcd_binary())
        harness.start()
    except gatematrix.MatrixError as exc:
        pytest.fail(str(exc))
    yield harness
    harness.close()


@pytest.mark.every_release("the catalog's verdicts against the release's own four binaries")
@pytest.mark.parametrize("version", VERSIONS)
def test_catalog_verdicts_are_the_binaries_verdicts(harness, version):
    result = gatematrix.compare(version, binaries(version), harness, WORKERS, log=print)
    minor = gatematrix.clusterlib_minor(version)
    assert gatematrix.problems(result) == []
    differing = sorted((row["gate"], row["value"]) for row in result["rows"] if not row["match"])
    assert differing == sorted((gate, value) for (m, gate, value) in gatematrix.EXCEPTIONS if m == minor)
    # Every case was decided by every component (no "no verdict" hides behind an exception).
    for row in result["rows"]:
        assert set(row["components"]) == set(gatematrix.COMPONENTS), row
        assert all(v in (gatematrix.ACCEPTED, gatematrix.REFUSED) for v, dummy in row["components"].values()), row


def ansible(version, module, args, check=False):
    """Run one module for real through `ansible localhost`; its JSON result."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
           "-e", "ansible_python_interpreter=" + sys.executable, "-m", module, "-a", json.dumps(args)]
    res = subprocess.run(cmd + (["--check"] if check else []), capture_output=True, text=True, env=env,
                         check=False, timeout=300)
    output = json.loads(res.stdout)
    return output["plays"][0]["tasks"][0]["hosts"]["localhost"]


# One case each way per pinned release, through the real modules: dra_version_info, and
# component_flags in check mode with enable_dra (the feature_gates role's check before it writes).
REAL_CASES = {
    "v1.37.2": [("DRAPrioritizedList", False), ("DRADeviceTaintRules", False)],
    # Locked on from 1.38; refused through the dependency of the on-by-default DRAFractionalCapacityRange; alpha.
    "v1.38.0-beta.0": [("DRAPartitionableDevices", False), ("DRAConsumableCapacity", False),
                       ("DRAListTypeAttributes", True)],
    "v1.33.13": [("DRAPrioritizedList", True), ("DRAConsumableCapacity", True)],
}


@pytest.mark.every_release("the catalog's verdicts against the release's own four binaries")
@pytest.mark.parametrize("version", VERSIONS)
def test_the_modules_give_the_binaries_verdict(harness, version, tmp_path):
    assert version in REAL_CASES, "add cases for %s to REAL_CASES" % version
    fixture = os.path.join(FIXTURES, "kubeadm-%s" % version, "kube-apiserver.yaml")
    manifest = str(tmp_path / "kube-apiserver.yaml")
    shutil.copy(fixture, manifest)
    for slot, (gate, value) in enumerate(REAL_CASES[version]):
        attempt = harness.attempt(slot, version, {gatematrix.APISERVER: binaries(version)[gatematrix.APISERVER]},
                                  gate, value)
        binary = gatematrix.binary_verdict(attempt["components"])
        assert binary in (gatematrix.ACCEPTED, gatematrix.REFUSED), attempt
        info = ansible(version, "dra.admin.dra_version_info",
                       {"kubernetes_version": version, "extra_gates": {gate: value}})
        role = ansible(version, "dra.admin.component_flags",
                       {"path": manifest, "kubernetes_version": version, "enable_dra": True, "backup": False,
                        "feature_gates": {gate: value}}, check=True)
        for result in (info, role):
            verdict = gatematrix.REFUSED if result.get("failed") else gatematrix.ACCEPTED
            assert verdict == binary, (gate, value, result.get("msg"), attempt["components"])
            if verdict == gatematrix.REFUSED:
                assert gate in result["msg"]
        if binary == gatematrix.ACCEPTED:
            assert info["feature_gates"] == attempt["gates"]
            assert info["runtime_config"] == attempt["runtime_config"]
    with open(fixture) as original, open(manifest) as checked:
        assert original.read() == checked.read()


@pytest.mark.every_release("every gate of the release's list against its own four binaries")
@pytest.mark.parametrize("version", VERSIONS)
def test_the_releases_gate_list_is_the_binaries(harness, version):
    """The upgrade check judges every gate (DRA or not) from kube_gate_lists, read from the release's library, and
    catalog.kube_gates_unknown_to: each of the four binaries accepts every gate of the list at its default (less
    those the table says it does not know, each of which it refuses), refuses every locked gate at the other value
    naming each, and refuses each gate the previous list has and this one not."""
    cases, found = gatematrix.check_list(version, binaries(version), harness, WORKERS, log=print)
    assert found == []
    assert cases >= 2
