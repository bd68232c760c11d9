"""Role dra.admin.guardrails on the real API server: ValidatingAdmissionPolicies refusing what they should.

On each pinned release the shared `cluster` (the defaults hack/cluster/up turns on) gets the whole walk:
check mode writes nothing, a run installs, a second run changes nothing, then every served version of the
guarded resources is tried with server-side dry runs (nothing stored) and a few real writes for the update
rules; Warn instead of Deny lets the objects through with a warning; state absent removes exactly the
role's objects and the bad objects are accepted again. Where the release does not serve DeviceTaintRule by
default (1.33: alpha, DRADeviceTaints and resource.k8s.io/v1alpha3) the role skips that guardrail and says
why; a second cluster of such a release is brought up with the catalog's gates for it (and DRAAdminAccess,
alpha there) to walk the release's own DeviceTaintRule schema (v1alpha3 with deviceClassName and CEL
selectors) and adminAccess.

kube-apiserver refuses adminAccess outside labelled namespaces itself from 1.33, before admission policies
run, so the admin-access policy's own refusal cannot show on the pinned releases: a copy of the policy built
for a test label (the same builder, only the label differs) shows its expressions refuse what they should,
for claims and templates in every served version.

The API server loads policies some time after they are written: every check waits on evidence (a dry run
refused, or accepted again), never on a sleep.
"""
import json
import os
import sys
import time

import pytest
import yaml

from cluster_harness import recap
from conftest import own_cluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.rbac import guardrails  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import admin_access_label  # noqa: E402

ROLE = "dra.admin.guardrails"
VERSIONS = clusterlib.supported_k8s_versions()
CATALOG = clusterlib.catalog()
# Releases whose DeviceTaintRule exists but is off by default: a cluster with its gates walks its schema.
GATED = [v for v in VERSIONS if CATALOG.device_taint_rule_support(v)["api_version"]
         and not CATALOG.device_taint_rule_support(v)["default_on"]]
DRIVER = "gpu.example.com"
SELECTOR = "dra.admin/guardrail"
TEST_LABEL = "guardrail-test.example.com/admin-access"
BROAD = guardrails.policy_name(guardrails.BROAD_DEVICE_TAINT)
ADMIN = guardrails.policy_name(guardrails.ADMIN_ACCESS)
OVERRIDE = guardrails.OVERRIDE_ANNOTATION
WAIT = 60


def role(c, tmp_path, extra=None, check=False):
    started = time.monotonic()
    res = c.run_role(ROLE, tmp_path, dict(extra or {}), check=check)
    print(f"role {extra or {}}{' --check' if check else ''}: rc {res.returncode} in {time.monotonic() - started:.1f}s")
    return res


def ours(c):
    out = c.kubectl("get", "validatingadmissionpolicies,validatingadmissionpolicybindings", "-l", SELECTOR,
                    "-o", "name").stdout.split()
    return sorted(out)


def serving(c):
    versions = [v["version"] for v in json.loads(c.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)["versions"]]
    out = {}
    for version in versions:
        listing = json.loads(c.kubectl("get", "--raw", f"/apis/resource.k8s.io/{version}").stdout)
        for item in listing["resources"]:
            out.setdefault(item["name"], []).append(version)
    return out


def dry_run(c, obj):
    """(accepted, the server's message: stderr, warnings included)."""
    res = c.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=yaml.safe_dump(obj), check=False)
    return res.returncode == 0, (res.stderr or "").strip(), (json.loads(res.stdout) if res.returncode == 0 else None)


def refused(c, obj, policy):
    """Wait until the dry run is refused by `policy`; the message."""
    found = {}

    def probe():
        ok, found["msg"], _obj = dry_run(c, obj)
        return not ok and f"ValidatingAdmissionPolicy '{policy}'" in found["msg"]
    c.wait_until(probe, WAIT, f"{obj['kind']} {obj['metadata']['name']} refused by {policy}")
    return found["msg"]


def accepted(c, obj, warning=None):
    """Wait until the dry run is accepted (with `warning` in the output when given); the output."""
    found = {}

    def probe():
        ok, found["msg"], found["obj"] = dry_run(c, obj)
        return ok and (warning is None or warning in found["msg"])
    c.wait_until(probe, WAIT, f"{obj['kind']} {obj['metadata']['name']} accepted")
    return found


def rule(version, name, selector, effect="NoSchedule", annotations=None):
    meta = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    spec = {"taint": {"key": "it.example.com/guardrail", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceTaintRule", "metadata": meta, "spec": spec}


def admin_claim(version, kind, namespace, name, subrequest=False):
    body = {"deviceClassName": DRIVER, "adminAccess": True}
    request = dict({"name": "admin"}, **body) if version in ("v1alpha3", "v1beta1") else {"name": "admin", "exactly": body}
    spec = {"devices": {"requests": [request]}}
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def bad_rules(version, old_schema):
    """(rule, which message) the broad-device-taint guardrail refuses in `version`."""
    out = [(rule(version, "it-empty-selector", {}), "names no driver"),
           (rule(version, "it-no-selector", None, "NoExecute"), "names no driver"),
           (rule(version, "it-pool-without-driver", {"pool": "node-1", "device": "gpu-0"}), "names no driver"),
           (rule(version, "it-noexecute-driver-only", {"driver": DRIVER}, "NoExecute"), "NoExecute taint"),
           (rule(version, "it-empty-override", {}, annotations={OVERRIDE: ""}), "names no driver")]
    if old_schema:  # 1.33-1.34: a DeviceClass or CEL selectors do not stand for a driver
        out.append((rule(version, "it-class-only", {"deviceClassName": DRIVER,
                                                    "selectors": [{"cel": {"expression": "true"}}]}), "names no driver"))
    return out


def good_rules(version):
    return [rule(version, "it-driver", {"driver": DRIVER}),
            rule(version, "it-driver-pool-noexecute", {"driver": DRIVER, "pool": "node-1"}, "NoExecute"),
            rule(version, "it-overridden", {}, "NoExecute", {OVERRIDE: "fleet-wide firmware update"})]


def walk_device_taint_rules(c, served, evidence):
    old_schema = "deviceClassName" in CATALOG.device_taint_rule_support(c.version)["selector_fields"]
    for version in served["devicetaintrules"]:
        for obj, part in bad_rules(version, old_schema):
            msg = refused(c, obj, BROAD)
            assert part in msg and OVERRIDE in msg and guardrails.BROAD_DEVICE_TAINT in msg, msg
            assert f"DeviceTaintRule {obj['metadata']['name']}: " in msg, msg
            evidence.append(f"{version} refused {obj['metadata']['name']}: {msg.split('denied request: ')[-1]}")
        for obj in good_rules(version):
            accepted(c, obj)
            evidence.append(f"{version} accepted {obj['metadata']['name']}")
    walk_override_outside_the_admins(c, served["devicetaintrules"][-1], evidence)


def walk_override_outside_the_admins(c, version, evidence):
    """The override annotation counts only for the admin persona: an operator allowed to create DeviceTaintRules
    (RBAC) but outside the admin groups gets the broad rule refused, override or not."""
    operator = ["--as=operator-c", "--as-group=it-guard-operators"]
    rbac = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "it-guard-op"},
             "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "it-guard-op"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "it-guard-op"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "it-guard-operators"}]}]
    c.apply(rbac)
    try:
        overridden = rule(version, "it-overridden-by-operator", {}, "NoExecute", {OVERRIDE: "fleet-wide"})
        narrow = rule(version, "it-narrow-by-operator", {"driver": DRIVER})
        found = {}

        def refused_as_operator():
            res = c.kubectl("create", "--dry-run=server", "-f", "-", *operator, stdin=yaml.safe_dump(overridden),
                            check=False)
            found["res"] = res
            return res.returncode != 0 and BROAD in res.stderr
        c.wait_until(refused_as_operator, WAIT, "the operator's overridden broad rule refused")
        assert "names no driver" in found["res"].stderr, found["res"].stderr
        res = c.kubectl("create", "--dry-run=server", "-f", "-", *operator, stdin=yaml.safe_dump(narrow), check=False)
        assert res.returncode == 0, res.stderr
        evidence.append(f"{version}: the override annotation of an operator outside the admin groups refused")
    finally:
        c.kubectl("delete", "clusterrolebinding,clusterrole", "it-guard-op", "--ignore-not-found", check=False)


def walk_device_taint_updates(c, version):
    """Updates: narrowing stays possible, broadening is refused; removing the override is checked; metadata of a
    rule kept under its override may change."""
    c.apply(rule(version, "it-update", {"driver": DRIVER, "pool": "node-1"}, "NoExecute"))
    c.apply(rule(version, "it-update-override", {}, "NoSchedule", {OVERRIDE: "planned"}))
    try:
        res = c.kubectl("patch", "devicetaintrule", "it-update", "--type=merge", "-p",
                        json.dumps({"spec": {"deviceSelector": {"pool": None}}}), check=False)
        assert res.returncode != 0 and BROAD in res.stderr and "NoExecute taint" in res.stderr, res.stderr
        res = c.kubectl("annotate", "devicetaintrule", "it-update-override", f"{OVERRIDE}-", check=False)
        assert res.returncode != 0 and BROAD in res.stderr and "names no driver" in res.stderr, res.stderr
        res = c.kubectl("label", "devicetaintrule", "it-update-override", "team=infra", check=False)
        assert res.returncode == 0, res.stderr
        res = c.kubectl("patch", "devicetaintrule", "it-update", "--type=merge", "-p",
                        json.dumps({"spec": {"deviceSelector": {"device": "gpu-0"}}}), check=False)
        assert res.returncode == 0, res.stderr
    finally:
        c.kubectl("delete", "devicetaintrule", "it-update", "it-update-override", "--ignore-not-found", check=False)


def admin_access_effective(c, served, namespace):
    """Whether the API server keeps adminAccess (DRAAdminAccess on): a dry run in a labelled namespace."""
    version = served["resourceclaims"][0]
    found = accepted(c, admin_claim(version, "ResourceClaim", namespace, "it-admin-probe"))
    request = found["obj"]["spec"]["devices"]["requests"][0]
    return bool(request.get("exactly", request).get("adminAccess"))


def walk_admin_access(c, served, evidence, tmp_path):
    label = admin_access_label(c.version)
    plain, labelled = f"it-guard-plain-{c.minor}", f"it-guard-admin-{c.minor}"
    c.kubectl("create", "namespace", plain)
    c.kubectl("create", "namespace", labelled)
    c.kubectl("label", "namespace", labelled, f"{label}=true")
    try:
        if not admin_access_effective(c, served, labelled):
            evidence.append(f"adminAccess is dropped by the API server (DRAAdminAccess off on {c.version}): "
                            "nothing reaches the policy")
            return
        versions = sorted(set(served["resourceclaims"]) | set(served["resourceclaimtemplates"]))
        for version in versions:
            for kind in ("ResourceClaim", "ResourceClaimTemplate"):
                accepted(c, admin_claim(version, kind, labelled, "it-admin"))
                ok, msg, _obj = dry_run(c, admin_claim(version, kind, plain, "it-admin"))
                assert not ok and label in msg, msg
                who = "kube-apiserver itself" if ADMIN not in msg else ADMIN
                evidence.append(f"{version} {kind} in {plain} refused by {who}: {msg.split(': ', 1)[-1]}")
                evidence.append(f"{version} {kind} in {labelled} ({label}=true) accepted")
        walk_admin_access_expressions(c, versions, label, plain, labelled, evidence)
    finally:
        c.kubectl("delete", "namespace", plain, labelled, "--wait=false", check=False)


def walk_admin_access_expressions(c, versions, label, plain, labelled, evidence):
    """The admin-access policy's own refusal, with a test label the API server does not check itself."""
    api = CATALOG.admission_policy_api_version(c.version)
    policy = guardrails.admin_access_policy(api, versions, TEST_LABEL)
    bind = guardrails.binding(api, guardrails.ADMIN_ACCESS, ["Deny"])
    for obj in (policy, bind):
        obj["metadata"]["name"] = "it-test-admin-access"
        obj["metadata"]["labels"] = {"it.example.com/test": "true"}
    bind["spec"]["policyName"] = "it-test-admin-access"
    c.apply([policy, bind])
    try:
        for version in versions:
            for kind in ("ResourceClaim", "ResourceClaimTemplate"):
                msg = refused(c, admin_claim(version, kind, labelled, "it-admin"), "it-test-admin-access")
                assert f"{kind} {labelled}/it-admin: requests adminAccess" in msg and TEST_LABEL in msg, msg
                evidence.append(f"test-label copy: {version} {kind} refused: {msg.split('denied request: ')[-1]}")
        c.kubectl("label", "namespace", labelled, f"{TEST_LABEL}=true")
        for version in versions:
            accepted(c, admin_claim(version, "ResourceClaim", labelled, "it-admin"))
        # A claim without adminAccess never meets the label check.
        plain_claim = admin_claim(versions[0], "ResourceClaim", plain, "it-plain")
        request = plain_claim["spec"]["devices"]["requests"][0]
        request.get("exactly", request).pop("adminAccess")
        accepted(c, plain_claim)
    finally:
        c.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "it-test-admin-access",
                  "--ignore-not-found", check=False)


def walk_admin_label(c, evidence):
    """admin-access-label: a tenant that may update (and create) its namespace cannot add, change or remove the
    admin-access label, nor create a namespace carrying it; other labels stay its own; the admin persona's group
    (system:masters, a default of dra_guardrails_label_admin_groups) may set it."""
    label = admin_access_label(c.version)
    ns, new = f"it-guard-tenant-{c.minor}", f"it-guard-tenant-new-{c.minor}"
    tenant, admin = ["--as=tenant-a", "--as-group=it-guard-tenants"], ["--as=admin-b", "--as-group=system:masters"]
    rbac = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "it-guard-tenant"},
             "rules": [{"apiGroups": [""], "resources": ["namespaces", "namespaces/status"],
                        "verbs": ["get", "patch", "update"], "resourceNames": [ns, new]},
                       {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "it-guard-tenant"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "it-guard-tenant"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "it-guard-tenants"}]}]
    c.kubectl("create", "namespace", ns)
    c.apply(rbac)
    policy = guardrails.policy_name(guardrails.ADMIN_ACCESS_LABEL)

    def as_tenant(*args):
        return c.kubectl(*args, *tenant, check=False)
    try:
        found = {}

        def refused_label():
            found["res"] = as_tenant("label", "namespace", ns, f"{label}=true")
            return found["res"].returncode != 0 and policy in found["res"].stderr
        c.wait_until(refused_label, WAIT, f"the tenant's {label} label refused by {policy}")
        msg = found["res"].stderr
        assert f"Namespace {ns} (user tenant-a): only the admin persona" in msg and label in msg, msg
        evidence.append(f"tenant adding {label}=true to {ns} refused: {msg.split('denied request: ')[-1].strip()}")
        assert as_tenant("label", "namespace", ns, "team=a").returncode == 0
        assert c.kubectl("label", "namespace", ns, f"{label}=true", *admin, check=False).returncode == 0
        evidence.append(f"system:masters member labelled {ns} {label}=true")
        for args in (("label", "namespace", ns, f"{label}-"), ("label", "--overwrite", "namespace", ns, f"{label}=false")):
            res = as_tenant(*args)
            assert res.returncode != 0 and policy in res.stderr, (args, res.stderr)
        assert as_tenant("label", "namespace", ns, "team=b", "--overwrite").returncode == 0
        assert c.get_json("namespace", ns)["metadata"]["labels"][label] == "true"
        labelled = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": new, "labels": {label: "true"}}}
        res = c.kubectl("create", "--dry-run=server", "-f", "-", *tenant, stdin=yaml.safe_dump(labelled), check=False)
        assert res.returncode != 0 and policy in res.stderr, res.stderr
        del labelled["metadata"]["labels"]
        res = c.kubectl("create", "--dry-run=server", "-f", "-", *tenant, stdin=yaml.safe_dump(labelled), check=False)
        assert res.returncode == 0, res.stderr
        evidence.append(f"tenant removing or changing it refused; creating {new} with it refused, without it accepted")
        # The other release's key too (on 1.33 the key of 1.34 and later, which the upgrade would make effective),
        # and through the status subresource, whose updates keep the labels they are sent.
        other = [k for k in (CATALOG.OLD_ADMIN_LABEL, CATALOG.NEW_ADMIN_LABEL) if k != label][0]
        res = as_tenant("label", "namespace", ns, f"{other}=true")
        assert res.returncode != 0 and policy in res.stderr, res.stderr
        res = as_tenant("patch", "namespace", ns, "--subresource=status", "--type=merge", "-p",
                        json.dumps({"metadata": {"labels": {other: "true"}}}))
        assert res.returncode != 0 and policy in res.stderr, res.stderr
        assert other not in (c.get_json("namespace", ns)["metadata"].get("labels") or {})
        evidence.append(f"tenant adding {other}=true (the other release's key) refused, directly and through "
                        "namespaces/status")
    finally:
        c.kubectl("delete", "clusterrolebinding,clusterrole", "it-guard-tenant", "--ignore-not-found", check=False)
        c.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def count_claim(version, kind, namespace, name, counts, subrequests=False):
    """A claim (or template) with one ExactCount request per count (firstAvailable subrequests with `subrequests`)."""
    requests = []
    for index, count in enumerate(counts):
        body = {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": count}
        if subrequests and version not in ("v1alpha3", "v1beta1"):
            choices = [dict(body, name="big"), dict(body, name="one", count=1)]
            requests.append({"name": f"r{index}", "firstAvailable": choices})
        elif version in ("v1alpha3", "v1beta1"):
            requests.append(dict({"name": f"r{index}"}, **body))
        else:
            requests.append({"name": f"r{index}", "exactly": body})
    spec = {"devices": {"requests": requests}}
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def walk_device_count(c, served, evidence, first):
    """device-count: where kube-scheduler sums counts without an overflow check, a request over the per-claim limit
    is refused (the overflowing pair of kubernetes#141307 among them); at the limit it is accepted. Elsewhere the
    role says why it is not installed."""
    policy = guardrails.policy_name(guardrails.DEVICE_COUNT)
    if not CATALOG.scheduler_count_overflow(c.version):
        assert f"kube-scheduler {c.version} checks device counts without overflowing" in first.stdout, first.stdout[-3000:]
        evidence.append(f"device-count not installed: kube-scheduler {c.version} has the overflow check")
        return
    ns = f"it-guard-count-{c.minor}"
    c.kubectl("create", "namespace", ns)
    try:
        versions = sorted(set(served["resourceclaims"]) | set(served["resourceclaimtemplates"]))
        for version in versions:
            # firstAvailable only where the release keeps it (DRAPrioritizedList on; v1beta2 and later).
            ok, _msg, kept = dry_run(c, count_claim(version, "ResourceClaim", ns, "it-sub-probe", [1], True))
            sub_kept = ok and "firstAvailable" in str(kept)
            cases = [("it-over", [33], False), ("it-overflow", [2 ** 62 + 1, 2 ** 62 + 1], False)] + (
                [("it-over-sub", [33], True)] if sub_kept else [])
            evidence.append(f"{version}: firstAvailable {'kept' if sub_kept else 'not served'}")
            for kind in ("ResourceClaim", "ResourceClaimTemplate"):
                for name, counts, sub in cases:
                    msg = refused(c, count_claim(version, kind, ns, name, counts, sub), policy)
                    assert f"{kind} {ns}/{name}: asks for more than 32 devices" in msg and "141307" in msg, msg
                    evidence.append(f"{version} {kind} {name} refused: {msg.split('denied request: ')[-1]}")
                accepted(c, count_claim(version, kind, ns, "it-at-limit", [32]))
                accepted(c, count_claim(version, kind, ns, "it-two", [16, 16]))
        evidence.append("counts at the limit accepted in every served version")
    finally:
        c.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def walk(c, tmp_path):
    """The whole walk on one cluster; returns the evidence lines."""
    assert ours(c) == [], ours(c)
    served = serving(c)
    evidence = []
    started = time.monotonic()
    planned = role(c, tmp_path, check=True)
    assert planned.returncode == 0, planned.stdout[-4000:]
    assert recap(planned)["changed"] >= 1 and ours(c) == [], planned.stdout[-3000:]

    first = role(c, tmp_path)
    assert first.returncode == 0, first.stdout[-4000:]
    assert recap(first)["changed"] >= 1
    installed = [guardrails.ADMIN_ACCESS, guardrails.ADMIN_ACCESS_LABEL] + (
        [guardrails.BROAD_DEVICE_TAINT] if served.get("devicetaintrules") else []) + (
        [guardrails.DEVICE_COUNT] if CATALOG.scheduler_count_overflow(c.version) else [])
    assert len(ours(c)) == 2 * len(installed), ours(c)
    assert "type-checked without warnings" in first.stdout
    second = role(c, tmp_path)
    assert second.returncode == 0 and recap(second)["changed"] == 0, second.stdout[-3000:]

    if served.get("devicetaintrules"):
        assert "refused by %s" % BROAD in first.stdout  # the role's own wait saw the policy in force
        walk_device_taint_rules(c, served, evidence)
        walk_device_taint_updates(c, served["devicetaintrules"][0])
    else:
        assert f"skipped: Kubernetes {c.version} does not serve DeviceTaintRule" in first.stdout, first.stdout[-3000:]
        assert not any(BROAD in name for name in ours(c))
        evidence.append(f"broad-device-taint skipped: Kubernetes {c.version} does not serve DeviceTaintRule")
    walk_admin_access(c, served, evidence, tmp_path)
    walk_admin_label(c, evidence)
    walk_device_count(c, served, evidence, first)

    if served.get("devicetaintrules"):
        bad = rule(served["devicetaintrules"][0], "it-warned", {})
        warned = role(c, tmp_path, {"dra_guardrails_validation_actions": ["Warn", "Audit"]})
        assert warned.returncode == 0 and recap(warned)["changed"] >= 1, warned.stdout[-3000:]
        found = accepted(c, bad, warning=BROAD)
        evidence.append(f"Warn: {bad['metadata']['name']} accepted with: {found['msg']}")

    removed = role(c, tmp_path, {"dra_guardrails_state": "absent"})
    assert removed.returncode == 0 and recap(removed)["changed"] >= 1, removed.stdout[-3000:]
    assert ours(c) == []
    if served.get("devicetaintrules"):
        accepted(c, rule(served["devicetaintrules"][0], "it-empty-selector", {}))
        evidence.append("after state absent: it-empty-selector accepted again")
    again = role(c, tmp_path, {"dra_guardrails_state": "absent"})
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-3000:]
    guarded = [name for names in guardrails.RESOURCES.values() for name in names]
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(served.items()) if k in guarded)
    print(f"\n{c.version} ({shown}) in {time.monotonic() - started:.0f}s")
    print("\n".join(evidence))
    return evidence


@pytest.mark.per_release("device_taint_rule_support", key="default_on")
def test_guardrails_with_the_defaults(cluster, tmp_path):
    walk(cluster, tmp_path)


@pytest.fixture(scope="module", params=GATED)
def gated_cluster(request):
    """A one-node cluster with the catalog's gates for DeviceTaintRule, and DRAAdminAccess (alpha before 1.34)."""
    version = request.param
    gates = dict(CATALOG.device_taint_rule_support(version)["gates"])
    if not CATALOG.gate_info(version, "DRAAdminAccess")["default"]:
        gates["DRAAdminAccess"] = True
    with own_cluster("it-guard", version, 1, 800, ",".join(f"{g}=true" for g in sorted(gates))) as c:
        yield c


@pytest.mark.per_release("device_taint_rule_support", key="gates")
def test_guardrails_with_device_taint_rules_switched_on(gated_cluster, tmp_path):
    evidence = walk(gated_cluster, tmp_path)
    assert any("refused by kube-apiserver itself" in line for line in evidence), evidence


def test_deny_and_warn_together_is_a_clear_error_and_writes_nothing(cluster, tmp_path):
    res = role(cluster, tmp_path, {"dra_guardrails_validation_actions": ["Deny", "Warn"]})
    assert res.returncode != 0
    assert "Deny and Warn cannot be used together" in res.stdout, res.stdout[-3000:]
    assert ours(cluster) == []
