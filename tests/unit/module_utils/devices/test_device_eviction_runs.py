"""dra_device_taint's effect Evict through its service (devices.taints_service with devices.evictions_service and
kube.evictions_service.PodEvictor) against a scripted API holding objects recorded from the local v1.37.2 control
plane (see test_device_evictions.py): which requests a run makes, in which order, and what it reports."""
import copy

import pytest

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import (
    DeviceTaint, DeviceTaintError, DeviceTaintFailure,
)
from conftest import recorded_by_kind
from test_device_taints import ScriptedApi

DRIVER = "evict.example.com"
SAID = "The disruption budget precious needs 1 healthy pods and has 1 currently"


class EvictingApi(ScriptedApi):
    """The scripted API, answering evictions as kube-apiserver does: a pod named in `refuse` gets the 429 of a
    PodDisruptionBudget (with the budget's message in the Status's causes), any other pod is deleted at once with
    its template claims, and a shared claim it reserved is released (deallocated once no pod reserves it)."""

    def __init__(self, objs, refuse=()):
        super(EvictingApi, self).__init__(copy.deepcopy(objs), served=("v1",), taint_rules_in=("v1",),
                                          version="v1.37.2")
        self.refuse = set(refuse)
        self.evictions = []  # (pod, answer)

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        if method == "POST" and path.endswith("/eviction"):
            self.requests += 1
            name = path.split("/")[-2]
            if name in self.refuse:
                self.evictions.append((name, 429))
                raise DraApiError("POST %s failed: HTTP 429: Cannot evict pod as it would violate the pod's "
                                  "disruption budget." % path, status=429, causes=("DisruptionBudget",),
                                  cause_messages=(SAID,))
            self.evictions.append((name, 201))
            self.delete_pod(name)
            return {"kind": "Status", "status": "Success"}
        return super(EvictingApi, self).request(method, path, query, body, content_type, accept)

    def delete_pod(self, name):
        [pod] = [p for p in self.objs["Pod"] if p["metadata"]["name"] == name]
        self.objs["Pod"].remove(pod)
        uid = pod["metadata"]["uid"]
        kept = []
        for claim in self.objs["ResourceClaim"]:
            if any(o.get("uid") == uid for o in claim["metadata"].get("ownerReferences") or []):
                continue  # a template claim goes with its pod
            status = claim.get("status") or {}
            status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            if not status["reservedFor"]:
                status.pop("allocation", None)
            kept.append(claim)
        self.objs["ResourceClaim"] = kept


class Clock(object):
    """A clock that moves one second per reading (so retries and waits end without sleeping)."""

    def __init__(self, start=1000.0):
        self.now = start

    def __call__(self):
        self.now += 1.0
        return self.now


def recorded(moment):
    return recorded_by_kind("device-eviction-%s-v1.37.2.json" % moment)


def params(pool, **kw):
    base = {"state": "tainted", "name": None, "driver": DRIVER, "pool": pool, "device": None,
            "key": "dra.admin/maintenance", "value": "", "effect": "Evict", "labels": {}, "annotations": {},
            "wait": True, "wait_timeout": 60, "wait_sleep": 0.5, "since": None}
    base.update(kw)
    return base


def run(api, pool, check_mode=False, clock=None, **kw):
    task = DeviceTaint(api, params(pool, **kw), check_mode=check_mode, clock=clock or Clock(), sleep=lambda s: None)
    return task, task.run()


def pod_names(objs, prefix):
    return sorted(p["metadata"]["name"] for p in objs["Pod"] if p["metadata"]["name"].startswith(prefix))


def waves_of(objs):
    train = pod_names(objs, "train-")
    return [pod_names(objs, "s"), train[:1], train[1:], pod_names(objs, "web-")]


def test_check_mode_and_dry_run_name_the_waves_and_write_nothing():
    objs = recorded("three-waves")
    for state, check_mode in (("tainted", True), ("dry_run", False)):
        api = EvictingApi(objs)
        task, out = run(api, "rack", check_mode=check_mode, state=state)
        assert api.writes == [] and api.evictions == []
        assert [[k.split("/")[1] for k in w["pods"]] for w in out["waves"]] == waves_of(objs)
        assert [b["name"].split("/")[1] for b in out["pod_disruption_budgets"]] == ["web"]
        assert task.changed is (state == "tainted")


def test_one_call_writes_the_rule_noschedule_then_evicts_wave_after_wave():
    objs = recorded("three-waves")
    api = EvictingApi(objs)
    task, out = run(api, "rack")
    [(verb, _path, rule)] = api.writes[:1]
    assert verb == "POST" and rule["spec"]["taint"]["effect"] == "NoSchedule"
    assert [w for w in api.writes if w[0] != "POST"] == []
    order = [name for name, answer in api.evictions if answer == 201]
    waves = waves_of(objs)
    # Within a wave the evictions are concurrent; the waves follow one another.
    assert [sorted(order[i:i + len(w)]) for i, w in zip((0, 2, 3, 4), waves)] == waves
    assert task.changed is True and out["not_evicted"] == [] and out["claims_released"] is True
    assert [k.split("/")[1] for k in out["evicted"]] == sorted(n for w in waves for n in w)
    assert out["still_holding"] == [] and out["pods"] == []
    # Again: the rule as it is, nobody to evict.
    again_task, again = run(api, "rack")
    assert again_task.changed is False and again["waves"] == [] and api.writes[1:] == []


def test_a_budget_that_never_allows_fails_at_the_deadline_naming_it_and_the_rule_stays():
    objs = recorded("held")
    [name] = pod_names(objs, "precious-")
    api = EvictingApi(objs, refuse=[name])
    with pytest.raises(DeviceTaintFailure) as failure:
        run(api, "held", wait_timeout=20)
    message = str(failure.value)
    assert "(wave 1)" in message and SAID in message and "effect NoSchedule" in message and "after 20s" in message
    [refused] = failure.value.details["not_evicted"]
    assert refused["reason"] == "budget" and refused["pod"].endswith("/" + name)
    assert refused["pod_disruption_budgets"] == [refused["pod"].split("/")[0] + "/precious"]
    assert len(api.evictions) > 2 and all(answer == 429 for _n, answer in api.evictions)  # retried, then stopped
    assert [w[0] for w in api.writes] == ["POST"] and pod_names(api.objs, "precious-") == [name]


def test_rounds_without_waiting_evict_one_wave_each_then_wait_for_nothing():
    objs = recorded("three-waves")
    api = EvictingApi(objs)
    clock = Clock()
    rounds = []
    for _round in range(6):
        task, out = run(api, "rack", wait=False, clock=clock)
        rounds.append((out["waiting_for"], out["waves_left"], sorted(n for n, _a in api.evictions)))
        if out["waiting_for"] is None:
            break
    waves = waves_of(objs)
    done = []
    expected = []
    for number, wave in enumerate(waves):
        done = sorted(done + wave)
        expected.append(("wave_evicted", len(waves) - number, done))  # each round evicts the first wave left
    expected.append((None, 0, done))
    assert rounds == expected
    assert task.changed is False and out["claims_released"] is True


def test_a_round_after_the_deadline_fails_naming_the_refusal():
    objs = recorded("held")
    [name] = pod_names(objs, "precious-")
    api = EvictingApi(objs, refuse=[name])
    task, out = run(api, "held", wait=False)
    assert out["waiting_for"] == "wave_evicted" and out["pending"][0].endswith("/" + name)
    assert [f["reason"] for f in out["not_evicted"]] == ["budget"] and SAID in out["not_evicted"][0]["message"]
    assert task.changed is True  # the rule was written
    with pytest.raises(DeviceTaintFailure) as failure:
        run(api, "held", wait=False, since=out["started"] - 100, wait_timeout=30)
    assert SAID in str(failure.value) and "after 30s" in str(failure.value)


def test_releases_without_the_rule_refuse_evict_naming_the_drain():
    api = EvictingApi(recorded("held"))
    api.version = "v1.33.13"
    api.served = ["v1beta2", "v1beta1"]
    with pytest.raises(DeviceTaintError) as failure:
        run(api, "held")
    assert "effect Evict needs the rule as well" in str(failure.value) and "dra_node_drain" in str(failure.value)
    assert api.writes == [] and api.evictions == []


def test_waves_of_several_namespaces_are_evicted_each_from_its_own_namespace():
    both = recorded("three-waves")
    for kind, items in recorded("held").items():
        both.setdefault(kind, []).extend(items)
    api = EvictingApi(both)
    task, out = run(api, None)  # every pool of the driver
    namespaces = sorted(set(k.split("/")[0] for w in out["waves"] for k in w["pods"]))
    assert len(namespaces) == 2 and len(out["waves"]) == 5
    assert out["not_evicted"] == [] and out["claims_released"] is True and out["still_holding"] == []
    assert sorted(n for n, answer in api.evictions if answer == 201) == sorted(
        p["metadata"]["name"] for p in both["Pod"])
