"""The eviction waits of the device taints phase by phase (devices/taint_progress.py, common/progress.py): what a
NoExecute rule still waits for, the message when the time is up, and the one result made of the write and the
wait's last round - against the scripted API of test_device_taints on objects recorded from the real cluster
(Kubernetes v1.36.3), before the taint (dry-run) and after the eviction (noexecute-done)."""
import copy

import pytest

from ansible_collections.dra.admin.plugins.module_utils.common.progress import module_fields, progress
from ansible_collections.dra.admin.plugins.module_utils.devices import taints as dt
from ansible_collections.dra.admin.plugins.module_utils.kube import taint_rules
from ansible_collections.dra.admin.plugins.module_utils.devices import taint_progress as tp
from ansible_collections.dra.admin.plugins.module_utils.devices.remediation_service import remediate
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import DeviceTaint, DeviceTaintFailure

from test_device_taints import NS, ScriptedApi, params, recorded
import test_device_remediation as remedy

PODS = ["%s/a1" % NS, "%s/a2" % NS, "%s/t" % NS]
# Fields that differ between one call and the write plus its wait only in how many requests they took.
REQUESTS = ("api_requests",)


class Clock(object):
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class EvictingApi(ScriptedApi):
    """The recorded cluster before the taint until the first write, then after the eviction; the rule's
    EvictionInProgress condition as `in_progress` says (the controller's report)."""

    def __init__(self, before, after, **kw):
        super(EvictingApi, self).__init__(before, **kw)
        self.after = after
        self.in_progress = False

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        out = super(EvictingApi, self).request(method, path, query, body, content_type, accept)
        if method != "GET":
            self.objs = self.after
        for rule in self.rules.values():
            rule["status"]["conditions"][0]["status"] = "True" if self.in_progress else "False"
        return out


def taint(api, clock, check_mode=False, **kw):
    p = dict(params(), state="tainted", wait=True, wait_timeout=30, wait_sleep=0.01)
    p.update(kw)
    task = DeviceTaint(api, p, check_mode=check_mode, clock=clock, sleep=lambda s: None)
    result = task.run()
    return dict(result, changed=task.changed, api_requests=api.requests, diff=task.diff)


def test_a_noexecute_rule_waits_while_its_pods_are_not_evicted():
    claims = dt.affected_claims(recorded("dry-run")["ResourceClaim"],
                                dt.selected_devices(recorded("dry-run")["ResourceSlice"], dt.selector(
                                    "maint.example.com", "tray")),
                                {"key": dt.DEFAULT_KEY, "effect": dt.NO_EXECUTE}, None)
    for claim in claims:
        claim["pods"] = ["a1", "a2"] if claim["name"] == "shared" else ["t"]
    # Not written yet (check mode), or written and not reported on: the pods still to go (t tolerates 20 s).
    assert tp.eviction_pending(None, "r", dt.NO_EXECUTE, claims) == (tp.EVICTION_DONE, PODS)
    forever = [dict(c, toleration="forever") if c["name"] == "tolerant" else c for c in claims]
    assert tp.eviction_pending(None, "r", dt.NO_EXECUTE, forever) == (tp.EVICTION_DONE, PODS[:2])
    # No pod listed, the report not there yet: the rule is what is pending.
    assert tp.eviction_pending(None, "r", dt.NO_EXECUTE, []) == (tp.EVICTION_DONE, ["DeviceTaintRule/r"])
    # NoSchedule evicts nothing; a rule reported done for its generation waits no more.
    assert tp.eviction_pending(None, "r", taint_rules.NO_SCHEDULE, claims) == (None, [])
    done = {"metadata": {"generation": 2}, "status": {"conditions": [
        {"type": dt.EVICTION_IN_PROGRESS, "status": "False", "observedGeneration": 2}]}}
    assert tp.eviction_pending(done, "r", dt.NO_EXECUTE, claims) == (None, [])
    stale = copy.deepcopy(done)
    stale["metadata"]["generation"] = 3
    assert tp.eviction_pending(stale, "r", dt.NO_EXECUTE, claims)[0] == tp.EVICTION_DONE


def test_the_progress_line_names_the_pods_and_the_seconds():
    out = progress(tp.EVICTION_DONE, PODS, 100.0, 103.04, tp.WAIT_TEXT)
    assert out["pending_count"] == 3 and out["elapsed"] == 3.0
    assert out["progress"] == ("waiting for the pods using the devices to be evicted (condition EvictionInProgress "
                               "false for the rule's generation): 3 pending (%s), 3.0s so far" % ", ".join(PODS))


def test_the_write_and_its_wait_make_the_one_calls_result():
    clock = Clock()
    one = EvictingApi(recorded("dry-run"), recorded("noexecute-done"))
    single = taint(one, clock, effect=dt.NO_EXECUTE)

    api = EvictingApi(recorded("dry-run"), recorded("noexecute-done"))
    api.in_progress = True
    step = taint(api, clock, effect=dt.NO_EXECUTE, wait=False)
    assert step["changed"] and step["waiting_for"] == tp.EVICTION_DONE and step["started"] == 1000.0
    assert step["still_holding"] == PODS and step["evicted"] == []
    # Rounds: read only, nothing written; pending until the controller reports the eviction over.
    clock.now = 1004.0
    writes = len(api.writes)
    round_one = taint(api, clock, check_mode=True, effect=dt.NO_EXECUTE, wait=False, since=step["started"])
    assert not round_one["changed"] and len(api.writes) == writes
    assert round_one["waiting_for"] == tp.EVICTION_DONE and round_one["elapsed"] == 4.0
    assert round_one["pending"] == ["DeviceTaintRule/%s" % step["name"]]  # the pods are gone, the report not yet
    api.in_progress = False
    last = taint(api, clock, check_mode=True, effect=dt.NO_EXECUTE, wait=False, since=step["started"])
    assert last["waiting_for"] is None and last["pending"] == [] and last["progress"].startswith("nothing left")

    merged = tp.merge_taint_steps(step, dict(last, attempts=2))
    assert merged["evicted"] == PODS and merged["still_holding"] == []
    assert module_fields(merged, REQUESTS) == module_fields(single, REQUESTS)
    assert "waiting_for" not in merged and "started" not in merged
    # Skipped wait (check mode, or nothing to wait for): the write's result as it is.
    assert tp.merge_taint_steps(step, {"skipped": True}) == module_fields(step, ("changed",)) | {"changed": True}
    assert tp.merge_taint_steps({"skipped": True}, last) == {}


def test_a_round_after_the_timeout_fails_as_the_one_call_does():
    clock = Clock()
    api = EvictingApi(recorded("dry-run"), recorded("dry-run"))
    api.in_progress = True
    step = taint(api, clock, effect=dt.NO_EXECUTE, wait=False)
    clock.now = 1029.0
    assert taint(api, clock, True, effect=dt.NO_EXECUTE, wait=False, since=1000.0)["pending"] == PODS
    clock.now = 1030.0
    with pytest.raises(DeviceTaintFailure) as err:
        taint(api, clock, True, effect=dt.NO_EXECUTE, wait=False, since=step["started"])
    message = str(err.value)
    assert message.startswith("DeviceTaintRule %s is in place, but after 30s still waiting for the eviction to "
                              "finish" % step["name"])
    assert ", ".join(PODS) in message and err.value.details["still_holding"] == PODS
    # The one call fails with the same words.
    one = EvictingApi(recorded("dry-run"), recorded("dry-run"))
    one.in_progress = True
    ticking = Clock()

    def sleep(seconds):
        ticking.now += 10
    with pytest.raises(DeviceTaintFailure) as single:
        DeviceTaint(one, dict(params(), state="tainted", wait=True, wait_timeout=30, wait_sleep=10),
                    clock=ticking, sleep=sleep).run()
    assert str(single.value).split(" (controller", 1)[0] == message.split(" (controller", 1)[0]


def test_without_noexecute_or_with_wait_nothing_is_waited_for():
    clock = Clock()
    api = EvictingApi(recorded("dry-run"), recorded("dry-run"))
    no_schedule = taint(api, clock, effect=taint_rules.NO_SCHEDULE, wait=False)
    assert no_schedule["waiting_for"] is None and "still_holding" not in no_schedule
    assert "waiting_for" not in taint(api, clock, effect=taint_rules.NO_SCHEDULE)


# ---- the remediation ----------------------------------------------------------------------------

DEV0 = remedy.DEV0
USER = "device-remediation/user"


def remediation(api, clock, check_mode=False, **kw):
    result, changed, diff = remediate(api, "NoExecute", 15, check_mode=check_mode, now=remedy.NOW, wait_timeout=30,
                                      poll_interval=0.01, clock=clock, sleep=lambda s: None, **kw)
    return dict(result, changed=changed, diff=diff, api_requests=api.requests)


def test_the_remediation_writes_then_waits_for_its_noexecute_devices():
    clock = Clock()
    single = remediation(EvictingApi(remedy.recorded("tainted"), remedy.recorded("tainted")), clock)

    api = EvictingApi(remedy.recorded("tainted"), remedy.recorded("tainted"))
    api.in_progress = True
    step = remediation(api, clock, wait=False)
    assert step["changed"] and step["tainted"] == [DEV0] and step["waiting_for"] == tp.EVICTION_DONE
    assert step["pending"] == [USER] and step["holding"] == {DEV0: [USER]}
    assert step["actions"][0]["still_holding"] == [USER] and step["actions"][0]["evicted"] == []
    # A round in check mode: the rule kept as written, still evicting.
    clock.now = 1002.0
    writes = len(api.writes)
    round_one = remediation(api, clock, check_mode=True, wait=False, since=step["started"])
    assert not round_one["changed"] and len(api.writes) == writes and round_one["kept"] == [DEV0]
    assert round_one["pending"] == [USER] and round_one["elapsed"] == 2.0
    assert USER in round_one["progress"]
    # The pod gone and the report in: nothing left; the one result says it was evicted.
    api.in_progress = False
    api.objs = copy.deepcopy(api.objs)
    api.objs["Pod"] = []
    last = remediation(api, clock, check_mode=True, wait=False, since=step["started"])
    assert last["waiting_for"] is None and last["holding"] == {DEV0: []}
    merged = tp.merge_remediation_steps(step, last)
    assert merged["actions"][0]["evicted"] == [USER] and merged["actions"][0]["still_holding"] == []
    # As the one call (whose pod was not gone: its result keeps it) but for the evictions.
    single_actions = [dict(a, evicted=[USER], still_holding=[]) for a in single["actions"]]
    assert module_fields(merged, REQUESTS) == module_fields(dict(single, actions=single_actions), REQUESTS)
    # Past the timeout, a round still evicting fails naming the device and the pods.
    api.in_progress = True
    api.objs = remedy.recorded("tainted")
    clock.now = 1030.0
    with pytest.raises(dt.DeviceTaintError) as err:
        remediation(api, clock, check_mode=True, wait=False, since=step["started"])
    assert "devices %s" % DEV0 in str(err.value) and "after 30s still waiting" in str(err.value)
    assert USER in str(err.value) and err.value.changed is False


def test_no_schedule_remediation_waits_for_nothing():
    clock = Clock()
    api = EvictingApi(remedy.recorded("tainted"), remedy.recorded("tainted"))
    result, changed, dummy = remediate(api, "NoSchedule", 15, now=remedy.NOW, clock=clock, wait=False)
    assert changed and result["waiting_for"] is None and result["holding"] == {}
