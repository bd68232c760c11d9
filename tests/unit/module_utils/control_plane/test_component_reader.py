"""The component reader (plugins/module_utils/control_plane/component_reader.py; filter reader_token_seconds): its
RBAC objects allow exactly get on /metrics and /configz, the change to send for what the cluster has, and the
token's lifetime. On the cluster: tests/integration/test_component_reader.py."""
import copy

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.filter.component_restart import reader_token_seconds_filter
from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_reader


def by_kind(objects):
    return dict((o["kind"], o) for o in objects)


def test_the_role_allows_get_on_the_two_urls_and_nothing_else():
    role = by_kind(component_reader.reader_objects())["ClusterRole"]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics", "/configz"], "verbs": ["get"]}]
    assert not any("resources" in rule or "apiGroups" in rule for rule in role["rules"])


def test_the_binding_names_the_account_in_its_namespace():
    objects = by_kind(component_reader.reader_objects("ops"))
    binding = objects["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == objects["ClusterRole"]["metadata"]["name"] == "dra.admin:component-reader"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dra-admin-component-reader",
                                    "namespace": "ops"}]
    assert objects["ServiceAccount"]["metadata"]["namespace"] == "ops"
    assert objects["ServiceAccount"]["automountServiceAccountToken"] is False
    assert component_reader.reader_user("ops") == "system:serviceaccount:ops:dra-admin-component-reader"


def test_an_empty_namespace_is_refused_naming_it():
    with pytest.raises(component_reader.ReaderInputError, match="namespace"):
        component_reader.reader_objects("")


def stored(obj):
    """What the API server gives back for `obj`: its fields plus server metadata."""
    back = copy.deepcopy(obj)
    back["metadata"].update(resourceVersion="42", uid="u-1", creationTimestamp="2026-01-01T00:00:00Z")
    return back


@pytest.mark.parametrize("kind", ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"])
def test_nothing_to_send_for_what_is_already_there(kind):
    wanted = by_kind(component_reader.reader_objects())[kind]
    assert component_reader.object_change(stored(wanted), wanted) is None
    assert component_reader.object_change(None, wanted) == "create"


def test_a_widened_role_is_put_back():
    wanted = by_kind(component_reader.reader_objects())["ClusterRole"]
    widened = stored(wanted)
    widened["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    assert component_reader.object_change(widened, wanted) == "update"
    body = component_reader.updated(widened, wanted)
    assert body["rules"] == wanted["rules"] and body["metadata"]["resourceVersion"] == "42"


def test_a_binding_to_another_role_is_replaced_and_a_lost_label_updated():
    wanted = by_kind(component_reader.reader_objects())["ClusterRoleBinding"]
    other = stored(wanted)
    other["roleRef"]["name"] = "cluster-admin"
    assert component_reader.object_change(other, wanted) == "replace"
    unlabelled = stored(wanted)
    unlabelled["metadata"]["labels"] = {}
    assert component_reader.object_change(unlabelled, wanted) == "update"
    assert component_reader.updated(unlabelled, wanted)["metadata"]["labels"] == wanted["metadata"]["labels"]


@pytest.mark.parametrize("wait,asked,seconds", [(300, None, 960), (60, None, 600), (100.5, None, 600),
                                                ("400", None, 1260), (300, 1200, 1200), (300, 30, 600)])
def test_the_token_covers_the_waits_and_never_goes_below_the_api_floor(wait, asked, seconds):
    assert reader_token_seconds_filter(wait, asked) == seconds


@pytest.mark.parametrize("wait,asked", [("soon", None), (300, "x"), (-5, None), (300, -1)])
def test_a_lifetime_that_is_no_number_of_seconds_is_refused_naming_it(wait, asked):
    with pytest.raises(AnsibleFilterError, match="token_seconds"):
        reader_token_seconds_filter(wait, asked)


def test_the_token_request_asks_for_that_lifetime():
    assert component_reader.token_request(960)["spec"] == {"expirationSeconds": 960}
