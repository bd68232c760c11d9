# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Progress of the long waits, for roles that wait in until-loops (a line per round).

A waiting module run with ``wait: false`` does the writes of one phase and returns at once; the role then
waits in an until-loop of a read-only call (the same module in check mode, or an ``*_info`` module) whose
result says what the wait still waits for (``waiting_for``), what is still pending (``pending``) and how long
the operation has taken so far (``elapsed``, seconds since ``since``). This file makes those fields and the
line; each domain decides which wait is not over and what is pending (``nodes.drain_progress`` for the drain,
``devices.taint_progress`` for the device taints and the remediation). How many rounds a role's timeout allows
is ``common.waits.wait_retries``.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# How many pending items a progress line names before it only counts them.
LINE_NAMES = 5

# The fields a wait=false run adds to its module's result, and those Ansible adds to a registered result: a
# role's merge of its per-phase results into the one call's result leaves them out.
PROGRESS_FIELDS = ("waiting_for", "pending", "pending_count", "elapsed", "progress", "started")
TASK_FIELDS = ("invocation", "attempts", "retries", "failed", "msg", "changed")


def elapsed_since(since, now):
    """Seconds from `since` (epoch seconds) to `now`, to a tenth; None without a start."""
    if since is None:
        return None
    return round(max(0.0, now - since), 1)


def progress_line(waiting_for, pending, elapsed, texts=None):
    """One line: what the wait waits for (its text in `texts`, a mapping of wait names; else its name), what
    is still pending (the first few named) and the time so far."""
    if not waiting_for:
        head = "nothing left to wait for"
    else:
        head = "waiting for %s" % (texts or {}).get(waiting_for, waiting_for)
        if pending:
            names = ", ".join(pending[:LINE_NAMES])
            more = len(pending) - LINE_NAMES
            head += ": %d pending (%s%s)" % (len(pending), names, ", and %d more" % more if more > 0 else "")
    if elapsed is not None:
        head += ", %ss so far" % elapsed
    return head


def progress(waiting_for, pending, since, now, texts=None):
    """The progress fields of a waiting module's result: waiting_for, pending, pending_count, elapsed, progress."""
    elapsed = elapsed_since(since, now)
    pending = list(pending)
    return {"waiting_for": waiting_for, "pending": pending, "pending_count": len(pending), "elapsed": elapsed,
            "progress": progress_line(waiting_for, pending, elapsed, texts)}


def ran(result):
    """Whether a registered result is of a task that ran (not None, not skipped)."""
    return bool(result) and not result.get("skipped")


def module_fields(result, also=()):
    """A registered result without the progress fields and those Ansible adds (and those in `also`): what the
    module returns with wait=true."""
    dropped = set(PROGRESS_FIELDS) | set(TASK_FIELDS) | set(also)
    return dict((k, v) for k, v in (result or {}).items() if k not in dropped)
