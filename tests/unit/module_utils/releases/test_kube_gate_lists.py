"""Every gate of a release (kube_gate_lists, read by hack/kube-gate-lists from each release's k8s.io/kubernetes
module) and what the catalog answers from it. tests/integration/test_gate_matrix.py checks the lists against each
pinned release's four binaries."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog, kube_gate_lists

LISTED = sorted(kube_gate_lists.RELEASES)


@pytest.mark.parametrize("minor", LISTED)
def test_the_dra_catalog_agrees_with_each_releases_own_list(minor):
    """The DRA catalog was written gate by gate; each release's library says which gates it has, with which
    default and lock: on every listed release the two agree, gate for gate."""
    version = "v1.%d.0" % minor
    for name in catalog._GATES:
        info, listed = catalog.target_gate_info(version, name), catalog.kube_gate_info(minor, name)
        assert (info is None) == (listed is None), (minor, name, info, listed)
        if info is not None:
            assert (info["default"], info["locked"], info["stage"].lower()) == (
                listed["default"], listed["locked"], listed["stage"]), (minor, name)


def test_runs_are_ordered_and_cover_listed_releases_only():
    for name, runs in kube_gate_lists.GATES.items():
        assert runs, name
        for first, last, default, locked, stage in runs:
            assert LISTED[0] <= first <= last <= LISTED[-1], name
            assert stage in ("alpha", "beta", "ga", "deprecated"), name
            assert not (locked and stage in ("alpha", "beta")), name
        assert all(a[1] < b[0] for a, b in zip(runs, runs[1:])), name
    assert LISTED == list(range(LISTED[0], LISTED[-1] + 1))


def test_a_gate_gone_from_a_newer_list_is_removed_there():
    assert catalog.kube_gate_info(37, "PodSchedulingReadiness") == {"stage": "ga", "default": True, "locked": True}
    assert catalog.kube_gate_info(38, "PodSchedulingReadiness") is None
    assert catalog.kube_gate_removed_in("PodSchedulingReadiness") == 38
    assert catalog.kube_gate_removed_in("APIListChunking") == 33
    # Still in the newest list, or in none: not removed as far as the lists tell.
    assert catalog.kube_gate_removed_in("ContextualLogging") is None
    assert catalog.kube_gate_removed_in("WatchListClient") is None
    assert catalog.kube_gate_info(38, "WatchListClient") is None
    assert not catalog.kube_gate_listed(31) and catalog.kube_gate_listed(LISTED[-1])


def test_each_list_comes_from_the_newest_release_of_its_minor_or_the_pinned_pre_release():
    assert kube_gate_lists.RELEASES[LISTED[-1]].startswith("v1.%d." % LISTED[-1])
    assert LISTED[-1] == catalog.SUPPORTED_MINORS[-1]
    for minor in catalog.PROVISIONAL_MINORS:
        assert kube_gate_lists.RELEASES[minor] == catalog.PROVISIONAL_CHECKED_AGAINST[minor]
