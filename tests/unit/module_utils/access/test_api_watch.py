"""DraApi's LIST-then-watch (what the node drain waits with), through the kubernetes client, against the scripted
API server of fake_kube_api (chunked watch streams as kube-apiserver sends them); json_lines on its own."""
import pytest
from kubernetes.client import ApiClient, Configuration

from fake_kube_api import PATH, FakeApi, pod

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi, DraApiError, json_lines


def api_for(server):
    config = Configuration()
    config.host = server.url
    return DraApi(api_client=ApiClient(config))


def test_json_lines_yields_each_line_as_it_completes_across_chunks():
    chunks = [b'{"type": "ADD', b'ED", "n": 1}\n{"type"', b': "DELETED"}\n\n', b'{"last": true}']
    assert list(json_lines(chunks)) == [{"type": "ADDED", "n": 1}, {"type": "DELETED"}, {"last": True}]


def test_json_lines_refuses_a_line_that_is_not_json():
    with pytest.raises(ValueError):
        list(json_lines([b"not json\n"]))


def test_a_watch_from_a_list_version_sees_only_later_changes_and_stops_when_the_caller_does():
    with FakeApi([pod("a", 5), pod("b", 6)], rv=10) as server:
        api = api_for(server)
        items, version = api.list_snapshot(PATH)
        assert sorted(i["metadata"]["name"] for i in items) == ["a", "b"] and version == "10"
        server.change("DELETED", "a")
        server.change("MODIFIED", "b", labels={"x": "y"})
        events = api.watch(PATH, {"resourceVersion": version}, timeout=30)
        first = next(events)
        assert (first["type"], first["object"]["metadata"]["uid"]) == ("DELETED", "uid-a")
        assert next(events)["type"] == "MODIFIED"
        events.close()  # the server's stream stays open: the caller ends it
        assert api.requests == 2
        assert [i["metadata"]["name"] for i in api.list_snapshot(PATH)[0]] == ["b"]  # the client serves on
        watch = server.watches()[-1]
        assert watch["resourceVersion"] == "10" and watch["timeoutSeconds"] == "30"


def test_a_version_the_server_no_longer_has_is_an_error_event_or_a_410():
    with FakeApi([pod("a", 5)], rv=10) as server:
        server.expired_below = 9
        api = api_for(server)
        events = list(api.watch(PATH, {"resourceVersion": "3"}, timeout=5))
        assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]
        server.gone_as_http = True
        with pytest.raises(DraApiError) as err:
            list(api.watch(PATH, {"resourceVersion": "3"}, timeout=5))
        assert err.value.status == 410 and "watch of %s" % PATH in str(err.value)


def test_a_stream_the_server_ends_ends_the_events():
    with FakeApi([pod("a", 5)], rv=10) as server:
        server.cut_after = [1]
        api = api_for(server)
        server.change("DELETED", "a")
        assert [e["type"] for e in api.watch(PATH, {"resourceVersion": "10"}, timeout=5)] == ["DELETED"]
