"""The version catalog's verdict on DRA feature gates against the real binaries' verdict.

For one Kubernetes release, every gate of the comparison is set to true and, separately, to
false. The catalog gives its verdict the way the feature_gates role and dra_version_info do
(`validate_dra_gates` and the module's `version_info`: the request merged with what DRA needs);
the binaries are started with the gates the role would write (the same merge) and the
--runtime-config it would write, and give theirs:

- refused: the process exits and its output has a feature-gate error ("unrecognized feature
  gate", "cannot set feature gate ... locked to", "... is enabled, but depends on features that
  are disabled", "... PreAlpha ...");
- accepted: kube-apiserver, kube-controller-manager and kube-scheduler answer /healthz with 200;
  the kubelet gets past every feature-gate check (flag parsing, configuration validation,
  server validation) and stops at the next step, taking its lock file, which is placed in a
  directory that does not exist ("unable to acquire file lock"): so it never touches the host;
- anything else (another exit, or no answer within the limit) is no verdict, and a mismatch.

Which gates: every gate the catalog lists for the release, plus every gate kube-apiserver
--help lists under --feature-gates whose name starts with "DRA" or "ResourceHealthStatus" or
contains "DynamicResource" (DRA_GATE). --help lists alpha and beta gates only: a GA gate the
catalog does not know is not found this way.

One etcd serves every attempt (each with its own --etcd-prefix). Ports: etcd 17000-17001,
attempt slot k uses 17010+10k to 17012+10k (kube-apiserver, kube-controller-manager,
kube-scheduler), all on 127.0.0.1. kube-apiserver runs with RBAC (anonymous requests may read
/healthz) and a static token in system:masters for the other two.

Used by tests/integration/test_gate_matrix.py (the pinned releases) and hack/gate-matrix
(`make gate-matrix`, every release from 1.32, written to docs/gate-matrix.md).
"""
import concurrent.futures
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import clusterlib  # noqa: E402

# Component names as the version catalog spells them.
_GATES = clusterlib.collection_module("releases.catalog")
APISERVER = _GATES.KUBE_APISERVER
KCM = _GATES.KUBE_CONTROLLER_MANAGER
SCHEDULER = _GATES.KUBE_SCHEDULER
KUBELET = _GATES.KUBELET
COMPONENTS = _GATES.COMPONENTS

ACCEPTED = "accepted"
REFUSED = "refused"
NO_VERDICT = "no verdict"

DRA_GATE = re.compile(r"^(DRA|ResourceHealthStatus)|DynamicResource")
GATE_ERROR = re.compile(
    r"unrecognized feature gate: \w+"
    r"|cannot set feature gate \w+ to \w+, feature is (?:locked to \w+|PreAlpha[^\n\"]*)"
    r"|\b\w+ is enabled, but depends on features that are disabled: \[[^\]]*\]")
KUBELET_PAST_GATES = re.compile(r"unable to acquire file lock on")
HELP_GATE = re.compile(r"^\s+(?:\w+:)?(\w+)=true\|false \((ALPHA|BETA) - default=(true|false)\)", re.M)

ETCD_PORT = 17000
SLOT_BASE = 17010
SLOT_WIDTH = 10
PORT_LIMIT = 17999
TOKEN = "gate-matrix-only-on-127.0.0.1"  # system:masters for kube-controller-manager and kube-scheduler
WAIT_LIMIT = 240  # seconds a component may take to give a verdict before it counts as none

# Where the collection is deliberately stricter than the binaries: (minor, gate, value) -> why.
# docs/decisions.md ("Version catalog") explains each; the comparison requires exactly these.
EXCEPTIONS = {
    (32, "DynamicResourceAllocation", False): "the role only enables DRA; the binaries accept DRA off",
    (33, "DynamicResourceAllocation", False): "the role only enables DRA; the binaries accept DRA off",
}


class MatrixError(Exception):
    """Something that keeps the comparison from running (not a mismatch)."""


# ---- the catalog's side ----------------------------------------------------------------

def catalog_modules():
    """(gate_catalog, dra_version_info) imported as the collection's own code."""
    clusterlib.collection_on_path()
    from ansible_collections.dra.admin.plugins.module_utils.releases import catalog as gate_catalog
    from ansible_collections.dra.admin.plugins.modules import dra_version_info
    return gate_catalog, dra_version_info


def catalog_verdict(version, gate, value):
    """(verdict, message) of the role's check and of dra_version_info; MatrixError when they differ."""
    gates, module = catalog_modules()
    role_errors = gates.validate_dra_gates(version, {gate: value})
    module_errors = module.version_info(version, {gate: value})["errors"]
    if role_errors != module_errors:
        raise MatrixError("%s %s=%s: the role's check says %r but dra_version_info says %r"
                          % (version, gate, value, role_errors, module_errors))
    return (REFUSED, "; ".join(role_errors)) if role_errors else (ACCEPTED, "")


def written_settings(version, gate, value):
    """(gates, runtime_config) the feature_gates role writes for {gate: value} (also when it refuses)."""
    gates, dummy = catalog_modules()
    written = gates.dra_gates(version, {gate: value})
    return written, gates.dra_runtime_config(version, written)


def flag_map(entries):
    return ",".join("%s=%s" % (k, str(v).lower()) for k, v in sorted(entries.items()))


# ---- the binaries' side ----------------------------------------------------------------

def parse_help(text):
    """Gates a --help text lists under --feature-gates: name -> (stage, default)."""
    return dict((m.group(1), (m.group(2).lower(), m.group(3) == "true")) for m in HELP_GATE.finditer(text))


def listed_gates(apiserver):
    """Gates kube-apiserver --help lists: name -> (stage, default)."""
    res = subprocess.run([apiserver, "--help"], capture_output=True, text=True, check=False, timeout=60)
    found = parse_help(res.stdout)
    if not found:
        raise MatrixError("%s --help lists no feature gates (exit %d): %s"
                          % (apiserver, res.returncode, (res.stdout + res.stderr)[-500:]))
    return found


def comparison_gates(version, listed):
    """Sorted names: the catalog's gates for the release and the DRA gates the binary lists."""
    gates, dummy = catalog_modules()
    return sorted(set(gates.gate_catalog(version)) | set(n for n in listed if DRA_GATE.search(n)))


def listing_differences(version, listed):
    """Catalog gates whose stage or default differs from what --help lists (alpha/beta gates)."""
    gates, dummy = catalog_modules()
    diffs = []
    for name, info in sorted(gates.gate_catalog(version).items()):
        if name in listed and listed[name] != (info["stage"], info["default"]):
            diffs.append("%s: catalog %s default=%s, --help %s default=%s" % (
                name, info["stage"], str(info["default"]).lower(), listed[name][0], str(listed[name][1]).lower()))
    return diffs


def healthz(port):
    """True when https://127.0.0.1:<port>/healthz answers 200."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen("https://127.0.0.1:%d/healthz" % port, timeout=3, context=context) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def stop(*procs, grace=5):
    """SIGTERM every process group at once, SIGKILL what is left after `grace` seconds; returns once all
    are gone. (kube-controller-manager goes on for a while after SIGTERM; an attempt's processes keep
    nothing worth a clean shutdown: their etcd prefix is never used again.)"""
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        signal_group(proc, signal.SIGTERM)
    deadline = time.time() + grace
    for proc in running:
        try:
            proc.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait(10)


def read_log(path):
    with open(path, errors="replace") as handle:
        return handle.read()


def tail(text, lines=6):
    return "".join(text.splitlines(True)[-lines:]).strip()


class Harness:
    """One etcd and a service-account key shared by every attempt; start() before attempts, close() after."""

    def __init__(self, etcd, work=None, interval=0.25):
        self.etcd_bin = etcd
        self.work = work or tempfile.mkdtemp(prefix="gate-matrix-")
        self.interval = interval
        self.etcd = None
        self.sa_key = os.path.join(self.work, "sa.key")
        self.token_file = os.path.join(self.work, "tokens.csv")

    def start(self):
        for port in (ETCD_PORT, ETCD_PORT + 1):
            if clusterlib.port_in_use(port):
                raise MatrixError("port %d (gate matrix etcd) is in use: stop whatever listens there" % port)
        res = subprocess.run(["openssl", "genrsa", "-out", self.sa_key, "2048"], capture_output=True, text=True,
                             check=False)
        if res.returncode != 0:
            raise MatrixError("openssl genrsa failed: %s" % res.stderr)
        with open(self.token_file, "w") as handle:
            handle.write("%s,gate-matrix,gate-matrix,system:masters\n" % TOKEN)
        log = open(os.path.join(self.work, "etcd.log"), "wb")
        client, peer = "http://127.0.0.1:%d" % ETCD_PORT, "http://127.0.0.1:%d" % (ETCD_PORT + 1)
        self.etcd = subprocess.Popen(
            [self.etcd_bin, "--name", "gm", "--data-dir", os.path.join(self.work, "etcd"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "gm=" + peer, "--quota-backend-bytes", str(2 * 1024 ** 3)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.etcd.poll() is not None:
                raise MatrixError("etcd exited: %s" % tail(read_log(os.path.join(self.work, "etcd.log"))))
            try:
                with urllib.request.urlopen(client + "/health", timeout=2) as resp:
                    if b'"health":"true"' in resp.read():
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(self.interval)
        raise MatrixError("etcd did not report healthy within 60 s: %s"
                          % tail(read_log(os.path.join(self.work, "etcd.log"))))

    def close(self, keep=False):
        if self.etcd is not None:
            stop(self.etcd)
            self.etcd = None
        if not keep:
            shutil.rmtree(self.work, ignore_errors=True)

    # ---- one attempt -------------------------------------------------------------------

    def argv(self, component, binary, directory, ports, gates, runtime_config, prefix):
        gate_flag = "--feature-gates=" + flag_map(gates)
        if component == APISERVER:
            argv = [binary, "--etcd-servers=http://127.0.0.1:%d" % ETCD_PORT, "--etcd-prefix=" + prefix,
                    "--bind-address=127.0.0.1", "--secure-port=%d" % ports[APISERVER],
                    "--cert-dir=" + os.path.join(directory, "apiserver-certs"),
                    "--authorization-mode=RBAC", "--token-auth-file=" + self.token_file,
                    "--service-account-issuer=https://gate-matrix.invalid",
                    "--service-account-key-file=" + self.sa_key,
                    "--service-account-signing-key-file=" + self.sa_key, gate_flag]
            if runtime_config:
                argv.append("--runtime-config=" + flag_map(runtime_config))
            return argv
        if component in (KCM, SCHEDULER):
            return [binary, "--kubeconfig=" + self.kubeconfig(directory, ports[APISERVER]),
                    "--bind-address=127.0.0.1", "--secure-port=%d" % ports[component],
                    "--cert-dir=" + os.path.join(directory, component + "-certs"), "--leader-elect=false", gate_flag]
        # The kubelet reads its gates from its configuration file, where the role writes them, and stops
        # right after its feature-gate checks: its lock file's directory does not exist.
        return [binary, "--config=" + self.kubelet_config(directory, gates),
                "--lock-file=" + os.path.join(directory, "no-such-dir", "kubelet.lock"),
                "--root-dir=" + os.path.join(directory, "kubelet-root"),
                "--cert-dir=" + os.path.join(directory, "kubelet-certs")]

    @staticmethod
    def kubelet_config(directory, gates):
        """A KubeletConfiguration with the gates; failCgroupV1 false, or a 1.35+ kubelet on a cgroup v1
        host stops in the same validation step before its gates are judged to the end."""
        path = os.path.join(directory, "kubelet-config.yaml")
        with open(path, "w") as handle:
            handle.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                         "failCgroupV1: false\nvolumePluginDir: %s\nfeatureGates:\n%s"
                         % (os.path.join(directory, "kubelet-volume-plugins"),
                            "".join("  %s: %s\n" % (k, str(v).lower()) for k, v in sorted(gates.items()))
                            or "  {}\n"))
        return path

    @staticmethod
    def kubeconfig(directory, port):
        path = os.path.join(directory, "kubeconfig")
        if not os.path.exists(path):
            with open(path, "w") as handle:
                handle.write(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: gm\n  cluster:\n"
                    "    server: https://127.0.0.1:%d\n    insecure-skip-tls-verify: true\n"
                    "users:\n- name: gm\n  user:\n    token: %s\ncontexts:\n- name: gm\n  context:\n"
                    "    cluster: gm\n    user: gm\ncurrent-context: gm\n" % (port, TOKEN))
        return path

    def verdict(self, component, proc, log_path, port):
        """Wait for the component's own evidence; (verdict, evidence)."""
        deadline = time.time() + WAIT_LIMIT
        while True:
            exited = proc.poll() is not None
            output = read_log(log_path)
            error = GATE_ERROR.search(output)
            if error:
                return REFUSED, error.group(0)
            if component == KUBELET and KUBELET_PAST_GATES.search(output):
                return ACCEPTED, "past the feature-gate checks (stopped at its lock file)"
            if exited:
                return NO_VERDICT, "exited with %s without a feature-gate error: %s" % (proc.returncode, tail(output))
            if port is not None and healthz(port):
                return ACCEPTED, "/healthz 200"
            if time.time() > deadline:
                return NO_VERDICT, "neither refused nor healthy after %d s: %s" % (WAIT_LIMIT, tail(output))
            time.sleep(self.interval)

    def attempt(self, slot, version, binaries, gate, value):
        """Start every component in `binaries` with what the role writes for {gate: value}; their verdicts."""
        gates, runtime_config = written_settings(version, gate, value)
        return self.start_with(slot, version, binaries, "%s=%s" % (gate, str(value).lower()), gates, runtime_config)

    def start_with(self, slot, version, binaries, label, gates, runtime_config=None, component_gates=None):
        """Start every component in `binaries` with these gates (those of `component_gates`, {component: gates},
        with their own) and kube-apiserver with this --runtime-config; {gates, runtime_config, components:
        {component: (verdict, evidence)}, logs: {component: path}}."""
        component_gates = component_gates or {}
        base = SLOT_BASE + SLOT_WIDTH * slot
        if base + len(COMPONENTS) > PORT_LIMIT:
            raise MatrixError("slot %d is outside the gate matrix's ports (to %d)" % (slot, PORT_LIMIT))
        ports = {APISERVER: base, KCM: base + 1, SCHEDULER: base + 2, KUBELET: None}
        directory = os.path.join(self.work, version, label)
        os.makedirs(directory, exist_ok=True)
        busy = [p for p in ports.values() if p is not None and clusterlib.port_in_use(p)]
        if busy:
            raise MatrixError("port(s) %s of slot %d are in use" % (busy, slot))
        prefix = "/gate-matrix/%s/%s" % (version, label.replace("=", "-"))
        procs, logs, results = {}, {}, {}

        def start(components):
            for component in components:
                if component in binaries:
                    logs[component] = os.path.join(directory, component + ".log")
                    with open(logs[component], "wb") as log:
                        procs[component] = subprocess.Popen(
                            self.argv(component, binaries[component], directory, ports,
                                      component_gates.get(component, gates), runtime_config, prefix),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=directory)

        def judge(components):
            for component in components:
                if component in procs:
                    results[component] = self.verdict(component, procs[component], logs[component],
                                                      ports[component])

        try:
            # kube-controller-manager and kube-scheduler give up when the API server is not healthy within
            # their own limit, so they start once kube-apiserver has its verdict (refusing gates comes
            # before they contact it).
            start((APISERVER, KUBELET))
            judge((APISERVER, KUBELET))
            start((KCM, SCHEDULER))
            judge((KCM, SCHEDULER))
        finally:
            stop(*procs.values())
        return {"gates": gates, "runtime_config": runtime_config,
                "components": dict((c, results[c]) for c in COMPONENTS if c in results), "logs": logs}


def binary_verdict(components):
    """One verdict for the release from the components' verdicts: theirs when they agree, else NO_VERDICT."""
    verdicts = set(v for v, dummy in components.values())
    return verdicts.pop() if len(verdicts) == 1 else NO_VERDICT


def each_on_a_slot(count, workers, run):
    """run(index, slot) for every index below `count`, `workers` at a time, each holding a port slot of its own
    (0 to workers - 1, Harness.start_with) while it runs; an exception of any is raised once all have ended."""
    slots = list(range(workers))

    def on_a_slot(index):
        slot = slots.pop()
        try:
            run(index, slot)
        finally:
            slots.append(slot)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(on_a_slot, i) for i in range(count)]:
            future.result()


def compare(version, binaries, harness, workers=2, log=None):
    """Every case of the release: a list of row dicts (gate, value, catalog, binary, match, ...)."""
    minor = clusterlib_minor(version)
    listed = listed_gates(binaries[APISERVER])
    cases = [(gate, value) for gate in comparison_gates(version, listed) for value in (True, False)]
    rows = [None] * len(cases)

    def run(index, slot):
        gate, value = cases[index]
        started = time.time()
        result = harness.attempt(slot, version, binaries, gate, value)
        catalog, message = catalog_verdict(version, gate, value)
        binary = binary_verdict(result["components"])
        exception = EXCEPTIONS.get((minor, gate, value))
        row = {"gate": gate, "value": value, "catalog": catalog, "catalog_message": message, "binary": binary,
               "components": result["components"], "match": catalog == binary, "exception": exception,
               "seconds": round(time.time() - started, 1)}
        rows[index] = row
        if log:
            note = "" if row["match"] else "  (listed exception)" if exception else "  <-- MISMATCH"
            log("%s %s=%s: catalog %s, binaries %s%s (%.0f s)" % (
                version, gate, str(value).lower(), catalog, binary, note, row["seconds"]))

    each_on_a_slot(len(cases), workers, run)
    return {"version": version, "rows": rows, "listing": listing_differences(version, listed),
            "components": [c for c in COMPONENTS if c in binaries]}


# ---- the release's whole gate list against the binaries ---------------------------------

LOCKED_ERROR = re.compile(r"cannot set feature gate (\w+) to \w+, feature is locked to \w+")
UNRECOGNIZED_ERROR = re.compile(r"unrecognized feature gate: (\w+)")


def kube_gate_lists():
    return clusterlib.collection_module("releases.kube_gate_lists")


def release_list(version):
    """{gate: {stage, default, locked}}: every gate of the release's list (catalog.kube_gate_info), which must have
    been read from this very release (hack/kube-gate-lists takes the pinned release of a pinned minor)."""
    minor, lists = clusterlib_minor(version), kube_gate_lists()
    if lists.RELEASES.get(minor) != version:
        raise MatrixError("the gate list of 1.%d was read from %s, not %s: run hack/kube-gate-lists"
                          % (minor, lists.RELEASES.get(minor, "no release"), version))
    known = dict((name, _GATES.kube_gate_info(minor, name)) for name in lists.GATES)
    return dict((name, info) for name, info in known.items() if info is not None)


def list_cases(version):
    """What the release's list (and catalog.kube_gates_unknown_to) says its binaries do, as [(label, {component:
    gates}, expected, named)]: every gate at its default is accepted by each component, less those it does not
    know, and each of those is refused by it ("unrecognized feature gate"); every locked gate at the other value is
    refused, each named ("cannot set feature gate ... locked"); each gate the previous list has and this one not is
    refused ("unrecognized feature gate")."""
    minor, known = clusterlib_minor(version), release_list(version)
    unknown = _GATES.kube_gates_unknown_to(minor)

    def each(gates):
        return dict((c, dict((n, v) for n, v in gates.items() if c not in unknown.get(n, ()))) for c in COMPONENTS)

    cases = [("list-defaults", each(dict((n, i["default"]) for n, i in known.items())), ACCEPTED, [])]
    for name, components in sorted(unknown.items()):
        for component in components:
            cases.append(("list-unknown-%s-%s" % (component, name), {component: {name: known[name]["default"]}},
                          REFUSED, [name]))
    locked = sorted(n for n, i in known.items() if i["locked"])
    if locked:
        cases.append(("list-locked", each(dict((n, not known[n]["default"]) for n in locked)), REFUSED, locked))
    for name in sorted(n for n in kube_gate_lists().GATES if _GATES.kube_gate_removed_in(n) == minor):
        gates = {name: _GATES.kube_gate_info(minor - 1, name)["default"]}
        cases.append(("list-removed-" + name, dict((c, gates) for c in COMPONENTS), REFUSED, [name]))
    return cases


def named_in(log_paths, pattern):
    """{component: set of gate names its whole log names with `pattern`} (read after it stopped)."""
    return dict((component, set(pattern.findall(read_log(path)))) for component, path in log_paths.items())


def check_list(version, binaries, harness, workers=2, log=None):
    """Every case of list_cases against the binaries (a case of one component starts it alone, with kube-apiserver
    beside it for kube-controller-manager and kube-scheduler): (cases run, [problem, ...])."""
    cases, found = list_cases(version), []

    def run(index, slot):
        label, component_gates, expected, named = cases[index]
        judged = [c for c in COMPONENTS if c in component_gates and c in binaries]
        started = dict((c, binaries[c]) for c in binaries
                       if c in judged or (c == APISERVER and set(judged) & set((KCM, SCHEDULER))))
        result = harness.start_with(slot, version, started, label, {}, component_gates=component_gates)
        names = named_in(result["logs"], LOCKED_ERROR if label == "list-locked" else UNRECOGNIZED_ERROR)
        for component in judged:
            verdict, evidence = result["components"][component]
            want = sorted(n for n in named if n in component_gates[component])
            if verdict != expected:
                found.append("%s %s (%d gates): %s %s, the list says %s: %s" % (
                    version, label, len(component_gates[component]), component, verdict, expected, evidence))
            elif want and names[component] != set(want):
                found.append("%s %s: %s names %s, the list says %s" % (
                    version, label, component, ", ".join(sorted(names[component])) or "none", ", ".join(want)))
        if log:
            log("%s %s: %s" % (version, label, ", ".join(
                "%s %s" % (c, result["components"][c][0]) for c in judged)))

    each_on_a_slot(len(cases), workers, run)
    return len(cases), sorted(found)


# ---- releases on the Go module proxy -----------------------------------------------------

def module_versions(module="k8s.io/kubernetes"):
    """Every version of the module the Go module proxy lists."""
    with tempfile.TemporaryDirectory(prefix="gate-matrix-go-") as work:
        env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
        env.pop("GOWORK", None)
        subprocess.run(["go", "mod", "init", "gate-matrix.local/versions"], cwd=work, env=env,
                       capture_output=True, check=True)
        res = subprocess.run(["go", "list", "-m", "-versions", module], cwd=work, env=env, capture_output=True,
                             text=True, check=False)
    if res.returncode != 0:
        raise MatrixError("go list -m -versions %s failed: %s" % (module, res.stderr.strip()))
    return res.stdout.split()[1:]


def latest_patches(versions, minors, pinned=()):
    """minor -> the newest released vX.Y.Z of that minor (pre-releases skipped); a minor without a release takes
    its pinned pre-release (versions.env: v1.38.0-beta.0 before v1.38.0)."""
    latest = {}
    for version in versions:
        parts = version.lstrip("v").split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or parts[0] != "1":
            continue
        minor, patch = int(parts[1]), int(parts[2])
        if minor in minors and (minor not in latest or patch > latest[minor][0]):
            latest[minor] = (patch, version)
    for version in pinned:
        minor = int(version.lstrip("v").split(".")[1])
        if minor in minors and minor not in latest:
            latest[minor] = (-1, version)
    missing = sorted(set(minors) - set(latest))
    if missing:
        raise MatrixError("the Go module proxy lists no release of 1.%s" % ", 1.".join(map(str, missing)))
    return [latest[m][1] for m in sorted(latest)]


def clusterlib_minor(version):
    return int(version.lstrip("v").split(".")[1])


def problems(result):
    """What makes a release's comparison fail: mismatches that are not listed exceptions, listed
    exceptions that no longer occur, and --help listings that differ from the catalog."""
    found = []
    minor = clusterlib_minor(result["version"])
    for row in result["rows"]:
        name = "%s=%s" % (row["gate"], str(row["value"]).lower())
        if not row["match"] and not row["exception"]:
            found.append("%s %s: catalog %s (%s), binaries %s: %s" % (
                result["version"], name, row["catalog"], row["catalog_message"] or "no error", row["binary"],
                "; ".join("%s %s (%s)" % (c, v, e) for c, (v, e) in sorted(row["components"].items()))))
        if row["match"] and row["exception"]:
            found.append("%s %s: listed as an exception (%s) but the catalog and the binaries now agree: "
                         "remove it from EXCEPTIONS and docs/decisions.md" % (result["version"], name, row["exception"]))
    seen = set((minor, row["gate"], row["value"]) for row in result["rows"])
    for key in sorted(k for k in EXCEPTIONS if k[0] == minor and k not in seen):
        found.append("%s: exception %s=%s is never tried (no such gate any more?): remove it"
                     % (result["version"], key[1], str(key[2]).lower()))
    found.extend("%s --help: %s" % (result["version"], d) for d in result["listing"])
    return found


def render(result):
    """A Markdown section: the release's table."""
    short = {APISERVER: "apiserver", KCM: "kcm", SCHEDULER: "scheduler", KUBELET: "kubelet"}
    components = result["components"]
    lines = ["## %s" % result["version"], "",
             "Binaries started: %s." % ", ".join(components), ""]
    head = ["gate", "value", "catalog"] + [short[c] for c in components] + ["match"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for row in result["rows"]:
        if row["match"]:
            match = "yes" + (" (listed exception?)" if row["exception"] else "")
        else:
            match = "exception: %s" % row["exception"] if row["exception"] else "**NO**"
        cells = [row["gate"], str(row["value"]).lower(), row["catalog"]]
        cells += [row["components"][c][0] for c in components] + [match]
        lines.append("| " + " | ".join(cells) + " |")
    if result["listing"]:
        lines += ["", "--help listing differs from the catalog:", ""] + ["- " + d for d in result["listing"]]
    return "\n".join(lines) + "\n"


def pinned_binaries(version, etcd_version=None):
    """Component -> binary of a pinned release's full build (hack/cluster/build); MatrixError when missing."""
    directory = clusterlib.component_dir("kubernetes", version)
    binaries = dict((c, os.path.join(directory, "bin", c)) for c in COMPONENTS)
    missing = [p for p in binaries.values() if not os.access(p, os.X_OK)]
    if missing or not os.path.exists(os.path.join(directory, ".built")):
        raise MatrixError("Kubernetes %s is not built (%s missing): run `make build`" % (version, ", ".join(missing)))
    return binaries


def etcd_binary():
    path = clusterlib.component_bin("etcd", clusterlib.load_versions()["ETCD_VERSION"], "etcd")
    if not os.access(path, os.X_OK):
        raise MatrixError("%s is not built: run `make build`" % path)
    return path
