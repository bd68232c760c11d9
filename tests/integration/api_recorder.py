"""Record the order of API events (watch streams) while a test acts on a cluster.

The drain's ordering guarantees are proven from what the API server saw, not
from the module's own log: each watch event is stamped on arrival.

Each collection is read once (LIST: its objects are recorded as ADDED, stamped
then) and watched from that LIST's resourceVersion with one kube.Watch: a
stream that ends is resumed from the last resourceVersion seen, so an object
deleted between two streams still produces its DELETED event. If the server
cannot resume (410 Gone), the record has a gap: `stop()` and `check()` raise
WatchContinuityLost instead of answering from a partial history.

`watch_*` return once the watch is established: act right after them, there
is nothing to wait for. `stop()` returns once every watch has caught up with
the collection as it is at that moment (no fixed grace period).
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "hack", "cluster"))
import kube  # noqa: E402  pylint: disable=wrong-import-position


class ApiRecorder:
    def __init__(self, kubeconfig=None, api=None, start_timeout=30):
        self.api = api or kube.Api(kubeconfig)
        self.events = []  # (monotonic time, kind, type, namespace/name, object dict)
        self.start_timeout = start_timeout
        self._watches = []  # (kind, path, kube.Watch)
        self._seen = {}  # path -> {uid: resourceVersion} of the objects the record says exist
        self._lock = threading.Lock()

    def _record(self, kind, path, event_type, obj, stamp):
        meta = obj.get("metadata") or {}
        with self._lock:
            self.events.append((stamp, kind, event_type, "%s/%s" % (meta.get("namespace"), meta.get("name")), obj))
            seen = self._seen.setdefault(path, {})
            if event_type == "DELETED":
                seen.pop(meta.get("uid"), None)
            else:
                seen[meta.get("uid")] = meta.get("resourceVersion")

    def watch_pods(self, namespace):
        self._start("pod", "/api/v1/namespaces/%s/pods" % namespace)

    def watch_claims(self, namespace, version):
        self._start("claim", "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims" % (version, namespace))

    def _start(self, kind, path):
        items, rv = self.api.list_all(path)
        stamp = time.monotonic()
        for obj in items:
            self._record(kind, path, "ADDED", obj, stamp)
        watch = kube.Watch(self.api, path, rv, lambda t, o, now: self._record(kind, path, t, o, now),
                           name="record " + path)
        self._watches.append((kind, path, watch))
        watch.start()
        watch.wait_started(self.start_timeout)

    def _caught_up(self, path, watch):
        """True once the record of `path` has reached the collection as a LIST shows it now."""
        self.check()
        items, rv = self.api.list_all(path)
        try:
            if int(watch.rv) >= int(rv):
                return True
        except (TypeError, ValueError):  # resourceVersions are opaque; etcd's are integers
            pass
        current = dict(((o.get("metadata") or {}).get("uid"), (o.get("metadata") or {}).get("resourceVersion"))
                       for o in items)
        with self._lock:
            return self._seen.get(path, {}) == current

    def stop(self, timeout=60):
        """Wait until every watch has seen the collection as it is now, stop them, and check continuity."""
        try:
            for _kind, path, watch in self._watches:
                kube.wait_for(lambda p=path, w=watch: self._caught_up(p, w), timeout,
                              "the watch of %s to catch up" % path, interval=0.2, retry_on=(kube.ApiError,))
        finally:
            for _kind, _path, watch in self._watches:
                watch.stop()
        self.check()

    def check(self):
        """WatchContinuityLost when a watch could not resume: the record may miss events."""
        lost = [w.lost for _k, _p, w in self._watches if w.lost]
        if lost:
            raise kube.WatchContinuityLost("the API event record has a gap, its answers cannot be trusted: "
                                           + "; ".join(lost))

    # --- queries over what was seen ------------------------------------
    def first(self, kind, key, predicate):
        self.check()
        for stamp, k, event_type, name, obj in self.events:
            if k == kind and name == key and predicate(event_type, obj):
                return stamp
        return None

    def deletion_started(self, kind, key):
        """When the object first carried a deletionTimestamp (or was deleted)."""
        return self.first(kind, key, lambda t, o: t == "DELETED" or bool((o.get("metadata") or {})
                                                                         .get("deletionTimestamp")))

    def released(self, key):
        """When a claim stopped being allocated and reserved (or was deleted)."""
        return self.first("claim", key, lambda t, o: t == "DELETED" or (
            not (o.get("status") or {}).get("allocation") and not (o.get("status") or {}).get("reservedFor")))
