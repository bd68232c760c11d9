"""A kubeadm control plane of real binaries on this host, for tests/integration/test_control_plane.py.

`generate()` runs the real kubeadm (`init phase certs/kubeconfig/control-plane/etcd` with
`--rootfs`) into a scratch root. Addresses and ports are chosen there, through kubeadm's own
configuration (InitConfiguration.localAPIEndpoint.bindPort, ClusterConfiguration.controlPlaneEndpoint,
etcd.local.extraArgs, apiServer/controllerManager/scheduler extraArgs `--etcd-servers` and
`--secure-port`), so the manifests already name free local ports in 18000-18999 and 127.0.0.1.
That range is below the kernel's ephemeral port range (net.ipv4.ip_local_port_range, 32768-60999
by default): a port in it can be taken by any outgoing connection while its component restarts
(the roles' own /metrics polls included), and the component then cannot bind it again. No other
test uses it (the clusters of the suite: 10000-16999 and 20000-22999; `make demo`: 31000).

`StaticPods` stands in for the kubelet's static-Pod handling: it watches
`<root>/etc/kubernetes/manifests/*.yaml` and (re)starts each component from its manifest's
container `command` when the file's content changes, restarts a process that exits (with a
short back-off), and stops a component whose manifest disappears. The command line is taken
as written, with only these adjustments, each because this host is not the Pod's host:

1. The binary: `command[0]` (e.g. `kube-apiserver`, the image's entry point) becomes the
   binary of the same name built for the manifest's release (etcd: the built etcd).
2. Paths under the rootfs: a flag value (or a comma-separated part of it, or the part after
   `name=`) that is an absolute path under /etc/kubernetes or /var/lib/etcd gets the scratch
   root in front, because the hostPath volumes of the Pod are those paths on the host, and
   the host's files are under the root here. Paths already under the root are left alone.
3. `--config=<file>` (kube-scheduler): the file is read where the manifest says; the process
   gets a copy in the work directory with adjustment 2 applied to the `clientConnection.kubeconfig`
   inside it (the file itself, as the role wrote it, is not touched).

No port is changed by the helper: they come from the manifests. Logs go where the kubelet
keeps them, `<work>/pods/kube-system_<component>-<node>_<n>/<component>/<restart>.log`, so the
roles' "last log lines" step reads them. Every process runs in its own session and is
stopped (SIGTERM, then SIGKILL) by `stop()`.
"""
import hashlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time

import yaml

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ROOTFS_PREFIXES = ("/etc/kubernetes", "/var/lib/etcd")
# DRA_IT_CP_PORTS=first-last narrows it, e.g. for two runs at once (test_control_plane checks it too).
PORT_RANGE = tuple(int(p) for p in os.environ.get("DRA_IT_CP_PORTS", "18000-18999").split("-", 1))
NODE = "cp-1"
# kubeadm refuses a loopback advertise address when the host has no default route; this
# documentation address (as in the recorded fixtures) is only published, never bound to.
ADVERTISE_ADDRESS = "192.0.2.2"


def free_ports(count, taken=()):
    """`count` distinct ports of PORT_RANGE that nothing listens on right now."""
    ports = []
    candidates = list(range(PORT_RANGE[0], PORT_RANGE[1] + 1))
    random.shuffle(candidates)
    for port in candidates:
        if port in taken or port in ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError("no %d free ports in %d-%d" % (count, PORT_RANGE[0], PORT_RANGE[1]))


def kubeadm_config(version, ports):
    """kubeadm's InitConfiguration + ClusterConfiguration (v1beta4) for a local control plane."""
    def args(**kwargs):
        return [{"name": k.replace("_", "-"), "value": v} for k, v in kwargs.items()]

    api, etcd_client, etcd_peer, etcd_metrics, kcm, sched = (
        ports["api"], ports["etcd"], ports["etcd_peer"], ports["etcd_metrics"], ports["kcm"], ports["scheduler"])
    init = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration",
            "localAPIEndpoint": {"advertiseAddress": ADVERTISE_ADDRESS, "bindPort": api},
            "nodeRegistration": {"name": NODE}}
    cluster = {
        "apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
        "kubernetesVersion": version, "clusterName": "dra-it",
        "controlPlaneEndpoint": "127.0.0.1:%d" % api,
        "etcd": {"local": {"dataDir": "/var/lib/etcd", "extraArgs": args(
            listen_client_urls="https://127.0.0.1:%d" % etcd_client,
            advertise_client_urls="https://127.0.0.1:%d" % etcd_client,
            listen_peer_urls="https://127.0.0.1:%d" % etcd_peer,
            initial_advertise_peer_urls="https://127.0.0.1:%d" % etcd_peer,
            initial_cluster="%s=https://127.0.0.1:%d" % (NODE, etcd_peer),
            listen_metrics_urls="http://127.0.0.1:%d" % etcd_metrics)}},
        "apiServer": {"extraArgs": args(etcd_servers="https://127.0.0.1:%d" % etcd_client)},
        "controllerManager": {"extraArgs": args(secure_port=str(kcm))},
        "scheduler": {"extraArgs": args(secure_port=str(sched))},
    }
    return yaml.safe_dump_all([init, cluster], sort_keys=False)


def generate(kubeadm, root, version, ports):
    """Run the real kubeadm's init phases into `root`; return the manifest directory."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "kubeadm-config.yaml"), "w") as handle:
        handle.write(kubeadm_config(version, ports))
    for phase in (["certs", "all"], ["kubeconfig", "all"], ["control-plane", "all"], ["etcd", "local"]):
        res = subprocess.run([kubeadm, "init", "phase"] + phase + ["--rootfs", root, "--config", "/kubeadm-config.yaml"],
                             capture_output=True, text=True, check=False, timeout=120)
        if res.returncode != 0:
            raise RuntimeError("kubeadm init phase %s failed:\n%s\n%s" % (" ".join(phase), res.stdout, res.stderr))
    return os.path.join(root, "etc", "kubernetes", "manifests")


class StaticPods:
    """The kubelet's static-Pod behaviour for the four control-plane manifests (see the module docstring)."""

    def __init__(self, root, work, binaries, components=COMPONENTS, poll=0.3):
        self.root = root
        self.work = work
        self.binaries = binaries  # command[0] -> path of the built binary
        self.components = components
        self.poll = poll
        self.manifest_dir = os.path.join(root, "etc", "kubernetes", "manifests")
        self.log_dir = os.path.join(work, "pods")
        self._procs = {}  # component -> dict(proc, text, argv, started, restarts, exited_at, log)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self.starts = []  # (component, time, argv) of every start, for the tests

    # ---- adjustments ----
    def _map_path(self, value):
        if value.startswith(self.root + "/"):
            return value
        for prefix in ROOTFS_PREFIXES:
            if value == prefix or value.startswith(prefix + "/"):
                return self.root + value
        return value

    def _map_value(self, value):
        parts = []
        for part in value.split(","):
            name, sep, rest = part.partition("=")
            if sep and rest.startswith("/"):
                parts.append(name + "=" + self._map_path(rest))
            else:
                parts.append(self._map_path(part))
        return ",".join(parts)

    def _config_copy(self, component, path):
        with open(path) as handle:
            config = yaml.safe_load(handle) or {}
        connection = config.get("clientConnection") or {}
        if isinstance(connection.get("kubeconfig"), str):
            connection["kubeconfig"] = self._map_path(connection["kubeconfig"])
        target = os.path.join(self.work, "%s-config.yaml" % component)
        with open(target, "w") as handle:
            yaml.safe_dump(config, handle)
        return target

    def argv(self, component, manifest):
        container = manifest["spec"]["containers"][0]
        command = container["command"]
        argv = [self.binaries[command[0]]]
        for item in command[1:]:
            name, sep, value = item.partition("=")
            if not sep:
                argv.append(item)
                continue
            value = self._map_value(value)
            if name == "--config":
                value = self._config_copy(component, value)
            argv.append(name + "=" + value)
        return argv

    # ---- processes ----
    def _log_path(self, component, restarts):
        directory = os.path.join(self.log_dir, "kube-system_%s-%s_%d" % (component, NODE, int(time.time() * 1000)),
                                 component)
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, "%d.log" % restarts)

    def _start(self, component, text, restarts=0):
        manifest = yaml.safe_load(text)
        argv = self.argv(component, manifest)
        log_path = self._log_path(component, restarts)
        log = open(log_path, "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=self.work)
        log.close()
        self._procs[component] = dict(proc=proc, text=text, argv=argv, started=time.time(), restarts=restarts,
                                      exited_at=None, log=log_path)
        self.starts.append((component, time.time(), argv))

    @staticmethod
    def _kill(proc, grace=15):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(5)

    def _read(self, component):
        path = os.path.join(self.manifest_dir, component + ".yaml")
        try:
            with open(path) as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def sync(self):
        """One pass of the kubelet's loop: start, restart or stop what the manifests say."""
        with self._lock:
            for component in self.components:
                text = self._read(component)
                current = self._procs.get(component)
                if text is None:
                    if current:
                        self._kill(current["proc"])
                        del self._procs[component]
                    continue
                if current is None:
                    self._start(component, text)
                elif current["text"] != text:
                    self._kill(current["proc"])
                    self._start(component, text)
                elif current["proc"].poll() is not None:
                    # Crash-loop back-off: the kubelet starts at 10 s and doubles; shorter here.
                    if current["exited_at"] is None:
                        current["exited_at"] = time.time()
                    delay = min(8, 2 ** min(current["restarts"], 3))
                    if time.time() - current["exited_at"] >= delay:
                        self._start(component, text, current["restarts"] + 1)

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as exc:  # keep emulating; the tests see the effect
                print("static pods: %s" % exc)
            self._stop.wait(self.poll)

    def start(self):
        os.makedirs(self.log_dir, exist_ok=True)
        self.sync()
        self._thread = threading.Thread(target=self._loop, name="static-pods", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(10)
        with self._lock:
            for component in reversed(self.components):
                current = self._procs.pop(component, None)
                if current:
                    self._kill(current["proc"])

    # ---- what the tests read ----
    def process(self, component):
        with self._lock:
            current = self._procs.get(component)
            return dict(current) if current else None

    def pid(self, component):
        current = self.process(component)
        return current["proc"].pid if current and current["proc"].poll() is None else None

    def cmdline(self, component):
        """The running process's command line, read from /proc/<pid>/cmdline."""
        pid = self.pid(component)
        if pid is None:
            return None
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return [part.decode() for part in handle.read().split(b"\0") if part]

    def log_tail(self, component, lines=20):
        current = self.process(component)
        if not current:
            return ""
        with open(current["log"], errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])


def snapshot(*directories):
    """path -> sha256 of every file under the directories (to prove nothing was written)."""
    result = {}
    for directory in directories:
        if not os.path.isdir(directory):  # not there (yet): creating it would be a write too
            result[directory] = None
            continue
        for base, dummy, files in os.walk(directory):
            for name in files:
                path = os.path.join(base, name)
                with open(path, "rb") as handle:
                    result[path] = hashlib.sha256(handle.read()).hexdigest()
    return result


def copy_tree(source, target):
    shutil.copytree(source, target)
    return target
