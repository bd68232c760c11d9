"""Which DeviceTaintRules a run may write: a dry run (and every check-mode run) writes none, whatever rules exist;
every other run writes only its own operation's rule; each lift says which other rules still keep the devices out
of service.

The rules are generated: every combination of selector (driver, pool, device, each set or not), owner (another
tool, dra.admin before operations were labelled, each operation of dra.admin, an unknown operation), effect and
name (each operation's default names, chosen names). The module's flow runs against the scripted API of
test_device_taints.py on the recorded objects of device-taints-dry-run-v1.36.3.json (maint.example.com's pool
"tray" of dev-0..dev-2 on one node, claims "shared" and "tolerant" on it).
"""
import copy

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.dra.admin.plugins.module_utils.devices import taints as dt
from ansible_collections.dra.admin.plugins.module_utils.kube import taint_rules
from ansible_collections.dra.admin.plugins.module_utils.devices import remediation as rem
from ansible_collections.dra.admin.plugins.module_utils.devices.remediation_service import remediate
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import DeviceTaint, drain_devices

from test_device_taints import DRIVER, POOL, ScriptedApi, recorded

FIELDS = ("driver", "pool", "device")
DRIVERS = (DRIVER, "other.example.com")
POOLS = (None, POOL, "rack")
DEVICES = (None, "dev-0", "dev-1")
OWNERS = ("foreign", "unlabelled", "unknown-operation") + dt.OPERATIONS
SETTINGS = settings(max_examples=100, deadline=None)


def make_rule(name, sel, owner, effect, key=dt.DEFAULT_KEY):
    """A rule as the server returns it, owned by `owner` (see OWNERS)."""
    labels = {}
    if owner != "foreign":
        labels[dt.MANAGED_BY_LABEL] = dt.MANAGED_BY
    if owner == "unknown-operation":
        labels[dt.OPERATION_LABEL] = "capacity-reservation"
    elif owner in dt.OPERATIONS:
        labels[dt.OPERATION_LABEL] = owner
    return {"apiVersion": "resource.k8s.io/v1beta2", "kind": dt.KIND,
            "metadata": {"name": name, "labels": labels, "generation": 1, "resourceVersion": "1"},
            "spec": {"deviceSelector": dict((k, v) for k, v in sel.items() if v),
                     "taint": {"key": key, "effect": effect, "timeAdded": "2026-11-23T10:00:00Z"}}}


selectors = st.builds(lambda d, p, v: dict((k, x) for k, x in zip(FIELDS, (d, p, v)) if x),
                      st.sampled_from(DRIVERS), st.sampled_from(POOLS), st.sampled_from(DEVICES))
# Selectors dra.admin's operations take: a device needs its pool.
own_selectors = selectors.filter(lambda s: "device" not in s or "pool" in s)


@st.composite
def rule_sets(draw):
    """{name: rule}: names drawn from every operation's default names of the selectors, and chosen ones."""
    out = {}
    for dummy in range(draw(st.integers(0, 6))):
        sel = draw(selectors)
        name = draw(st.one_of(st.builds(dt.operation_rule_name, st.just(sel), st.sampled_from(dt.OPERATIONS)),
                              st.sampled_from(("gpu-repair", "vendor-health", "dra-admin-maint.example.com-tray"))))
        out[name] = make_rule(name, sel, draw(st.sampled_from(OWNERS)), draw(st.sampled_from(dt.EFFECTS)))
    return out


def wanted_rule(name, sel, operation, effect=dt.NO_EXECUTE):
    return dt.build_rule("v1beta2", name, sel, dt.DEFAULT_KEY, "", effect, operation=operation)


# ---- the pure rules -----------------------------------------------------------------------------

@SETTINGS
@given(rule_sets(), own_selectors, st.sampled_from(dt.OPERATIONS), st.sampled_from(dt.EFFECTS))
def test_a_dry_run_plans_no_write_whatever_rules_exist(rules, sel, operation, effect):
    for existing in list(rules.values()) + [None]:
        name = dt.rule_name_of(existing) or dt.operation_rule_name(sel, operation)
        assert dt.planned_writes(dt.DRY_RUN, operation, existing, wanted_rule(name, sel, operation, effect)) == []


@SETTINGS
@given(rule_sets(), own_selectors, st.sampled_from(dt.OPERATIONS), st.sampled_from((dt.TAINTED, dt.ABSENT)))
def test_a_run_writes_only_its_own_operations_rule(rules, sel, operation, state):
    for existing in list(rules.values()) + [None]:
        name = dt.rule_name_of(existing) or dt.operation_rule_name(sel, operation)
        try:
            writes = dt.planned_writes(state, operation, existing, wanted_rule(name, sel, operation))
        except dt.DeviceTaintError as exc:
            # Refused: the rule is another tool's or another operation's, and the message says whose.
            assert existing is not None and dt.rule_operation(existing) != operation
            assert "nothing was changed" in str(exc) and name in str(exc)
            continue
        assert existing is None or dt.rule_operation(existing) == operation
        assert all(w["name"] == name for w in writes)
        if state == dt.ABSENT:
            assert [w["verb"] for w in writes] == (["DELETE"] if existing else [])
        else:
            assert [w["verb"] for w in writes] in ([["POST"]] if existing is None else [[], ["PATCH"]])
            for write in writes:  # what is written is the operation's own (a patch never takes another's label)
                labels = (write["body"].get("metadata") or {}).get("labels") or {}
                assert labels.get(dt.OPERATION_LABEL, operation) == operation


@st.composite
def operation_runs(draw):
    """A sequence of (operation, state, selector, chosen name or None) runs."""
    runs = []
    for dummy in range(draw(st.integers(1, 12))):
        operation = draw(st.sampled_from(dt.OPERATIONS))
        name = draw(st.sampled_from((None, None, "gpu-repair"))) if operation == dt.MAINTENANCE else None
        runs.append((operation, draw(st.sampled_from((dt.DRY_RUN, dt.TAINTED, dt.ABSENT))), draw(own_selectors),
                     name))
    return runs


@SETTINGS
@given(rule_sets(), operation_runs())
def test_operations_on_the_same_devices_never_change_or_lift_each_others_rules(rules, runs):
    """Carried out one after the other on a store of rules: every rule changed or deleted is one its own
    operation made; other tools' rules never change; a lift reports every other rule still in force."""
    store = copy.deepcopy(rules)
    owner = dict((name, dt.rule_operation(rule) or "foreign") for name, rule in store.items())
    untouchable = dict((n, copy.deepcopy(r)) for n, r in store.items() if not dt.is_managed(r))
    for operation, state, sel, chosen in runs:
        name = chosen or dt.operation_rule_name(sel, operation)
        existing = store.get(name)
        try:
            writes = dt.planned_writes(state, operation, existing, wanted_rule(name, sel, operation))
        except dt.DeviceTaintError:
            continue
        if state == dt.DRY_RUN:
            assert writes == []
        for write in writes:
            if write["verb"] == "POST":
                store[name] = copy.deepcopy(write["body"])
                owner[name] = operation
            else:
                assert owner[name] == operation, (write, owner[name])
                if write["verb"] == "DELETE":
                    del store[name]
                else:
                    store[name]["metadata"]["labels"].update(write["body"].get("metadata", {}).get("labels", {}))
                    if "spec" in write["body"]:
                        store[name]["spec"] = copy.deepcopy(write["body"]["spec"])
        if state == dt.ABSENT and existing is not None:
            still = dt.rules_in_force(store.values(), dt.rule_selector(existing), besides=name)
            expected = sorted(n for n, r in store.items() if n != name
                              and r["spec"]["taint"]["effect"] in dt.KEEPS_ALLOCATIONS_OFF
                              and dt.selectors_overlap(dt.rule_selector(r), dt.rule_selector(existing)))
            assert [r["name"] for r in still] == expected
    for name, rule in untouchable.items():
        assert store[name] == rule


UNIVERSE = [dict(zip(FIELDS, (d, p, v))) for d in DRIVERS for p in POOLS[1:] for v in DEVICES[1:]]


def selects(sel, device):
    return all(not sel.get(k) or sel[k] == device[k] for k in FIELDS)


@SETTINGS
@given(selectors, selectors)
def test_selectors_overlap_exactly_when_some_device_is_selected_by_both(first, second):
    assert dt.selectors_overlap(first, second) == any(selects(first, d) and selects(second, d) for d in UNIVERSE)


@SETTINGS
@given(rule_sets(), own_selectors, st.sampled_from(dt.OPERATIONS))
def test_rules_in_force_are_the_other_rules_keeping_some_selected_device_out_of_service(rules, sel, operation):
    besides = dt.operation_rule_name(sel, operation)
    found = dt.rules_in_force(rules.values(), sel, besides=besides)
    assert [r["name"] for r in found] == sorted(r["name"] for r in found)
    names = set(r["name"] for r in found)
    for name, rule in rules.items():
        keeps = rule["spec"]["taint"]["effect"] in (taint_rules.NO_SCHEDULE, dt.NO_EXECUTE)
        shares = any(selects(sel, d) and selects(dt.rule_selector(rule), d) for d in UNIVERSE)
        assert (name in names) == (name != besides and keeps and shares), (name, rule)
    for entry in found:
        assert entry["operation"] == dt.rule_operation(rules[entry["name"]])


texts = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-_/ABC", min_size=1, max_size=260)
dns_labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
subdomains = st.lists(dns_labels, min_size=1, max_size=4).map(".".join).filter(lambda n: len(n) <= 253)
# Pool names are DNS subdomains separated by slashes; device names are DNS labels.
pools = st.lists(subdomains, min_size=1, max_size=2).map("/".join).filter(lambda n: len(n) <= 253)


@SETTINGS
@given(st.builds(dt.selector, texts, st.one_of(st.none(), texts), st.one_of(st.none(), texts)))
def test_each_operation_names_the_same_devices_differently(sel):
    assert len(set(dt.operation_rule_name(sel, op) for op in dt.OPERATIONS)) == len(dt.OPERATIONS)


@SETTINGS
@given(st.builds(dt.selector, subdomains, st.one_of(st.none(), pools), st.one_of(st.none(), dns_labels)))
def test_default_names_of_api_valid_selections_are_valid_rule_names(sel):
    for operation in dt.OPERATIONS:
        name = dt.operation_rule_name(sel, operation)
        assert dt.input_errors({"name": name, "driver": "x.example.com", "key": dt.DEFAULT_KEY,
                                "effect": dt.NO_EXECUTE}) == [], (sel, name)


def test_another_operations_rule_is_refused_naming_its_owner_and_tool():
    drained = make_rule("dra-admin-maint.example.com-tray", dt.selector(DRIVER, POOL), dt.DEVICE_DRAIN,
                        dt.NO_EXECUTE)
    with pytest.raises(dt.DeviceTaintError) as err:
        dt.planned_writes(dt.ABSENT, dt.MAINTENANCE, drained)
    text = str(err.value)
    assert "belongs to another dra.admin operation (label dra.admin/purpose=device-drain" in text
    assert "dra_node_drain's device mode" in text and "nothing was changed" in text
    # A rule of the collection without the label predates the labels: maintenance's, as before.
    legacy = make_rule("dra-admin-maint.example.com-tray", dt.selector(DRIVER, POOL), "unlabelled", dt.NO_EXECUTE)
    assert dt.planned_writes(dt.ABSENT, dt.MAINTENANCE, legacy) == [{"verb": "DELETE", "name": legacy["metadata"]["name"]}]
    with pytest.raises(dt.DeviceTaintError):
        dt.planned_writes(dt.ABSENT, dt.DEVICE_DRAIN, legacy)


def test_the_operation_label_is_not_an_input():
    errors = dt.input_errors({"driver": DRIVER, "key": dt.DEFAULT_KEY, "effect": taint_rules.NO_SCHEDULE,
                              "labels": {dt.OPERATION_LABEL: dt.DEVICE_DRAIN}})
    assert len(errors) == 1 and "labels: dra.admin/purpose" in errors[0] and "leave it out" in errors[0]


# ---- the flow: dry runs and check mode against the scripted API ----------------------------------

def scripted(rules):
    api = ScriptedApi(recorded("dry-run"))
    api.rules.update(copy.deepcopy(rules))
    return api


def module_params(**kw):
    base = {"name": None, "driver": DRIVER, "pool": POOL, "device": None, "key": dt.DEFAULT_KEY, "value": "",
            "effect": dt.NO_EXECUTE, "labels": {}, "annotations": {}, "wait": True, "wait_timeout": 5,
            "wait_sleep": 0.01}
    base.update(kw)
    return base


@settings(max_examples=60, deadline=None)
@given(rule_sets(), st.sampled_from((None, "dev-0", "dev-1")), st.sampled_from((None, "gpu-repair")))
def test_the_module_dry_run_only_reads_whatever_rules_exist(rules, device, name):
    api = scripted(rules)
    task = DeviceTaint(api, module_params(state=dt.DRY_RUN, device=device, name=name), sleep=lambda s: None)
    result = task.run()
    assert api.writes == [] and api.rules == rules and task.changed is False
    assert task.diff["before"] == task.diff["after"]
    assert "evicted" not in result and (device or result["would_evict"])
    own = rules.get(task.name)
    assert result["rule"] == (dt.rule_summary(own, "v1beta2") if own else {})
    assert result["other_rules_in_force"] == dt.rules_in_force(rules.values(), task.selector, besides=task.name)


@settings(max_examples=60, deadline=None)
@given(rule_sets(), st.sampled_from((dt.TAINTED, dt.ABSENT)), st.sampled_from((None, "dev-0")))
def test_check_mode_runs_only_read_whatever_rules_exist(rules, state, device):
    """dra_device_taint, the drain's device mode and the remediation in check mode."""
    api = scripted(rules)
    node = next(s["spec"]["nodeName"] for s in api.objs["ResourceSlice"] if s["spec"]["driver"] == DRIVER)
    task = DeviceTaint(api, module_params(state=state, device=device), check_mode=True, sleep=lambda s: None)
    try:
        task.run()
    except dt.DeviceTaintError as exc:
        assert "nothing was changed" in str(exc)
    try:
        drain_devices(api, node, "drained" if state == dt.TAINTED else "in_service", DRIVER, POOL, device,
                      check_mode=True)
    except dt.DeviceTaintError as exc:
        assert "nothing was changed" in str(exc)
    assert api.writes == [] and api.rules == rules


def test_remediation_in_check_mode_only_reads_and_names_the_rules_its_lift_leaves():
    objs = recorded("dry-run")
    api = ScriptedApi(objs)
    name = rem.rule_name(DRIVER, POOL, "dev-0")
    api.rules[name] = make_rule(name, dt.selector(DRIVER, POOL, "dev-0"), dt.REMEDIATION, taint_rules.NO_SCHEDULE, key=rem.KEY)
    # An admin's maintenance rule on the whole pool.
    api.rules["dra-admin-maint.example.com-tray"] = make_rule("dra-admin-maint.example.com-tray",
                                                              dt.selector(DRIVER, POOL), dt.MAINTENANCE, taint_rules.NO_SCHEDULE)
    before = copy.deepcopy(api.rules)
    result, changed, diff = remediate(api, taint_rules.NO_SCHEDULE, 0, check_mode=True, poll_interval=0.01,
                                      sleep=lambda s: None)
    assert result["lifted"] == ["%s/%s/dev-0" % (DRIVER, POOL)] and changed  # healthy: the lift it would make
    (lift,) = result["actions"]
    assert lift["other_rules_in_force"] == ["dra-admin-maint.example.com-tray"]
    assert api.writes == [] and api.rules == before


# ---- the flow: two operations on the same devices -----------------------------------------------

def test_maintenance_and_device_drain_coexist_and_each_lift_reports_the_other():
    api = scripted({})
    node = next(s["spec"]["nodeName"] for s in api.objs["ResourceSlice"] if s["spec"]["driver"] == DRIVER)
    # An admin's maintenance rule on the pool, then the drain's device mode on one device of it.
    maintenance = DeviceTaint(api, module_params(state=dt.TAINTED, effect=taint_rules.NO_SCHEDULE), sleep=lambda s: None)
    maintenance.run()
    try:
        drain_devices(api, node, "drained", DRIVER, POOL, "dev-0", timeout=0, sleep=lambda s: None)
    except dt.DeviceTaintError as exc:  # the recorded claims are still allocated: the drain's rule stays
        assert "still allocated" in str(exc)
    assert sorted(api.rules) == ["dra-admin-drain-maint.example.com-tray-dev-0", "dra-admin-maint.example.com-tray"]
    assert api.rules["dra-admin-maint.example.com-tray"]["spec"]["taint"]["effect"] == taint_rules.NO_SCHEDULE
    # The drain's lift deletes its own rule only, and names the maintenance rule still in force.
    back = drain_devices(api, node, "in_service", DRIVER, POOL, "dev-0")
    assert back["lifted"] and api.writes[-1] == ("DELETE", "/apis/resource.k8s.io/v1beta2/devicetaintrules/"
                                                 "dra-admin-drain-maint.example.com-tray-dev-0", None)
    assert [(r["name"], r["operation"], r["effect"]) for r in back["other_rules_in_force"]] == [
        ("dra-admin-maint.example.com-tray", dt.MAINTENANCE, taint_rules.NO_SCHEDULE)]
    assert list(api.rules) == ["dra-admin-maint.example.com-tray"]
    # And the other way round: the drain again, then the maintenance lift leaves it and reports it.
    try:
        drain_devices(api, node, "drained", DRIVER, POOL, "dev-0", timeout=0, sleep=lambda s: None)
    except dt.DeviceTaintError:
        pass
    lifted = DeviceTaint(api, module_params(state=dt.ABSENT), sleep=lambda s: None).run()
    assert lifted["lifted"] and list(api.rules) == ["dra-admin-drain-maint.example.com-tray-dev-0"]
    assert [(r["name"], r["operation"]) for r in lifted["other_rules_in_force"]] == [
        ("dra-admin-drain-maint.example.com-tray-dev-0", dt.DEVICE_DRAIN)]
    # A maintenance run naming the drain's rule is refused, and changes nothing.
    before = copy.deepcopy(api.rules)
    count = len(api.writes)
    for state in (dt.TAINTED, dt.ABSENT):
        with pytest.raises(dt.DeviceTaintError) as err:
            DeviceTaint(api, module_params(state=state, name="dra-admin-drain-maint.example.com-tray-dev-0"),
                        sleep=lambda s: None).run()
        assert "device-drain" in str(err.value)
    assert api.rules == before and len(api.writes) == count
