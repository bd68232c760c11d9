"""The canary's pods pass the Pod Security level its namespace enforces, on the release's own API server.

Role dra.admin.canary makes its namespace (with nothing to probe it stops there); the API server's PodSecurity
admission then judges, with a server-side dry run, the probe pod the canary module would create there. A pod as
the canary made it before it ran unprivileged (no securityContext) is refused, so the namespace's level is
really enforced.
"""
import copy
import json
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.canary import canary  # noqa: E402

PROBE = {"driver": "gpu.example.com", "pool": "kwok-node-0", "device": "gpu-0", "node": "kwok-node-0",
         "device_class": "gpu.example.com", "selector": 'device.driver == "gpu.example.com"'}


def dry_run(cluster, pod):
    return cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod), check=False)


@pytest.fixture
def namespace(cluster, tmp_path):
    name = "it-canary-psa"
    res = cluster.run_role("dra.admin.canary", tmp_path, {"dra_canary_namespace": name,
                                                          "dra_canary_drivers": ["no-such-driver.example.com"]})
    yield name, res
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_canary_pod_is_admitted_under_the_namespaces_restricted_level(cluster, namespace):
    name, res = namespace
    labels = cluster.get_json("namespace", name)["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("pod-security.kubernetes.io/")} == {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted"}, res.stdout[-3000:]
    pod = canary.canary_pod("dra-canary-it-0", name, "it", PROBE, "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
                            ["/dev/{device_env}"])
    admitted = dry_run(cluster, pod)
    assert admitted.returncode == 0 and "Warning" not in admitted.stderr, admitted.stderr
    assert json.loads(admitted.stdout)["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] is True

    before = copy.deepcopy(pod)
    del before["spec"]["containers"][0]["securityContext"]
    refused = dry_run(cluster, before)
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:' in refused.stderr, refused.stderr
