"""A small API client for the scale benchmark: requests with the kubeconfig's client certificate.

Watches run in threads and timestamp every event on arrival (time.monotonic()), which
is what the latencies are computed from: the API's own timestamps have a resolution of
one second, too coarse for pod startup on a fast path.
"""
import json
import socket
import threading
import time

import requests
import urllib3
import yaml

urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)


class ApiError(Exception):
    pass


def load_kubeconfig(path):
    with open(path) as fh:
        cfg = yaml.safe_load(fh)
    ctx_name = cfg["current-context"]
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    for key in ("client-certificate", "client-key"):
        if key not in user:
            raise ApiError(f"{path}: user {ctx['user']} has no {key} file (only file-based client "
                           "certificates are supported, as kwokctl writes them)")
    return {"server": cluster["server"], "ca": cluster.get("certificate-authority"),
            "cert": (user["client-certificate"], user["client-key"])}


class Api:
    def __init__(self, kubeconfig):
        self.cfg = load_kubeconfig(kubeconfig)
        self.server = self.cfg["server"].rstrip("/")
        self._local = threading.local()

    def session(self):
        s = getattr(self._local, "session", None)
        if s is None:
            s = requests.Session()
            s.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster CA
            s.cert = self.cfg["cert"]
            s.verify = self.cfg["ca"] or False
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
        params = dict(params or {}, limit=500)
        items, rv = [], None
        while True:
            page = self.get(path, params)
            items.extend(page.get("items") or [])
            rv = page["metadata"].get("resourceVersion")
            cont = page["metadata"].get("continue")
            if not cont:
                return items, rv
            params["continue"] = cont

    def metrics_text(self, url):
        """GET a component's /metrics (self-signed serving certificate; client certificate from kubeconfig)."""
        resp = self.session().get(url, verify=False, timeout=20)
        resp.raise_for_status()
        return resp.text


class Watch(threading.Thread):
    """Watch a collection from a resourceVersion; call on_event(type, object, monotonic arrival time)."""

    def __init__(self, api, path, resource_version, on_event, name="watch"):
        super().__init__(name=name, daemon=True)
        self.api, self.path, self.rv, self.on_event = api, path, resource_version, on_event
        self.stopped = threading.Event()
        self.errors = []
        self._resp = None

    def run(self):
        while not self.stopped.is_set():
            try:
                params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "1800",
                          "resourceVersion": self.rv}
                resp = self.api.session().get(self.api.server + self.path, params=params, stream=True,
                                              timeout=(10, 120))
                self._resp = resp
                if resp.status_code != 200:
                    raise ApiError(f"watch {self.path}: HTTP {resp.status_code}")
                for line in resp.iter_lines(chunk_size=None):
                    now = time.monotonic()
                    if self.stopped.is_set():
                        return
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event["type"] == "ERROR":
                        # 410 Gone: the resourceVersion is too old; nothing to do but report it.
                        raise ApiError(f"watch {self.path}: {obj.get('message')}")
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    if event["type"] != "BOOKMARK":
                        self.on_event(event["type"], obj, now)
            except Exception as exc:  # closing the stream from stop() surfaces as any error
                if self.stopped.is_set():
                    return
                self.errors.append(f"{time.strftime('%H:%M:%S')} {exc}")
                time.sleep(0.5)

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
