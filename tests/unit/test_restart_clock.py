"""The roles' "time before the change" is on the clock of process_start_time_seconds.

feature_gates' verify step accepts a component as restarted once its /metrics report
process_start_time_seconds >= the time noted before the manifest was written. Components compute
that metric as /proc/stat btime + the process's start ticks / 100 (prometheus/procfs); btime is
whole seconds, so the value is up to 1 s lower than the wall clock at the start. Noted with
`date +%s`, a component restarted within the same second as the note looked older than the change
and the role waited until its timeout and rolled back (seen as "Wait for the new process and the
wanted gates on /metrics" failing in test_control_plane.py).
"""
import os
import shlex
import subprocess
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = ("feature_gates", "control_plane_tuning")


def before_command(role):
    with open(os.path.join(ROOT, "roles", role, "tasks", "component.yml")) as handle:
        tasks = yaml.safe_load(handle)
    task = next(t for t in tasks if t["name"].startswith("Note the time before the change"))
    command = task["ansible.builtin.command"]
    return command["argv"] if isinstance(command, dict) else shlex.split(command)


def procfs_start_time(pid):
    """process_start_time_seconds as a Go component computes it (prometheus/procfs ProcStat.StartTime)."""
    with open("/proc/stat") as handle:
        btime = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
    with open("/proc/%d/stat" % pid) as handle:
        ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
    return btime + ticks / 100.0


@pytest.mark.parametrize("role", ROLES)
def test_a_component_started_right_after_the_note_counts_as_new(role):
    argv = before_command(role)
    misses = []
    for attempt in range(15):
        before = float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        started = subprocess.Popen(["sleep", "0.05"])  # the component, restarted at once
        try:
            start = procfs_start_time(started.pid)
        finally:
            started.wait()
        if start < before:
            misses.append("note %.2f, start %.2f" % (before, start))
        time.sleep(0.043 * (attempt % 7))  # notes at different points of the second
    assert not misses, "%s: a process started after the note reports an earlier start: %s" % (role, misses[:3])


@pytest.mark.parametrize("role", ROLES)
def test_an_old_process_does_not_count_as_new(role):
    old = subprocess.Popen(["sleep", "5"])
    try:
        time.sleep(1.1)
        before = float(subprocess.run(before_command(role), capture_output=True, text=True, check=True).stdout)
        assert procfs_start_time(old.pid) < before
    finally:
        old.kill()
        old.wait()
