# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A kubelet's feature gates as its host holds them: the KubeletConfiguration file (``--config``), the drop-in
files of ``--config-dir`` and ``--feature-gates`` on its command line, merged as the kubelet merges them.

The kubelet reads the file, merges the drop-ins over it in file-name order (a map such as ``featureGates`` key by
key), then parses its command line again over the result: a gate given by ``--feature-gates`` wins, the gates the
files set and the flag does not stay (cmd/kubelet/app/server.go, kubeletConfigFlagPrecedence). ``--feature-gates``
given twice accumulates, the later value of a gate winning.

Pure: the command line comes in as its arguments (``/proc/<pid>/cmdline`` split at NUL), the files as text. Read on
the host by ``upgrade/kubelet_gates_service.py`` (module ``dra_kubelet_gates_info``); judged by ``upgrade/checks``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.control_plane.command_line import parse_map
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import require_yaml, yaml

KUBELET_CONFIG_KIND = "KubeletConfiguration"
DROP_IN_SUFFIX = ".conf"
# The flags read; each takes a value, given as --name=value or --name value.
VALUE_FLAGS = ("config", "config-dir", "feature-gates", "hostname-override")


def command_line(cmdline):
    """The arguments of /proc/<pid>/cmdline's bytes or text (NUL-separated), program name included."""
    if isinstance(cmdline, bytes):
        cmdline = cmdline.decode("utf-8", "replace")
    return [part for part in (cmdline or "").split("\0") if part]


def flag_values(args, name):
    """Every value of the flag `name` in `args` (program name first), in order: --name=value and --name value
    (pflag's forms; one or two dashes)."""
    values = []
    items = list(args[1:])
    index = 0
    while index < len(items):
        item = items[index]
        index += 1
        if item == "--":
            break
        if not item.startswith("-"):
            continue
        flag, sep, value = item.lstrip("-").partition("=")
        if flag.replace("_", "-") != name:
            continue
        if not sep:
            value = items[index] if index < len(items) else ""
            index += 1
        values.append(value)
    return values


def last_flag(args, name):
    values = flag_values(args, name)
    return values[-1] if values else None


def config_gates(text, where):
    """{gate: value as written} of a KubeletConfiguration document's featureGates ({} without); ValueError naming
    `where` when the text is not a KubeletConfiguration."""
    require_yaml()
    try:
        document = yaml.safe_load(text) if text and text.strip() else {}
    except yaml.YAMLError as exc:
        raise ValueError("%s is not YAML: %s" % (where, str(exc).splitlines()[0]))
    if document in (None, {}):
        return {}
    if not isinstance(document, dict) or document.get("kind") not in (None, KUBELET_CONFIG_KIND):
        raise ValueError("%s is not a %s" % (where, KUBELET_CONFIG_KIND))
    gates = document.get("featureGates") or {}
    if not isinstance(gates, dict):
        raise ValueError("%s: featureGates is not a map" % where)
    return dict(gates)


def flag_gates(args):
    """{gate: value as written} of every --feature-gates on the command line, the later value winning."""
    gates = {}
    for value in flag_values(args, "feature-gates"):
        gates.update((k, v) for k, v in parse_map(value).items() if v is not None)
    return gates


def host_gates(args, config_text=None, config_path=None, drop_ins=()):
    """{gates, from_flags, from_files}: the kubelet's gates as it merges them. `drop_ins`: [(path, text)] of
    --config-dir's *.conf files; they are applied in path order. ValueError naming a file that cannot be read."""
    from_files = {}
    if config_text is not None:
        from_files.update(config_gates(config_text, config_path or "the kubelet's --config file"))
    for path, text in sorted(drop_ins or []):
        from_files.update(config_gates(text, path))
    from_flags = flag_gates(args)
    gates = dict(from_files)
    gates.update(from_flags)
    return {"gates": gates, "from_flags": from_flags, "from_files": from_files}


def node_name(args, hostname, given=None):
    """The Node's name: `given`, else --hostname-override, else the host name lowercased (as the kubelet does)."""
    if given:
        return given
    override = last_flag(args, "hostname-override")
    return (override or hostname or "").strip().lower()
