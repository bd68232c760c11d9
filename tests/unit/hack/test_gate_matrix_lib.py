"""hack/cluster/gatematrix.py and hack/gate-matrix: the pure parts of the catalog-against-binaries comparison.

The comparison itself runs real binaries (tests/integration/test_gate_matrix.py, make gate-matrix);
these tests pin down how --help, the components' errors and the results are read.
"""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import gatematrix  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "gate-matrix")


def recorded_help(version):
    with open(os.path.join(FIXTURES, "kube-apiserver-%s-feature-gates.txt" % version)) as handle:
        return handle.read()


def test_help_lists_alpha_and_beta_gates_with_their_defaults():
    listed = gatematrix.parse_help(recorded_help("v1.36.3"))
    assert listed["DRADeviceTaintRules"] == ("beta", False)
    assert listed["DRAListTypeAttributes"] == ("alpha", False)
    assert listed["ResourceHealthStatusMessage"] == ("beta", True)
    assert "DRAAdminAccess" not in listed  # GA: --help leaves it out
    assert "AllAlpha" in listed and len(listed) > 100


def test_the_dra_rule_picks_dra_gates_only():
    dra = sorted(n for n in gatematrix.parse_help(recorded_help("v1.36.3")) if gatematrix.DRA_GATE.search(n))
    assert dra == ["DRAConsumableCapacity", "DRADeviceBindingConditions", "DRADeviceTaintRules", "DRADeviceTaints",
                   "DRAExtendedResource", "DRAListTypeAttributes", "DRANodeAllocatableResources",
                   "DRAPartitionableDevices", "DRAResourceClaimDeviceStatus",
                   "DRAResourceClaimGranularStatusAuthorization", "DRAResourcePoolStatus",
                   "DRASchedulerFilterTimeout", "DRAWorkloadResourceClaims", "ResourceHealthStatus",
                   "ResourceHealthStatusMessage"]
    old = sorted(n for n in gatematrix.parse_help(recorded_help("v1.33.13")) if gatematrix.DRA_GATE.search(n))
    assert "DynamicResourceAllocation" in old and "KubeletPodResourcesDynamicResources" in old
    for other in ("PodLevelResources", "CSIVolumeHealth", "KubeletPodResourcesGet", "InPlacePodVerticalScaling"):
        assert not gatematrix.DRA_GATE.search(other)


@pytest.mark.parametrize("version", ["v1.33.13", "v1.36.3"])
def test_recorded_help_agrees_with_the_catalog(version):
    assert gatematrix.listing_differences(version, gatematrix.parse_help(recorded_help(version))) == []


def test_listing_differences_name_the_gate_and_both_sides():
    diffs = gatematrix.listing_differences("v1.36.3", {"DRADeviceTaintRules": ("beta", True)})
    assert diffs == ["DRADeviceTaintRules: catalog beta default=false, --help beta default=true"]


@pytest.mark.parametrize("line,match", [
    ('E1123 run.go:72] "command failed" err="unrecognized feature gate: DRAFancy"', "unrecognized feature gate: DRAFancy"),
    ('err="cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"',
     "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
    ('err="ResourceHealthStatusMessage is enabled, but depends on features that are disabled: [ResourceHealthStatus]"',
     "ResourceHealthStatusMessage is enabled, but depends on features that are disabled: [ResourceHealthStatus]"),
    ('err="failed to set feature gates from initial flags-based config: unrecognized feature gate: DRAConsumableCapacity"',
     "unrecognized feature gate: DRAConsumableCapacity"),
    ('err="failed to wait for apiserver being healthy: timed out"', None),
])
def test_feature_gate_errors_recorded_from_the_components(line, match):
    found = gatematrix.GATE_ERROR.search(line)
    assert (found.group(0) if found else None) == match


def test_components_that_disagree_give_no_verdict():
    both = {"kube-apiserver": ("accepted", ""), "kubelet": ("accepted", "")}
    assert gatematrix.binary_verdict(both) == "accepted"
    split = {"kube-apiserver": ("accepted", ""), "kubelet": ("refused", "x")}
    assert gatematrix.binary_verdict(split) == "no verdict"


def row(gate, value, catalog, binary, minor=33):
    return {"gate": gate, "value": value, "catalog": catalog, "catalog_message": "", "binary": binary,
            "components": {"kube-apiserver": (binary, "evidence")}, "match": catalog == binary,
            "exception": gatematrix.EXCEPTIONS.get((minor, gate, value))}


def test_problems_allow_exactly_the_listed_exceptions():
    rows = [row("DynamicResourceAllocation", True, "accepted", "accepted"),
            row("DynamicResourceAllocation", False, "refused", "accepted")]
    assert gatematrix.problems({"version": "v1.33.13", "rows": rows, "listing": []}) == []


def test_problems_report_a_mismatch_an_exception_that_no_longer_occurs_and_one_never_tried():
    mismatch = gatematrix.problems({"version": "v1.33.13", "listing": [], "rows": [
        row("DynamicResourceAllocation", False, "refused", "accepted"),
        row("DRAAdminAccess", True, "refused", "accepted")]})
    assert len(mismatch) == 1 and mismatch[0].startswith("v1.33.13 DRAAdminAccess=true: catalog refused")
    gone = gatematrix.problems({"version": "v1.33.13", "listing": [], "rows": [
        row("DynamicResourceAllocation", False, "accepted", "accepted")]})
    assert len(gone) == 1 and "listed as an exception" in gone[0] and "now agree" in gone[0]
    never = gatematrix.problems({"version": "v1.33.13", "listing": [], "rows": []})
    assert len(never) == 1 and "never tried" in never[0]
    listing = gatematrix.problems({"version": "v1.36.3", "listing": ["X: catalog ..."], "rows": []})
    assert listing == ["v1.36.3 --help: X: catalog ..."]


def test_every_exception_is_in_the_decisions_doc():
    with open(os.path.join(ROOT, "docs", "decisions.md")) as handle:
        text = handle.read()
    for minor, gate, value in gatematrix.EXCEPTIONS:
        assert "`%s=%s` on" % (gate, str(value).lower()) in text and "1.%d" % minor in text


def test_latest_patch_of_each_minor_from_the_proxy_listing():
    listing = ["v1.13.0", "v1.32.2", "v1.32.13", "v1.33.6", "v1.33.13", "v1.34.0", "v1.34.4", "v1.35.4",
               "v1.36.1", "v1.36.3", "v1.37.0-rc.1", "v1.37.2"]
    assert gatematrix.latest_patches(listing, range(32, 38)) == [
        "v1.32.13", "v1.33.13", "v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"]
    with pytest.raises(gatematrix.MatrixError, match="no release of 1.38"):
        gatematrix.latest_patches(listing, [38])
    # A minor without a release takes its pinned pre-release; a released minor keeps its release.
    assert gatematrix.latest_patches(listing + ["v1.38.0-beta.0"], [37, 38], ["v1.37.2", "v1.38.0-beta.0"]) == [
        "v1.37.2", "v1.38.0-beta.0"]
