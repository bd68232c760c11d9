"""dra.admin.component_reader on the real local cluster: the identity the component restart reads /metrics and
/configz with may do exactly that. Impersonated (kubectl auth can-i --as), it gets /metrics and /configz and
nothing else - no resource, no other non-resource URL - while the admin identity the restart used before can do
everything; its token reads kube-apiserver's /metrics over a verified TLS connection (the cluster's CA) and is
refused a Secret; a run again changes nothing; a widened ClusterRole is put back.

The real restart path (kubeadm's static pods on a real kubelet) is tests/integration/test_kind_nodes.py
(test_apiserver_that_does_not_come_back_is_rolled_back_by_the_real_kubelet) and the kind molecule scenario."""
import base64
import json
import ssl
import time
import urllib.error
import urllib.request

import yaml

from clusterlib import collection_module

reader = collection_module("control_plane.component_reader")
USER = reader.reader_user()


def can_i(cluster, *args, as_user=USER):
    res = cluster.kubectl("auth", "can-i", *args, *(["--as", as_user] if as_user else []), check=False)
    return res.stdout.strip()


def cluster_ca_and_server(cluster):
    with open(cluster.kubeconfig) as handle:
        config = yaml.safe_load(handle)
    entry = config["clusters"][0]["cluster"]
    if "certificate-authority-data" in entry:
        ca = base64.b64decode(entry["certificate-authority-data"]).decode()
    else:
        with open(entry["certificate-authority"]) as handle:
            ca = handle.read()
    return ca, entry["server"]


def get(url, token, ca):
    context = ssl.create_default_context(cadata=ca)
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_reader_gets_metrics_and_configz_and_nothing_else(cluster):
    # Before: the restart read them with the admin client certificate, which may do everything.
    assert can_i(cluster, "*", "*", as_user=None) == "yes"
    first = cluster.run_module("dra.admin.component_reader", {"token_seconds": 600})
    assert not first.get("failed"), first
    assert first["user"] == USER and first["token"]
    # After: exactly get on the two URLs.
    assert [can_i(cluster, "get", url) for url in ("/metrics", "/configz")] == ["yes", "yes"]
    for args in (("get", "/logs"), ("get", "/debug/pprof"), ("post", "/metrics"), ("get", "secrets", "-A"),
                 ("get", "pods", "-A"), ("get", "nodes/proxy"), ("create", "pods/exec", "-A"), ("*", "*")):
        assert can_i(cluster, *args) == "no", args
    rules = cluster.get_json("clusterrole", reader.READER_ROLE)["rules"]
    assert rules == [{"nonResourceURLs": ["/metrics", "/configz"], "verbs": ["get"]}]

    # Its token, with the certificate checked against the cluster's CA: /metrics yes, a Secret no.
    ca, server = cluster_ca_and_server(cluster)
    status, text = get(server + "/metrics", first["token"], ca)
    assert status == 200 and "process_start_time_seconds" in text
    assert get(server + "/api/v1/namespaces/kube-system/secrets", first["token"], ca)[0] == 403
    # It expires when asked: 600 s from now (the API's floor), not the year a pod-bound token may get.
    expires = time.mktime(time.strptime(first["expiration_timestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert 500 < expires - time.time() <= 660, first["expiration_timestamp"]

    again = cluster.run_module("dra.admin.component_reader", {"token": False})
    assert again["changed"] is False and again["objects"] == [] and again["token"] == ""


def test_a_widened_role_is_narrowed_again_and_check_mode_only_says_so(cluster):
    cluster.run_module("dra.admin.component_reader", {"token": False})
    cluster.kubectl("patch", "clusterrole", reader.READER_ROLE, "--type=json", "-p", json.dumps(
        [{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}]))
    assert can_i(cluster, "get", "secrets", "-n", "kube-system") == "yes"
    checked = cluster.run_module("dra.admin.component_reader", {}, check=True)
    assert checked["changed"] is True and checked["token"] == ""
    assert checked["objects"] == [{"kind": "ClusterRole", "name": reader.READER_ROLE, "action": "update"}]
    assert can_i(cluster, "get", "secrets", "-n", "kube-system") == "yes"
    fixed = cluster.run_module("dra.admin.component_reader", {"token": False})
    assert fixed["changed"] is True
    cluster.wait_until(lambda: can_i(cluster, "get", "secrets", "-n", "kube-system") == "no", 30,
                       "the reader refused Secrets again")
