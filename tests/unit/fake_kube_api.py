"""A small HTTP API server of one pod collection, for the tests of hack/cluster/kube.py and the API recorder.

It behaves like kube-apiserver for what a watcher sees: LIST returns the objects and the current
resourceVersion; a watch from resourceVersion R sends every change after R (bookmarks when asked
for); a watch without one sends ADDED for every object first. Streams use chunked encoding, as the
API server's do. Tests script what real servers do at random: end a stream after some events
(`cut_after`), change objects while no stream is open (`on_cut`), refuse to resume from an old
version (`expired_below`: an ERROR event with code 410, or HTTP 410 with `gone_as_http`).
"""
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATH = "/api/v1/namespaces/ns/pods"


def pod(name, rv, uid=None, **meta):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": dict({"name": name, "namespace": "ns", "uid": uid or "uid-" + name,
                              "resourceVersion": str(rv)}, **meta),
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "registry.invalid/c"}]}}


class FakeApi:
    def __init__(self, objects, rv):
        self.rv = rv
        self.objects = dict((o["metadata"]["name"], o) for o in objects)
        self.changes = []  # (rv, type, object)
        self.requests = []  # query parameters of every request, in order
        self.cut_after = []  # per watch stream, in order: end it cleanly after this many events (None: never)
        self.on_cut = []  # callables run when a stream is cut, before the client can reconnect
        self.expired_below = None  # a watch from a resourceVersion below this is refused (410)
        self.gone_as_http = False
        self.bookmark_every_event = True
        self._cond = threading.Condition(threading.RLock())
        self._closing = False
        self._streams = 0
        handler = type("Handler", (_Handler,), {"api": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def change(self, event_type, name, **meta):
        """Apply a change (ADDED, MODIFIED, DELETED) to the named pod; returns its resourceVersion."""
        with self._cond:
            self.rv += 1
            obj = pod(name, self.rv, **meta)
            if event_type == "DELETED":
                gone = self.objects.pop(name)
                obj = dict(gone, metadata=dict(gone["metadata"], resourceVersion=str(self.rv)))
            else:
                self.objects[name] = obj
            self.changes.append((self.rv, event_type, obj))
            self._cond.notify_all()
            return self.rv

    def watches(self):
        return [r for r in self.requests if r.get("watch")]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api = None

    def log_message(self, *args):  # quiet
        pass

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, event):
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        api = self.api
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        api.requests.append(query)
        if url.path != PATH:
            self._json(404, {"kind": "Status", "code": 404})
            return
        if not query.get("watch"):
            with api._cond:
                items = [dict(o) for o in api.objects.values()]
                self._json(200, {"kind": "PodList", "metadata": {"resourceVersion": str(api.rv)}, "items": items})
            return
        with api._cond:
            index = api._streams
            api._streams += 1
        start = query.get("resourceVersion")
        if start and api.expired_below is not None and int(start) < api.expired_below:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                      "message": "too old resource version: %s (%d)" % (start, api.expired_below)}
            if api.gone_as_http:
                self._json(410, status)
                return
        else:
            status = None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if status:
            self._chunk({"type": "ERROR", "object": status})
            self.wfile.write(b"0\r\n\r\n")
            return
        cut = api.cut_after[index] if index < len(api.cut_after) else None
        sent = 0
        try:
            with api._cond:
                if start:
                    position = next((i for i, c in enumerate(api.changes) if c[0] > int(start)), len(api.changes))
                else:
                    for obj in api.objects.values():
                        self._chunk({"type": "ADDED", "object": obj})
                    position = len(api.changes)
                while not api._closing and (cut is None or sent < cut):
                    if position < len(api.changes):
                        rv, event_type, obj = api.changes[position]
                        position += 1
                        self._chunk({"type": event_type, "object": obj})
                        sent += 1
                        if api.bookmark_every_event and query.get("allowWatchBookmarks") == "true":
                            self._chunk({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
                                                                        "metadata": {"resourceVersion": str(rv)}}})
                    else:
                        api._cond.wait(0.2)
                if cut is not None and sent >= cut:
                    for hook in api.on_cut[index:index + 1]:  # the lock is reentrant
                        if hook:
                            hook()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
