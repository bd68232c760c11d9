"""Shared helpers of hack/cluster/{build,up,down}: versions and paths.

The errors and the wait helper come from kube.py beside this file (the API client and wait helper
of the tests, the benchmarks and hack/), and are re-exported here for the scripts that import them
from clusterlib.
"""
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from kube import ClusterError, GaveUp, Kubectl, WaitTimeout, wait_for  # noqa: E402,F401  pylint: disable=wrong-import-position

CACHE_ROOT = os.path.expanduser(os.environ.get("DRA_ADMIN_CACHE", "~/.cache/dra-admin"))


def load_versions(path=os.path.join(HERE, "versions.env")):
    versions = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                versions[key.strip()] = value.strip()
    return versions


def go_mod_download(module, version):
    """`go mod download -json module@version` outside any module: what it prints (GoMod, Dir, ...). A module that asks
    for a newer Go than the one on PATH (k8s.io/kubernetes 1.38) is downloaded with versions.env's GO_TOOLCHAIN, which
    the go command fetches from the module proxy. ClusterError, with the go command's output, where the proxy does
    not serve it."""
    import json
    import subprocess

    def run(toolchain):
        res = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                             env=dict(os.environ, GOFLAGS="", GOTOOLCHAIN=toolchain, GOWORK="off"), cwd=HERE)
        try:
            return res, json.loads(res.stdout)
        except ValueError:
            return res, {}
    res, info = run("local")
    if res.returncode != 0 and "requires go >=" in info.get("Error", ""):
        res, info = run(load_versions()["GO_TOOLCHAIN"])
    if res.returncode != 0:
        raise ClusterError(f"cannot download {module}@{version} from the Go module proxy: "
                           f"{(res.stdout + res.stderr).strip()[-400:]}")
    return info


def supported_k8s_versions(versions=None):
    return (versions or load_versions())["K8S_VERSIONS"].split()


def kind_k8s_versions(versions=None):
    """Releases a kind cluster may run: the pinned ones, then the one the upgrade test starts from."""
    versions = versions or load_versions()
    pinned = supported_k8s_versions(versions)
    return pinned + [v for v in versions.get("K8S_UPGRADE_FROM", "").split() if v not in pinned]


def tree_digest(directory, length=12):
    """A digest of the files under directory (names and contents): a version for this project's own sources."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as fh:
                digest.update(fh.read())
    return digest.hexdigest()[:length]


# The allocation oracle (hack/oracle): this project's own Go program on k8s.io/dynamic-resource-allocation, built
# per Kubernetes release with the release's own modules (hack/cluster/build); a test oracle, never shipped.
ORACLE_SRC = os.path.join(os.path.dirname(HERE), "oracle")
ORACLE = "dra-oracle"


def oracle_version(k8s_version):
    """The oracle's cache version: the Kubernetes release it is built against and a digest of its sources."""
    return f"{k8s_version}-{tree_digest(ORACLE_SRC, 8)}"


def oracle_bin(k8s_version):
    return component_bin(ORACLE, oracle_version(k8s_version), ORACLE)


def component_dir(name, version):
    return os.path.join(CACHE_ROOT, f"{name}-{version}")


def component_bin(name, version, binary):
    return os.path.join(component_dir(name, version), "bin", binary)


STATE_ROOT = os.path.expanduser(os.environ.get("DRA_ADMIN_STATE", os.path.join(CACHE_ROOT, "state")))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))


def log(msg):
    print(f"[cluster] {msg}", flush=True)


COLLECTIONS = os.path.join(REPO_ROOT, ".tmp", "collections")


def collection_on_path():
    """Make this checkout importable as ansible_collections.dra.admin: the link `make collection-link`
    keeps under .tmp/collections (made here when missing), with .tmp/collections on sys.path."""
    link = os.path.join(COLLECTIONS, "ansible_collections", "dra", "admin")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.islink(link):
            os.unlink(link)  # dangling (the checkout moved)
        os.symlink(REPO_ROOT, link)
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)


def collection_module(name):
    """A pure module of the collection (plugins/module_utils/<name>.py) imported as the collection's own
    code, without Ansible (the pure modules import each other that way)."""
    import importlib
    collection_on_path()
    return importlib.import_module("ansible_collections.dra.admin.plugins.module_utils." + name)


def catalog():
    """The collection's version catalog (plugins/module_utils/releases/catalog.py)."""
    return collection_module("releases.catalog")


def gates_and_runtime_config(k8s_version, extra_gates=None):
    """--feature-gates and --runtime-config strings DRA needs on this version, with `extra_gates`
    (name -> bool) switched too and the API versions they need: what the feature_gates role writes
    (the catalog's dra_settings); raises ClusterError with the catalog's errors."""
    settings = catalog().dra_settings(k8s_version, extra_gates or {})
    if settings["errors"]:
        raise ClusterError("; ".join(settings["errors"]))
    gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(settings["gates"].items()))
    runtime = ",".join(f"{k}={v}" for k, v in sorted(settings["runtime_config"].items()))
    return gates, runtime


def deviceclass_manifest(k8s_version, driver):
    gates_mod = catalog()
    served = set(gates_mod.default_served_api_versions(k8s_version)) | {
        k.split("/")[1] for k in gates_mod.runtime_config_for_dra(k8s_version)}
    api = gates_mod.preferred_api_version(served)
    return (f"apiVersion: resource.k8s.io/{api}\nkind: DeviceClass\nmetadata:\n  name: {driver}\n"
            f"spec:\n  selectors:\n  - cel:\n      expression: device.driver == \"{driver}\"\n")


def cluster_state(name):
    directory = os.path.join(STATE_ROOT, name)
    return {"dir": directory, "file": os.path.join(directory, "cluster.json"),
            "kubeconfig": os.path.join(directory, "kubeconfig"),
            "kwok_workdir": os.path.join(directory, "kwok")}


def read_state(st):
    import json
    try:
        with open(st["file"]) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def write_state(st, state):
    import json
    tmp = st["file"] + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(state, fh, indent=2)
    os.replace(tmp, st["file"])


def port_in_use(port):
    """False when a server can listen on the port (as Go's listeners do, with SO_REUSEADDR: a port whose
    last connections are in TIME_WAIT is free)."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def ensure_ports_free(ports, what):
    taken = [p for p in ports if port_in_use(p)]
    if taken:
        raise ClusterError(f"port(s) {', '.join(map(str, taken))} already in use ({what}); stop whatever "
                           f"listens there or choose another --port")


def ephemeral_port_range(path="/proc/sys/net/ipv4/ip_local_port_range"):
    """The kernel's range of source ports for outgoing connections, or None when unreadable."""
    try:
        with open(path) as fh:
            low, high = (int(x) for x in fh.read().split())
    except (OSError, ValueError):
        return None
    return low, high


def ensure_outside_ephemeral_range(first, last, what, port_range=None):
    """Refuse listening ports the kernel may hand to outgoing connections (they can be taken at any time)."""
    port_range = port_range or ephemeral_port_range()
    if port_range is None:
        return
    low, high = port_range
    if first <= high and last >= low:
        raise ClusterError(f"{what} {first}-{last} overlap the kernel's ephemeral port range {low}-{high} "
                           f"(net.ipv4.ip_local_port_range): an outgoing connection can take one of them while "
                           f"the cluster starts; choose a --port below {low - (last - first)}")


def kubectl(args, env, kubeconfig, stdin=None):
    """kubectl's output (kube.Kubectl: a failure raises a ClusterError)."""
    return Kubectl(kubeconfig, env).run(*args, stdin=stdin).stdout


def component_pidfile(workdir, component):
    """kwokctl's binary runtime keeps one pid file per component under <cluster workdir>/pids/."""
    return os.path.join(workdir, "pids", component + ".pid")


def component_pid(workdir, component):
    with open(component_pidfile(workdir, component)) as fh:
        return int(fh.read().strip())


def component_argv(workdir, component):
    """The command line of a running component, from /proc."""
    with open(f"/proc/{component_pid(workdir, component)}/cmdline", "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0") if a]


def restart_component(workdir, component, argv=None, between=None):
    """Stop a kwokctl component (SIGTERM, wait until it is gone, SIGKILL after 20 s), call between(),
    and start argv (default: its own command line) in the same directory, logging to the same file.

    Waiting for the old process matters: a new one started beside it cannot bind its ports and exits.
    The pid file is rewritten, so `kwokctl stop/delete cluster` (hack/cluster/down) stops the new process.
    """
    import subprocess
    pid = component_pid(workdir, component)
    argv = argv or component_argv(workdir, component)
    cwd = os.readlink(f"/proc/{pid}/cwd")
    logpath = os.readlink(f"/proc/{pid}/fd/1")
    stop_pid(pid, timeout=20)
    if between:
        between()
    with open(logpath, "a") as logfh, open(os.devnull) as devnull:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=devnull, stdout=logfh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    tmp = component_pidfile(workdir, component) + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(str(proc.pid))
    os.replace(tmp, component_pidfile(workdir, component))
    return proc


def component_pids(workdir):
    """{component: pid} from kwokctl's pid files in a cluster's workdir ({} when it has no pids/ directory)."""
    pids = {}
    directory = os.path.join(workdir, "pids")
    for entry in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if entry.endswith(".pid"):
            try:
                pids[entry[:-4]] = component_pid(workdir, entry[:-4])
            except (OSError, ValueError):
                pass
    return pids


def live_components(workdir):
    """{component: pid} of the components whose pid file names a live process running that component."""
    return {c: pid for c, pid in component_pids(workdir).items() if process_alive(pid, c)}


def process_alive(pid, program):
    """True when pid is a live process whose command line names program."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return program.encode() in fh.read()
    except OSError:
        return False


def plugin_pid_alive(pid):
    """True when pid is a live dra-example-kubeletplugin process."""
    return process_alive(pid, "dra-example-kubeletplugin")


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def stop_pids(pids, timeout=10):
    """SIGTERM every process at once, wait up to timeout for all of them, SIGKILL what is left."""
    import signal
    import time
    alive = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            alive.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.time() + timeout
    while alive and time.time() < deadline:
        alive = [pid for pid in alive if not _gone(pid)]
        if alive:
            time.sleep(0.2)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_pid(pid, timeout=10):
    stop_pids([pid], timeout)


def keep_component_logs(st, name):
    """Copy the control-plane components' logs to <state>/component-logs (kwokctl delete removes them)."""
    import shutil
    logs = os.path.join(st["kwok_workdir"], "clusters", name, "logs")
    if os.path.isdir(logs):
        shutil.copytree(logs, os.path.join(st["dir"], "component-logs"), dirs_exist_ok=True)


def stop_cluster(st, env, kwokctl_bin, keep_logs=False):
    """Stop the plugins (by recorded pid), the kwokctl cluster, and remove the state.

    With keep_logs, the state directory (component and plugin logs) is moved to
    <state>.failed instead of being removed, and its path returned.
    """
    import shutil
    import subprocess
    state = read_state(st) or {}
    name = state.get("name") or os.path.basename(st["dir"])
    stop_pids([p["pid"] for p in state.get("plugins", {}).values() if plugin_pid_alive(p["pid"])])
    if keep_logs:
        keep_component_logs(st, name)
    components = live_components(os.path.join(st["kwok_workdir"], "clusters", name)).values()
    if os.path.isdir(st["kwok_workdir"]) and kwokctl_bin and os.access(kwokctl_bin, os.X_OK):
        subprocess.run([kwokctl_bin, "delete", "cluster", "--name", name, "--kubeconfig", st["kubeconfig"]],
                       env=dict(env, KWOK_WORKDIR=st["kwok_workdir"]), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    # kwokctl kills the components (SIGKILL) without waiting for them: until they are gone their ports
    # are taken, and a cluster started right after (molecule's destroy, then create) would find them so.
    stop_pids([pid for pid in components if not _gone(pid)])
    if keep_logs and os.path.isdir(st["dir"]):
        kept = st["dir"] + ".failed"
        shutil.rmtree(kept, ignore_errors=True)
        os.replace(st["dir"], kept)
        return kept
    shutil.rmtree(st["dir"], ignore_errors=True)
    return None
