# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A component's command line as data: its --flags read, set and removed.

kubeadm writes every flag of kube-apiserver, kube-controller-manager and
kube-scheduler as one ``--name=value`` item of the container's ``command``
list. This module reads those items as an ordered map, sets and removes
flags, and treats ``--feature-gates`` and ``--runtime-config`` as maps
(``A=true,B=false``) so a change merges into what is there instead of
replacing the string. Untouched flags keep their place and their exact text.

Pure functions on parsed YAML and lists of (name, value); no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from collections import OrderedDict

from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import ManifestError, find_container


MAP_FLAGS = ("feature-gates", "runtime-config")


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
