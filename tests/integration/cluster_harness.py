"""Running the collection against a test cluster and reading what it did, for every integration test.

- run_module: one module ad hoc (the `ansible` command), its result read from the JSON callback;
- run_module_batch: one module with each of several args, as the tasks of one ansible-playbook run;
- results: the per-task results of a playbook run with the JSON callback;
- recap: a host's counts in ansible-playbook's PLAY RECAP;
- record: with DRA_IT_RECORD=<dir>, what a scenario left on the cluster saved for the unit tests
  (tests/unit/fixtures/recorded/, tests/unit/fixtures/capacity/).
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# resource.k8s.io kinds that record reads at the version the cluster prefers (Cluster.resource_version).
# DeviceTaintRules are read as kubectl finds them: a release may serve them at another version only.
RESOURCE_KINDS = ("resourceclaims", "resourceclaimtemplates", "resourceslices", "deviceclasses")


def results(res, what, host="localhost"):
    """host's result of each task of the first play, from a run (a CompletedProcess) with the JSON callback."""
    try:
        return [task["hosts"][host] for task in json.loads(res.stdout)["plays"][0]["tasks"]]
    except (ValueError, KeyError, IndexError):
        raise AssertionError(f"cannot read result of {what}: rc={res.returncode}\n{res.stdout}\n{res.stderr}")


def run_module(env, inventory, module, args=None, check=False, expect_failure=None):
    """One module ad hoc on localhost of inventory, in env (the cluster's); its result dict. With expect_failure
    True or False the run must have failed or not (None: either)."""
    cmd = ["ansible", "localhost", "-i", inventory, "-m", module]
    if args:
        cmd += ["-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    env = dict(env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    result = results(res, module)[0]
    if expect_failure is not None and bool(result.get("failed")) != expect_failure:
        raise AssertionError(f"{module} {'succeeded' if expect_failure else 'failed'} unexpectedly: "
                             f"{json.dumps(result, indent=1)[:4000]}")
    return result


def run_module_batch(env, inventory, module, cases, check=False):
    """module on localhost of inventory, in env (the cluster's), once with each args dict of cases, as the tasks
    of one ansible-playbook run (ignore_errors, so a failed case does not stop the next); the result dict of each
    case, in order. Saves a process per case where many bad inputs each fail before any API request.

    The playbook is YAML from yaml.safe_dump: nan and inf are written .nan and .inf and read back as the same
    floats, and every string is quoted where YAML would read it as something else (as `-a JSON` passes it)."""
    cases = list(cases)
    if not cases:
        return []
    play = {"hosts": "localhost", "gather_facts": False,
            "tasks": [{"name": f"case {index}", module: dict(args or {}), "ignore_errors": True,
                       "check_mode": bool(check)} for index, args in enumerate(cases)]}
    directory = tempfile.mkdtemp(prefix="dra-batch-")
    try:
        playbook = os.path.join(directory, "batch.yml")
        with open(playbook, "w") as fh:
            yaml.safe_dump([play], fh, sort_keys=False)
        env = dict(env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
        res = subprocess.run(["ansible-playbook", "-i", inventory, playbook], env=env, capture_output=True,
                             text=True, cwd=ROOT, check=False)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    got = results(res, f"{module} batch")
    if len(got) != len(cases):
        raise AssertionError(f"{module} batch: {len(got)} results of {len(cases)} cases: rc={res.returncode}\n"
                             f"{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return got


def recap(run, host="localhost"):
    """host's counts in ansible-playbook's PLAY RECAP, as numbers ({"ok": 5, "changed": 0, "failed": 0, ...});
    run: the CompletedProcess of the playbook, or its output."""
    output = run if isinstance(run, str) else run.stdout
    for line in output.split("PLAY RECAP")[-1].splitlines():
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
        if match and match.group(1) == host:
            return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group(2))}
    raise AssertionError(f"no PLAY RECAP line of {host}:\n{output[-4000:]}")


def _kinds(cluster, kinds):
    return ",".join(f"{kind}.{cluster.resource_version}.resource.k8s.io" if kind in RESOURCE_KINDS else kind
                    for kind in kinds.split(","))


def _objects(cluster, read):
    if callable(read):
        return read(cluster)
    kinds, *more = (read,) if isinstance(read, str) else read
    return cluster.get_json(_kinds(cluster, kinds), *more)["items"]


def record(cluster, name, *reads, paths=None):
    """With DRA_IT_RECORD=<dir>, save what a scenario left on the cluster as <dir>/<name>-<version>.json for the
    unit tests; without it, nothing (and nothing is read). Returns the file's path, or None.

    Each read is a `kubectl get` of a list: its kinds (comma-separated; those of RESOURCE_KINDS at the cluster's
    resource.k8s.io version), alone or as a tuple followed by more kubectl arguments (("resourceclaims,pods", "-n",
    namespace)); or a function of the cluster giving a list of objects. The file is a List of all their objects in
    that order. paths instead (a function of the cluster giving API paths): the server's answer to each, by path."""
    target = os.environ.get("DRA_IT_RECORD")
    if not target:
        return None
    if paths is not None:
        document = {path: json.loads(cluster.kubectl("get", "--raw", path).stdout) for path in paths(cluster)}
    else:
        document = {"apiVersion": "v1", "kind": "List",
                    "items": [item for read in reads for item in _objects(cluster, read)]}
    os.makedirs(target, exist_ok=True)
    saved = os.path.join(target, f"{name}-{cluster.version}.json")
    with open(saved, "w") as fh:
        json.dump(document, fh, indent=1, sort_keys=True)
    return saved
