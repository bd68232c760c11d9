# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A changed static Pod manifest written back as text, changing as few lines as it can.

A flag change rewrites only the lines of the container's flag list (items that did not
change keep their exact text); a structural change (a volume, an annotation) writes the
manifest in kubeadm's layout, which for a file kubeadm wrote changes only the lines that
differ. Text that would not parse back to the intended manifest is never returned.

Pure functions on text and parsed YAML; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.control_plane.command_line import apply_to_manifest, flag_items
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import find_container, load_manifest, require_yaml, yaml


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
    require_yaml()
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
    new_text, changed, before, after, dummy = edit_manifest(
        text, load_manifest(text, where), container, set_flags, remove_flags, feature_gates, runtime_config, where)
    return new_text, changed, before, after


def edit_manifest(text, manifest, container=None, set_flags=None, remove_flags=None, feature_gates=None,
                  runtime_config=None, where="manifest"):
    """edit_manifest_text of a manifest already parsed (`manifest` is `text` parsed): returns (new text,
    changed, flags before, flags after, the new text parsed)."""
    new_manifest, changed, before, after = apply_to_manifest(
        manifest, container, set_flags, remove_flags, feature_gates, runtime_config, where)
    if not changed:
        return text, False, before, after, new_manifest
    target_name = find_container(manifest, container, where).get("name")
    field, dummy = flag_items(find_container(manifest, container, where), where)
    return render_manifest(text, new_manifest, target_name if container is not None else None, field), \
        True, before, after, new_manifest


def canonical_manifest(manifest):
    """A manifest as kubeadm writes it (sorted keys, block style, lists not indented).

    PyYAML's block dump with sorted keys reproduces kubeadm's files byte for byte, so a
    structural change to a kubeadm manifest written this way changes only its own lines.
    """
    require_yaml()
    return yaml.safe_dump(manifest, default_flow_style=False, sort_keys=True, width=1 << 20)


def render_structure(text, old_manifest, new_manifest):
    """Text for a manifest whose structure (not only a flag list) changed.

    A file in kubeadm's layout stays in it, so only the changed lines differ; any other
    layout is written in kubeadm's layout (comments are not kept).
    """
    if new_manifest == old_manifest:
        return text
    return canonical_manifest(new_manifest)
