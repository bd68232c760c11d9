# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A component's command line inside a static pod manifest, read and changed as data.

kubeadm writes every flag of kube-apiserver, kube-controller-manager and
kube-scheduler as one ``--name=value`` item of the container's ``command``
list. This module reads those items as an ordered map, sets and removes
flags, and treats ``--feature-gates`` and ``--runtime-config`` as maps
(``A=true,B=false``) so a change merges into what is there instead of
replacing the string. Untouched flags keep their place and their exact text.

Pure functions on parsed YAML (dicts and lists) and on manifest text; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from collections import OrderedDict

from ansible_collections.dra.admin.plugins.module_utils._gates import gate_value
from ansible_collections.dra.admin.plugins.module_utils._merge import deep_merge

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - reported by the modules
    yaml = None
    HAS_YAML = False

MAP_FLAGS = ("feature-gates", "runtime-config")


class ManifestError(ValueError):
    """A manifest or a request this module does not understand; the message says what and what to do."""


def flag_name(name):
    """'--kube-api-qps' or 'kube-api-qps' -> 'kube-api-qps'."""
    text = str(name).strip()
    bare = text.lstrip("-")
    if not bare or "=" in bare or " " in bare:
        raise ManifestError("%r is not a flag name: give it as kube-api-qps or --kube-api-qps" % (name,))
    return bare


def flag_text(value):
    """A flag value as the command line spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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


def flag_items(container, where="manifest"):
    """(field, prefix_length): where the container keeps its flags and how many leading items are not flags.

    kubeadm: ``command: [kube-apiserver, --flag=value, ...]`` -> ('command', 1).
    A manifest that keeps them in ``args`` (and has no flag in ``command``) -> ('args', 0).
    """
    command = container.get("command")
    args = container.get("args")
    for field, value in (("command", command), ("args", args)):
        if value is not None and (not isinstance(value, list) or any(not isinstance(i, str) for i in value)):
            raise ManifestError("%s: container %r has a %s that is not a list of strings"
                                % (where, container.get("name"), field))
    command_has_flags = bool(command) and any(i.startswith("-") for i in command[1:])
    args_has_flags = bool(args) and any(i.startswith("-") for i in args)
    if command_has_flags and args_has_flags:
        raise ManifestError("%s: container %r has flags in both command and args; this module changes one "
                            "list only: move the flags into command" % (where, container.get("name")))
    if command:
        if args_has_flags:
            return "args", 0
        if command[0].startswith("-"):
            raise ManifestError("%s: container %r has a command that starts with a flag (%s): expected the "
                                "binary first" % (where, container.get("name"), command[0]))
        return "command", 1
    if args_has_flags:
        return "args", 0
    raise ManifestError("%s: container %r has no command: expected the component's binary followed by its "
                        "--flags, as kubeadm writes them" % (where, container.get("name")))


def parse_flag(item, where="manifest"):
    """'--name=value' -> ('name', 'value'); '--name' -> ('name', None)."""
    if not item.startswith("--") or len(item) < 3:
        raise ManifestError("%s: %r is not a --flag or --flag=value item; this module understands only "
                            "those forms (one flag per list item)" % (where, item))
    name, sep, value = item[2:].partition("=")
    return name, (value if sep else None)


def render_flag(name, value):
    return "--%s" % name if value is None else "--%s=%s" % (name, value)


def read_flags(container, where="manifest"):
    """The container's flags as a list of (name, value) in command-line order."""
    field, skip = flag_items(container, where)
    return [parse_flag(item, where) for item in container[field][skip:]]


def flags_dict(entries):
    """(name, value) pairs as an ordered map; a flag given several times maps to a list of its values."""
    result = OrderedDict()
    for name, value in entries:
        if name in result:
            previous = result[name]
            result[name] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            result[name] = value
    return result


def parse_map(text):
    """'A=true,B=false' -> OrderedDict; an entry without '=' maps to None (runtime-config 'api/all')."""
    result = OrderedDict()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        result[key.strip()] = value.strip() if sep else None
    return result


def render_map(entries):
    return ",".join(key if value is None else "%s=%s" % (key, value) for key, value in entries.items())


def _same(old, new):
    if old is None or new is None:
        return old is new
    return str(old).strip().lower() == str(new).strip().lower()


def merge_map(text, updates):
    """Merge `updates` into a map flag's value; a None update removes the key.

    Existing keys keep their place (and their spelling when the value does not change);
    new keys are appended in sorted order. Returns the new text, or None when the map is empty.
    """
    entries = parse_map(text)
    for key in sorted(updates, key=str):
        value = updates[key]
        if value is None:
            entries.pop(key, None)
            continue
        rendered = flag_text(value)
        if key in entries and _same(entries[key], rendered):
            continue
        entries[key] = rendered
    return render_map(entries) or None


def _value_list(value):
    return [flag_text(v) if v is not None else None for v in value] if isinstance(value, list) \
        else [flag_text(value) if value is not None else None]


def change_flags(entries, set_flags=None, remove_flags=None, map_updates=None):
    """Apply changes to a list of (name, value); return the new list.

    set_flags: name -> value (None: bare flag; list: the flag repeated once per value).
    remove_flags: names to drop. map_updates: map flag name -> {key: value or None}.
    A flag that is set keeps its place; a new one goes where sorting puts it when the existing
    flags are sorted (as kubeadm writes them), otherwise at the end in sorted order.
    """
    set_flags = dict((flag_name(k), v) for k, v in (set_flags or {}).items())
    remove = set(flag_name(n) for n in (remove_flags or []))
    map_updates = dict((flag_name(k), v) for k, v in (map_updates or {}).items())
    for name in set_flags:
        if name in MAP_FLAGS:
            raise ManifestError("set --%s with the %s option, which merges it as a map instead of replacing "
                                "the whole string" % (name, name.replace("-", "_")))
        if name in remove:
            raise ManifestError("flag --%s is both set and removed: keep it in one of set_flags, remove_flags" % name)
    for name in map_updates:
        if name not in MAP_FLAGS:
            raise ManifestError("--%s is not a map flag (those are %s)" % (name, ", ".join(MAP_FLAGS)))
        if name in remove:
            raise ManifestError("flag --%s is both merged and removed: keep it in one of them" % name)

    result = []
    placed = set()
    for name, value in entries:
        if name in remove:
            continue
        if name in set_flags:
            if name not in placed:
                result.extend((name, v) for v in _value_list(set_flags[name]))
                placed.add(name)
            continue
        if name in map_updates:
            if name in placed:
                continue
            merged = merge_map(",".join(v for n, v in entries if n == name and v), map_updates[name])
            if merged is not None:
                result.append((name, merged))
            placed.add(name)
            continue
        result.append((name, value))
    new_entries = [(name, v) for name in sorted(set(set_flags) - placed) for v in _value_list(set_flags[name])]
    for name in sorted(set(map_updates) - placed):
        merged = merge_map(None, map_updates[name])
        if merged is not None:
            new_entries.append((name, merged))
    names = [name for name, dummy in entries]
    keep_sorted = names == sorted(names)  # kubeadm writes flags sorted: keep it so
    for entry in sorted(new_entries, key=lambda e: e[0]) if keep_sorted else new_entries:
        if keep_sorted:
            index = len(result)
            while index > 0 and result[index - 1][0] > entry[0]:
                index -= 1
            result.insert(index, entry)
        else:
            result.append(entry)
    return result


def apply_to_manifest(manifest, container=None, set_flags=None, remove_flags=None, feature_gates=None,
                      runtime_config=None, where="manifest"):
    """Change a container's flags in a parsed manifest.

    Returns (new manifest (a copy), changed, flags before, flags after); the flags as flags_dict().
    """
    target = find_container(manifest, container, where)
    field, skip = flag_items(target, where)
    before = read_flags(target, where)
    map_updates = {}
    if feature_gates:
        map_updates["feature-gates"] = feature_gates
    if runtime_config:
        map_updates["runtime-config"] = runtime_config
    after = change_flags(before, set_flags, remove_flags, map_updates)
    new_items = list(target[field][:skip]) + [render_flag(n, v) for n, v in after]
    changed = new_items != target[field]
    result = copy.deepcopy(manifest)
    if changed:
        find_container(result, container, where)[field] = new_items
    return result, changed, flags_dict(before), flags_dict(after)


# ---- text: change only the lines of the flag list, keep the rest of the file byte for byte ----

def _require_yaml():
    if yaml is None:
        raise ManifestError("PyYAML is required to read manifests")


def load_manifest(text, where="manifest"):
    _require_yaml()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError("%s is not valid YAML: %s" % (where, exc))
    if data is None:
        raise ManifestError("%s is empty: expected a static Pod manifest" % where)
    return data


def _mapping_value(node, key):
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == key:
            return value_node
    return None


def _sequence_node(text, container, field):
    """The YAML node of the container's flag list, or None when it cannot be located safely."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    containers = _mapping_value(_mapping_value(root, "spec"), "containers")
    if not isinstance(containers, yaml.SequenceNode):
        return None
    candidates = [c for c in containers.value if isinstance(c, yaml.MappingNode)]
    if container is not None:
        candidates = [c for c in candidates if getattr(_mapping_value(c, "name"), "value", None) == container]
    if len(candidates) != 1:
        return None
    node = _mapping_value(candidates[0], field)
    if not isinstance(node, yaml.SequenceNode) or node.flow_style or not node.value:
        return None
    if any(not isinstance(item, yaml.ScalarNode) for item in node.value):
        return None
    return node


def _scalar_text(value):
    """One list item's text as YAML would write it on one line (plain when it can be)."""
    dumped = yaml.safe_dump([value], default_flow_style=False, width=1 << 20)
    return dumped[2:].rstrip("\n")


def render_manifest(text, new_manifest, container, field):
    """The manifest text with only the container's flag list rewritten.

    Items that did not change keep their original text; other lines are untouched.
    Falls back to dumping the whole document when the list is not a plain block sequence.
    """
    _require_yaml()
    node = _sequence_node(text, container, field)
    items = find_container(new_manifest, container)[field]
    if node is None:
        return yaml.safe_dump(new_manifest, default_flow_style=False, sort_keys=False)
    lines = text.splitlines(True)
    first, last = node.value[0], node.value[-1]
    start_line = first.start_mark.line
    end_line = last.end_mark.line
    if last.end_mark.column == 0:  # a block scalar ends at the start of the next line
        end_line -= 1
    dash_line = lines[start_line]
    indent = dash_line[:len(dash_line) - len(dash_line.lstrip())]
    if not dash_line.lstrip().startswith("- ") or end_line >= len(lines):
        return yaml.safe_dump(new_manifest, default_flow_style=False, sort_keys=False)
    original = {}  # item value -> its line, for items written on one line
    for item in node.value:
        if item.start_mark.line == item.end_mark.line:
            original.setdefault(item.value, item.start_mark.line)
    new_lines = []
    for value in items:
        line_no = original.get(value)
        if line_no is not None and lines[line_no].strip().startswith("- "):
            new_lines.append(lines[line_no] if lines[line_no].endswith("\n") else lines[line_no] + "\n")
        else:
            new_lines.append("%s- %s\n" % (indent, _scalar_text(value)))
    tail = lines[end_line + 1:]
    if not lines[end_line].endswith("\n") and not tail:
        new_lines[-1] = new_lines[-1].rstrip("\n")
    result = "".join(lines[:start_line] + new_lines + tail)
    if yaml.safe_load(result) != new_manifest:  # never write text that does not say what was meant
        return yaml.safe_dump(new_manifest, default_flow_style=False, sort_keys=False)
    return result


def edit_manifest_text(text, container=None, set_flags=None, remove_flags=None, feature_gates=None,
                       runtime_config=None, where="manifest"):
    """Text in, text out: returns (new text, changed, flags before, flags after)."""
    manifest = load_manifest(text, where)
    new_manifest, changed, before, after = apply_to_manifest(
        manifest, container, set_flags, remove_flags, feature_gates, runtime_config, where)
    if not changed:
        return text, False, before, after
    target_name = find_container(manifest, container, where).get("name")
    field, dummy = flag_items(find_container(manifest, container, where), where)
    return render_manifest(text, new_manifest, target_name if container is not None else None, field), \
        True, before, after


# ---- config files (KubeletConfiguration, KubeSchedulerConfiguration): merge keys, keep the layout ----

def normalize_gates(gates):
    """Feature gate values as booleans (read by _gates.gate_value); None kept (it removes the gate)."""
    result = {}
    for name, value in (gates or {}).items():
        if value is None:
            result[name] = None
            continue
        try:
            result[name] = gate_value(value)
        except ValueError:
            raise ManifestError("feature gate %s=%r: the value must be true or false" % (name, value))
    return result


def load_config(text, kind, where="config file"):
    """A component config file as a dict; refuses another kind or a non-mapping."""
    _require_yaml()
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ManifestError("%s is not valid YAML: %s" % (where, exc))
    if not isinstance(data, dict):
        raise ManifestError("%s is not a YAML mapping: expected a %s" % (where, kind))
    if data.get("kind", kind) != kind:
        raise ManifestError("%s has kind %r: expected %s" % (where, data.get("kind"), kind))
    return data


def _top_level_ranges(text):
    """key -> (first line, line after the entry) for each top-level key of a block mapping, or None."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return None
    lines = text.splitlines(True)
    starts = [(key.value, key.start_mark.line) for key, dummy in root.value
              if isinstance(key, yaml.ScalarNode) and key.start_mark.column == 0]
    if len(starts) != len(root.value):
        return None
    ranges = {}
    for index, (key, line) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(lines)
        ranges[key] = (line, end)
    return ranges


def _dump_entry(key, value):
    return yaml.safe_dump({key: value}, default_flow_style=False, sort_keys=True, width=1 << 20)


def render_config(text, old, new):
    """`text` with only the top-level entries that differ between `old` and `new` rewritten.

    Entries that did not change keep their exact text; a new entry goes where sorting puts it when
    the file's keys are sorted (as kubeadm writes them), otherwise at the end.
    """
    _require_yaml()
    ranges = _top_level_ranges(text) if text.strip() else None
    if ranges is None or list(ranges) != list(old):
        return yaml.safe_dump(new, default_flow_style=False, sort_keys=True)
    lines = text.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    keys_sorted = list(ranges) == sorted(ranges)
    blocks = []  # (key, text)
    for key, (start, end) in ranges.items():
        if key not in new:
            continue
        block = "".join(lines[start:end])
        blocks.append((key, block if new[key] == old[key] else _dump_entry(key, new[key])))
    for key in sorted(k for k in new if k not in old):
        entry = (key, _dump_entry(key, new[key]))
        if keys_sorted:
            index = len(blocks)
            while index > 0 and blocks[index - 1][0] > key:
                index -= 1
            blocks.insert(index, entry)
        else:
            blocks.append(entry)
    head = "".join(lines[:min(start for start, dummy in ranges.values())]) if ranges else ""
    result = head + "".join(block for dummy, block in blocks)
    if yaml.safe_load(result) != new:
        return yaml.safe_dump(new, default_flow_style=False, sort_keys=True)
    return result


def edit_config_text(text, kind, merge=None, feature_gates=None, where="config file"):
    """Merge keys (and featureGates) into a component config file's text.

    Returns (new text, changed, before, after) with before/after as parsed data.
    """
    before = load_config(text, kind, where)
    updates = dict(merge or {})
    if "featureGates" in updates and feature_gates:
        raise ManifestError("give feature gates either in feature_gates or as merge.featureGates, not both")
    if feature_gates:
        updates["featureGates"] = normalize_gates(feature_gates)
    elif isinstance(updates.get("featureGates"), dict):
        updates["featureGates"] = normalize_gates(updates["featureGates"])
    after = deep_merge(before, updates)
    if isinstance(after.get("featureGates"), dict) and not after["featureGates"]:
        after.pop("featureGates")
    if after == before:
        return text, False, before, after
    return render_config(text, before, after), True, before, after


# ---- the rest of a static Pod: hostPath mounts and Pod annotations ----

def canonical_manifest(manifest):
    """A manifest as kubeadm writes it (sorted keys, block style, lists not indented).

    PyYAML's block dump with sorted keys reproduces kubeadm's files byte for byte, so a
    structural change to a kubeadm manifest written this way changes only its own lines.
    """
    _require_yaml()
    return yaml.safe_dump(manifest, default_flow_style=False, sort_keys=True, width=1 << 20)


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


def render_structure(text, old_manifest, new_manifest):
    """Text for a manifest whose structure (not only a flag list) changed.

    A file in kubeadm's layout stays in it, so only the changed lines differ; any other
    layout is written in kubeadm's layout (comments are not kept).
    """
    if new_manifest == old_manifest:
        return text
    return canonical_manifest(new_manifest)
