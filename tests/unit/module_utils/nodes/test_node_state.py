"""What the node knows, read from files recorded on a v1.37.2 kind node (tests/unit/fixtures/node-state/) and from
the checkpoints of the kubelet's own tests of v1.33.13 and v1.37.2 (pkg/kubelet/cm/dra/state)."""
import json
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.nodes import node_state
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_state_service
from conftest import FIXTURES

RECORDED = os.path.join(FIXTURES, "node-state", "v1.37.2")
CLAIM = "2e5fed7d-c2a8-4bad-8ecd-ed565d1cf452"
POD = "28fd590b-0412-4407-b674-386a96b18041"
# checkpointer_test.go of v1.33.13 (no ShareID) and v1.37.2 (ShareID null), with the checksums the kubelet wrote.
KUBELET_1_33 = ('{"Data":"{\\"kind\\":\\"DRACheckpoint\\",\\"apiVersion\\":\\"checkpoint.dra.kubelet.k8s.io/v1\\",'
                '\\"ClaimInfoStateList\\":[{\\"ClaimUID\\":\\"067798be-454e-4be4-9047-1aa06aea63f7\\",\\"ClaimName\\":'
                '\\"example\\",\\"Namespace\\":\\"default\\",\\"PodUIDs\\":{\\"139cdb46-f989-4f17-9561-ca10cfb509a6\\":'
                '{}},\\"DriverState\\":{\\"test-driver.cdi.k8s.io\\":{\\"Devices\\":[{\\"PoolName\\":\\"worker-1\\",'
                '\\"DeviceName\\":\\"dev-1\\",\\"RequestNames\\":[\\"test request\\"],\\"CDIDeviceIDs\\":'
                '[\\"example.com/example=cdi-example\\"]}]}}}]}","Checksum":1656016162}')
KUBELET_1_37 = KUBELET_1_33.replace('\\"DeviceName\\":\\"dev-1\\",', '\\"DeviceName\\":\\"dev-1\\",\\"ShareID\\":null,'
                                    ).replace("1656016162", "2570581864")


def recorded(name):
    with open(os.path.join(RECORDED, name)) as handle:
        return handle.read()


def test_the_recorded_checkpoint_is_read_with_its_checksum():
    report = node_state.parse_checkpoint(recorded("dra_manager_state"))
    assert report["format"] == "DRACheckpoint checkpoint.dra.kubelet.k8s.io/v1"
    assert report["checksum_ok"] is True and report["error"] is None
    assert [c["uid"] for c in report["claims"]] == [CLAIM]
    claim = report["claims"][0]
    assert claim["pod_uids"] == [POD] and claim["namespace"] == "explore"
    device = claim["drivers"]["gpu.example.com"][0]
    assert device["device"] == "gpu-0" and device["cdi_device_ids"][1] == "k8s.gpu.example.com/gpu=%s-gpu-0" % CLAIM


@pytest.mark.parametrize("text", [KUBELET_1_33, KUBELET_1_37], ids=["v1.33.13", "v1.37.2"])
def test_the_checksum_is_the_kubelets_on_both_releases(text):
    report = node_state.parse_checkpoint(text)
    assert report["checksum_ok"] is True, report
    assert report["claims"][0]["drivers"]["test-driver.cdi.k8s.io"][0]["pool"] == "worker-1"


def test_a_changed_checkpoint_fails_its_checksum():
    report = node_state.parse_checkpoint(KUBELET_1_37.replace("worker-1", "worker-2"))
    assert report["checksum_ok"] is False and "checksum" in report["error"]


@pytest.mark.parametrize("text, said", [
    ("not json", "not JSON"),
    ('{"checkpoint": 1}', "no Data and Checksum"),
    ('{"Data": "{]", "Checksum": 1}', "Data is not JSON"),
    ('{"Data": "{\\"kind\\": \\"DRACheckpoint\\", \\"apiVersion\\": \\"checkpoint.dra.kubelet.k8s.io/v2\\"}", '
     '"Checksum": 1}', "apiVersion checkpoint.dra.kubelet.k8s.io/v2"),
])
def test_an_unknown_checkpoint_format_is_reported_not_guessed(text, said):
    report = node_state.parse_checkpoint(text)
    assert report["format"] == "unknown" and said in report["error"] and report["claims"] == []


@pytest.mark.parametrize("name, driver, uid, naming", [
    ("gpu.example.com-reg.sock", "gpu.example.com", None, "plain"),
    ("gpu.example.com-e17a79f7-cb9b-45d9-88ab-716c779b2bc4-reg.sock", "gpu.example.com",
     "e17a79f7-cb9b-45d9-88ab-716c779b2bc4", "rolling-update"),
    ("dra-AAAAAAAAAAAAAAAAAAAAAA-reg.sock", None, None, "hashed"),
    ("kubelet.sock", None, None, "unknown"),
])
def test_registration_socket_names(name, driver, uid, naming):
    assert node_state.registration_socket(name) == {"name": name, "driver": driver, "pod_uid": uid, "naming": naming}


def test_plugin_sockets():
    assert node_state.plugin_socket("dra-e17a79f7-cb9b-45d9-88ab-716c779b2bc4.sock")["pod_uid"] == \
        "e17a79f7-cb9b-45d9-88ab-716c779b2bc4"
    assert node_state.plugin_socket("dra.sock") == {"name": "dra.sock", "pod_uid": None, "dra": True}
    assert node_state.plugin_socket("csi.sock")["dra"] is False


def test_cdi_specs_name_their_claims_by_file_name_and_devices():
    path = "/var/run/cdi/k8s.gpu.example.com-gpu_%s.yaml" % CLAIM
    spec = node_state.cdi_spec(path, yaml.safe_load(recorded("claim-spec.yaml")))
    assert spec["format"] == "cdi" and spec["kind"] == "k8s.gpu.example.com/gpu"
    assert spec["claim_uids"] == [CLAIM]
    assert spec["devices"] == ["k8s.gpu.example.com/gpu=%s-gpu-0" % CLAIM]
    common = node_state.cdi_spec("/var/run/cdi/k8s.gpu.example.com-gpu_common.yaml",
                                 yaml.safe_load(recorded("common-spec.yaml")))
    assert common["claim_uids"] == [] and common["devices"] == ["k8s.gpu.example.com/gpu=common"]


def test_a_file_that_is_not_a_cdi_spec_is_unknown():
    assert node_state.cdi_spec("/etc/cdi/x.json", {"hello": 1})["format"] == "unknown"
    assert node_state.cdi_spec("/etc/cdi/x.json", None, "not JSON")["error"] == "not JSON"


def test_running_containers_and_the_specs_they_use():
    containers = node_state.inspected_containers(json.loads(recorded("crictl-inspect.json")))
    ids = node_state.running_container_ids(json.loads(recorded("crictl-ps.json")))
    assert sorted(c["id"] for c in containers) == sorted(ids)
    users = [c for c in containers if c["cdi_devices"]]
    assert [(c["pod_uid"], c["name"]) for c in users] == [(POD, "ctr")]
    path = "/var/run/cdi/k8s.gpu.example.com-gpu_%s.yaml" % CLAIM
    spec = node_state.cdi_spec(path, yaml.safe_load(recorded("claim-spec.yaml")))
    assert node_state.specs_in_use([spec], containers) == {path: [users[0]["id"]]}
    single = node_state.inspected_containers(json.loads(recorded("crictl-inspect.json"))[0])
    assert len(single) == 1


# --- the node-side service on a made-up kubelet root ----------------------------------------------------

@pytest.fixture
def short_path():
    """A directory with a short path: a Unix socket's path is at most 107 bytes."""
    path = tempfile.mkdtemp(prefix="ns", dir="/tmp")
    yield Path(path)
    shutil.rmtree(path)


class Http2Server(object):
    """A Unix socket whose server answers as every gRPC server does first: its HTTP/2 SETTINGS frame (one setting,
    SETTINGS_MAX_CONCURRENT_STREAMS); or another `answer`; or none at all (b"": a stopped process, whose socket the
    kernel still accepts connections on). Each connection stays open until the client closes it."""

    SETTINGS = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00\x64"

    def __init__(self, path, answer=SETTINGS):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(4)
        self.answer = answer
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, dummy = self.sock.accept()
            except OSError:
                return
            try:
                if self.answer:
                    conn.sendall(self.answer)
                while conn.recv(4096):
                    pass
            except OSError:  # the client went away first (the test's side of the race)
                pass
            finally:
                conn.close()

    def close(self):
        self.sock.close()


def node_tree(tmp_path):
    """A kubelet root and a CDI directory as on the recorded node, with one live and one dead socket."""
    root = tmp_path / "k"
    (root / "plugins_registry").mkdir(parents=True)
    (root / "plugins" / "gpu.example.com").mkdir(parents=True)
    (root / "dra_manager_state").write_text(recorded("dra_manager_state"))
    live = Http2Server(str(root / "plugins_registry" / "gpu.example.com-e17a79f7-cb9b-45d9-88ab-716c779b2bc4-reg.sock"))
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(root / "plugins_registry" / "gpu.example.com-0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11-reg.sock"))
    dead.close()
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / ("k8s.gpu.example.com-gpu_%s.yaml" % CLAIM)).write_text(recorded("claim-spec.yaml"))
    (cdi / "k8s.gpu.example.com-gpu_common.yaml").write_text(recorded("common-spec.yaml"))
    (cdi / "broken.json").write_text("{")
    return root, cdi, live


def crictl(containers_json, ps_json):
    def run(argv):
        return (0, ps_json, "") if "ps" in argv else (0, containers_json, "")
    return run


def params(root, cdi):
    return {"kubelet_root_dir": str(root), "cdi_spec_dirs": [str(cdi), "/nonexistent/cdi"], "containers": True,
            "runtime_endpoint": "", "node_name": "nsx-worker2"}


def test_gather_reads_files_sockets_and_containers(short_path):
    tmp_path = short_path
    root, cdi, live = node_tree(tmp_path)
    try:
        state = node_state_service.gather(params(root, cdi), crictl(recorded("crictl-inspect.json"),
                                                                    recorded("crictl-ps.json")), "crictl")
    finally:
        live.close()
    assert state["checkpoint"]["claims"][0]["uid"] == CLAIM and state["checkpoint"]["present"]
    answers = dict((s["pod_uid"], s["answers"]) for s in state["registration"]["sockets"])
    assert answers == {"e17a79f7-cb9b-45d9-88ab-716c779b2bc4": True, "0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11": False}
    by_name = dict((s["path"].rsplit("/", 1)[1], s) for s in state["cdi_specs"])
    assert by_name["broken.json"]["format"] == "unknown"
    assert len(by_name["k8s.gpu.example.com-gpu_%s.yaml" % CLAIM]["used_by"]) == 1
    assert state["containers"]["available"] and state["errors"] == []


def test_a_socket_that_accepts_but_never_answers_is_not_taken_for_a_live_plugin(short_path):
    """What a SIGSTOPped plugin leaves: the kernel accepts connections on its socket, the process sends nothing. A
    plain listening socket and one whose server answers with something else than HTTP/2 are told apart too."""
    silent = Http2Server(str(short_path / "stopped.sock"), answer=b"")
    try:
        answers, why = node_state_service.socket_answers(str(short_path / "stopped.sock"))
    finally:
        silent.close()
    assert answers is False and "stopped or hung" in why
    other = Http2Server(str(short_path / "other.sock"), answer=b"HTTP/1.1 400 Bad Request\r\n\r\n")
    try:
        answers, why = node_state_service.socket_answers(str(short_path / "other.sock"))
    finally:
        other.close()
    assert answers is False and "not as a gRPC server" in why
    live = Http2Server(str(short_path / "live.sock"))
    try:
        assert node_state_service.socket_answers(str(short_path / "live.sock")) == (True, None)
    finally:
        live.close()


def test_without_crictl_no_spec_is_known_unused(short_path):
    tmp_path = short_path
    root, cdi, live = node_tree(tmp_path)
    live.close()
    state = node_state_service.gather(params(root, cdi), None, None)
    assert state["containers"]["available"] is False and state["containers"]["reason"] == "crictl not found"
    assert all(s["used_by"] is None for s in state["cdi_specs"])


def test_repairs_are_rechecked_on_the_node_and_check_mode_moves_nothing(short_path):
    tmp_path = short_path
    root, cdi, live = node_tree(tmp_path)
    live.close()
    spec = str(cdi / ("k8s.gpu.example.com-gpu_%s.yaml" % CLAIM))
    dead = str(root / "plugins_registry" / "gpu.example.com-0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11-reg.sock")
    repairs = [{"kind": "cdi_spec", "path": spec, "claim_uids": [CLAIM]}, {"kind": "socket", "path": dead}]
    used = node_state_service.gather(params(root, cdi), crictl(recorded("crictl-inspect.json"),
                                                               recorded("crictl-ps.json")), "crictl")
    done, refused = node_state_service.repair(repairs, used, str(tmp_path / "backups"), check_mode=False)
    assert [d["path"] for d in done] == [dead] and "used by running container" in refused[0]["why"]
    assert os.path.exists(spec) and not os.path.exists(dead)

    unused = node_state_service.gather(params(root, cdi), crictl("[]", '{"containers": []}'), "crictl")
    done, refused = node_state_service.repair(repairs[:1], unused, str(tmp_path / "backups"), check_mode=True)
    assert [d["path"] for d in done] == [spec] and done[0]["backup"] is None and os.path.exists(spec)
    text = open(spec).read()
    done, refused = node_state_service.repair(repairs[:1], unused, str(tmp_path / "backups"), check_mode=False)
    assert not os.path.exists(spec) and open(done[0]["backup"]).read() == text and refused == []
    again = node_state_service.gather(params(root, cdi), crictl("[]", '{"containers": []}'), "crictl")
    done, refused = node_state_service.repair(repairs, again, str(tmp_path / "backups"), check_mode=False)
    assert done == [] and sorted(r["why"].split(" is ")[1] for r in refused) == ["gone already", "gone already"]
