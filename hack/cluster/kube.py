"""The API client and the wait helper of the test suite, the benchmarks and hack/.

(The collection itself talks to clusters only through plugins/module_utils/access/api.py.)

- `Api`: REST requests with the kubeconfig's credentials (client certificate as files or inline
  data, or a bearer token).
- `Watch`: one watch of a collection, without gaps: it starts from a resourceVersion (from a LIST),
  asks for bookmarks, and when a stream ends (server timeout, dropped connection) the next one
  resumes from the last resourceVersion seen, so nothing that happened between two streams is lost.
  When the server can no longer resume (410 Gone: that version was compacted away) events may have
  been missed: the watch stops, `lost` says why, and whoever reads its events must fail.
- `wait_for`: call a probe until it returns something truthy.
- `Kubectl`: the one kubectl runner (a kubeconfig, an environment, the error a failure raises).

Watch events are stamped on arrival (time.monotonic()): the API's own timestamps have a
resolution of one second, too coarse for pod startup on a fast path.
"""
import atexit
import base64
import json
import os
import shutil
import socket
import tempfile
import threading
import time

# requests and PyYAML are imported where they are used: hack/cluster/build imports this module (through
# clusterlib) with the host's python3, which may have neither.


class ClusterError(Exception):
    """An error a user can act on; printed without a traceback."""


class KubectlError(ClusterError, AssertionError):
    """kubectl exited non-zero (an AssertionError too: in a test it is a failed expectation)."""


class GaveUp(ClusterError):
    """A wait_for probe found that waiting longer cannot help."""


class WaitTimeout(ClusterError, AssertionError):
    """wait_for ran out of time (an AssertionError too: in a test it is a failed expectation)."""


class ApiError(ClusterError):
    pass


class WatchContinuityLost(ClusterError, AssertionError):
    """A watch could not resume where it stopped: events between two streams may be missing."""


def wait_for(probe, timeout, what, interval=0.5, retry_on=(ClusterError,), detail=None):
    """Call probe() until it returns something truthy (returned); WaitTimeout after `timeout` seconds.

    Exceptions of the `retry_on` classes count as "not yet" (the last one is reported), except GaveUp
    and WaitTimeout (a probe that waits itself and timed out); others propagate at once. detail()
    (optional) adds what is still missing to the timeout's message. The probe runs at least once,
    and once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    last = last_error = None
    while True:
        try:
            last = probe()
            if last:
                return last
        except (GaveUp, WaitTimeout):
            raise
        except retry_on as exc:  # pylint: disable=catching-non-exception
            last_error = exc
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    message = f"timed out after {timeout}s waiting for {what} (last: {last!r})"
    if last_error is not None:
        message += f"; last error: {last_error}"
    if detail is not None:
        message += f"\n{detail()}"
    raise WaitTimeout(message)


# ---------------------------------------------------------------------------
# Credentials
# ---------------------------------------------------------------------------

_SCRATCH = []


class Kubectl:
    """kubectl against one cluster: `binary` (a path, or found on the environment's PATH) with
    `--kubeconfig`, in `env`; a non-zero exit raises KubectlError naming the command and its stderr
    (unless check=False); `timeout` seconds per command (None: no limit)."""

    def __init__(self, kubeconfig, env=None, binary="kubectl", timeout=None):
        self.kubeconfig = kubeconfig
        self.env = env
        self.binary = binary
        self.timeout = timeout

    def run(self, *args, stdin=None, check=True, kubeconfig=None):
        import subprocess
        res = subprocess.run([self.binary, "--kubeconfig", kubeconfig or self.kubeconfig] + list(args), env=self.env,
                             input=stdin, capture_output=True, text=True, check=False, timeout=self.timeout)
        if check and res.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)} failed: {res.stderr.strip()}")
        return res

    def get_json(self, *args):
        return json.loads(self.run("get", "-o", "json", *args).stdout)

    def apply(self, docs):
        import yaml
        return self.run("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


def _scratch_dir():
    if not _SCRATCH:
        path = tempfile.mkdtemp(prefix="kube-client-")
        atexit.register(shutil.rmtree, path, True)
        _SCRATCH.append(path)
    return _SCRATCH[0]


def _data_file(data, name):
    """Inline base64 data of a kubeconfig as a private file (requests takes certificates as paths)."""
    fd, path = tempfile.mkstemp(prefix=name + "-", dir=_scratch_dir())
    with os.fdopen(fd, "wb") as fh:
        fh.write(base64.b64decode(data))
    return path


def load_kubeconfig(path, context=None):
    """server, ca (path or None), cert ((cert, key) paths or None) and token of the kubeconfig's context."""
    import yaml
    with open(path) as fh:
        cfg = yaml.safe_load(fh)
    ctx_name = context or cfg["current-context"]
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next((u["user"] for u in cfg.get("users") or [] if u["name"] == ctx.get("user")), None) or {}
    ca = cluster.get("certificate-authority")
    if not ca and cluster.get("certificate-authority-data"):
        ca = _data_file(cluster["certificate-authority-data"], "ca")
    cert = None
    if user.get("client-certificate") and user.get("client-key"):
        cert = (user["client-certificate"], user["client-key"])
    elif user.get("client-certificate-data") and user.get("client-key-data"):
        cert = (_data_file(user["client-certificate-data"], "cert"), _data_file(user["client-key-data"], "key"))
    token = user.get("token")
    if cert is None and token is None and cluster["server"].startswith("https:"):
        raise ApiError(f"{path}: user {ctx.get('user')} has neither a client certificate nor a token "
                       "(the only credentials this client supports)")
    return {"server": cluster["server"], "ca": ca, "cert": cert, "token": token,
            "insecure": bool(cluster.get("insecure-skip-tls-verify"))}


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------

class Api:
    """REST requests against one API server; one requests.Session per thread."""

    def __init__(self, kubeconfig=None, config=None):
        self.cfg = config or load_kubeconfig(kubeconfig)
        self.server = self.cfg["server"].rstrip("/")
        self._local = threading.local()

    def session(self):
        s = getattr(self._local, "session", None)
        if s is None:
            import requests
            import urllib3
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            s = requests.Session()
            s.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster CA; no proxy for a local server
            s.cert = self.cfg.get("cert")
            s.verify = False if self.cfg.get("insecure") else (self.cfg.get("ca") or False)
            if self.cfg.get("token"):
                s.headers["Authorization"] = "Bearer " + self.cfg["token"]
            self._local.session = s
        return s

    def request(self, method, path, body=None, params=None, ok=(200, 201, 202), content_type=None, timeout=60):
        headers = {"Content-Type": content_type} if content_type else {}
        data = json.dumps(body) if body is not None else None
        if data is not None and not content_type:
            headers["Content-Type"] = "application/json"
        resp = self.session().request(method, self.server + path, data=data, params=params, headers=headers,
                                      timeout=timeout)
        if resp.status_code not in ok:
            raise ApiError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json() if resp.content else None

    def get(self, path, params=None, ok=(200,)):
        return self.request("GET", path, params=params, ok=ok)

    def create(self, path, body):
        return self.request("POST", path, body)

    def ensure(self, path, body):
        """Create, or leave alone when it exists."""
        return self.request("POST", path, body, ok=(200, 201, 202, 409))

    def delete(self, path, params=None):
        return self.request("DELETE", path, params=params, ok=(200, 202, 404))

    def merge_patch(self, path, body):
        return self.request("PATCH", path, body, ok=(200, 404), content_type="application/merge-patch+json")

    def list_all(self, path, params=None):
        """Every item of a collection (paginated) and the list's resourceVersion."""
        params = dict(params or {}, limit=500)
        items = []
        while True:
            page = self.get(path, params)
            items.extend(page.get("items") or [])
            rv = page["metadata"].get("resourceVersion")
            cont = page["metadata"].get("continue")
            if not cont:
                return items, rv
            params["continue"] = cont

    def text(self, path_or_url, timeout=20):
        """GET plain text (e.g. /metrics) from the API server, or from a component's URL with the same client
        certificate (components serve self-signed certificates: not verified)."""
        url = path_or_url if "://" in path_or_url else self.server + path_or_url
        resp = self.session().get(url, verify=False if "://" in path_or_url else self.session().verify,
                                  timeout=timeout)
        if resp.status_code != 200:
            raise ApiError(f"GET {url}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.text

    def metrics_text(self, url):
        """GET a component's /metrics (self-signed serving certificate; client certificate from kubeconfig)."""
        return self.text(url)


# ---------------------------------------------------------------------------
# Watches
# ---------------------------------------------------------------------------

def _gone(status):
    return isinstance(status, dict) and (status.get("code") == 410 or status.get("reason") in ("Expired", "Gone"))


class Watch(threading.Thread):
    """Watch a collection from a resourceVersion; call on_event(type, object, monotonic arrival time).

    Bookmarks (not passed on) keep the resourceVersion current on a quiet collection. A stream that
    ends, cleanly or not, is followed by one that resumes from the last resourceVersion seen:
    `streams` counts them. `started` is set once the server answered the first one. If the server
    refuses to resume (410 Gone), the watch ends with `lost` set: its events have a gap.
    """

    def __init__(self, api, path, resource_version, on_event, name="watch", timeout_seconds=1800, params=None):
        super().__init__(name=name, daemon=True)
        self.api, self.path, self.rv, self.on_event = api, path, resource_version, on_event
        self.timeout_seconds = timeout_seconds
        self.params = dict(params or {})
        self.stopped = threading.Event()
        self.started = threading.Event()
        self.errors = []
        self.lost = None
        self.streams = 0
        self._resp = None

    def _lose(self, why):
        self.lost = f"watch {self.path} cannot resume from resourceVersion {self.rv}: {why}"
        self.errors.append(f"{time.strftime('%H:%M:%S')} {self.lost}")
        self.stopped.set()
        self.started.set()  # nobody waits for a start that will not come

    def _stream(self):
        params = dict(self.params, watch="1", allowWatchBookmarks="true", timeoutSeconds=str(self.timeout_seconds),
                      resourceVersion=self.rv)
        resp = self.api.session().get(self.api.server + self.path, params=params, stream=True,
                                      timeout=(10, self.timeout_seconds + 60))
        self._resp = resp
        if resp.status_code == 410:
            self._lose(f"HTTP 410: {resp.text[:300]}")
            return
        if resp.status_code != 200:
            raise ApiError(f"watch {self.path}: HTTP {resp.status_code}: {resp.text[:300]}")
        self.streams += 1
        self.started.set()
        for line in resp.iter_lines(chunk_size=None):
            now = time.monotonic()
            if self.stopped.is_set():
                return
            if not line:
                continue
            event = json.loads(line)
            obj = event.get("object") or {}
            if event["type"] == "ERROR":
                if _gone(obj):
                    self._lose(f"{obj.get('reason')} ({obj.get('code')}): {obj.get('message')}")
                    return
                raise ApiError(f"watch {self.path}: {obj.get('message') or obj}")
            if event["type"] != "BOOKMARK":
                self.on_event(event["type"], obj, now)
            # Only once the event is handed on: a stream cut before this resumes with the event again.
            self.rv = (obj.get("metadata") or {}).get("resourceVersion") or self.rv

    def run(self):
        while not self.stopped.is_set():
            try:
                self._stream()
            except Exception as exc:  # closing the stream from stop() surfaces as any error
                if self.stopped.is_set():
                    return
                self.errors.append(f"{time.strftime('%H:%M:%S')} {exc}")
                self.stopped.wait(0.5)

    def wait_started(self, timeout=30):
        """Wait until the server answered the first stream; ClusterError when it did not or cannot resume."""
        if not self.started.wait(timeout):
            raise WaitTimeout(f"watch {self.path} did not start within {timeout}s: {self.errors[-3:]}")
        if self.lost:
            raise WatchContinuityLost(self.lost)

    def stop(self):
        """Stop now: shut the socket down under the reading thread (Response.close() would wait for it)."""
        self.stopped.set()
        conn = getattr(getattr(self._resp, "raw", None), "_connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.join(timeout=5)
