# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""component_flags' change worked out on data: the request checked against the version catalog and
the QPS/Burst rules, the configuration file's merge, the manifest's new text (with the file's mount
and digest annotation) and the module's result.

Pure functions on parsed manifests, flags and text; no IO (the files are read and written by
component_flags.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

from ansible_collections.dra.admin.plugins.module_utils.control_plane import command_line
from ansible_collections.dra.admin.plugins.module_utils.control_plane import config_file
from ansible_collections.dra.admin.plugins.module_utils.control_plane import host_paths
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest as manifest_rules
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest_text
from ansible_collections.dra.admin.plugins.module_utils.control_plane import tuning
from ansible_collections.dra.admin.plugins.module_utils.common.merge import deep_merge
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    KUBE_SCHEDULER, dra_additions, validate_dra_gates, validate_gates, validate_runtime_config, validate_without_version,
)

CONFIG_ANNOTATION = "dra.admin/config-sha256"


def validate_request(version, feature_gates, runtime_config, enable_dra=False):
    """Catalog errors for the requested gates and runtime-config (removals are never refused).

    With enable_dra the gates are judged together with what DRA needs, as the catalog's
    validate_dra_gates does for the feature_gates role and dra_version_info."""
    gates = dict((k, v) for k, v in feature_gates.items() if v is not None)
    entries = dict((k, v) for k, v in runtime_config.items() if v is not None)
    gate_errors = validate_dra_gates(version, gates) if enable_dra else validate_gates(version, gates)
    return gate_errors + validate_runtime_config(version, entries)


def request(params, container, flags):
    """The flags to write and what is wrong with them: a dict with set_flags, feature_gates, runtime_config,
    added (what enable_dra added: (gates, runtime-config entries)) and errors."""
    version = params["kubernetes_version"]
    feature_gates = dict(params["feature_gates"])
    runtime_config = dict(params["runtime_config"])
    set_flags = dict((command_line.flag_name(k), v) for k, v in params["set_flags"].items())
    added = ({}, {})
    if params["enable_dra"]:
        added = dra_additions(version, container, feature_gates)
        for name, value in added[0].items():
            feature_gates.setdefault(name, value)
        for key, value in added[1].items():
            runtime_config.setdefault(key, value)
    if version:
        errors = list(validate_request(version, feature_gates, runtime_config, params["enable_dra"]))
    else:
        errors = list(validate_without_version(feature_gates, runtime_config))
    errors.extend(tuning.flag_rate_errors(container, set_flags, flags, params["path"]))
    return dict(set_flags=set_flags, feature_gates=feature_gates, runtime_config=runtime_config, added=added,
                errors=errors)


def current_config_flag(flags, where):
    """The file --config names, or None when there is no --config; several or an empty one are refused."""
    current = flags.get("config")
    if isinstance(current, list) or (current is None and "config" in flags):
        raise manifest_rules.ManifestError("%s: --config is given %s: expected one --config=<file>"
                                           % (where, "several times" if isinstance(current, list) else "without a file"))
    return current or None


def mounted_config_path(manifest, container, pod_path, where):
    """Where --config's file is on the host, through the manifest's hostPath mounts."""
    host_path = host_paths.host_path_for(manifest, container, pod_path, where)
    if host_path is None:
        raise manifest_rules.ManifestError(
            "%s: --config=%s is not mounted from the host (no hostPath volume mount covers it), so its "
            "content cannot be changed here: mount the file with a hostPath volume, or remove --config and "
            "let this module create the file" % (where, pod_path))
    return host_path


def new_config_path(options, where):
    """config_file.path, checked, for a manifest without --config."""
    pod_path = options.get("path")
    if not pod_path:
        raise manifest_rules.ManifestError(
            "%s has no --config flag: give config_file.path, where the file is to be created "
            "(e.g. /etc/kubernetes/kube-scheduler-config.yaml)" % where)
    if not os.path.isabs(pod_path):
        raise manifest_rules.ManifestError("config_file.path %s is not an absolute path: give it as the Pod sees it, "
                                           "e.g. /etc/kubernetes/kube-scheduler-config.yaml" % pod_path)
    return pod_path


def plan_config_text(options, container, flags, location, text):
    """The configuration file's part of the change, from its current text ("" and location["exists"] False for a
    new file). location: path (as the Pod sees it), host_path, exists, add_flag.

    Keys: those of location, created, text, new_text, changed, config, errors.
    """
    exists = location["exists"]
    merge = dict(options.get("merge") or {})
    if not exists:
        base = tuning.scheduler_config_from_flags(flags, options["api_version"])
        merge = deep_merge(base, merge)
    host_path = location["host_path"]
    new_text, changed, dummy, after = config_file.edit_config_text(text, options["kind"], merge, where=host_path)
    planned = dict(location)
    planned.update(created=not exists, text=text, new_text=new_text, changed=changed or not exists, config=after,
                   errors=tuning.config_rate_errors(container, after, host_path))
    return planned


def config_flag_errors(wanted, config, flags, params, container):
    """What is wrong with the flags once the configuration file is part of the change; adds --config to the
    wanted flags when the file is new."""
    path = params["path"]
    errors = []
    if config is not None:
        errors.extend(config["errors"])
        if config["add_flag"]:
            if "config" in wanted or "config" in params["remove_flags"]:
                errors.append("%s: --config is managed through config_file: leave it out of set_flags and "
                              "remove_flags" % path)
            wanted["config"] = config["path"]
    if container == KUBE_SCHEDULER and (config or flags.get("config")):
        ignored = sorted(n for n in ("kube-api-qps", "kube-api-burst") if n in wanted)
        if ignored:
            errors.append("%s: kube-scheduler ignores --%s once --config is given: set clientConnection.qps/burst "
                          "through config_file.merge instead" % (path, " and --".join(ignored)))
    return errors


def with_config_file(new_text, new_manifest, changed, config, params, path):
    """The manifest's new text with the configuration file's mount (when the file is new) and its digest
    annotation (so a change to the file alone restarts the Pod): (new text, changed).

    new_manifest is new_text parsed (edit_manifest's manifest)."""
    structured = new_manifest
    if config["add_flag"]:
        structured, dummy = host_paths.add_host_path_mount(
            structured, params["container"], params["config_file"]["volume_name"], config["host_path"],
            config["path"], "File", True, path)
    digest = hashlib.sha256(config["new_text"].encode("utf-8")).hexdigest()
    structured, dummy = manifest_rules.set_annotation(structured, CONFIG_ANNOTATION, digest)
    if structured != new_manifest:
        return manifest_text.render_structure(new_text, new_manifest, structured), True
    return new_text, changed


def plan_manifest(text, manifest, params, wanted, config):
    """The manifest's new text: a dict with text, new_text, changed, before and after (the flags)."""
    path = params["path"]
    new_text, changed, before, after, new_manifest = manifest_text.edit_manifest(
        text, manifest, params["container"], wanted["set_flags"], params["remove_flags"],
        wanted["feature_gates"], wanted["runtime_config"], where=path)
    if config is not None:
        new_text, changed = with_config_file(new_text, new_manifest, changed, config, params, path)
    return dict(text=text, new_text=new_text, changed=changed, before=before, after=after)


def map_value(flags, name):
    value = flags.get(name)
    if isinstance(value, list):
        value = ",".join(v for v in value if v)
    return dict(command_line.parse_map(value or ""))


def config_result(config):
    return dict(path=config["path"], host_path=config["host_path"], created=config["created"],
                changed=config["changed"], config=config["config"], backup_file="")


def diff(planned, path):
    """The diff of the configuration file and the manifest: one dict, or a list of two."""
    config = planned["config"]
    diffs = []
    if config is not None and config["changed"]:
        diffs.append(dict(before=config["text"], after=config["new_text"],
                          before_header=config["host_path"] if config["exists"] else "/dev/null",
                          after_header=config["host_path"]))
    if planned["changed"]:
        diffs.append(dict(before=planned["text"], after=planned["new_text"], before_header=path, after_header=path))
    return diffs[0] if len(diffs) == 1 else diffs


def result(planned, path, clock, with_diff=False):
    """The module's result for a plan (backup_file and config_file.backup_file are filled in by the write)."""
    after, before, config = planned["after"], planned["before"], planned["config"]
    changed = planned["changed"] or bool(config and config["changed"])
    outcome = dict(changed=changed, path=path, container=planned["container"], flags=dict(after),
                   flags_before=dict(before),
                   feature_gates=map_value(after, "feature-gates"),
                   runtime_config=map_value(after, "runtime-config"),
                   dra_feature_gates=planned["added"][0], dra_runtime_config=planned["added"][1],
                   clock_before_write=clock)
    if config is not None:
        outcome["config_file"] = config_result(config)
    if changed and with_diff:
        outcome["diff"] = diff(planned, path)
    return outcome
