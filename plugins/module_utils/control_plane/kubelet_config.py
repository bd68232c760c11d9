# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""kubelet_config's change worked out on data: the gates asked for (with what enable_dra adds) checked
against the version catalog, the merge into the KubeletConfiguration's text, and its client QPS/Burst
checked. Pure functions; the file is read and written by kubelet_config.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.control_plane import config_file
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest
from ansible_collections.dra.admin.plugins.module_utils.control_plane import tuning
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    KUBELET, dra_additions, validate_dra_gates, validate_gates, validate_without_version,
)

KIND = "KubeletConfiguration"


def _merged_gates(feature_gates, merge):
    gates = dict(feature_gates)
    if isinstance(merge.get("featureGates"), dict):
        gates.update(merge["featureGates"])
    return gates


def gate_request(params):
    """(feature_gates, merge, gates enable_dra added): the request with what DRA needs added, checked against
    the catalog; raises ManifestError ("nothing written") when it is refused."""
    path = params["path"]
    version = params["kubernetes_version"]
    if params["enable_dra"] and not version:
        raise manifest.ManifestError("enable_dra needs kubernetes_version: give the kubelet's version, e.g. v1.33.13")
    added = dra_additions(version, KUBELET)[0] if params["enable_dra"] else {}
    feature_gates = dict(params["feature_gates"])
    merge = dict(params["merge"])
    if merge.get("featureGates") is not None and not isinstance(merge["featureGates"], dict):
        raise manifest.ManifestError("%s: nothing written: merge.featureGates must be a mapping of gate names to true "
                                     "or false (for example {DRADeviceTaints: true}), got %r"
                                     % (path, merge["featureGates"]))
    target = merge["featureGates"] if isinstance(merge.get("featureGates"), dict) else feature_gates
    for name, value in added.items():
        target.setdefault(name, value)
    gates = _merged_gates(feature_gates, merge)
    if version:
        check = validate_dra_gates if params["enable_dra"] else validate_gates
        errors = check(version, dict((k, v) for k, v in gates.items() if v is not None), KUBELET)
    else:
        errors = validate_without_version(gates, component=KUBELET)
    if errors:
        raise manifest.ManifestError("%s: nothing written: %s" % (path, "; ".join(errors)))
    return feature_gates, merge, added


def edit(text, feature_gates, merge, path):
    """(new text, changed, config before, config after) of the file's text; raises ManifestError ("nothing
    written") when kubeAPIQPS/kubeAPIBurst would be wrong."""
    new_text, changed, before, after = config_file.edit_config_text(text, KIND, merge, feature_gates, where=path)
    if "kubeAPIQPS" in merge or "kubeAPIBurst" in merge:
        errors = tuning.check_component_rate(
            KUBELET, merge.get("kubeAPIQPS"), merge.get("kubeAPIBurst"), before.get("kubeAPIQPS"),
            before.get("kubeAPIBurst"), path, ("kubeAPIQPS", "kubeAPIBurst"))
        if errors:
            raise manifest.ManifestError("%s: nothing written: %s" % (path, "; ".join(errors)))
    return new_text, changed, before, after


def result(planned, path, with_diff=False):
    """The module's result for a plan (backup_file is filled in by the write)."""
    text, new_text, changed, dummy, after, added = planned
    outcome = dict(changed=changed, path=path, config=after, feature_gates=after.get("featureGates") or {},
                   dra_feature_gates=added)
    if changed and with_diff:
        outcome["diff"] = dict(before=text, after=new_text, before_header=path, after_header=path)
    return outcome
