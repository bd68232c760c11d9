# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Reads a kubelet's gates on its own host (module ``dra_kubelet_gates_info``): the running kubelet's command line
(``/proc/<pid>/cmdline`` of the process named kubelet), the file of its ``--config`` and the ``*.conf`` files of its
``--config-dir``, through ``access/files.py``; ``upgrade/kubelet_gates`` merges them. Nothing is asked of the API
server or of the kubelet's API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket

from ansible_collections.dra.admin.plugins.module_utils.access.files import read_text
from ansible_collections.dra.admin.plugins.module_utils.upgrade import kubelet_gates

KUBELET = "kubelet"


def kubelet_processes(proc_dir="/proc"):
    """[(pid, args)] of the processes named kubelet, by pid."""
    found = []
    try:
        names = os.listdir(proc_dir)
    except OSError:
        return found
    for pid in sorted((n for n in names if n.isdigit()), key=int):
        try:
            if read_text(os.path.join(proc_dir, pid, "comm")).strip() != KUBELET:
                continue
            with open(os.path.join(proc_dir, pid, "cmdline"), "rb") as handle:
                found.append((int(pid), kubelet_gates.command_line(handle.read())))
        except (IOError, OSError, UnicodeDecodeError):
            continue
    return found


def _drop_ins(directory):
    return [(os.path.join(directory, name), read_text(os.path.join(directory, name)))
            for name in sorted(os.listdir(directory)) if name.endswith(kubelet_gates.DROP_IN_SUFFIX)]


def read(node_name=None, config_file=None, proc_dir="/proc", hostname=None):
    """{node, pid, gates, from_flags, from_files, sources, error}: the kubelet's gates on this host, or the reason
    they cannot be read (no kubelet running, a file it names unreadable); never a guess."""
    hostname = hostname if hostname is not None else socket.gethostname()
    result = {"node": node_name or hostname.lower(), "pid": None, "gates": None, "from_flags": {}, "from_files": {},
              "sources": {"command_line": None, "config_file": None, "config_dir_files": []}, "error": ""}
    processes = kubelet_processes(proc_dir)
    if not processes:
        result["error"] = "no kubelet process runs on %s (no /proc/<pid>/comm named kubelet)" % hostname
        return result
    if len(processes) > 1:
        result["error"] = "%d kubelet processes run on %s (pids %s): cannot tell which one is the node's" % (
            len(processes), hostname, ", ".join(str(found[0]) for found in processes))
        return result
    pid, args = processes[0]
    result.update(pid=pid, node=kubelet_gates.node_name(args, hostname, node_name))
    result["sources"]["command_line"] = "/proc/%d/cmdline" % pid
    path = config_file or kubelet_gates.last_flag(args, "config")
    directory = kubelet_gates.last_flag(args, "config-dir")
    try:
        text = read_text(path) if path else None
        drop_ins = _drop_ins(directory) if directory else []
        merged = kubelet_gates.host_gates(args, text, path, drop_ins)
    except (IOError, OSError, UnicodeDecodeError, ValueError) as exc:
        result["error"] = "the kubelet's configuration cannot be read: %s" % exc
        return result
    result["sources"].update(config_file=path, config_dir_files=[found[0] for found in drop_ins])
    result.update(merged)
    return result
