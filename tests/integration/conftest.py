"""Real local clusters for the integration suite.

The `cluster` fixture brings up one cluster per Kubernetes version listed in
hack/cluster/versions.env (with `hack/cluster/up`), runs every test of the
session against it, and tears it down (`hack/cluster/down`).

What is real and what is not:
- real, built from upstream sources at the pinned versions: etcd, kube-apiserver,
  kube-controller-manager and kube-scheduler (each a host process), and the example
  DRA driver's kubelet plugin (dra-example-kubeletplugin, one host process per node,
  publishing ResourceSlices through the API server);
- not real: the nodes are KWOK fakes (kwok-controller marks pods Running and deletes
  them after their grace period): there is no kubelet, no container and no CDI, so
  nothing calls the plugin's NodePrepareResources; test_driver.py's HostPlugins starts a
  plugin process for each Running driver pod, standing in for the container runtime;
- test_control_plane.py runs its own kubeadm-made control plane whose static Pods are
  (re)started by a stand-in process (control_plane_helpers.StaticPods), not a kubelet.
"""
import contextlib
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import cluster_harness  # noqa: E402  (tests/integration/cluster_harness.py: running modules, reading results)
import kind_nodes  # noqa: E402  (tests/integration/kind_nodes.py: the real-node clusters' helpers)
from kube import Kubectl, wait_for  # noqa: E402  (hack/cluster/kube.py: the one wait helper of tests, bench and hack/)
import release_facts  # noqa: E402  (tests/integration/release_facts.py: what makes a test release-dependent)
import shards  # noqa: E402  (tests/integration/shards.py: one release's suite split between processes)
import tiers  # noqa: E402  (tests/integration/tiers.py: DRA_TEST_TIER, ci or full)

VERSIONS = clusterlib.supported_k8s_versions()
DEFAULT_RELEASE = VERSIONS[0]
NODES = int(os.environ.get("DRA_IT_NODES", "3"))


# --- tiers: the full depth on the default release, what differs by release on the others ----------
def pytest_configure(config):
    config.addinivalue_line("markers", "per_release(fact, *args, key=None): runs in the ci tier on a release where the "
                                       "catalog fact differs from the default release's (tests/integration/release_facts.py)")
    config.addinivalue_line("markers", "every_release(reason): runs in the ci tier on every pinned release")


def release_of(item):
    """The pinned release an item is parametrized with (its cluster, kind cluster, oracle or version), or None."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    found = [value for value in params.values() if isinstance(value, str) and value in VERSIONS]
    return found[0] if found else None


def pytest_collection_modifyitems(config, items):
    """With DRA_IT_SHARD, only the files of this process's shard (shards.py); in the ci tier a release other than the
    default keeps the tests its markers send there (release_facts.runs_on); a marker naming no catalog fact fails the
    collection, whatever the tier."""
    kept, dropped = [], []
    mine = shards.selected(os.path.basename(str(item.fspath)) for item in items)
    for item in items:
        if os.path.basename(str(item.fspath)) not in mine:
            dropped.append(item)
        elif tiers.TIER == "full" or release_facts.runs_on(item, release_of(item), DEFAULT_RELEASE):
            kept.append(item)
        else:
            dropped.append(item)
        marker = item.get_closest_marker(release_facts.PER_RELEASE)
        if marker is not None:
            fact, args, key = release_facts.marker_fact(marker)
            release_facts.value(fact, DEFAULT_RELEASE, args, key)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# --- what a session started: clusters and ansible processes (hack/test-all's report) --------------
_STARTED = {"kwok": 0, "kind": 0, "ansible": 0}
_POPEN_INIT = subprocess.Popen.__init__
_ANSIBLE = {"ansible", "ansible-playbook", "ansible-runner"}


def _counting_init(self, args, *rest, **kwargs):
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]
    names = [os.path.basename(a) for a in argv[:2]]
    if names and names[0] in _ANSIBLE:
        _STARTED["ansible"] += 1
    elif "up" in names:
        _STARTED["kwok"] += 1
    elif "kind-up" in names:
        _STARTED["kind"] += 1
    _POPEN_INIT(self, args, *rest, **kwargs)


def pytest_sessionstart(session):
    subprocess.Popen.__init__ = _counting_init


def pytest_sessionfinish(session):
    subprocess.Popen.__init__ = _POPEN_INIT
    directory = os.environ.get("DRA_TEST_COUNTS")
    if directory and os.path.isdir(directory):
        with open(os.path.join(directory, "%d.json" % os.getpid()), "w") as fh:
            json.dump(dict(_STARTED, job=os.environ.get("DRA_TEST_JOB")), fh)


class Cluster:
    def __init__(self, name, version, port):
        self.name = name
        self.version = version
        self.minor = int(version.split(".")[1])
        self.port = port
        st = clusterlib.cluster_state(name)
        self.kubeconfig = st["kubeconfig"]
        self.state_dir = st["dir"]
        self.bin_dir = os.path.dirname(clusterlib.component_bin("kubernetes", version, "kubectl"))
        self.env = dict(os.environ, K8S_AUTH_KUBECONFIG=self.kubeconfig, KUBECONFIG=self.kubeconfig,
                        PATH=os.pathsep.join([self.bin_dir, os.path.dirname(sys.executable), os.environ["PATH"]]),
                        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"))
        self._resource_version = None

    # --- kubectl -------------------------------------------------------
    def kubectl(self, *args, stdin=None, check=True):
        return Kubectl(self.kubeconfig, self.env).run(*args, stdin=stdin, check=check)

    def get_json(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, objects):
        docs = objects if isinstance(objects, list) else [objects]
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    @property
    def resource_version(self):
        """The resource.k8s.io version the cluster prefers (v1, or v1beta2 on 1.33)."""
        if self._resource_version is None:
            group = json.loads(self.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
            self._resource_version = group["preferredVersion"]["version"]
        return self._resource_version

    def wait_for_default_service_account(self, namespace, timeout=60):
        """Pods are admitted once kube-controller-manager has made the namespace's default ServiceAccount
        (later when the controller-manager was just restarted)."""
        self.wait_until(lambda: self.kubectl("get", "serviceaccount", "default", "-n", namespace,
                                             check=False).returncode == 0, timeout, f"ServiceAccount {namespace}/default")

    def wait_until(self, probe, timeout=60, what="condition", interval=0.5):
        """kube.wait_for; an error raised by the probe (e.g. a failed kubectl) fails at once."""
        return wait_for(probe, timeout, what, interval, retry_on=())

    # --- ansible -------------------------------------------------------
    def run_module(self, module, args=None, check=False, expect_failure=False):
        """Run one module ad hoc against the cluster; return its result dict (cluster_harness.run_module)."""
        return cluster_harness.run_module(self.env, os.path.join(ROOT, "inventory", "kwok.yml"), module, args, check,
                                          expect_failure)

    def run_module_batch(self, module, cases, check=False):
        """Run one module once per args dict of cases, in one ansible-playbook; their result dicts, in order
        (cluster_harness.run_module_batch)."""
        return cluster_harness.run_module_batch(self.env, os.path.join(ROOT, "inventory", "kwok.yml"), module, cases,
                                                check)

    def run_playbook(self, playbook, *extra, env=None):
        cmd = ["ansible-playbook", "-i", os.path.join(ROOT, "inventory", "kwok.yml"),
               os.path.join(ROOT, playbook)] + list(extra)
        return subprocess.run(cmd, env=dict(self.env, **(env or {})), capture_output=True, text=True, cwd=ROOT,
                              check=False)

    def run_role(self, role, tmp_path, extra_vars, check=False, verbose=False):
        """One role on localhost with extra_vars; results as one-line JSON, so messages can be searched unwrapped
        (with `verbose`, every task's result is printed, as `-v` prints it)."""
        playbook = tmp_path / (role.rsplit(".", 1)[-1] + ".yml")
        playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n  roles:\n    - {role}\n")
        vars_file = tmp_path / f"vars-{time.monotonic_ns()}.json"
        vars_file.write_text(json.dumps(extra_vars))
        return self.run_playbook(str(playbook), "-e", f"@{vars_file}", *(["--check"] if check else []),
                                 *(["-v"] if verbose else []), env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})


def _port_for(version):
    """A port range per version (API server, components, then driver ports from +100), clear of `make up`
    and below the kernel's ephemeral port range (32768-60999), where client sockets could take them."""
    return int(os.environ.get("DRA_IT_PORT_BASE", "20000")) + 1000 * VERSIONS.index(version)


@contextlib.contextmanager
def own_cluster(prefix, version, nodes, port_offset, feature_gates=""):
    """A cluster of a test module's own beside the shared one (its own gates, its own ports at
    `port_offset` above the version's range); taken down when the block ends."""
    name = "%s-%d-%d" % (prefix, int(version.split(".")[1]), os.getpid())
    port = _port_for(version) + port_offset
    up = [sys.executable, os.path.join(ROOT, "hack", "cluster", "up"), "--name", name, "--k8s-version", version,
          "--nodes", str(nodes), "--port", str(port)] + (["--feature-gates", feature_gates] if feature_gates else [])
    res = subprocess.run(up, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"cluster {version} with {feature_gates or 'no extra gates'} did not come up:\n"
                           f"{res.stdout}\n{res.stderr}")
    try:
        yield Cluster(name, version, port)
    finally:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "down"), "--name", name],
                       capture_output=True, text=True, check=False)


@pytest.fixture(scope="session", params=VERSIONS)
def cluster(request):
    version = request.param
    # A name of this run's own: `up` on an existing name would join someone else's cluster.
    name = "it-%d-%d" % (int(version.split(".")[1]), os.getpid())
    port = _port_for(version)
    up = [sys.executable, os.path.join(ROOT, "hack", "cluster", "up"), "--name", name, "--k8s-version",
          version, "--nodes", str(NODES), "--port", str(port)]
    started = time.time()
    res = subprocess.run(up, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"cluster {version} did not come up:\n{res.stdout}\n{res.stderr}")
    print(f"\ncluster {name} up in {time.time() - started:.0f}s")
    yield Cluster(name, version, port)
    subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "down"), "--name", name],
                   capture_output=True, text=True, check=False)


@pytest.fixture
def cluster_objects(cluster):
    """Apply cluster-scoped objects (slices, device classes) for one test; delete them afterwards."""
    created = []

    def apply(objects):
        cluster.apply(objects)
        created.extend(objects)

    yield apply
    for obj in reversed(created):
        kind = f"{obj['kind'].lower()}s.{obj['apiVersion'].split('/')[1]}.resource.k8s.io"
        cluster.kubectl("delete", kind, obj["metadata"]["name"], "--ignore-not-found", check=False)


@pytest.fixture
def namespace(cluster, request):
    """A fresh namespace per test, deleted afterwards."""
    name = "it-" + request.node.name.lower().replace("_", "-").replace("[", "-").replace("]", "")[:40]
    name = "".join(c for c in name.replace(".", "-") if c.isalnum() or c == "-").strip("-")[:55]
    cluster.kubectl("create", "namespace", name)
    cluster.wait_for_default_service_account(name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


# Real nodes (test_kind_*.py but the README test, which brings up its own cluster of the default release).
@pytest.fixture(scope="module", params=VERSIONS)
def release_oracle(request):
    """The allocation oracle of one pinned release (hack/oracle, tests/integration/oracle.py), serving a module's
    differential tests."""
    from oracle import Oracle  # pylint: disable=import-outside-toplevel
    oracle = Oracle(request.param)
    yield oracle
    oracle.close()


@pytest.fixture(scope="session", params=VERSIONS)
def kind_cluster(request):
    """One kind cluster per pinned release for every real-node test of the session."""
    version = request.param
    name = "itk-%d-%d" % (int(version.split(".")[1]), os.getpid())
    workers = 2
    # DRA is switched on at creation here (on 1.33 it is off by default): these tests are about the
    # nodes, not about turning DRA on (playbooks/site.yml does that on `make demo`).
    up = [sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-up"), "--name", name, "--k8s-version", version,
          "--workers", str(workers), "--enable-dra"]
    started = time.time()
    res = subprocess.run(up, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                       capture_output=True, check=False)
        raise RuntimeError(f"kind cluster {version} did not come up:\n{res.stdout}\n{res.stderr}")
    print(f"\nkind cluster {name} up in {time.time() - started:.0f}s")
    try:
        yield kind_nodes.KindCluster(name, version, workers)
    finally:
        down = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                              capture_output=True, text=True, check=False)
        assert down.returncode == 0, f"kind-down left something behind:\n{down.stdout}\n{down.stderr}"


@pytest.fixture(scope="session")
def kind_driver(kind_cluster, tmp_path_factory):
    """The example driver installed by the collection's driver role (its own DaemonSet template)."""
    c = kind_cluster
    res = c.run_role("dra.admin.driver", tmp_path_factory.mktemp("driver"), {
        "dra_driver_name": kind_nodes.DRIVER, "dra_driver_namespace": kind_nodes.DRIVER_NAMESPACE,
        "dra_driver_image": kind_nodes.kindlib.driver_image(c.versions), "dra_driver_command": ["dra-example-kubeletplugin"],
        "dra_driver_wait_timeout": 240})
    assert res.returncode == 0, f"driver role failed:\n{res.stdout[-6000:]}\n{res.stderr[-2000:]}"
    return kind_nodes.DRIVER
