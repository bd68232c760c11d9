#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: component_flags
short_description: Set or remove command-line flags of a control-plane component in its static Pod manifest
version_added: 0.1.0
description:
  - Changes the flags of one container of a static Pod manifest, such as
    C(/etc/kubernetes/manifests/kube-apiserver.yaml) written by kubeadm.
  - C(--feature-gates) and C(--runtime-config) are merged as maps (C(A=true,B=false)), so gates
    already there stay unless named; other flags are set or removed one by one.
  - Untouched flags keep their place and their exact text; the rest of the file is not rewritten.
    New flags go where sorting puts them when the existing flags are sorted, as kubeadm writes them.
  - With O(kubernetes_version), the feature gates and C(resource.k8s.io) runtime-config entries are
    checked against the collection's version catalog first; an unknown gate, a removed gate, a gate
    locked to the other value, or an API version the release does not have fails the task and
    nothing is written.
  - Writes atomically, after a backup kept outside the manifest directory (the kubelet would run a
    backup left there as a second Pod).
  - Runs on the control-plane host; it does not talk to the API server. The kubelet restarts the
    component when the file changes; waiting for it is the caller's business (the
    C(dra.admin.feature_gates) role does it).
author:
  - dra.admin maintainers (@dra-admin)
options:
  path:
    description:
      - The static Pod manifest to change.
    type: path
    required: true
  container:
    description:
      - Name of the container whose flags change. Needed only when the Pod has several containers.
    type: str
  set_flags:
    description:
      - Flags to set, name (with or without the leading C(--)) to value.
      - A null value writes the bare flag (C(--flag)); a list writes the flag once per element.
      - C(feature-gates) and C(runtime-config) are refused here; use O(feature_gates) and O(runtime_config).
    type: dict
    default: {}
  remove_flags:
    description:
      - Names of flags to remove (every occurrence).
    type: list
    elements: str
    default: []
  feature_gates:
    description:
      - Feature gates to merge into C(--feature-gates), gate name to V(true) or V(false).
      - A null value removes that gate from the flag; the flag is dropped when no gate is left.
    type: dict
    default: {}
  runtime_config:
    description:
      - Entries to merge into C(--runtime-config), for example C(resource.k8s.io/v1beta1=true).
      - A null value removes that entry.
    type: dict
    default: {}
  kubernetes_version:
    description:
      - Version of the component (for example V(v1.33.13)). When given, O(feature_gates) and
        O(runtime_config) are validated against that release before anything is written.
    type: str
  enable_dra:
    description:
      - Also merge what DRA needs on O(kubernetes_version) according to the version catalog
        (C(DynamicResourceAllocation=true) on 1.30 to 1.33, nothing from 1.34) and, for the
        C(kube-apiserver) container, the C(resource.k8s.io) versions to serve with C(--runtime-config)
        (those DRA needs and those the gates in O(feature_gates) need, such as V(v1beta2) for
        C(DRADeviceTaintRules) on 1.36).
      - Requires O(kubernetes_version).
    type: bool
    default: false
  backup:
    description:
      - Copy the manifest into O(backup_dir) before changing it.
    type: bool
    default: true
  backup_dir:
    description:
      - Where backups go. Must not be the manifest's own directory (or below it).
    type: path
    default: /etc/kubernetes/dra-admin-backups
attributes:
  check_mode:
    support: full
    description: Reports what would change and the diff; writes nothing.
  diff_mode:
    support: full
    description: The manifest text before and after.
requirements:
  - PyYAML >= 3.11
notes:
  - The manifest must keep its flags as one C(--flag) or C(--flag=value) item per list element of the
    container's C(command) (as kubeadm writes them) or C(args); anything else is refused with a message.
  - Feature gates are accepted by all four components alike; where each gate takes effect is in the
    collection's version catalog (see the C(dra.admin.feature_gates) role).
"""

EXAMPLES = r"""
- name: Enable DRA and its beta API on a 1.33 API server
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-apiserver.yaml
    kubernetes_version: v1.33.13
    feature_gates:
      DynamicResourceAllocation: true
    runtime_config:
      resource.k8s.io/v1beta1: "true"
      resource.k8s.io/v1beta2: "true"

- name: Raise kube-controller-manager client QPS and Burst
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-controller-manager.yaml
    set_flags:
      kube-api-qps: 75
      kube-api-burst: 150
  register: kcm

- name: Drop a gate again
  dra.admin.component_flags:
    path: /etc/kubernetes/manifests/kube-scheduler.yaml
    feature_gates:
      DRADeviceTaints: null
"""

RETURN = r"""
changed:
  description: Whether the manifest changed (or would change, in check mode).
  returned: always
  type: bool
path:
  description: The manifest.
  returned: always
  type: str
  sample: /etc/kubernetes/manifests/kube-apiserver.yaml
container:
  description: Name of the container whose flags were read.
  returned: always
  type: str
  sample: kube-apiserver
flags:
  description: The container's flags after the change, in command-line order, without the leading C(--).
    A bare flag has a null value; a repeated flag a list of values.
  returned: always
  type: dict
  sample: {advertise-address: 192.0.2.2, feature-gates: DynamicResourceAllocation=true}
flags_before:
  description: The flags before the change, same form as RV(flags).
  returned: always
  type: dict
dra_feature_gates:
  description: The gates O(enable_dra) added (empty without it).
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: true}
dra_runtime_config:
  description: The C(--runtime-config) entries O(enable_dra) added (empty without it, or for other containers).
  returned: always
  type: dict
  sample: {resource.k8s.io/v1beta1: "true"}
feature_gates:
  description: The C(--feature-gates) map after the change.
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: "true"}
runtime_config:
  description: The C(--runtime-config) map after the change.
  returned: always
  type: dict
  sample: {resource.k8s.io/v1beta1: "true"}
backup_file:
  description: The backup written before the change; absent when nothing was written.
  returned: changed and backup and not check mode
  type: str
  sample: /etc/kubernetes/dra-admin-backups/kube-apiserver.yaml.20250101T120000.000000
"""

import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.dra.admin.plugins.module_utils import _flags
from ansible_collections.dra.admin.plugins.module_utils._gates import (
    gates_for_dra, runtime_config_for_dra, runtime_config_for_gates, validate_gates, validate_runtime_config,
)


def argument_spec():
    return dict(
        path=dict(type="path", required=True),
        container=dict(type="str"),
        set_flags=dict(type="dict", default={}),
        remove_flags=dict(type="list", elements="str", default=[]),
        feature_gates=dict(type="dict", default={}),
        runtime_config=dict(type="dict", default={}),
        kubernetes_version=dict(type="str"),
        enable_dra=dict(type="bool", default=False),
        backup=dict(type="bool", default=True),
        backup_dir=dict(type="path", default="/etc/kubernetes/dra-admin-backups"),
    )


def check_backup_dir(path, backup_dir):
    """Refuse a backup directory the kubelet would read static Pods from."""
    manifest_dir = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    target = os.path.realpath(os.path.abspath(backup_dir))
    if target == manifest_dir or target.startswith(manifest_dir + os.sep):
        raise _flags.ManifestError(
            "backup_dir %s is inside %s, where the kubelet would start a backup as a second Pod: "
            "choose a directory outside it (default /etc/kubernetes/dra-admin-backups)" % (backup_dir, manifest_dir))


def validate_request(version, feature_gates, runtime_config):
    """Catalog errors for the requested gates and runtime-config (removals are never refused)."""
    gates = dict((k, v) for k, v in feature_gates.items() if v is not None)
    entries = dict((k, v) for k, v in runtime_config.items() if v is not None)
    return validate_gates(version, gates) + validate_runtime_config(version, entries)


def read_text(path):
    if not os.path.exists(path):
        raise _flags.ManifestError(
            "manifest %s does not exist: is this a control-plane node set up by kubeadm? "
            "Give the manifest's path in the path option" % path)
    if not os.path.isfile(path):
        raise _flags.ManifestError("%s is not a regular file: give the manifest's path" % path)
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8")


def dra_additions(version, container, feature_gates):
    """(gates, runtime-config entries) the catalog says DRA needs for this container on this release."""
    gates = gates_for_dra(version)
    runtime_config = {}
    if container == "kube-apiserver":
        runtime_config = runtime_config_for_dra(version)
        wanted = dict(gates)
        wanted.update(dict((k, v) for k, v in feature_gates.items() if v is not None))
        runtime_config.update(runtime_config_for_gates(version, wanted))
    return gates, runtime_config


def plan(params):
    """Everything but IO: (current text, new text, changed, before flags, after flags, container name, additions)."""
    path = params["path"]
    version = params["kubernetes_version"]
    if params["backup"]:
        check_backup_dir(path, params["backup_dir"])
    if params["enable_dra"] and not version:
        raise _flags.ManifestError("enable_dra needs kubernetes_version: give the component's version, e.g. v1.33.13")
    text = read_text(path)
    container = _flags.find_container(_flags.load_manifest(text, path), params["container"], path).get("name")
    feature_gates = dict(params["feature_gates"])
    runtime_config = dict(params["runtime_config"])
    added = ({}, {})
    if params["enable_dra"]:
        added = dra_additions(version, container, feature_gates)
        for name, value in added[0].items():
            feature_gates.setdefault(name, value)
        for key, value in added[1].items():
            runtime_config.setdefault(key, value)
    if version:
        errors = validate_request(version, feature_gates, runtime_config)
        if errors:
            raise _flags.ManifestError("%s: nothing written: %s" % (path, "; ".join(errors)))
    new_text, changed, before, after = _flags.edit_manifest_text(
        text, params["container"], params["set_flags"], params["remove_flags"],
        feature_gates, runtime_config, where=path)
    return text, new_text, changed, before, after, container, added


def backup_file(path, backup_dir):
    """Copy `path` into `backup_dir` (created 0700) under a timestamped name; return the copy's path."""
    if not os.path.isdir(backup_dir):
        os.makedirs(backup_dir, 0o700)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + ".%06d" % (int(time.time() * 1e6) % 1000000)
    target = os.path.join(backup_dir, "%s.%s" % (os.path.basename(path), stamp))
    shutil.copy2(path, target)
    return target


def write_atomically(module, path, text):
    """Write through a temporary file outside the manifest directory, then atomic_move over the target."""
    handle, temp = tempfile.mkstemp(dir=module.tmpdir)
    with os.fdopen(handle, "wb") as out:
        out.write(text.encode("utf-8"))
    module.atomic_move(temp, path)


def map_value(flags, name):
    value = flags.get(name)
    if isinstance(value, list):
        value = ",".join(v for v in value if v)
    return dict(_flags.parse_map(value or ""))


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if not _flags.HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    path = module.params["path"]
    try:
        text, new_text, changed, before, after, container, added = plan(module.params)
    except (_flags.ManifestError, ValueError) as exc:
        module.fail_json(msg=to_native(exc), path=path, changed=False)
    result = dict(changed=changed, path=path, container=container, flags=dict(after), flags_before=dict(before),
                  feature_gates=map_value(after, "feature-gates"),
                  runtime_config=map_value(after, "runtime-config"),
                  dra_feature_gates=added[0], dra_runtime_config=added[1])
    if changed and module._diff:
        result["diff"] = dict(before=text, after=new_text, before_header=path, after_header=path)
    if changed and not module.check_mode:
        try:
            if module.params["backup"]:
                result["backup_file"] = backup_file(path, module.params["backup_dir"])
            write_atomically(module, path, new_text)
        except (IOError, OSError) as exc:
            module.fail_json(msg="writing %s failed: %s" % (path, to_native(exc)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
