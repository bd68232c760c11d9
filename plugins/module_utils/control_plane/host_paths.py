# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A static Pod's hostPath mounts: where a path the container sees lives on the host, and adding a mount.

Pure functions on parsed YAML; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import ManifestError, find_container


def _under(path, directory):
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory + "/") or directory == "/"


def host_path_for(manifest, container, path, where="manifest"):
    """Where a path the container sees lives on the host, through its hostPath volume mounts.

    Returns the host path, or None when no hostPath mount covers `path` (the longest mount path wins).
    """
    target = find_container(manifest, container, where)
    volumes = dict((v.get("name"), v) for v in (manifest.get("spec") or {}).get("volumes") or []
                   if isinstance(v, dict))
    best = None
    for mount in target.get("volumeMounts") or []:
        if not isinstance(mount, dict) or not isinstance(mount.get("mountPath"), str):
            continue
        mount_path = mount["mountPath"]
        if not _under(path, mount_path):
            continue
        host = (volumes.get(mount.get("name")) or {}).get("hostPath")
        if not isinstance(host, dict) or not isinstance(host.get("path"), str):
            continue
        if best is None or len(mount_path) > len(best[0]):
            best = (mount_path, host["path"])
    if best is None:
        return None
    mount_path, host = best
    rest = path[len(mount_path.rstrip("/")):].lstrip("/") if path != mount_path else ""
    return host.rstrip("/") + "/" + rest if rest else host


def add_host_path_mount(manifest, container, name, host_path, mount_path, path_type="File", read_only=True,
                        where="manifest"):
    """Mount a host file or directory into the container: (new manifest (a copy), changed).

    Nothing changes when a hostPath mount already makes `mount_path` the same host path. A volume
    or mount of that name used for something else, or a mount at `mount_path` from elsewhere, is
    refused (the Pod would not start, or would read another file).
    """
    if host_path_for(manifest, container, mount_path, where) == host_path:
        return copy.deepcopy(manifest), False
    result = copy.deepcopy(manifest)
    target = find_container(result, container, where)
    spec = result["spec"]
    volumes = spec.get("volumes")
    mounts = target.get("volumeMounts")
    if volumes is not None and not isinstance(volumes, list) or mounts is not None and not isinstance(mounts, list):
        raise ManifestError("%s: spec.volumes or the container's volumeMounts is not a list: expected a static "
                            "Pod manifest as kubeadm writes it" % where)
    volumes = spec.setdefault("volumes", []) if volumes is None else volumes
    mounts = target.setdefault("volumeMounts", []) if mounts is None else mounts
    for volume in volumes:
        if isinstance(volume, dict) and volume.get("name") == name:
            raise ManifestError("%s already has a volume named %r for something else: choose another volume name"
                                % (where, name))
    for mount in mounts:
        if isinstance(mount, dict) and (mount.get("name") == name or mount.get("mountPath") == mount_path):
            raise ManifestError(
                "%s: container %r already mounts %r at %s, not host path %s: remove that mount or point the file "
                "elsewhere" % (where, target.get("name"), mount.get("name"), mount.get("mountPath"), host_path))

    def insert(items, item):
        names = [i.get("name") for i in items if isinstance(i, dict)]
        if names == sorted(names, key=str):  # kubeadm keeps them sorted by name: keep it so
            index = len(items)
            while index > 0 and str(items[index - 1].get("name")) > name:
                index -= 1
            items.insert(index, item)
        else:
            items.append(item)

    mount = {"mountPath": mount_path, "name": name}
    if read_only:
        mount["readOnly"] = True
    insert(mounts, mount)
    insert(volumes, {"hostPath": {"path": host_path, "type": path_type}, "name": name})
    return result, True
