"""Record the order of API events (watch streams) while a test acts on a cluster.

The drain's ordering guarantees are proven from what the API server saw, not
from the module's own log: each watch event is stamped on arrival.
"""
import threading
import time

from kubernetes import client, config, watch


class ApiRecorder:
    def __init__(self, kubeconfig):
        self.api_client = config.new_client_from_config(config_file=kubeconfig)
        self.events = []  # (monotonic time, kind, type, namespace/name, object dict)
        self._threads = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _record(self, kind, event_type, obj):
        meta = obj.get("metadata") or {}
        with self._lock:
            self.events.append((time.monotonic(), kind, event_type,
                                "%s/%s" % (meta.get("namespace"), meta.get("name")), obj))

    def _run(self, kind, list_fn, kwargs):
        w = watch.Watch()
        while not self._stop.is_set():
            try:
                for event in w.stream(list_fn, timeout_seconds=2, _request_timeout=5, **kwargs):
                    obj = event["object"]
                    if not isinstance(obj, dict):
                        obj = self.api_client.sanitize_for_serialization(obj)
                    self._record(kind, event["type"], obj)
                    if self._stop.is_set():
                        break
            except Exception:  # a dropped watch is restarted; events keep their arrival time
                time.sleep(0.1)
            kwargs.pop("resource_version", None)

    def watch_pods(self, namespace):
        core = client.CoreV1Api(self.api_client)
        self._start("pod", core.list_namespaced_pod, {"namespace": namespace})

    def watch_claims(self, namespace, version):
        custom = client.CustomObjectsApi(self.api_client)
        self._start("claim", custom.list_namespaced_custom_object,
                    {"group": "resource.k8s.io", "version": version, "namespace": namespace,
                     "plural": "resourceclaims"})

    def _start(self, kind, fn, kwargs):
        t = threading.Thread(target=self._run, args=(kind, fn, kwargs), daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self):
        time.sleep(1.0)
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)

    # --- queries over what was seen ------------------------------------
    def first(self, kind, key, predicate):
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
