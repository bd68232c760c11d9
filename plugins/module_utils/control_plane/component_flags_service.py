# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""component_flags on the host: the static Pod manifest and the configuration file read, the change
planned (by component_flags, on the manifest parsed once), the backups and the atomic writes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.dra.admin.plugins.module_utils.control_plane import command_line
from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_flags
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest as manifest_rules
from ansible_collections.dra.admin.plugins.module_utils.access.files import (
    DEFAULT_BACKUP_KEEP, NODE_BACKUP_DIR, backup_file, read_regular_file, read_text, write_atomically,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_metrics import procfs_start_time


def check_backup_dir(path, backup_dir):
    """Refuse a backup directory the kubelet would read static Pods from."""
    manifest_dir = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    target = os.path.realpath(os.path.abspath(backup_dir))
    if target == manifest_dir or target.startswith(manifest_dir + os.sep):
        raise manifest_rules.ManifestError(
            "backup_dir %s is inside %s, where the kubelet would start a backup as a second Pod: "
            "choose a directory outside it (default %s)" % (backup_dir, manifest_dir, NODE_BACKUP_DIR))


def read_manifest(path):
    return read_regular_file(
        path, "manifest %s does not exist: is this a control-plane node set up by kubeadm? "
        "Give the manifest's path in the path option", "%s is not a regular file: give the manifest's path",
        manifest_rules.ManifestError)


def locate_config_file(options, manifest, container, flags, where):
    """Where the configuration file is: a dict with path (as the Pod sees it), host_path, exists and add_flag
    (True when --config must be added)."""
    current = component_flags.current_config_flag(flags, where)
    if current:
        pod_path = current
        host_path = component_flags.mounted_config_path(manifest, container, pod_path, where)
        if not os.path.isfile(host_path):
            raise manifest_rules.ManifestError(
                "%s: --config=%s (on the host %s) does not exist: the component cannot start like this; put the "
                "file back, or remove --config and let this module create the file" % (where, pod_path, host_path))
    else:
        pod_path = host_path = component_flags.new_config_path(options, where)
        if not os.path.isdir(os.path.dirname(host_path)):
            raise manifest_rules.ManifestError("config_file.path %s: directory %s does not exist on this host: choose a "
                                               "path in an existing directory" % (pod_path, os.path.dirname(host_path)))
    exists = os.path.isfile(host_path)
    if os.path.exists(host_path) and not exists:
        raise manifest_rules.ManifestError("%s is not a regular file: give config_file.path a file name" % host_path)
    return dict(path=pod_path, host_path=host_path, exists=exists, add_flag=not current)


def plan_config_file(options, manifest, container, flags, where):
    """The configuration file's part of the change (see component_flags.plan_config_text); reads the file."""
    location = locate_config_file(options, manifest, container, flags, where)
    text = read_text(location["host_path"]) if location["exists"] else ""
    return component_flags.plan_config_text(options, container, flags, location, text)


def plan(params):
    """Everything but writing: a dict with the manifest's current and new text, changed, the flags before
    and after, the container's name, what enable_dra added and the configuration file's plan."""
    path = params["path"]
    if params["backup"]:
        check_backup_dir(path, params["backup_dir"])
    if params["enable_dra"] and not params["kubernetes_version"]:
        raise manifest_rules.ManifestError("enable_dra needs kubernetes_version: give the component's version, e.g. v1.33.13")
    text = read_manifest(path)
    manifest = manifest_rules.load_manifest(text, path)
    target = manifest_rules.find_container(manifest, params["container"], path)
    container = target.get("name")
    flags = command_line.flags_dict(command_line.read_flags(target, path))
    wanted = component_flags.request(params, container, flags)
    config = None
    if params.get("config_file"):
        config = plan_config_file(params["config_file"], manifest, container, flags, path)
    errors = wanted["errors"] + component_flags.config_flag_errors(wanted["set_flags"], config, flags, params,
                                                                   container)
    if errors:
        raise manifest_rules.ManifestError("%s: nothing written: %s" % (path, "; ".join(errors)))
    planned = component_flags.plan_manifest(text, manifest, params, wanted, config)
    planned.update(container=container, added=wanted["added"], config=config)
    return planned


def clock_before_write():
    """This module process's start on the clock of process_start_time_seconds (None where there is no
    procfs): a component process started after the write reports at least this."""
    try:
        return procfs_start_time(read_text("/proc/stat"), read_text("/proc/self/stat"))
    except (IOError, OSError, ValueError, IndexError, StopIteration):
        return None


def write(module, planned, params, result):
    """Back up and write what changed, the configuration file first (the manifest change is what makes the
    kubelet restart the Pod); the backups' paths go into result."""
    config = planned["config"]
    if config is not None and config["changed"]:
        if params["backup"] and config["exists"]:
            result["config_file"]["backup_file"] = backup_file(config["host_path"], params["backup_dir"], params.get("backup_keep", DEFAULT_BACKUP_KEEP))
        write_atomically(module, config["host_path"], config["new_text"])
        if config["created"]:
            os.chmod(config["host_path"], 0o600)
    if planned["changed"]:
        if params["backup"]:
            result["backup_file"] = backup_file(params["path"], params["backup_dir"], params.get("backup_keep", DEFAULT_BACKUP_KEEP))
        write_atomically(module, params["path"], planned["new_text"])
