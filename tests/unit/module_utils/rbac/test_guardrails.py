"""The guardrails' ValidatingAdmissionPolicies and bindings, built for what a cluster serves, and the wait for them.

The expressions themselves are evaluated by the real API server in tests/integration/test_guardrails.py; here
the objects' shape, names, labels, versions, messages and the choices around them."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.rbac import guardrails as g
from ansible_collections.dra.admin.plugins.module_utils.rbac import guardrails_service as svc
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog

ALL_V1 = {"devicetaintrules": ["v1"], "resourceclaims": ["v1"], "resourceclaimtemplates": ["v1"]}
V1_33 = {"devicetaintrules": [], "resourceclaims": ["v1beta2", "v1beta1"], "resourceclaimtemplates": ["v1beta2", "v1beta1"]}
V1_33_TAINTS = dict(V1_33, devicetaintrules=["v1alpha3"])
ON = {g.BROAD_DEVICE_TAINT: True, g.ADMIN_ACCESS: True, g.ADMIN_ACCESS_LABEL: True, g.DEVICE_COUNT: True}


def by_name(objects):
    return dict(((o["kind"], o["metadata"]["name"]), o) for o in objects)


def test_every_guardrail_is_a_policy_then_its_binding_with_the_catalogs_api_version():
    out = g.render("v1.37.2", ALL_V1, ON)
    assert out["policy_api_version"] == "admissionregistration.k8s.io/v1"
    assert [(o["kind"], o["metadata"]["name"]) for o in out["objects"]] == [
        ("ValidatingAdmissionPolicy", "dra-admin-guardrail-broad-device-taint"),
        ("ValidatingAdmissionPolicyBinding", "dra-admin-guardrail-broad-device-taint"),
        ("ValidatingAdmissionPolicy", "dra-admin-guardrail-admin-access"),
        ("ValidatingAdmissionPolicyBinding", "dra-admin-guardrail-admin-access"),
        ("ValidatingAdmissionPolicy", "dra-admin-guardrail-admin-access-label"),
        ("ValidatingAdmissionPolicyBinding", "dra-admin-guardrail-admin-access-label")]
    for obj in out["objects"]:
        assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
        assert obj["metadata"]["labels"][g.GUARDRAIL_LABEL] in g.GUARDRAILS
        assert g.is_ours(obj)
    # v1.37.2's kube-scheduler checks device counts itself (fixed in 1.37.1): device-count is not needed there.
    assert out["installed"] == [g.BROAD_DEVICE_TAINT, g.ADMIN_ACCESS, g.ADMIN_ACCESS_LABEL]
    assert [n["guardrail"] for n in out["not_applicable"]] == [g.DEVICE_COUNT] and out["disabled"] == []
    assert "kubernetes#141307, fixed in 1.34.12, 1.35.9, 1.36.5, 1.37.1 and 1.38" in out["not_applicable"][0]["reason"]


def test_bindings_deny_by_default_and_take_the_actions_given():
    out = g.render("v1.37.2", ALL_V1, ON)
    bindings = [o for o in out["objects"] if o["kind"] == g.BINDING_KIND]
    assert [b["spec"] for b in bindings] == [
        {"policyName": "dra-admin-guardrail-broad-device-taint", "validationActions": ["Deny"]},
        {"policyName": "dra-admin-guardrail-admin-access", "validationActions": ["Deny"]},
        {"policyName": "dra-admin-guardrail-admin-access-label", "validationActions": ["Deny"]}]
    warn = g.render("v1.37.2", ALL_V1, ON, ["Warn", "Audit"])
    assert all(o["spec"]["validationActions"] == ["Warn", "Audit"] for o in warn["objects"] if o["kind"] == g.BINDING_KIND)


def test_policies_match_every_served_version_with_equivalent_matching():
    objects = by_name(g.render("v1.33.13", dict(V1_33_TAINTS, resourceclaims=["v1beta2", "v1beta1", "v1alpha3"]),
                               ON)["objects"])
    taint = objects[(g.POLICY_KIND, g.policy_name(g.BROAD_DEVICE_TAINT))]["spec"]
    assert taint["failurePolicy"] == "Fail"
    assert taint["matchConstraints"] == {"matchPolicy": "Equivalent", "resourceRules": [
        {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1alpha3"], "operations": ["CREATE", "UPDATE"],
         "resources": ["devicetaintrules"]}]}
    admin = objects[(g.POLICY_KIND, g.policy_name(g.ADMIN_ACCESS))]["spec"]
    assert admin["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1alpha3", "v1beta1", "v1beta2"], "operations": ["CREATE"],
         "resources": ["resourceclaims", "resourceclaimtemplates"]}]


def test_a_guardrail_whose_resource_is_not_served_is_skipped_with_the_reason():
    out = g.render("v1.33.13", V1_33, ON)
    assert out["installed"] == [g.ADMIN_ACCESS, g.ADMIN_ACCESS_LABEL, g.DEVICE_COUNT]
    assert out["not_applicable"] == [{"guardrail": g.BROAD_DEVICE_TAINT, "reason": out["not_applicable"][0]["reason"]}]
    reason = out["not_applicable"][0]["reason"]
    assert "Kubernetes v1.33.13 does not serve DeviceTaintRule" in reason
    assert "dra_feature_gates_device_taints: true" in reason
    none = g.render("v1.33.13", {}, ON)
    assert none["objects"] == [] and [s["guardrail"] for s in none["not_applicable"]] == list(g.GUARDRAILS)
    assert "does not serve ResourceClaims" in none["not_applicable"][1]["reason"]
    assert "the admin-access label grants nothing" in none["not_applicable"][2]["reason"]
    assert "does not serve ResourceClaims" in none["not_applicable"][3]["reason"]


def test_switched_off_guardrails_are_not_rendered():
    out = g.render("v1.37.2", ALL_V1, {g.BROAD_DEVICE_TAINT: False, g.ADMIN_ACCESS: True, g.ADMIN_ACCESS_LABEL: False})
    assert out["installed"] == [g.ADMIN_ACCESS] and out["disabled"] == [g.BROAD_DEVICE_TAINT, g.ADMIN_ACCESS_LABEL]
    assert g.enabled({})[g.DEVICE_COUNT] is True
    assert g.enabled({"broad_device_taint": False, "admin_access": True, "admin_access_label": False,
                      "device_count": True}) == {
        g.BROAD_DEVICE_TAINT: False, g.ADMIN_ACCESS: True, g.ADMIN_ACCESS_LABEL: False, g.DEVICE_COUNT: True}
    assert g.enabled({}) == ON


def test_the_broad_taint_policy_names_the_guardrail_and_the_override_in_every_message():
    spec = g.broad_taint_policy("admissionregistration.k8s.io/v1", ["v1"])["spec"]
    assert len(spec["validations"]) == 2
    for validation in spec["validations"]:
        for text in (validation["message"], validation["messageExpression"]):
            assert g.BROAD_DEVICE_TAINT in text and g.policy_name(g.BROAD_DEVICE_TAINT) in text
            assert 'dra.admin/allow-broad-taint: \\"<reason>\\"' in text or 'allow-broad-taint: "<reason>"' in text
        assert validation["reason"] == "Forbidden"
        assert validation["messageExpression"].startswith("'DeviceTaintRule ' + (has(object.metadata.name)")
    driver, noexecute = spec["validations"]
    assert "names no driver" in driver["message"] and "has(variables.selector.driver)" in driver["expression"]
    assert "NoExecute" in noexecute["message"] and "variables.selector.pool" in noexecute["expression"]
    # The override (a non-empty annotation) and unchanged updates are left alone by the match conditions.
    conditions = dict((c["name"], c["expression"]) for c in spec["matchConditions"])
    assert "'dra.admin/allow-broad-taint' in object.metadata.annotations" in conditions["no-override"]
    assert "object.spec != oldObject.spec" in conditions["spec-or-override-changed"]
    assert "oldObject.metadata.annotations" in conditions["spec-or-override-changed"]


def test_a_quote_in_a_message_is_escaped_for_cel():
    assert g.cel_string("it's \\ here") == "'it\\'s \\\\ here'"


@pytest.mark.parametrize("version,label", [("v1.32.13", "resource.k8s.io/admin-access"),
                                           ("v1.33.13", "resource.k8s.io/admin-access"),
                                           ("v1.34.4", "resource.kubernetes.io/admin-access"),
                                           ("v1.37.2", "resource.kubernetes.io/admin-access")])
def test_the_admin_access_label_is_the_releases_from_the_upgrade_checks(version, label):
    assert catalog.admin_access_label(version) == label
    policy = by_name(g.render(version, ALL_V1, ON)["objects"])[(g.POLICY_KIND, g.policy_name(g.ADMIN_ACCESS))]
    validation = policy["spec"]["validations"][0]
    assert "namespaceObject.metadata.labels['%s'] == 'true'" % label in validation["expression"]
    assert "%s=true" % label in validation["message"] and g.policy_name(g.ADMIN_ACCESS) in validation["message"]
    other = ({catalog.OLD_ADMIN_LABEL, catalog.NEW_ADMIN_LABEL} - {label}).pop()
    assert other not in str(policy)


def test_admin_access_is_read_flat_under_exactly_and_on_subrequests():
    spec = g.admin_access_policy("admissionregistration.k8s.io/v1", ["v1"], "x.example.com/admin")["spec"]
    variables = dict((v["name"], v["expression"]) for v in spec["variables"])
    assert "object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec" in variables["devices"]
    for part in ("dyn(r).adminAccess == true", "dyn(r).exactly.adminAccess == true", "dyn(r).firstAvailable.exists(s",
                 "dyn(s).adminAccess == true"):
        assert part in variables["adminAccess"]
    assert spec["validations"][0]["expression"].startswith("!variables.adminAccess || ")


def test_notes_say_where_the_api_server_enforces_the_admin_label_itself():
    assert "does not check the namespace" in g.notes("v1.32.13")[g.ADMIN_ACCESS]
    assert "resource.k8s.io/admin-access=true" in g.notes("v1.32.13")[g.ADMIN_ACCESS]
    for version, label in (("v1.33.13", "resource.k8s.io/admin-access"), ("v1.37.2", "resource.kubernetes.io/admin-access")):
        note = g.notes(version)[g.ADMIN_ACCESS]
        assert "refuses adminAccess outside namespaces labelled %s=true itself (since 1.33)" % label in note


@pytest.mark.parametrize("actions,error", [
    (["Deny"], None), (["Warn", "Audit"], None), (["Deny", "Audit"], None), (["Audit"], None),
    ([], "give one or more of Deny, Warn, Audit"), (["Block"], "give one or more of Deny, Warn, Audit"),
    (["Deny", "Warn"], "Deny and Warn cannot be used together"), (["Deny", "Deny"], "each action once")])
def test_validation_actions_are_checked(actions, error):
    errors = g.input_errors({"validation_actions": actions})
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and error in errors[0] and "validation_actions" in errors[0]


def test_stale_objects_are_ours_that_are_no_longer_rendered_bindings_first():
    objects = g.render("v1.37.2", ALL_V1, {g.BROAD_DEVICE_TAINT: False})["objects"]
    earlier = g.render("v1.37.2", ALL_V1, ON)["objects"]
    foreign = {"kind": g.POLICY_KIND, "metadata": {"name": "someone-elses", "labels": {MANAGED_BY_LABEL: "other"}}}
    assert g.stale(earlier + [foreign], objects) == [
        {"kind": g.BINDING_KIND, "name": "dra-admin-guardrail-broad-device-taint", "guardrail": g.BROAD_DEVICE_TAINT},
        {"kind": g.POLICY_KIND, "name": "dra-admin-guardrail-broad-device-taint", "guardrail": g.BROAD_DEVICE_TAINT}]
    assert g.stale(earlier, earlier) == []


def test_the_probe_rule_is_what_the_policy_refuses_and_refusals_are_recognised():
    probe = g.probe_rule("v1")
    assert probe["apiVersion"] == "resource.k8s.io/v1" and probe["spec"]["deviceSelector"] == {}
    assert g.refused_by("ValidatingAdmissionPolicy 'dra-admin-guardrail-broad-device-taint' with binding ...",
                        g.BROAD_DEVICE_TAINT)
    assert not g.refused_by("admission webhook denied", g.BROAD_DEVICE_TAINT)


def test_type_checking_status_is_read():
    assert not g.type_checked({"metadata": {"generation": 2}, "status": {"observedGeneration": 1, "typeChecking": {}}})
    assert not g.type_checked({"metadata": {"generation": 1}, "status": {"observedGeneration": 1}})
    assert g.type_checked({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "typeChecking": {}}})
    assert g.type_warnings({"status": {"typeChecking": {"expressionWarnings": [
        {"fieldRef": "spec.validations[0].expression", "warning": "undefined field 'x'"}]}}}) == [
        "spec.validations[0].expression: undefined field 'x'"]


def test_the_catalog_knows_the_policy_api_version_per_release():
    for version in ("v1.30.0", "v1.33.13", "v1.37.2", "v1.38.0"):
        assert catalog.admission_policy_api_version(version) == "admissionregistration.k8s.io/v1"
    with pytest.raises(catalog.VersionError, match="not a release the catalog knows"):
        catalog.admission_policy_api_version("v1.29.0")


class FakeApi:
    """Answers the wait's requests: the policy (type-checked from the given look on) and the probe's dry run
    (refused from the given look on)."""

    def __init__(self, checked_from, refused_from, warnings=()):
        self.looks = 0
        self.checked_from, self.refused_from, self.warnings = checked_from, refused_from, list(warnings)
        self.requests = 0
        self.dry_runs = []

    def get_or_none(self, path):
        self.requests += 1
        self.looks += 1 if g.policy_name(g.BROAD_DEVICE_TAINT) in path else 0
        status = {"observedGeneration": 1}
        if self.looks >= self.checked_from:
            status["typeChecking"] = {"expressionWarnings": self.warnings} if self.warnings else {}
        return {"metadata": {"generation": 1}, "status": status}

    def request(self, method, path, query=None, body=None):
        self.requests += 1
        self.dry_runs.append((method, path, query, body["metadata"]["name"]))
        if self.looks >= self.refused_from:
            raise DraApiError("POST %s failed: HTTP 403: ValidatingAdmissionPolicy '%s' with binding '%s' denied "
                              "request" % (path, g.policy_name(g.BROAD_DEVICE_TAINT), g.policy_name(g.BROAD_DEVICE_TAINT)),
                              status=403)
        return body


def wait(api, actions=("Deny",), timeout=10):
    result = {"installed": [g.BROAD_DEVICE_TAINT, g.ADMIN_ACCESS], "policy_api_version": "admissionregistration.k8s.io/v1",
              "serving": ALL_V1}
    clock = {"t": 0.0}
    return svc.wait_in_force(api, result, {"wait_timeout": timeout, "wait_sleep": 1.0, "validation_actions": list(actions)},
                             clock=lambda: clock["t"], sleep=lambda s: clock.update(t=clock["t"] + s))


def test_the_wait_ends_on_a_refused_dry_run_of_the_probe():
    api = FakeApi(checked_from=2, refused_from=3)
    evidence = wait(api)
    assert "refused by dra-admin-guardrail-broad-device-taint" in evidence[g.BROAD_DEVICE_TAINT]
    assert "type-checked without warnings" in evidence[g.ADMIN_ACCESS]
    assert all(q == {"dryRun": "All"} and name == g.PROBE_NAME for _m, _p, q, name in api.dry_runs)
    assert api.dry_runs[0][1] == "/apis/resource.k8s.io/v1/devicetaintrules"


def test_the_wait_fails_naming_what_is_still_missing():
    with pytest.raises(svc.GuardrailNotInForce, match="broad-device-taint not in force after 3s: a dry run of a "
                                                      "DeviceTaintRule with an empty selector is still accepted"):
        wait(FakeApi(checked_from=1, refused_from=99), timeout=3)


def test_the_wait_fails_on_type_checking_warnings():
    api = FakeApi(checked_from=1, refused_from=1, warnings=[{"fieldRef": "spec.validations[0].expression",
                                                            "warning": "undefined field 'driver'"}])
    with pytest.raises(svc.GuardrailNotInForce, match="type-checking warnings.*undefined field 'driver'"):
        wait(api)


def test_with_warn_the_wait_does_not_expect_a_refusal():
    api = FakeApi(checked_from=1, refused_from=99)
    assert "type-checked" in wait(api, actions=("Warn",))[g.BROAD_DEVICE_TAINT]
    assert api.dry_runs == []


@pytest.mark.parametrize("version", ["v1.33.13", "v1.37.2"])
def test_the_admin_label_policy_lets_only_the_admin_groups_change_either_label(version):
    """Both keys on every release: on 1.33 a tenant could set the new key today, and after the upgrade to 1.34 the
    namespace would have admin access; the status and finalize subresources keep the labels they are sent."""
    out = g.render(version, ALL_V1, ON, admin_groups=["platform-admins", "system:masters"])
    policy = by_name(out["objects"])[(g.POLICY_KIND, g.policy_name(g.ADMIN_ACCESS_LABEL))]
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["namespaces", "namespaces/status", "namespaces/finalize"]}]
    (condition,) = spec["matchConditions"]
    # Only a change of a label's value matches: set on create, added, changed or removed on update.
    for label in (catalog.OLD_ADMIN_LABEL, catalog.NEW_ADMIN_LABEL):
        assert "object.metadata.labels['%s']" % label in condition["expression"]
        assert "oldObject.metadata.labels['%s']" % label in condition["expression"]
    assert "request.operation == 'UPDATE' ? " in condition["expression"]
    (validation,) = spec["validations"]
    assert validation["expression"] == ("(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in "
                                        "['platform-admins', 'system:masters']))")
    for text in (validation["message"], validation["messageExpression"]):
        assert catalog.OLD_ADMIN_LABEL in text and catalog.NEW_ADMIN_LABEL in text
        assert "platform-admins, system:masters" in text and g.ADMIN_ACCESS_LABEL in text
    assert validation["reason"] == "Forbidden"
    default = by_name(g.render(version, ALL_V1, ON)["objects"])[(g.POLICY_KIND, g.policy_name(g.ADMIN_ACCESS_LABEL))]
    assert "['system:masters', 'kubeadm:cluster-admins']" in default["spec"]["validations"][0]["expression"]


@pytest.mark.parametrize("groups", [[], [""], ["  "]])
def test_admin_groups_must_name_groups(groups):
    errors = g.input_errors({"validation_actions": ["Deny"], "admin_groups": groups})
    assert len(errors) == 1 and errors[0].startswith("admin_groups") and "admin_access_label: false" in errors[0]
    assert g.input_errors({"validation_actions": ["Deny"], "admin_groups": ["system:masters"]}) == []


@pytest.mark.parametrize("version,crashes", [
    ("v1.30.14", True), ("v1.33.13", True), ("v1.34.11", True), ("v1.34.12", False), ("v1.35.8", True),
    ("v1.35.9", False), ("v1.36.4", True), ("v1.36.5", False), ("v1.37.0", True), ("v1.37.1-rc.0", True),
    ("v1.37.1", False), ("v1.37.2", False), ("v1.38.0", False), ("v1.37", True)])
def test_the_device_count_guardrail_is_installed_where_kube_scheduler_crashes(version, crashes):
    assert catalog.scheduler_count_overflow(version) is crashes
    out = g.render(version, ALL_V1, ON)
    assert (g.DEVICE_COUNT in out["installed"]) is crashes
    assert g.notes(version)[g.DEVICE_COUNT].endswith("is the only check" if crashes else "without overflowing itself")


def test_the_device_count_policy_reads_every_count_and_names_the_fix():
    policy = g.device_count_policy("admissionregistration.k8s.io/v1", ["v1beta1", "v1beta2"], "v1.33.13")
    spec = policy["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1beta1", "v1beta2"], "operations": ["CREATE"],
         "resources": ["resourceclaims", "resourceclaimtemplates"]}]
    (validation,) = spec["validations"]
    for part in ("dyn(r).count > 32", "dyn(r).exactly.count > 32", "dyn(s).count > 32"):
        assert part in validation["expression"], part
    for text in (validation["message"], validation["messageExpression"]):
        assert "v1.33.13" in text and "141307" in text and g.DEVICE_COUNT in text and "at most 32" in text
