# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The wait options of every module that waits, and their one check.

Every module that waits names its options as kubernetes.core does: ``wait_timeout`` (seconds the wait may
take) and ``wait_sleep`` (seconds between polls); the names a module had before are kept as aliases
(``wait_options``). Every time parameter of a module (those, and the request timeouts and scrape intervals
of the modules that read endpoints) must be a finite number of seconds above 0: ``nan``, ``inf``, ``-1`` and
``0`` are refused before anything is read or written, the message naming the option and giving an example.
A role that waits in an ``until`` loop takes its ``retries`` from ``wait_retries`` (the filter of the same name).

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError

WAIT_TIMEOUT = "wait_timeout"
WAIT_SLEEP = "wait_sleep"

# An example value per kind of time parameter, for the message.
TIMEOUT_EXAMPLE = 300
SLEEP_EXAMPLE = 2


def wait_options(timeout_default, sleep_default=None, timeout_aliases=(), sleep_aliases=()):
    """The argument spec entries of a waiting module's wait_timeout (whole seconds) and wait_sleep
    (seconds, fractions allowed; left out when sleep_default is None), with the module's former names as
    aliases."""
    options = {WAIT_TIMEOUT: dict(type="int", default=timeout_default)}
    if timeout_aliases:
        options[WAIT_TIMEOUT]["aliases"] = list(timeout_aliases)
    if sleep_default is not None:
        options[WAIT_SLEEP] = dict(type="float", default=sleep_default)
        if sleep_aliases:
            options[WAIT_SLEEP]["aliases"] = list(sleep_aliases)
    return options


def is_positive_seconds(value):
    """A number of seconds a wait can use: a finite int or float above 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and value > 0


def option_label(name, aliases=()):
    """How a message names an option: with its aliases, since the task may use one of them."""
    return "%s (alias %s)" % (name, ", ".join(aliases)) if aliases else name


def seconds_error(name, value, example, aliases=()):
    """The message for one time parameter that is not a finite number of seconds above 0, or None."""
    if is_positive_seconds(value):
        return None
    return ("%s must be a finite number of seconds above 0, got %r: give for example %s: %s"
            % (option_label(name, aliases), value, name, example))


def option_aliases(spec, name):
    return tuple((spec or {}).get(name, {}).get("aliases") or ())


def wait_parameter_errors(params, timeouts=(WAIT_TIMEOUT,), intervals=(WAIT_SLEEP,), spec=None):
    """Messages naming each timeout or poll interval of `params` that is not a finite number above 0.

    `spec` (the module's argument spec) lets the messages name the aliases too. A parameter left unset
    (None) is not checked here: its own option decides whether it is required.
    """
    errors = []
    for names, example in ((timeouts, TIMEOUT_EXAMPLE), (intervals, SLEEP_EXAMPLE)):
        for name in names:
            if params.get(name) is None:
                continue
            error = seconds_error(name, params[name], example, option_aliases(spec, name))
            if error:
                errors.append(error)
    return errors


def since_error(params, operation):
    """The message when ``since`` (the start of an operation run in several calls, seconds since the epoch, as
    its first call returned it in ``started``) is given and not a time; None when it is fine or unset."""
    since = params.get("since")
    if since is None or since >= 0:
        return None
    return "since must be a time in seconds since the epoch (the started of the %s's first call), got %r" % (
        operation, since)


# The first look again of a wait that polls: what is waited for is often done at once (a pod deleted with a short
# grace period, a claim released right after its pod), so the looks start close and grow to the set interval.
FIRST_POLL = 0.1


def growing_delays(ceiling, first=FIRST_POLL, factor=2.0):
    """Delays between the looks of a wait: first, doubling, then `ceiling` seconds (0.1, 0.2, 0.4, 0.8, 1, 1, ...
    for a ceiling of 1); `first` is never above the ceiling."""
    delay = min(first, ceiling)
    while True:
        yield delay
        delay = min(delay * factor, ceiling)


def wait_retries(timeout, delay, elapsed=0):
    """Rounds of an until-loop that polls every `delay` seconds so that the wait ends about `timeout` seconds
    after the operation started, `elapsed` seconds ago; at least 1 (one more look after the time is up).
    Raises ValueError naming the bad value."""
    try:
        timeout, delay, elapsed = float(timeout), float(delay), float(elapsed or 0)
    except (TypeError, ValueError):
        raise InputError("timeout %r, delay %r and elapsed %r must be numbers of seconds, e.g. 300, 5 and 0"
                         % (timeout, delay, elapsed))
    if not (delay > 0 and math.isfinite(delay)):
        raise InputError("the delay between rounds must be a finite number of seconds above 0 (e.g. 5), got %r" % delay)
    if not math.isfinite(timeout) or not math.isfinite(elapsed):
        raise InputError("timeout %r and elapsed %r must be finite numbers of seconds" % (timeout, elapsed))
    return max(1, int(math.ceil((timeout - elapsed) / delay)))
