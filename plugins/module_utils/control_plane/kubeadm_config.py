# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""kubeadm's ClusterConfiguration (the kubeadm-config ConfigMap) kept in step with the manifests.

`kubeadm upgrade` renders the static Pod manifests from the ClusterConfiguration in the
kubeadm-config ConfigMap (kube-system): a flag or a hostPath volume written into a manifest
and not into the ClusterConfiguration is gone after the next upgrade. This module merges
flags into a component's ``extraArgs`` (a map in kubeadm.k8s.io/v1beta3, a list of
``{name, value}`` in v1beta4 and later) and hostPath volumes into its ``extraVolumes``.

Entries already there keep their place, so a second merge of the same request changes
nothing and another tool's entries stay as they are. A volume whose mountPath the section
already mounts under another name is left out (two mounts at one path stop the Pod).

Pure functions on text and parsed YAML; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.dra.admin.plugins.module_utils.control_plane.command_line import flag_name, flag_text, render_map
from ansible_collections.dra.admin.plugins.module_utils.control_plane.config_file import load_config, render_config
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, gate_value,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import ManifestError

CONFIG_MAP_NAMESPACE = "kube-system"
CONFIG_MAP_NAME = "kubeadm-config"
DATA_KEY = "ClusterConfiguration"
KIND = "ClusterConfiguration"

# The ClusterConfiguration section of each control-plane component.
SECTIONS = {KUBE_APISERVER: "apiServer", KUBE_CONTROLLER_MANAGER: "controllerManager", KUBE_SCHEDULER: "scheduler"}

# kubeadm API versions whose extraArgs are a map; from v1beta4 on they are a list of {name, value}.
MAP_ARGS_VERSIONS = ("kubeadm.k8s.io/v1beta2", "kubeadm.k8s.io/v1beta3")

VOLUME_FIELDS = ("name", "hostPath", "mountPath")


def _check_component(component, option):
    if component not in SECTIONS:
        raise ManifestError("%s: %r is not a control-plane component kubeadm-config configures: use one of %s"
                            % (option, component, ", ".join(sorted(SECTIONS))))


def arg_value(name, value):
    """A requested extraArgs value as kubeadm keeps it: a string, None (remove the flag), or None for an
    empty map (nothing to carry; the flag is left as it is) -> (text, remove)."""
    if value is None:
        return None, True
    if isinstance(value, dict):
        return (render_map(dict((k, None if v is None else flag_text(v)) for k, v in value.items())) or None), False
    if isinstance(value, (list, tuple)):
        raise ManifestError("extra_args: --%s is given a list; kubeadm-config keeps one value per flag here: give "
                            "it as one string" % name)
    return flag_text(value), False


# Map flags whose every value must be true or false (a component refuses to start otherwise).
BOOLEAN_MAP_FLAGS = ("feature-gates", "runtime-config")


def map_value_error(component, flag, key, value):
    """Why one entry of a map flag (feature-gates, runtime-config) cannot be written, or None."""
    if value is None or flag not in BOOLEAN_MAP_FLAGS:
        return None
    try:
        gate_value(value)
    except ValueError:
        return ("extra_args.%s.%s: %s=%r, the value must be true or false (a null value removes the entry)"
                % (component, flag, key, value))
    return None


def normalize_args(extra_args):
    """{component: {flag: value}} checked: {component: ([(flag, text)], [flags to remove])}."""
    result = {}
    for component, flags in (extra_args or {}).items():
        _check_component(component, "extra_args")
        if not isinstance(flags, dict):
            raise ManifestError("extra_args.%s must be a mapping of flag names to values" % component)
        sets, removes = [], []
        for name, value in flags.items():
            bare = flag_name(name)
            for key, entry in (value.items() if isinstance(value, dict) else ()):
                error = map_value_error(component, bare, key, entry)
                if error:
                    raise ManifestError(error)
            text, remove = arg_value(bare, value)
            if remove:
                removes.append(bare)
            elif text is not None:
                sets.append((bare, text))
        result[component] = (sets, removes)
    return result


def normalize_volumes(extra_volumes):
    """{component: [volume]} checked: every volume a mapping with name, hostPath and mountPath."""
    result = {}
    for component, volumes in (extra_volumes or {}).items():
        _check_component(component, "extra_volumes")
        if not isinstance(volumes, list):
            raise ManifestError("extra_volumes.%s must be a list of volumes ({name, hostPath, mountPath, readOnly, "
                                "pathType})" % component)
        checked = []
        for index, volume in enumerate(volumes):
            missing = [f for f in VOLUME_FIELDS if not isinstance(volume, dict) or not volume.get(f)]
            if missing:
                raise ManifestError("extra_volumes.%s[%d] has no %s: give name, hostPath and mountPath"
                                    % (component, index, ", ".join(missing)))
            checked.append(dict(volume))
        result[component] = checked
    return result


def args_are_map(config, current):
    """Whether this ClusterConfiguration keeps extraArgs as a map (v1beta3) rather than a list (v1beta4)."""
    if isinstance(current, dict):
        return True
    if isinstance(current, list):
        return False
    return config.get("apiVersion") in MAP_ARGS_VERSIONS


def merge_args(current, sets, removes, as_map, where):
    """extraArgs with `sets` applied in place and `removes` dropped."""
    if as_map:
        merged = dict(current or {})
        for name in removes:
            merged.pop(name, None)
        merged.update(sets)
        return merged
    if any(not isinstance(item, dict) or "name" not in item for item in current or []):
        raise ManifestError("%s: extraArgs is not a list of {name, value}: fix the ClusterConfiguration in the "
                            "kubeadm-config ConfigMap first" % where)
    wanted = dict(sets)
    merged = []
    for item in current or []:
        if item["name"] in removes:
            continue
        merged.append({"name": item["name"], "value": wanted[item["name"]]} if item["name"] in wanted else item)
    present = set(item["name"] for item in current or [])
    merged.extend({"name": name, "value": value} for name, value in sets if name not in present)
    return merged


def merge_volumes(current, volumes):
    """(extraVolumes with `volumes` merged by name, the volumes left out because their mountPath is taken)."""
    by_name = dict((v["name"], v) for v in volumes)
    merged = [by_name.get(item.get("name"), item) if isinstance(item, dict) else item for item in current or []]
    present = set(item.get("name") for item in current or [] if isinstance(item, dict))
    taken = set(item.get("mountPath") for item in merged if isinstance(item, dict))
    skipped = []
    for volume in volumes:
        if volume["name"] in present:
            continue
        if volume["mountPath"] in taken:
            skipped.append(volume)
            continue
        merged.append(volume)
        taken.add(volume["mountPath"])
    return merged, skipped


def merge_cluster_configuration(config, extra_args=None, extra_volumes=None, where=DATA_KEY):
    """(new ClusterConfiguration (a copy), volumes left out) with the flags and volumes merged per component."""
    args = normalize_args(extra_args)
    volumes = normalize_volumes(extra_volumes)
    result = copy.deepcopy(config)
    skipped = {}
    for component, section_name in SECTIONS.items():
        sets, removes = args.get(component, ([], []))
        wanted_volumes = volumes.get(component) or []
        if not (sets or removes or wanted_volumes):
            continue
        section = dict(result.get(section_name) or {})
        if sets or removes:
            current = section.get("extraArgs")
            merged = merge_args(current, sets, removes, args_are_map(result, current), "%s %s" % (where, section_name))
            if merged or current is not None:
                section["extraArgs"] = merged
        if wanted_volumes:
            section["extraVolumes"], left_out = merge_volumes(section.get("extraVolumes"), wanted_volumes)
            if left_out:
                skipped[component] = left_out
        result[section_name] = section
    return result, skipped


def edit_cluster_configuration_text(text, extra_args=None, extra_volumes=None, where=DATA_KEY):
    """The ClusterConfiguration's text with the merge applied: (new text, changed, before, after, volumes left out).

    Only the top-level entries that change are rewritten; the others keep their exact text.
    """
    if text is None:
        raise ManifestError("%s has no %s key: it is not the ConfigMap `kubeadm init` writes; fix or remove it, or "
                            "switch the role's kubeadm-config update off" % (where, DATA_KEY))
    before = load_config(text, KIND, where)
    after, skipped = merge_cluster_configuration(before, extra_args, extra_volumes, where)
    if after == before:
        return text, False, before, after, skipped
    return render_config(text, before, after), True, before, after, skipped
