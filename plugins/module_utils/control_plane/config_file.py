# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A component's configuration file (KubeletConfiguration, KubeSchedulerConfiguration) merged as data.

Keys are deep-merged into what the file has (a null removes a key), feature gates are read
as booleans, and only the top-level entries that changed are rewritten: the rest of the
file keeps its exact text.

Pure functions on text and parsed YAML; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import gate_value
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import ManifestError, require_yaml, yaml
from ansible_collections.dra.admin.plugins.module_utils.common.merge import deep_merge


def normalize_gates(gates):
    """Feature gate values as booleans (read by releases.catalog.gate_value); None kept (it removes the gate)."""
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
    require_yaml()
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
    require_yaml()
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
