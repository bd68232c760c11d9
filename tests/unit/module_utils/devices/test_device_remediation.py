"""Remediation of unhealthy devices: the plan on recorded objects, and the flow against a scripted API.

tests/unit/fixtures/recorded/device-remediation-*-v1.36.3.json were written by
tests/integration/test_device_taints.py (test_remediation_...) with DRA_IT_RECORD=<dir>, on Kubernetes v1.36.3
with DRADeviceTaintRules=true: the ResourceSlices (the example driver's, and remedy.example.com's pool "rack" of
dev-0 and dev-1), the claim and pod of namespace device-remediation (pod "user" holds dev-0) and every
DeviceTaintRule, at two moments:
tainted   the driver taints dev-0 NoSchedule in its slice; the remediation's rule for dev-0 exists (NoSchedule);
          on dev-1 a maintenance rule of dra.admin (dra_device_taint, key dra.admin/maintenance) and another
          tool's rule (foreign-dev-1, no dra.admin label)
marked    the driver's taint is gone; the remediation's rule carries dra.admin/healthy-since
"""
import copy
import datetime
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.devices import remediation as rem
from ansible_collections.dra.admin.plugins.module_utils.devices import taints as dt
from ansible_collections.dra.admin.plugins.module_utils.devices.health import device_health
from ansible_collections.dra.admin.plugins.module_utils.common.times import parse_time
from ansible_collections.dra.admin.plugins.module_utils.devices.remediation_service import remediate

from test_device_taints import ScriptedApi
from conftest import FIXTURES, recorded_by_kind

REC = os.path.join(FIXTURES, "recorded")
DRIVER = "remedy.example.com"
DEV0 = "%s/rack/dev-0" % DRIVER
RULE = "dra-admin-unhealthy-remedy.example.com-rack-dev-0"
UTC = datetime.timezone.utc


def recorded(moment):
    return recorded_by_kind("device-remediation-%s-v1.36.3.json" % moment)


def health(objs, now):
    return device_health(objs["ResourceSlice"], objs.get("ResourceClaim", []), objs.get("Pod", []), now)["devices"]


def rules(objs, without=()):
    return [r for r in objs["DeviceTaintRule"] if r["metadata"]["name"] not in without]


def since(objs):
    rule = [r for r in objs["DeviceTaintRule"] if r["metadata"]["name"] == RULE][0]
    return parse_time(rule["metadata"]["annotations"][rem.HEALTHY_SINCE])


def kinds(actions):
    return [(a["action"], a["id"]) for a in actions]


def with_driver_taint(objs, taint):
    """The objects with dev-0's taints in the remedy slice replaced (as the driver republishes it)."""
    objs = copy.deepcopy(objs)
    for item in objs["ResourceSlice"]:
        if item["spec"]["driver"] == DRIVER:
            item["spec"]["devices"][0]["taints"] = [taint] if taint else []
    return objs


NOW = datetime.datetime(2026, 11, 23, 22, 0, 0, tzinfo=UTC)


def test_recorded_objects_are_what_the_docstring_says():
    tainted, marked = recorded("tainted"), recorded("marked")
    names = sorted(r["metadata"]["name"] for r in tainted["DeviceTaintRule"])
    assert names == ["dra-admin-remedy.example.com-rack-dev-1", RULE, "foreign-dev-1"]
    assert [r for r in tainted["DeviceTaintRule"] if rem.is_remediation_rule(r)][0]["metadata"]["name"] == RULE
    assert rem.HEALTHY_SINCE in [r for r in marked["DeviceTaintRule"] if r["metadata"]["name"] == RULE][0][
        "metadata"]["annotations"]
    dev0 = [d for d in health(tainted, NOW) if d["id"] == DEV0][0]
    assert dev0["condition"] == "unhealthy" and dev0["in_use"] and dev0["since_source"] == "taint"
    assert [d for d in health(marked, NOW) if d["id"] == DEV0][0]["condition"] == "not-reported"


def test_an_unhealthy_device_without_its_rule_is_tainted_no_schedule_by_default():
    objs = recorded("tainted")
    actions = rem.plan(health(objs, NOW), rules(objs, without=[RULE]), NOW, 600)
    assert kinds(actions) == [("taint", DEV0)]
    (action,) = actions
    assert action["rule"] == RULE == rem.rule_name(DRIVER, "rack", "dev-0")
    assert action["want_effect"] == "NoSchedule" and action["in_use"] is True
    assert action["reasons"] == ["driver taint remedy.example.com/unhealthy=ecc:NoSchedule"]
    assert rem.rule_annotations(action, NOW) == {rem.REASON: action["reasons"][0], rem.HEALTHY_SINCE: None}
    # NoExecute only when asked.
    assert rem.plan(health(objs, NOW), [], NOW, 600, effect="NoExecute")[0]["want_effect"] == "NoExecute"


def test_a_rule_as_wanted_is_kept_and_a_changed_effect_is_updated():
    objs = recorded("tainted")
    assert kinds(rem.plan(health(objs, NOW), rules(objs), NOW, 600)) == [("keep", DEV0)]
    (update,) = rem.plan(health(objs, NOW), rules(objs), NOW, 600, effect="NoExecute")
    assert update["action"] == "update" and update["effect"] == "NoSchedule" and update["want_effect"] == "NoExecute"


def test_healthy_again_marks_then_waits_then_lifts():
    tainted, marked = recorded("tainted"), recorded("marked")
    # The driver's taint is gone: the first run marks the rule with its time.
    (mark,) = rem.plan(health(marked, NOW), rules(tainted), NOW, 15)
    assert mark["action"] == "mark-healthy" and mark["healthy_since"] == "2026-11-23T22:00:00Z"
    assert rem.rule_annotations(mark, NOW) == {rem.HEALTHY_SINCE: "2026-11-23T22:00:00Z"}
    # As recorded after that run: waiting while the period is not over, lifted after it.
    start = since(marked)
    (wait,) = rem.plan(health(marked, start), rules(marked), start + datetime.timedelta(seconds=5), 15)
    assert wait["action"] == "wait" and wait["seconds_left"] == 10
    (lift,) = rem.plan(health(marked, start), rules(marked), start + datetime.timedelta(seconds=15), 15)
    assert lift["action"] == "lift" and lift["rule"] == RULE
    # healthy_for 0: lifted the first run that sees it healthy, no mark needed.
    assert kinds(rem.plan(health(marked, NOW), rules(tainted), NOW, 0)) == [("lift", DEV0)]


def test_unhealthy_or_unknown_again_starts_the_period_over():
    marked = recorded("marked")
    again = with_driver_taint(marked, {"key": "remedy.example.com/unhealthy", "effect": "NoExecute"})
    (update,) = rem.plan(health(again, NOW), rules(marked), NOW, 15)
    assert update["action"] == "update" and rem.rule_annotations(update, NOW)[rem.HEALTHY_SINCE] is None
    devices = health(marked, NOW)
    for device in devices:
        if device["id"] == DEV0:
            device.update(condition="unknown", reasons=["a pod reports it Unknown"])
    (unmark,) = rem.plan(devices, rules(marked), NOW, 15)
    assert unmark["action"] == "unmark" and rem.rule_annotations(unmark, NOW) == {rem.HEALTHY_SINCE: None}
    assert kinds(rem.plan(devices, rules(recorded("tainted")), NOW, 15)) == [("keep", DEV0)]
    # A driver taint with effect None is a note, not a health problem.
    informational = with_driver_taint(marked, {"key": "remedy.example.com/note", "effect": "None"})
    soon = since(marked) + datetime.timedelta(seconds=1)
    assert kinds(rem.plan(health(informational, soon), rules(marked), soon, 15)) == [("wait", DEV0)]


def test_a_device_no_longer_published_keeps_its_rule():
    objs = recorded("marked")
    objs["ResourceSlice"] = [s for s in objs["ResourceSlice"] if s["spec"]["driver"] != DRIVER]
    assert kinds(rem.plan(health(objs, NOW), rules(objs), NOW, 0)) == [("unpublished", DEV0)]


def test_only_the_remediations_own_rules_are_ever_lifted():
    objs = recorded("marked")
    others = rules(objs, without=[RULE])
    assert [r["metadata"]["name"] for r in others] == ["dra-admin-remedy.example.com-rack-dev-1", "foreign-dev-1"]
    assert not any(rem.is_remediation_rule(r) for r in others)
    assert rem.plan(health(objs, NOW), others, NOW, 0) == []
    # Neither a dra.admin rule with the remediation's key but without its purpose label, nor one with the label
    # and another key, nor a remediation rule of another driver when a driver is named.
    own = [r for r in objs["DeviceTaintRule"] if r["metadata"]["name"] == RULE][0]
    no_label = copy.deepcopy(own)
    del no_label["metadata"]["labels"][rem.PURPOSE_LABEL]
    other_key = copy.deepcopy(own)
    other_key["spec"]["taint"]["key"] = "dra.admin/maintenance"
    assert not rem.is_remediation_rule(no_label) and not rem.is_remediation_rule(other_key)
    assert rem.plan(health(objs, NOW), [no_label, other_key], NOW, 0) == []
    assert rem.plan(health(objs, NOW), [own], NOW, 0, driver="gpu.example.com") == []
    # The LIST asks the server for the labels; the key is checked on each rule too.
    assert rem.LABEL_SELECTOR == "app.kubernetes.io/managed-by=dra.admin,dra.admin/purpose=device-health-remediation"


@pytest.mark.parametrize("effect, healthy_for, words", [
    ("None", 600, "effect 'None'"), ("NoExecute", -1, "healthy_for is -1"), ("NoSchedule", "10", "healthy_for"),
    ("NoSchedule", True, "healthy_for is True")])
def test_bad_options_name_the_option(effect, healthy_for, words):
    with pytest.raises(rem.RemediationInputError) as err:
        rem.plan([], [], NOW, healthy_for, effect)
    assert words in str(err.value)


def test_rule_names_never_collide_with_maintenance_rules():
    sel = dt.selector(DRIVER, "rack", "dev-0")
    assert rem.rule_name(DRIVER, "rack", "dev-0") != dt.default_rule_name(sel)
    long_name = rem.rule_name("d" * 120 + ".example.com", "p" * 100, "x" * 60)
    assert len(long_name) <= 253 and long_name.startswith(rem.RULE_PREFIX)


def test_annotations_given_as_none_are_removed_and_never_created():
    built = dt.build_rule("v1beta2", RULE, dt.selector(DRIVER, "rack", "dev-0"), rem.KEY, "", "NoSchedule",
                          annotations={rem.REASON: "x", rem.HEALTHY_SINCE: None})
    assert built["metadata"]["annotations"] == {rem.REASON: "x"}
    own = [r for r in recorded("marked")["DeviceTaintRule"] if r["metadata"]["name"] == RULE][0]
    wanted = dt.build_rule("v1beta2", RULE, dt.selector(DRIVER, "rack", "dev-0"), rem.KEY, "", "NoSchedule",
                           annotations={rem.HEALTHY_SINCE: None}, operation=rem.PURPOSE)
    assert dt.rule_patch(own, wanted, dt.removed_annotations({rem.HEALTHY_SINCE: None})) == {
        "metadata": {"annotations": {rem.HEALTHY_SINCE: None}}}
    assert dt.rule_patch(own, wanted) is None  # nothing asked to remove: nothing to change


# ---- the flow against a scripted API ------------------------------------------------------------

class RemediationApi(ScriptedApi):
    """ScriptedApi as the remediation uses it (the LIST of rules by label, merge patches)."""


def run(api, now, check_mode=False, effect="NoSchedule", healthy_for=15):
    return remediate(api, effect, healthy_for, check_mode=check_mode, now=now, poll_interval=0.01,
                     sleep=lambda s: None)


def test_taint_mark_wait_lift_through_the_device_taint_code():
    tainted, marked = recorded("tainted"), recorded("marked")
    others = dict((r["metadata"]["name"], r) for r in rules(tainted, without=[RULE]))
    api = RemediationApi(tainted)
    api.rules.update(copy.deepcopy(others))
    # Check mode: the plan, nothing written.
    result, changed, diff = run(api, NOW, check_mode=True)
    assert changed and result["tainted"] == [DEV0] and api.writes == []
    assert diff["after"][RULE]["taint"] == {"key": rem.KEY, "value": "", "effect": "NoSchedule"}
    # The taint, created as dra_device_taint creates a rule; again: nothing.
    result, changed, diff = run(api, NOW)
    assert changed and [w[0] for w in api.writes] == ["POST"] and diff["before"][RULE] == {}
    body = api.writes[0][2]
    assert body["metadata"]["labels"] == {dt.MANAGED_BY_LABEL: dt.MANAGED_BY, rem.PURPOSE_LABEL: rem.PURPOSE}
    assert rem.HEALTHY_SINCE not in body["metadata"]["annotations"]
    result, changed, diff = run(api, NOW)
    assert not changed and result["kept"] == [DEV0] and len(api.writes) == 1
    # Healthy again: mark (a patch of the annotation only), wait, lift (DELETE); the others stay as they were.
    api.objs = marked
    result, changed, diff = run(api, NOW)
    assert changed and result["marked_healthy"] == [DEV0]
    assert api.writes[-1][0] == "PATCH" and api.writes[-1][2] == {
        "metadata": {"annotations": {rem.HEALTHY_SINCE: "2026-11-23T22:00:00Z"}}}
    result, changed, diff = run(api, NOW + datetime.timedelta(seconds=14))
    assert not changed and result["waiting"] == [DEV0] and len(api.writes) == 2
    result, changed, diff = run(api, NOW + datetime.timedelta(seconds=15))
    assert changed and result["lifted"] == [DEV0] and api.writes[-1][0] == "DELETE" and RULE not in api.rules
    # The maintenance rule and the other tool's rule select dev-1 only: nothing else keeps dev-0 out of service.
    assert [a["other_rules_in_force"] for a in result["actions"]] == [[]]
    assert diff["after"] == {RULE: {}} and diff["before"][RULE]["taint"]["key"] == rem.KEY
    assert dict((n, api.rules[n]) for n in others) == others
    result, changed, diff = run(api, NOW + datetime.timedelta(seconds=16))
    assert not changed and result["actions"] == []


def test_not_available_writes_nothing():
    api = RemediationApi(recorded("tainted"), served=("v1",), taint_rules_in=())
    with pytest.raises(dt.DeviceTaintError) as err:
        run(api, NOW)
    assert "not available on Kubernetes v1.36.3" in str(err.value) and api.writes == []
    assert api.requests == 3  # version and discovery only


def test_a_failed_write_says_what_was_done_before_it():
    class FailingDelete(RemediationApi):
        def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
            if method == "DELETE":
                raise dt.DeviceTaintError("refused")
            return super(FailingDelete, self).request(method, path, query, body, content_type, accept)

    api = FailingDelete(recorded("marked"))
    lift = copy.deepcopy([r for r in recorded("marked")["DeviceTaintRule"] if r["metadata"]["name"] == RULE][0])
    api.rules[RULE] = lift
    with pytest.raises(dt.DeviceTaintError) as err:
        run(api, since(recorded("marked")) + datetime.timedelta(seconds=60))
    assert "device %s (lift of rule %s): refused" % (DEV0, RULE) in str(err.value)
    assert err.value.changed is False and [a["action"] for a in err.value.details["actions"]] == ["lift"]
