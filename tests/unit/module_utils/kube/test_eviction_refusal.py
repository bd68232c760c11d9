"""How the drain reads a refused eviction, on a Status body recorded from kube-apiserver v1.36.3
(POST .../pods/p/eviction in a namespace being deleted)."""
import os

from ansible_collections.dra.admin.plugins.module_utils.kube.evictions import eviction_refusal
from ansible_collections.dra.admin.plugins.module_utils.access.api import status_causes
from conftest import FIXTURES

API_ERRORS = os.path.join(FIXTURES, "api-errors")


def recorded(name):
    with open(os.path.join(API_ERRORS, name)) as f:
        return f.read()


def test_namespace_terminating_cause_is_read_from_the_recorded_status():
    assert status_causes(recorded("eviction-namespace-terminating-v1.36.3.json")) == ("NamespaceTerminating",)


def test_terminating_namespace_is_waited_for_not_failed():
    causes = status_causes(recorded("eviction-namespace-terminating-v1.36.3.json"))
    assert eviction_refusal(403, causes) == "namespace"


def test_other_forbidden_evictions_stop_the_drain():
    assert eviction_refusal(403, ()) == "error"
    assert eviction_refusal(403, ("FieldValueInvalid",)) == "error"


def test_budget_and_gone():
    assert eviction_refusal(429) == "budget"
    assert eviction_refusal(404) == "gone"
    assert eviction_refusal(500) == "error"


def test_bodies_that_are_not_a_status_have_no_causes():
    assert status_causes(None) == ()
    assert status_causes("not json") == ()
    assert status_causes('{"details": {"causes": [{"message": "no reason"}, "x"]}}') == ()
    assert status_causes('["a list"]') == ()
