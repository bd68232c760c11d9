# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""kubelet_config on the node: the KubeletConfiguration read, the change planned by kubelet_config,
the backup and the atomic write."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.control_plane import kubelet_config
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest
from ansible_collections.dra.admin.plugins.module_utils.access.files import (
    DEFAULT_BACKUP_KEEP, backup_file, read_regular_file, write_atomically,
)


def read_kubelet_config(path):
    return read_regular_file(
        path, "kubelet configuration %s does not exist: is the kubelet set up by kubeadm on this node? "
        "Give the file's path in the path option (see the kubelet's --config flag)",
        "%s is not a regular file: give the kubelet configuration file's path", manifest.ManifestError)


def plan(params):
    """Everything but writing: (current text, new text, changed, before, after, gates enable_dra added)."""
    path = params["path"]
    feature_gates, merge, added = kubelet_config.gate_request(params)
    text = read_kubelet_config(path)
    new_text, changed, before, after = kubelet_config.edit(text, feature_gates, merge, path)
    return text, new_text, changed, before, after, added


def write(module, params, new_text, result):
    """Back up (into result's backup_file) and write the new text."""
    if params["backup"]:
        result["backup_file"] = backup_file(params["path"], params["backup_dir"], params.get("backup_keep", DEFAULT_BACKUP_KEEP))
    write_atomically(module, params["path"], new_text)
