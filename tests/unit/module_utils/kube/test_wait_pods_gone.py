"""kube.evictions_service.wait_pods_gone (the node drain's and dra_device_taint's wait for evicted pods), through
the kubernetes client, against the scripted API server of fake_kube_api: a LIST, then a watch from its version,
a LIST again when the watch ends first, polls where the watch is refused, the names left at the deadline."""
from kubernetes.client import ApiClient, Configuration

from fake_kube_api import PATH, FakeApi, pod

from ansible_collections.dra.admin.plugins.module_utils.access.api import LIST_PAGE_SIZE, DraApi
from ansible_collections.dra.admin.plugins.module_utils.devices.evictions import wave_scopes
from ansible_collections.dra.admin.plugins.module_utils.kube.evictions_service import wait_pods_gone


class DeletingAfterList(DraApi):
    """The client, and the pods named in `then_deleted` deleted on the server right after each LIST returns (as
    evicted pods go while the wait starts its watch)."""

    def __init__(self, server, then_deleted):
        config = Configuration()
        config.host = server.url
        super(DeletingAfterList, self).__init__(api_client=ApiClient(config))
        self.server = server
        self.then_deleted = list(then_deleted)

    def list_snapshot(self, path, query=None, page_size=LIST_PAGE_SIZE):
        listed = super(DeletingAfterList, self).list_snapshot(path, query, page_size)
        while self.then_deleted:
            self.server.change("DELETED", self.then_deleted.pop(0))
        return listed


def awaiting(*names):
    return [(PATH, None, dict(("uid-" + n, "ns/" + n) for n in names))]


class Sleeps(object):
    def __init__(self, on_sleep=None):
        self.slept = []
        self.on_sleep = on_sleep

    def __call__(self, seconds):
        self.slept.append(seconds)
        if self.on_sleep:
            self.on_sleep()


def plenty():
    return 300.0


def test_the_wait_ends_on_the_watch_event_of_the_last_deletion():
    with FakeApi([pod("a", 5), pod("b", 6), pod("other", 7)], rv=10) as server:
        api = DeletingAfterList(server, ["a", "b"])
        sleep = Sleeps()
        assert wait_pods_gone(api, awaiting("a", "b"), plenty, sleep, 1.0) == []
        assert api.requests == 2 and sleep.slept == []  # one LIST, one watch; no poll
        watch = server.watches()[0]
        assert watch["resourceVersion"] == "10" and watch["timeoutSeconds"] == "60"


def test_a_pod_gone_before_the_list_and_a_pod_of_another_uid_need_no_watch():
    # "b" was replaced by a pod of the same name and another UID: the evicted one is gone.
    with FakeApi([pod("b", 6, uid="uid-b-new"), pod("other", 7)], rv=10) as server:
        api = DeletingAfterList(server, [])
        assert wait_pods_gone(api, awaiting("a", "b"), plenty, Sleeps(), 1.0) == []
        assert api.requests == 1 and server.watches() == []


def test_a_stream_that_ends_first_is_followed_by_a_list_and_a_watch_from_its_version():
    with FakeApi([pod("a", 5), pod("b", 6)], rv=10) as server:
        server.cut_after = [1]  # the first stream ends after the first deletion; "b" goes while none is open
        server.on_cut = [lambda: server.change("DELETED", "b")]
        api = DeletingAfterList(server, ["a"])
        assert wait_pods_gone(api, awaiting("a", "b"), plenty, Sleeps(), 1.0) == []
        assert api.requests == 3  # LIST, watch, LIST (which no longer has "b")
        assert len(server.watches()) == 1


def test_an_expired_version_lists_again():
    with FakeApi([pod("a", 5)], rv=10) as server:
        server.expired_below = 11  # the LIST's version 10 is refused as too old: ERROR 410 in the stream
        api = DeletingAfterList(server, [])
        calls = []

        def remaining():
            calls.append(1)
            if len(calls) == 2:  # as the watch is asked for: the pod goes, and version 10 is too old from now
                server.change("DELETED", "a")
            return 300.0
        assert wait_pods_gone(api, awaiting("a"), remaining, Sleeps(), 1.0) == []
        assert [w["resourceVersion"] for w in server.watches()] == ["10"]
        assert api.requests == 3


def test_a_refused_watch_polls_the_list_with_growing_delays():
    with FakeApi([pod("a", 5)], rv=10) as server:
        server.expired_below = 11
        server.gone_as_http = True  # the watch itself answers 410: taken as refused
        api = DeletingAfterList(server, [])
        sleep = Sleeps()
        sleep.on_sleep = lambda: len(sleep.slept) == 3 and server.change("DELETED", "a")
        assert wait_pods_gone(api, awaiting("a"), plenty, sleep, 1.0) == []
        assert len(server.watches()) == 1  # asked once, never again
        assert sleep.slept == sorted(sleep.slept) and sleep.slept[0] < 1.0 and len(sleep.slept) == 3
        assert api.requests == 1 + 1 + 1 + 3  # the first LIST, the refused watch, a LIST then and after each poll


def test_the_pods_still_there_at_the_deadline_are_named_sorted():
    with FakeApi([pod("b", 5), pod("a", 6), pod("c", 7)], rv=10) as server:
        server.cut_after = [0]  # the server's time limit: the stream ends with no event
        api = DeletingAfterList(server, ["c"])
        left = iter([5.0, 5.0, 0.0])
        assert wait_pods_gone(api, awaiting("b", "a", "c"), lambda: next(left), Sleeps(), 1.0) == ["ns/a", "ns/b"]
        assert [w["timeoutSeconds"] for w in server.watches()] == ["5"]


def test_each_scope_waits_for_its_own_pods_only():
    with FakeApi([pod("a", 5), pod("b", 6)], rv=10) as server:
        api = DeletingAfterList(server, ["a"])
        # "a" awaited in the first scope; "x" (not on this server's list) in the second: gone there.
        scopes = awaiting("a") + [(PATH, {"labelSelector": "app=x"}, {"uid-x": "ns/x"})]
        assert wait_pods_gone(api, scopes, plenty, Sleeps(), 1.0) == []
        assert api.requests == 3  # LIST and watch of the first scope, LIST of the second


def test_a_waves_pods_are_awaited_per_namespace():
    wave = {"pods": ["b/p2", "a/p1", "b/p3"], "uids": {"b/p2": "u2", "a/p1": "u1", "b/p3": "u3"}}
    assert wave_scopes(wave) == [("/api/v1/namespaces/a/pods", None, {"u1": "a/p1"}),
                                 ("/api/v1/namespaces/b/pods", None, {"u2": "b/p2", "u3": "b/p3"})]
