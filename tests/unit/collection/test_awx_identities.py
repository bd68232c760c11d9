"""Every AWX job template names the identity its playbook needs, and no more.

playbooks/awx_configure.yml gives each job template an `identity` (the Kubernetes credential: a job identity of
plugins/module_utils/rbac/personas.py, or the administrator's privileged one) and a `machine` (the SSH credential:
hosts, gpu or none). This test reads each template's playbook as Ansible runs it (plays, roles and their
dependencies, included roles and task files, blocks; a step whose `when` is a variable that is false by default or
by the template's extra_vars is left out), collects what each step writes to the API server (WRITES below, read
from each module's service code, independently of the personas) and which hosts it connects to, and checks:

- the identity's rules (rendered by personas.py, as role dra.admin.rbac applies them) allow every write;
- it is the least identity that does: a playbook that writes nothing gets the reader, one that needs the
  privileged credential writes something no job identity may write;
- the machine credential is attached exactly where a step connects to a host other than the API host.
"""
import re
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from ansible_collections.dra.admin.plugins.module_utils.rbac import personas

ROOT = Path(ROOT)
CANARY = "canary"   # a write in the canary's namespace
ANY_NS = "*"        # a write in any namespace
CLUSTER = ""        # a cluster-scoped write
DRA = "resource.k8s.io"
SERVED = ["deviceclasses", "devicetaintrules", "devicetaintrules/status", "resourceclaims", "resourceclaims/status",
          "resourceclaimtemplates", "resourcepoolstatusrequests", "resourceslices"]

# What each module that writes to the API server writes: (group, resource, verb, where), read from its service.
# A module missing here that is neither *_info, *_facts nor a host-only module fails the test: add it.
TAINTS = [(DRA, "devicetaintrules", verb, CLUSTER) for verb in ("create", "patch", "delete")]
EVICTION = [("", "pods/eviction", "create", ANY_NS)]
WRITES = {
    # canary/canary_service.py: the probes' templates and pods, the claims the controller made, in its namespace.
    "dra.admin.dra_canary": [("", "pods", "create", CANARY), ("", "pods", "delete", CANARY),
                             (DRA, "resourceclaimtemplates", "create", CANARY),
                             (DRA, "resourceclaimtemplates", "delete", CANARY),
                             (DRA, "resourceclaims", "delete", CANARY)],
    # devices/taints_service.py, devices/remediation_service.py and kube/evictions_service.py.
    "dra.admin.dra_device_taint": TAINTS + EVICTION,
    "dra.admin.dra_device_remediation": TAINTS + EVICTION,
    # nodes/drain_service.py: the cordon and its annotations, the exclusion label; kube/evictions_service.py.
    "dra.admin.dra_node_drain": [("", "nodes", "patch", CLUSTER)] + EVICTION,
    # upgrade/checks_service.py asks the authorizer about drivers and schedulers: a question, no object written.
    "dra.admin.dra_upgrade_check_info": [("authorization.k8s.io", "subjectaccessreviews", "create", CLUSTER)],
    "dra.admin.dra_upgrade_plan_info": [("authorization.k8s.io", "subjectaccessreviews", "create", CLUSTER)],
}
# Read modules that write when an option asks for it: dra_capacity_info's pool_status creates (and deletes) a
# ResourcePoolStatusRequest (claims/claims_service.py).
WRITES_WHEN = {"dra.admin.dra_capacity_info": ("pool_status", [(DRA, "resourcepoolstatusrequests", "create", CLUSTER),
                                                               (DRA, "resourcepoolstatusrequests", "delete", CLUSTER)])}
# Modules that write nothing though their names do not say so: dra_metrics_advice reads Prometheus or scrapes
# /metrics (metrics/prometheus_service.py).
READ_ONLY = {"dra.admin.dra_metrics_advice"}
# Modules that work on the host they run on (files, node state, GPUs), never the API server.
HOST_ONLY = {"dra.admin.dra_node_state_info", "dra.admin.dra_node_state_repair", "dra.admin.dra_gpu_health_facts",
             "dra.admin.dra_hardware_facts"}
# Steps that run on the controller without connecting to any host.
LOCAL_ACTIONS = {"debug", "set_fact", "assert", "fail", "meta", "set_stats", "pause", "include_tasks",
                 "import_tasks", "include_role", "import_role", "include_vars", "validate_argument_spec", "add_host",
                 "group_by"}
# What a play or a step's delegate_to may name for the API host.
API_HOSTS = ("k8s_api", "localhost", "dra_api_host")
PRIVILEGED = "privileged"
TASK_KEYS = {"name", "when", "loop", "loop_control", "register", "delegate_to", "run_once", "become", "vars",
             "check_mode", "tags", "no_log", "changed_when", "failed_when", "until", "retries", "delay", "notify",
             "module_defaults", "ignore_errors", "environment", "args", "become_user", "listen", "throttle",
             "delegate_facts", "timeout", "diff", "any_errors_fatal", "collections"}


def load(path):
    return yaml.safe_load(Path(path).read_text())


def role_dir(name):
    return ROOT / "roles" / name.split(".")[-1]


def role_defaults(name):
    path = role_dir(name) / "defaults" / "main.yml"
    return load(path) or {} if path.exists() else {}


SIMPLE_CONDITION = re.compile(r"^\s*(not\s+)?(\w+)\s*(\|\s*bool)?\s*$")


def skipped(condition, known):
    """Whether a `when` is false for sure: a variable (| bool, or not) whose value is known."""
    for cond in condition if isinstance(condition, list) else [condition]:
        match = SIMPLE_CONDITION.match(str(cond))
        if match and match.group(2) in known and isinstance(known[match.group(2)], bool):
            value = known[match.group(2)]
            if (not value) if not match.group(1) else value:
                return True
    return False


def module_of(task):
    """(the module's full name, the key the task names it by)."""
    keys = [k for k in task if k not in TASK_KEYS and not k.startswith("with_")]
    assert len(keys) == 1, "cannot tell the module of %s" % task.get("name")
    return (keys[0] if "." in keys[0] else "ansible.builtin." + keys[0]), keys[0]


class Walk:
    """The steps of one playbook as (module, task, hosts the step connects to: 'api', 'hosts' or 'gpu')."""

    def __init__(self, extra_vars):
        self.extra_vars = extra_vars
        self.steps = []

    def playbook(self, path):
        for play in load(path):
            api = any(h in str(play.get("hosts")) for h in API_HOSTS)
            for key in ("pre_tasks", "roles", "tasks", "post_tasks"):
                for item in play.get(key) or []:
                    if key == "roles":
                        self.role(item["role"] if isinstance(item, dict) else item, "main", api, {})
                    else:
                        self.task(item, None, api, {})

    def role(self, name, entry, api, known):
        known = dict(role_defaults(name), **known)
        known.update(self.extra_vars)
        meta = role_dir(name) / "meta" / "main.yml"
        for dep in (load(meta) or {}).get("dependencies") or [] if meta.exists() else []:
            self.role(dep["role"] if isinstance(dep, dict) else dep, "main", api, {})
        self.tasks(role_dir(name) / "tasks" / ("%s.yml" % entry), name, api, known)

    def tasks(self, path, role, api, known):
        for task in (load(path) or [] if path.exists() else []):
            self.task(task, role, api, known)

    def task(self, task, role, api, known):
        known = dict(known, **self.extra_vars)
        if "when" in task and skipped(task["when"], known):
            return
        if "block" in task:
            for key in ("block", "rescue", "always"):
                for sub in task.get(key) or []:
                    self.task(sub, role, api, known)
            return
        module, key = module_of(task)
        args = task[key]
        short = module.split(".")[-1]
        if short in ("include_role", "import_role"):
            self.role(args["name"], args.get("tasks_from", "main"), api, {})
            return
        if short in ("include_tasks", "import_tasks"):
            target = args if isinstance(args, str) else args.get("file")
            if "{{" in target:
                self.steps.append(("dynamic:" + target, task, where(task, api)))
                return
            self.tasks(role_dir(role) / "tasks" / target, role, api, known)
            return
        self.steps.append((module, task, where(task, api) if short not in LOCAL_ACTIONS else "api"))


def where(task, api):
    """The hosts a step connects to: the API host, the GPU nodes of a list such as dra_health_gpu_nodes, or hosts."""
    delegate = str(task.get("delegate_to", ""))
    if delegate:
        if any(h in delegate for h in API_HOSTS):
            return "api"
        return "gpu" if "gpu_nodes" in str(task.get("loop", "")) else "hosts"
    return "api" if api else "hosts"


def writes(module, task):
    """What one step writes: a list of (group, resource, verb, where), or None when only the privileged may."""
    if module in WRITES:
        return WRITES[module]
    option, written = WRITES_WHEN.get(module, (None, []))
    if option and (task.get(module) or task.get(module.split(".")[-1]) or {}).get(option) not in (None, False):
        return written
    if module in HOST_ONLY or module in READ_ONLY or module.startswith("ansible.builtin.") or module.endswith(("_info", "_facts")):
        return []
    return None  # kubernetes.core.k8s, helm, component and kubeconfig writers, a dynamic task file: privileged


def template_needs(template):
    walk = Walk(template.get("extra_vars") or {})
    walk.playbook(ROOT / template["playbook"])
    needed, hosts = [], set()
    for module, task, connects in walk.steps:
        found = writes(module, task)
        needed.append((module, task.get("name"), found))
        if connects != "api" and module not in ("ansible.builtin." + a for a in LOCAL_ACTIONS):
            hosts.add(connects)
    machine = "hosts" if "hosts" in hosts else ("gpu" if "gpu" in hosts else "none")
    return needed, machine


def rules_of(identity, where_):
    """The rules an identity holds for a write at `where_` (the canary's own only in its namespace)."""
    if identity == "canary":
        return personas.reader_rules(SERVED) + (personas.canary_rules(SERVED) if where_ == CANARY else [])
    return personas.JOB_RULES[identity](SERVED)


def allows(identity, write):
    group, resource, verb, where_ = write
    return any(group in rule.get("apiGroups", []) and resource in rule.get("resources", [])
               and verb in rule.get("verbs", []) for rule in rules_of(identity, where_))


def covering(needed):
    """The job identities allowing every write; none when a step needs the privileged credential."""
    if any(found is None for dummy, dummy2, found in needed):
        return []
    return [i for i in personas.JOB_IDENTITIES if all(allows(i, w) for dummy, dummy2, found in needed for w in found)]


def job_templates():
    play = load(ROOT / "playbooks" / "awx_configure.yml")[0]
    task = next(t for t in play["tasks"] if "awx.awx.job_template" in t)
    return task["vars"]["dra_awx_job_templates"]


# The table this test holds the templates to: what each playbook was written to need.
EXPECTED = {
    "site": (PRIVILEGED, "hosts"), "upgrade": (PRIVILEGED, "hosts"), "driver_upgrade": (PRIVILEGED, "none"),
    "health": ("reader", "gpu"), "upgrade_check": ("reader", "hosts"), "node_doctor": ("reader", "hosts"),
    "canary": ("canary", "none"), "device_maintenance": ("devices", "none"),
    "device_remediation": ("devices", "gpu"), "maintenance": ("maintenance", "none"),
}


def test_every_template_has_an_identity_and_a_machine_of_the_table():
    templates = {t["name"]: t for t in job_templates()}
    assert sorted(templates) == sorted(EXPECTED)
    for name, template in templates.items():
        assert (template["identity"], template.get("machine", "none")) == EXPECTED[name], name
        assert template["identity"] in personas.JOB_IDENTITIES + (personas.PRIVILEGED,)
    # Only site, upgrade and driver upgrade get the administrator's credential.
    assert sorted(n for n, t in templates.items() if t["identity"] == PRIVILEGED) == [
        "driver_upgrade", "site", "upgrade"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_identity_is_the_least_that_allows_what_the_playbook_writes(name):
    template = next(t for t in job_templates() if t["name"] == name)
    needed, dummy = template_needs(template)
    assert needed, "%s: no step found in %s" % (name, template["playbook"])
    covers = covering(needed)
    identity = template["identity"]
    writing = [(m, n, w) for m, n, w in needed if w is None or w]
    if identity == PRIVILEGED:
        assert not covers, "%s: the privileged credential is more than it needs; %s would do" % (name, covers)
        return
    assert identity in covers, "%s: identity %s does not allow %s" % (
        name, identity, [(m, n, w) for m, n, w in writing if w is None or not all(allows(identity, x) for x in w)])
    if not writing or all(all(allows("reader", x) for x in w) for dummy, dummy2, w in writing):
        assert identity == "reader", "%s writes nothing the reader may not: it gets the reader" % name
    else:
        assert "reader" not in covers
        # No other job identity allows it: the one named is the only fit, not a broader one.
        assert covers == [identity], "%s: %s all allow what it writes" % (name, covers)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_ssh_only_where_a_step_reaches_a_host_other_than_the_api_host(name):
    template = next(t for t in job_templates() if t["name"] == name)
    dummy, machine = template_needs(template)
    assert template.get("machine", "none") == machine, name


def test_a_writing_step_makes_the_reader_wrong():
    """The check can fail: the health report with a step that writes is no longer the reader's."""
    health = {"name": "health", "playbook": "playbooks/health.yml", "identity": "reader"}
    needed, dummy = template_needs(health)
    assert "reader" in covering(needed)
    needed.append(("dra.admin.dra_device_taint", "a write", WRITES["dra.admin.dra_device_taint"]))
    assert "reader" not in covering(needed) and covering(needed) == ["devices"]
    # A read module asked to write (the capacity report's ResourcePoolStatusRequest) is not the reader's either.
    capacity = "dra.admin.dra_capacity_info"
    assert writes(capacity, {capacity: {}}) == []
    assert not all(allows("reader", w) for w in writes(capacity, {capacity: {"pool_status": True}}))
    needed.append(("kubernetes.core.k8s", "any object", None))
    assert covering(needed) == []


def test_the_canary_writes_nowhere_but_its_namespace():
    for write in WRITES["dra.admin.dra_canary"]:
        assert allows("canary", write)
        assert not allows("canary", write[:3] + (ANY_NS,)), write
    # Its namespace's labels (Pod Security, admin access) are not its to change.
    assert not allows("canary", ("", "namespaces", "patch", CANARY))
    assert not allows("canary", ("", "namespaces", "update", CANARY))


def test_the_canary_template_leaves_the_namespace_to_the_privileged_run():
    canary = next(t for t in job_templates() if t["name"] == "canary")
    assert canary["extra_vars"] == {"dra_canary_manage_namespace": False}
    walk = Walk({})
    walk.playbook(ROOT / "playbooks" / "canary.yml")
    # Without the template's extra_vars the role makes the namespace itself: a write only the privileged may.
    assert "kubernetes.core.k8s" in [m for m, dummy, dummy2 in walk.steps]
    walk = Walk(canary["extra_vars"])
    walk.playbook(ROOT / "playbooks" / "canary.yml")
    assert "kubernetes.core.k8s" not in [m for m, dummy, dummy2 in walk.steps]
