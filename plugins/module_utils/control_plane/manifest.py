# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A static Pod manifest as data: parse it, find its container, set a Pod annotation.

kubeadm writes kube-apiserver, kube-controller-manager and kube-scheduler as static
Pods under /etc/kubernetes/manifests. Every error of this family of modules
(`control_plane.command_line`, `control_plane.manifest_text`, `control_plane.config_file`, `control_plane.host_paths`, `control_plane.kubeadm_config`)
is a ManifestError whose message says what is wrong and what to do.

Pure functions on parsed YAML (dicts and lists) and on text; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - reported by the modules
    yaml = None
    HAS_YAML = False


class ManifestError(DraAdminError, ValueError):
    """A manifest or a request this module does not understand; the message says what and what to do."""


def require_yaml():
    if yaml is None:
        raise ManifestError("PyYAML is required to read manifests")


def load_manifest(text, where="manifest"):
    require_yaml()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError("%s is not valid YAML: %s" % (where, exc))
    if data is None:
        raise ManifestError("%s is empty: expected a static Pod manifest" % where)
    return data


def find_container(manifest, container=None, where="manifest"):
    """The container dict of a static pod manifest; `container` is its name, needed when there are several."""
    if not isinstance(manifest, dict):
        raise ManifestError("%s is not a YAML mapping: expected a static Pod manifest" % where)
    if manifest.get("kind", "Pod") != "Pod":
        raise ManifestError("%s has kind %r: expected a static Pod manifest (kind: Pod)" % (where, manifest.get("kind")))
    spec = manifest.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise ManifestError("%s has no spec.containers list: expected a static Pod manifest such as "
                            "/etc/kubernetes/manifests/kube-apiserver.yaml" % where)
    if any(not isinstance(c, dict) for c in containers):
        raise ManifestError("%s: an entry of spec.containers is not a mapping" % where)
    if container is None:
        if len(containers) > 1:
            raise ManifestError("%s has %d containers (%s): name the one to change with the container option"
                                % (where, len(containers), ", ".join(str(c.get("name")) for c in containers)))
        return containers[0]
    for candidate in containers:
        if candidate.get("name") == container:
            return candidate
    raise ManifestError("%s has no container named %r (it has %s)"
                        % (where, container, ", ".join(str(c.get("name")) for c in containers)))


def set_annotation(manifest, key, value):
    """Set one Pod annotation: (new manifest (a copy), changed). A None value removes it."""
    result = copy.deepcopy(manifest)
    metadata = result.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise ManifestError("manifest metadata is not a mapping: expected a static Pod manifest")
    annotations = metadata.get("annotations") or {}
    if value is None:
        if key not in annotations:
            return result, False
        annotations.pop(key)
    else:
        if annotations.get(key) == str(value):
            return result, False
        annotations[key] = str(value)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return result, True
