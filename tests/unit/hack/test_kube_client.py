"""hack/cluster/kube.py (the API client and wait helper of tests, benchmarks and hack/) and the
integration suite's API recorder built on it, against a scripted API server (fake_kube_api)."""
import base64
import os
import socket
import sys
import threading
import time

import pytest
import yaml

from fake_kube_api import PATH, FakeApi, pod
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import kube  # noqa: E402  pylint: disable=wrong-import-position
from api_recorder import ApiRecorder  # noqa: E402  pylint: disable=wrong-import-position


def recorder_for(server):
    return ApiRecorder(api=kube.Api(config={"server": server.url}), start_timeout=10)


# --- wait_for ------------------------------------------------------------------------------------

def test_wait_for_returns_the_first_truthy_value():
    answers = iter([None, 0, [], "ready"])
    assert kube.wait_for(lambda: next(answers), 5, "x", interval=0.01) == "ready"


def test_wait_for_timeout_is_a_cluster_error_and_an_assertion_with_what_was_missing():
    with pytest.raises(kube.WaitTimeout) as info:
        kube.wait_for(lambda: [], 0.2, "the moon", interval=0.05, detail=lambda: "still missing: moon")
    assert isinstance(info.value, AssertionError) and isinstance(info.value, kube.ClusterError)
    assert str(info.value) == "timed out after 0.2s waiting for the moon (last: [])\nstill missing: moon"


def test_wait_for_retries_the_given_errors_and_propagates_others():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise kube.ApiError("not yet")
        return True
    assert kube.wait_for(flaky, 5, "x", interval=0.01) is True

    def broken():
        raise KeyError("bug")
    with pytest.raises(KeyError):
        kube.wait_for(broken, 5, "x", interval=0.01)
    with pytest.raises(kube.GaveUp):
        kube.wait_for(lambda: (item for item in ()).throw(kube.GaveUp("no")), 5, "x", interval=0.01)
    with pytest.raises(kube.WaitTimeout) as info:
        kube.wait_for(lambda: (item for item in ()).throw(kube.ApiError("HTTP 500")), 0.1, "x", interval=0.02)
    assert "last error: HTTP 500" in str(info.value)
    with pytest.raises(kube.ApiError):
        kube.wait_for(lambda: (item for item in ()).throw(kube.ApiError("HTTP 500")), 5, "x", retry_on=())


def test_wait_for_probes_once_more_at_the_deadline():
    started = time.monotonic()
    answers = []

    def late():
        answers.append(time.monotonic() - started)
        return len(answers) == 2
    assert kube.wait_for(late, 0.3, "x", interval=10) is True
    assert 0.25 <= answers[1] < 2


def test_clusterlib_reexports_the_same_helper():
    import clusterlib
    assert clusterlib.wait_for is kube.wait_for and clusterlib.ClusterError is kube.ClusterError


# --- credentials ---------------------------------------------------------------------------------

def test_kubeconfig_with_inline_certificates_becomes_files(tmp_path):
    cfg = {"current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
           "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1",
                                                  "certificate-authority-data": base64.b64encode(b"CA").decode()}}],
           "users": [{"name": "u", "user": {"client-certificate-data": base64.b64encode(b"CERT").decode(),
                                            "client-key-data": base64.b64encode(b"KEY").decode()}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    loaded = kube.load_kubeconfig(str(path))
    with open(loaded["ca"], "rb") as ca, open(loaded["cert"][0], "rb") as cert, open(loaded["cert"][1], "rb") as key:
        assert (ca.read(), cert.read(), key.read()) == (b"CA", b"CERT", b"KEY")
    assert oct(os.stat(loaded["cert"][1]).st_mode & 0o777) == "0o600"
    cfg["users"][0]["user"] = {}
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(kube.ApiError, match="neither a client certificate nor a token"):
        kube.load_kubeconfig(str(path))


# --- the recorder's watches ----------------------------------------------------------------------

def test_object_deleted_between_two_streams_is_recorded():
    """A stream ends after one event and pod b is deleted before the next one starts: the next stream
    resumes from the last resourceVersion seen and delivers b's DELETED (a re-list would not)."""
    with FakeApi([pod("a", 5), pod("b", 6)], rv=10) as server:
        server.cut_after = [1]
        server.on_cut = [lambda: server.change("DELETED", "b")]
        recorder = recorder_for(server)
        recorder.watch_pods("ns")
        server.change("MODIFIED", "a")
        kube.wait_for(lambda: recorder.deletion_started("pod", "ns/b"), 10, "b's deletion", interval=0.05)
        recorder.stop()
    watches = server.watches()
    assert [w["resourceVersion"] for w in watches] == ["10", "11"]  # the LIST's version, then the last one seen
    assert all(w["allowWatchBookmarks"] == "true" for w in watches)
    assert [(e[2], e[3]) for e in recorder.events] == [("ADDED", "ns/a"), ("ADDED", "ns/b"), ("MODIFIED", "ns/a"),
                                                       ("DELETED", "ns/b")]


@pytest.mark.parametrize("as_http", [False, True], ids=["error-event", "http-410"])
def test_watch_that_cannot_resume_fails_loudly(as_http):
    with FakeApi([pod("a", 5)], rv=10) as server:
        server.cut_after = [1]
        server.on_cut = [lambda: setattr(server, "expired_below", 12)]  # compacted meanwhile: 11 is refused
        server.gone_as_http = as_http
        recorder = recorder_for(server)
        recorder.watch_pods("ns")
        server.change("MODIFIED", "a")
        server.change("DELETED", "a")
        with pytest.raises(kube.WatchContinuityLost) as info:
            recorder.stop()
        assert "cannot resume from resourceVersion 11" in str(info.value)
        assert "Expired" in str(info.value) or "HTTP 410" in str(info.value)
        with pytest.raises(kube.WatchContinuityLost):  # and no answer comes from the partial record
            recorder.deletion_started("pod", "ns/a")


def test_watch_is_established_when_watch_pods_returns():
    with FakeApi([], rv=10) as server:
        recorder = recorder_for(server)
        recorder.watch_pods("ns")
        assert [r.get("watch") for r in server.requests] == [None, "1"]  # LIST, then the watch, already answered
        server.change("ADDED", "c")  # right away: no grace period before acting
        recorder.stop()
    assert [(e[2], e[3]) for e in recorder.events] == [("ADDED", "ns/c")]


def test_stop_waits_for_the_events_that_are_still_on_their_way():
    """The server delivers b's DELETED 2 s late: stop() returns once the record matches a LIST taken
    at stop (no fixed grace period, which would have missed it)."""
    with FakeApi([pod("a", 5), pod("b", 6)], rv=10) as server:
        server.bookmark_every_event = False
        recorder = recorder_for(server)
        recorder.watch_pods("ns")

        def slow_delete():
            # the object is gone from LISTs at once; its event reaches the watch 2 s later
            with server._cond:
                server.rv += 1
                gone = server.objects.pop("b")
            time.sleep(2)
            with server._cond:
                server.changes.append((server.rv, "DELETED", dict(gone, metadata=dict(
                    gone["metadata"], resourceVersion=str(server.rv)))))
                server._cond.notify_all()
        threading.Thread(target=slow_delete, daemon=True).start()
        time.sleep(0.1)
        started = time.monotonic()
        recorder.stop()
        assert time.monotonic() - started >= 1.5
    assert recorder.deletion_started("pod", "ns/b") is not None


def test_watch_resumes_after_a_dropped_connection():
    """A stream cut without its terminating chunk is an error, not a gap: the next stream resumes."""
    with FakeApi([pod("a", 5)], rv=10) as server:
        recorder = recorder_for(server)
        recorder.watch_pods("ns")
        watch = recorder._watches[0][2]
        server.change("MODIFIED", "a")
        kube.wait_for(lambda: watch.rv == "11", 5, "the first event", interval=0.02)
        # cut the connection under the reader, as a server restart would
        watch._resp.raw._connection.sock.shutdown(socket.SHUT_RDWR)
        kube.wait_for(lambda: len(server.watches()) == 2, 10, "a second stream", interval=0.05)
        server.change("DELETED", "a")
        recorder.stop()
    assert server.watches()[1]["resourceVersion"] == "11"
    assert [(e[2], e[3]) for e in recorder.events] == [("ADDED", "ns/a"), ("MODIFIED", "ns/a"), ("DELETED", "ns/a")]
    assert PATH in watch.path
