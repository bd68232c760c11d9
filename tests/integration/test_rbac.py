"""Role dra.admin.rbac on the real API server (RBAC authorizer on): a SubjectAccessReview matrix.

Every persona x verb x DRA resource x namespace is asked of the API server after the role ran;
the expected answers below are written from the persona definitions, not computed by the
collection's code. The matrix is printed; any unexpected allow or deny fails.
"""
import json

import pytest

from cluster_harness import recap


DRIVER = "it-rbac.example.com"
OTHER_DRIVER = "someone-else.example.com"
TEAM_A = "it-rbac-team-a"
TEAM_B = "it-rbac-team-b"
DRIVER_NS = "it-rbac-drivers"
ALL_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
READ = {"get", "list", "watch"}

SUBJECTS = {
    "admin": {"user": "it-admin", "groups": ["it-admins", "system:authenticated"]},
    "driver": {"user": f"system:serviceaccount:{DRIVER_NS}:driver",
               "groups": ["system:serviceaccounts", f"system:serviceaccounts:{DRIVER_NS}", "system:authenticated"]},
    "operator": {"user": "it-operator", "groups": ["system:authenticated"]},
    "nobody": {"user": "it-nobody", "groups": ["system:authenticated"]},
}

PERSONAS = {
    "dra_rbac_admins": {"groups": ["it-admins"]},
    "dra_rbac_drivers": [{"driver": DRIVER, "service_accounts": [f"{DRIVER_NS}/driver"]}],
    "dra_rbac_operators": [{"namespaces": [TEAM_A], "users": ["it-operator"]}],
}


def cases(served, granular):
    """(persona, resource, subresource, name, namespace, verb, expected) for the whole matrix."""
    namespaced = ("resourceclaims", "resourceclaimtemplates")
    cluster_scoped = ("deviceclasses", "resourceslices", "devicetaintrules")
    rows = []
    for persona in SUBJECTS:
        for verb in ALL_VERBS:
            for resource in cluster_scoped:
                if persona == "admin":
                    allowed = resource in served
                elif persona == "driver":
                    allowed = resource == "resourceslices" and verb != "deletecollection"
                else:
                    allowed = False
                rows.append((persona, resource, "", "", "", verb, allowed))
            for resource in namespaced:
                for namespace in (TEAM_A, TEAM_B, ""):
                    if persona == "admin":
                        allowed = verb in READ
                    elif persona == "driver":
                        allowed = resource == "resourceclaims" and verb in READ
                    elif persona == "operator":
                        allowed = namespace == TEAM_A
                    else:
                        allowed = False
                    rows.append((persona, resource, "", "", namespace, verb, allowed))
            for namespace in (TEAM_A, ""):
                allowed = persona == "driver" and verb in ("get", "update", "patch")
                rows.append((persona, "resourceclaims", "status", "", namespace, verb, allowed))
            rows.append((persona, "nodes", "", "", "", verb, persona == "driver" and verb == "get"))
        for verb in ("associated-node:update", "associated-node:patch", "arbitrary-node:update"):
            for name in (DRIVER, OTHER_DRIVER):
                allowed = persona == "driver" and granular and name == DRIVER and verb.startswith("associated-node")
                rows.append((persona, "resourceclaims", "driver", name, TEAM_A, verb, allowed))
    return rows


def review(persona, resource, subresource, name, namespace, verb):
    attributes = {"group": "" if resource == "nodes" else "resource.k8s.io", "resource": resource, "verb": verb}
    if subresource:
        attributes["subresource"] = subresource
    if name:
        attributes["name"] = name
    if namespace:
        attributes["namespace"] = namespace
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": dict(SUBJECTS[persona], resourceAttributes=attributes)}


def json_documents(text):
    decoder, index, docs = json.JSONDecoder(), 0, []
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        doc, index = decoder.raw_decode(text, index)
        docs.append(doc)
    return docs


def ask(cluster, rows):
    """The API server's answer to each row, in one kubectl call (one SubjectAccessReview per row)."""
    items = [review(*row[:6]) for row in rows]
    out = cluster.kubectl("create", "-f", "-", "-o", "json",
                          stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})).stdout
    docs = json_documents(out)
    docs = docs[0]["items"] if len(docs) == 1 and docs[0].get("kind") == "List" else docs
    assert len(docs) == len(rows)
    return [bool(d["status"].get("allowed")) for d in docs]


def print_matrix(cluster, rows, answers):
    print(f"\nSubjectAccessReview matrix on Kubernetes {cluster.version} ({len(rows)} reviews)")
    header = "persona   resource                      namespace          " + " ".join(v[:6].ljust(6) for v in ALL_VERBS)
    print(header)
    grouped = {}
    for row, answer in zip(rows, answers):
        persona, resource, sub, name, namespace, verb, expected = row
        label = resource + ("/" + sub if sub else "") + ("[" + name + "]" if name else "")
        mark = ("Y" if answer else ".") + ("" if answer == expected else "!")
        grouped.setdefault((persona, label, namespace or "*"), {})[verb] = mark
    for (persona, label, namespace), verbs in grouped.items():
        extra = [f"{v}={m}" for v, m in verbs.items() if v not in ALL_VERBS]
        cells = " ".join(verbs.get(v, "").ljust(6) for v in ALL_VERBS)
        print(f"{persona:9} {label[:29]:29} {namespace[:18]:18} {cells} {' '.join(extra)}")
    allowed = sum(answers)
    print(f"allowed {allowed}, denied {len(answers) - allowed}; '!' marks an answer that differs from the persona "
          "definition")


def run_role(cluster, tmp_path, extra_vars, check=False):
    return cluster.run_role("dra.admin.rbac", tmp_path, extra_vars, check)


def served_resources(cluster):
    out = cluster.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout
    return {line.split(".")[0] for line in out.split()}


@pytest.fixture(scope="module")
def personas(cluster):
    for namespace in (TEAM_A, TEAM_B, DRIVER_NS):
        cluster.kubectl("create", "namespace", namespace, check=False)
    yield
    for namespace in (TEAM_A, TEAM_B, DRIVER_NS):
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    cluster.kubectl("delete", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/managed-by=dra.admin,"
                    "dra.admin/persona", check=False)


@pytest.mark.per_release("gate_info", "DRAResourceClaimGranularStatusAuthorization", key="default")
def test_matrix_after_role(cluster, personas, tmp_path):
    res = run_role(cluster, tmp_path, PERSONAS)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    served = served_resources(cluster)
    granular = cluster.minor >= 36
    rows = cases(served, granular)
    answers = ask(cluster, rows)
    print_matrix(cluster, rows, answers)
    wrong = [(row[:6], "allowed" if got else "denied") for row, got in zip(rows, answers) if got != row[6]]
    assert not wrong, f"{len(wrong)} unexpected answers: {wrong[:20]}"
    # the matrix must exercise both answers for every persona with rights
    for persona in ("admin", "driver", "operator"):
        assert any(a for r, a in zip(rows, answers) if r[0] == persona)
        assert any(not a for r, a in zip(rows, answers) if r[0] == persona)
    assert not any(a for r, a in zip(rows, answers) if r[0] == "nobody")


def test_second_run_changes_nothing(cluster, personas, tmp_path):
    first = run_role(cluster, tmp_path, PERSONAS)
    assert first.returncode == 0, first.stdout[-3000:]
    second = run_role(cluster, tmp_path, PERSONAS)
    assert second.returncode == 0, second.stdout[-3000:]
    assert recap(second)["changed"] == 0, second.stdout[-3000:]


def test_check_mode_and_prune_of_removed_namespace(cluster, personas, tmp_path):
    assert run_role(cluster, tmp_path, PERSONAS).returncode == 0
    operator_row = [("operator", "resourceclaims", "", "", TEAM_A, "create", True)]
    assert ask(cluster, operator_row) == [True]
    moved = dict(PERSONAS, dra_rbac_operators=[{"namespaces": [TEAM_B], "users": ["it-operator"]}])

    planned = run_role(cluster, tmp_path, moved, check=True)
    assert planned.returncode == 0, planned.stdout[-3000:]
    assert recap(planned)["changed"] >= 1
    assert cluster.kubectl("get", "rolebinding", "-n", TEAM_B, "dra-operator", check=False).returncode != 0, \
        "check mode created a RoleBinding"
    assert ask(cluster, operator_row) == [True], "check mode removed access"

    applied = run_role(cluster, tmp_path, moved)
    assert applied.returncode == 0, applied.stdout[-3000:]
    assert ask(cluster, [("operator", "resourceclaims", "", "", TEAM_A, "create", False),
                         ("operator", "resourceclaims", "", "", TEAM_B, "create", True)]) == [False, True]
    assert cluster.kubectl("get", "rolebinding", "-n", TEAM_A, "dra-operator", check=False).returncode != 0


def test_bad_service_account_is_a_clear_error(cluster, personas, tmp_path):
    bad = dict(PERSONAS, dra_rbac_drivers=[{"driver": DRIVER, "service_accounts": ["driver-without-namespace"]}])
    res = run_role(cluster, tmp_path, bad)
    assert res.returncode != 0
    assert "must be written namespace/name" in res.stdout


@pytest.mark.per_release("gate_info", "DRAResourceClaimGranularStatusAuthorization", key="default")
def test_driver_rules_follow_served_version(cluster):
    result = cluster.run_module("dra.admin.dra_rbac_plan_info", {"drivers": [{"driver": DRIVER}]})
    assert set(result["served_resources"]) >= {"deviceclasses", "resourceclaims", "resourceslices"}
    role = [o for o in result["objects"] if o["metadata"]["name"] == f"dra-driver:{DRIVER}"][0]
    granular_rules = [r for r in role["rules"] if "resourceclaims/driver" in r["resources"]]
    assert bool(granular_rules) is (cluster.minor >= 36)
    assert result["granular_status_authorization"] is (cluster.minor >= 36)
