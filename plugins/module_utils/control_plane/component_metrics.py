# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a component's /metrics says after a change: is it a new process, and does it run with the wanted gates.

Every Kubernetes component exposes ``process_start_time_seconds`` (its process's start, on the clock of
/proc/stat's btime plus the start ticks) and ``kubernetes_feature_enabled{name="<gate>"}`` (1 or 0 per
feature gate). A change counts as taken when the process started at or after the time noted before the
change and every wanted gate has the wanted value.

A component's ``/configz`` (its running configuration as JSON) shows settings that are not gates (control_plane_tuning's
QPS and Burst): ``configz_missing`` names the expected patterns it does not match yet.

Pure: parsing through `kube.prometheus_text.parse_text`; no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from urllib.parse import urlsplit, urlunsplit

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import gate_value
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import enabled_gates, parse_text, select

START_TIME = "process_start_time_seconds"
# prometheus/procfs divides a process's start ticks by 100, whatever the kernel's CONFIG_HZ.
USER_HZ = 100.0


def procfs_start_time(proc_stat, pid_stat):
    """A process's process_start_time_seconds as a Go component computes it (prometheus/procfs
    ProcStat.StartTime): /proc/stat's btime (whole seconds) + its start ticks (field 22 of
    /proc/<pid>/stat) / 100. That clock runs up to 1 s behind the wall clock, so a time to compare
    a component's start with must be taken on it, not from `date`."""
    btime = next(int(line.split()[1]) for line in proc_stat.splitlines() if line.startswith("btime "))
    ticks = int(pid_stat.rsplit(")", 1)[1].split()[19])
    return btime + ticks / USER_HZ


def wanted_gates(gates):
    """{gate: value} (booleans, or "true"/"false" as component_flags returns them) as booleans; the error
    names the gate."""
    result = {}
    for name, value in (gates or {}).items():
        try:
            result[name] = gate_value(value)
        except ValueError:
            raise InputError("feature_gates.%s=%r: the value must be true or false" % (name, value))
    return result


def start_time(samples):
    """The process's start time (seconds since the epoch), or None when the metric is not there."""
    found = [s.value for s in select(samples, START_TIME) if not s.labels]
    return found[0] if found else None


def component_state(text, wanted=None, started_after=None):
    """What the metrics text says: start_time, feature_gates (all it reports), new_process (None when
    started_after is not given), missing_gates ("Gate=true" for each wanted value not reported) and ready."""
    samples = parse_text(text).samples
    started = start_time(samples)
    gates = enabled_gates(samples)
    wanted = wanted_gates(wanted)
    missing = ["%s=%s" % (name, str(value).lower()) for name, value in sorted(wanted.items())
               if gates.get(name) is not value]
    new_process = None if started_after is None else (started is not None and started >= float(started_after))
    return {"start_time": started, "feature_gates": gates, "new_process": new_process, "missing_gates": missing,
            "ready": new_process is not False and not missing}


def configz_patterns(patterns):
    """The compiled regular expressions of `patterns` (configz_expected); InputError naming the one that is not
    a regular expression."""
    compiled = []
    for pattern in patterns or []:
        try:
            compiled.append((pattern, re.compile(str(pattern))))
        except re.error as exc:
            raise InputError("configz_expected: %r is not a regular expression (%s); give a Python regular "
                             "expression such as '\"qps\":\\s*50'" % (pattern, exc))
    return compiled


def configz_missing(text, patterns):
    """The patterns (configz_expected) that /configz's text does not match, in the order given."""
    return [pattern for pattern, regex in configz_patterns(patterns) if not regex.search(text or "")]


def configz_url(metrics_url):
    """The /configz URL of the component whose /metrics URL is given (same scheme, host and port)."""
    parts = urlsplit(str(metrics_url))
    return urlunsplit((parts.scheme, parts.netloc, "/configz", "", ""))
