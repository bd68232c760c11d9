"""The roles' "time before the change" is on the clock of process_start_time_seconds.

feature_gates' verify step accepts a component as restarted once its /metrics report
process_start_time_seconds >= the time noted before the manifest was written (component_flags'
clock_before_write). Components compute that metric as /proc/stat btime + the process's start
ticks / 100 (prometheus/procfs); btime is whole seconds, so the value is up to 1 s lower than the
wall clock at the start. Noted with `date +%s`, a component restarted within the same second as the
note looked older than the change and the role waited until its timeout and rolled back (seen as
"Wait for the new process and the wanted gates on /metrics" failing in test_control_plane.py).
"""
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_metrics import procfs_start_time
from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_flags_service

# What the module does in its own process, run as a fresh process as the module is.
NOTE = ("from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_flags_service; "
        "print(component_flags_service.clock_before_write())")


def note():
    """clock_before_write() of a new process, as when Ansible runs component_flags."""
    out = subprocess.run([sys.executable, "-c", NOTE], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return float(out.stdout)


def start_of(pid):
    with open("/proc/stat") as stat, open("/proc/%d/stat" % pid) as pid_stat:
        return procfs_start_time(stat.read(), pid_stat.read())


def test_the_clock_is_procfs_not_the_wall_clock():
    with open("/proc/stat") as stat, open("/proc/self/stat") as pid_stat:
        assert procfs_start_time(stat.read(), pid_stat.read()) == component_flags_service.clock_before_write()
    assert component_flags_service.clock_before_write() <= time.time()


def test_a_component_started_right_after_the_note_counts_as_new():
    misses = []
    for attempt in range(10):
        before = note()
        started = subprocess.Popen(["sleep", "0.05"])  # the component, restarted at once
        try:
            start = start_of(started.pid)
        finally:
            started.wait()
        if start < before:
            misses.append("note %.2f, start %.2f" % (before, start))
        time.sleep(0.043 * (attempt % 7))  # notes at different points of the second
    assert not misses, "a process started after the note reports an earlier start: %s" % misses[:3]


def test_an_old_process_does_not_count_as_new():
    old = subprocess.Popen(["sleep", "5"])
    try:
        time.sleep(1.1)
        assert start_of(old.pid) < note()
    finally:
        old.kill()
        old.wait()


def test_recorded_proc_stat_lines():
    proc_stat = "cpu  1 2 3\nbtime 1795300000\nprocesses 9\n"
    pid_stat = "4242 (kube sched) S 1 4242 4242 0 -1 4194560 1 0 0 0 5 6 0 0 20 0 12 0 35049 1 2"
    assert procfs_start_time(proc_stat, pid_stat) == pytest.approx(1795300350.49)
