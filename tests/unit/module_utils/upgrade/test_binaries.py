"""The node upgrade's check of the binaries it installs, on the results of real stat and slurp runs."""
import base64
import hashlib

from ansible_collections.dra.admin.plugins.module_utils.upgrade.binaries import checksum_problems, published_digest

NAMES = ("kubeadm", "kubelet", "kubectl")
DIGESTS = dict((n, hashlib.sha256(n.encode()).hexdigest()) for n in NAMES)


def stats(**checksums):
    return [{"item": n, "stat": {"exists": n in checksums, "checksum": checksums.get(n)}} for n in NAMES]


def slurped(**texts):
    return [{"item": n, "content": base64.b64encode(texts[n].encode()).decode(), "encoding": "base64"}
            if n in texts else {"item": n, "failed": True, "msg": "file not found"} for n in NAMES]


def test_published_digests_as_dl_k8s_io_and_sha256sum_write_them():
    assert published_digest(DIGESTS["kubelet"] + "\n") == DIGESTS["kubelet"]
    assert published_digest(DIGESTS["kubelet"].upper() + "  kubelet\n") == DIGESTS["kubelet"]
    assert published_digest("<html>not found</html>") is None and published_digest("") is None


def test_matching_binaries_pass_and_a_changed_one_is_named():
    good = stats(**DIGESTS)
    assert checksum_problems(good, slurped(**DIGESTS)) == []
    tampered = stats(**dict(DIGESTS, kubelet="0" * 64))
    problems = checksum_problems(tampered, slurped(**DIGESTS))
    assert len(problems) == 1 and problems[0].startswith("kubelet: sha256 %s is not the one kubelet.sha256 gives" % ("0" * 64))


def test_given_digests_win_and_missing_sources_are_named_with_the_fix():
    assert checksum_problems(stats(**DIGESTS), slurped(), DIGESTS) == []
    problems = checksum_problems(stats(**DIGESTS), slurped(kubeadm=DIGESTS["kubeadm"]), {"kubectl": "xyz", "kubelett": "a"})
    assert problems == [
        "dra_node_upgrade_checksums names kubelett, which is none of the binaries installed (kubeadm, kubelet, kubectl)",
        "kubelet: no kubelet.sha256 beside it and no dra_node_upgrade_checksums.kubelet: download the release's "
        "kubelet.sha256 with the binary (dl.k8s.io/release/<version>/bin/linux/<arch>/) or give its digest",
        "kubectl: dra_node_upgrade_checksums.kubectl 'xyz' is not a sha256 digest (64 hex digits)"]
    assert checksum_problems(stats(kubeadm=DIGESTS["kubeadm"]), slurped(), DIGESTS)[0] == \
        "kubelet: not found in dra_node_upgrade_binaries_dir"
