"""Stopping and starting pieces of a test cluster made by hack/cluster/up: its kube-controller-manager (a host
process kwokctl started) and the example driver's kubelet plugin of one node."""
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position


def pid_listening_on(port):
    out = subprocess.run(["ss", "-Hltnp", "sport = :%d" % port], capture_output=True, text=True, check=True).stdout
    for part in out.split("pid=")[1:]:
        return int(part.split(",")[0])
    return None


class ControllerManager:
    """Stop and (re)start the cluster's kube-controller-manager (same binary, same flags; the client rate
    limits may be changed)."""

    def __init__(self, cluster, workdir):
        self.cluster = cluster
        self.port = cluster.port + 1
        pid = pid_listening_on(self.port)
        assert pid, "no kube-controller-manager listening on %d" % self.port
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            self.original = [a.decode() for a in handle.read().split(b"\0") if a]
        self.cwd = os.readlink("/proc/%d/cwd" % pid)
        self.pid = pid
        self.workdir = workdir
        self.proc = None

    def stop(self):
        """Stop it and wait until its port is free (nothing to do when it is not running)."""
        if not pid_listening_on(self.port):
            return
        os.kill(self.pid, signal.SIGTERM)
        self.cluster.wait_until(lambda: not pid_listening_on(self.port), 30, "kube-controller-manager to stop",
                                interval=0.3)

    def start(self, qps, burst):
        self.stop()
        args = [a for a in self.original if not a.startswith(("--kube-api-qps", "--kube-api-burst"))]
        if qps is not None:
            args += ["--kube-api-qps=%s" % qps, "--kube-api-burst=%s" % burst]
        log = open(os.path.join(self.workdir, "kcm-%s.log" % qps), "w")
        self.proc = subprocess.Popen(args, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.cluster.wait_until(lambda: pid_listening_on(self.port), 60, "kube-controller-manager listening")
        self.pid = pid_listening_on(self.port)
        # kwokctl stops the control plane by its pid files: keep them pointing at the running process.
        pid_file = os.path.join(self.cluster.state_dir, "kwok", "clusters", self.cluster.name, "pids",
                                "kube-controller-manager.pid")
        if os.path.exists(pid_file):
            with open(pid_file, "w") as handle:
                handle.write(str(self.pid))

    def restore(self):
        self.start(None, None)


def stop_driver_plugin(cluster, node):
    """Stop the node's dra-example-kubeletplugin process (its ResourceSlices stay, as after a crash)."""
    state = clusterlib.read_state(clusterlib.cluster_state(cluster.name))
    pid = state["plugins"][node]["pid"]
    assert clusterlib.plugin_pid_alive(pid), "no driver plugin running for %s" % node
    clusterlib.stop_pid(pid)


def restore_driver_plugins(cluster, nodes):
    """hack/cluster/up on the running cluster: starts the plugins that are not running and waits until every
    node publishes ResourceSlices again."""
    res = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "up"), "--name", cluster.name,
                          "--k8s-version", cluster.version, "--nodes", str(nodes), "--port", str(cluster.port)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, "restarting the driver plugins failed:\n%s\n%s" % (res.stdout, res.stderr)
