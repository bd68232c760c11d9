# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Client QPS/Burst of the control-plane components: checks and the scheduler's config file.

Every Kubernetes component talks to the API server through a client-go rate
limiter: a token bucket that refills at QPS tokens per second and holds at
most Burst tokens. kube-controller-manager takes them as ``--kube-api-qps`` /
``--kube-api-burst``; kube-scheduler as ``clientConnection.qps/burst`` in the
KubeSchedulerConfiguration named by ``--config`` (its flags of the same name
are deprecated and ignored once ``--config`` is given).

Pure functions; no IO.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET

# kube-controller-manager's built-in --kube-api-qps and --kube-api-burst.
DEFAULT_KCM_QPS = 20
DEFAULT_KCM_BURST = 30

# Built-in client defaults (QPS, Burst) of each component, used when a value is not set.
DEFAULT_RATES = {
    KUBE_CONTROLLER_MANAGER: (float(DEFAULT_KCM_QPS), DEFAULT_KCM_BURST),
    KUBE_SCHEDULER: (50.0, 100),
    KUBELET: (50.0, 100),
}

SCHEDULER_KIND = "KubeSchedulerConfiguration"
# Name of the hostPath volume that mounts a config file component_flags creates for kube-scheduler
# (component_flags' config_file.volume_name default; kubeadm-config's extraVolumes entry of the same file).
SCHEDULER_CONFIG_VOLUME = "kube-scheduler-config"
SCHEDULER_API_VERSION = "kubescheduler.config.k8s.io/v1"

# Deprecated kube-scheduler flags that stop working once --config is given, and where
# their value goes in a KubeSchedulerConfiguration (kube-scheduler's ApplyDeprecated).
SCHEDULER_DEPRECATED_FLAGS = (
    ("kubeconfig", ("clientConnection", "kubeconfig"), str),
    ("kube-api-content-type", ("clientConnection", "contentType"), str),
    ("kube-api-qps", ("clientConnection", "qps"), float),
    ("kube-api-burst", ("clientConnection", "burst"), int),
    ("profiling", ("enableProfiling",), "bool"),
    ("contention-profiling", ("enableContentionProfiling",), "bool"),
)


class TuningError(DraAdminError, ValueError):
    """A QPS/Burst request that a component would refuse or misread; the message says what to do."""


def _number(value):
    """A QPS/Burst value as a number, or None when it is not one (booleans are not numbers).

    ``nan`` and the infinities are not numbers here: a rate limiter cannot run on them, and
    arithmetic on them (``int(inf)``) raises instead of comparing.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number = value
    else:
        try:
            text = str(value).strip()
            number = int(text) if text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            return None
    if isinstance(number, float) and not math.isfinite(number):
        return None
    return number


def _not_a_number_reason(value):
    """Why a value that _number refused is not one, for the error message."""
    try:
        number = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is not None and math.isnan(number):
        return "is not a number (NaN)"
    if number is not None and math.isinf(number):
        return "is not a finite number"
    return "is not a number"


def qps_text(value):
    """A QPS as a flag or JSON spells it: 75 for 75.0, 7.5 for 7.5."""
    number = float(value)
    return str(int(number)) if number == int(number) else repr(number)


def check_rate(qps, burst, where="client", qps_name="qps", burst_name="burst"):
    """Errors for one QPS/Burst pair (either may be None: unchecked); each names the item and the fix.

    QPS must be a number above 0: client-go treats 0 as "use the default" and a
    negative QPS as "no rate limit at all". Burst must be a whole number, at
    least 1 and at least QPS: a bucket smaller than the refill rate cannot
    hand out the QPS it is given.
    """
    errors = []
    qps_value = _number(qps) if qps is not None else None
    burst_value = _number(burst) if burst is not None else None
    if qps is not None:
        if qps_value is None:
            errors.append("%s %s=%r %s: give the requests per second, e.g. 75"
                          % (where, qps_name, qps, _not_a_number_reason(qps)))
        elif qps_value <= 0:
            errors.append("%s %s=%s must be greater than 0 (0 means the built-in default and a negative value "
                          "switches the client rate limit off): give the requests per second, e.g. 75"
                          % (where, qps_name, qps))
    if burst is not None:
        if burst_value is None or float(burst_value) != int(burst_value):
            reason = "is not a whole number" if burst_value is not None else _not_a_number_reason(burst)
            errors.append("%s %s=%r %s: give the bucket size, e.g. 150" % (where, burst_name, burst, reason))
            burst_value = None
        elif burst_value < 1:
            errors.append("%s %s=%s must be at least 1: give the bucket size, e.g. 150" % (where, burst_name, burst))
            burst_value = None
    if qps_value is not None and qps_value > 0 and burst_value is not None and burst_value < qps_value:
        errors.append("%s %s=%s is lower than %s=%s: the client could never reach its QPS; set %s to at least %s "
                      "(twice the QPS is usual, e.g. %s)"
                      % (where, burst_name, burst, qps_name, qps, burst_name, qps_text(qps_value),
                         int(2 * qps_value) if 2 * qps_value == int(2 * qps_value) else int(2 * qps_value) + 1))
    return errors


def check_component_rate(component, qps=None, burst=None, current_qps=None, current_burst=None, where=None,
                         names=("qps", "burst")):
    """Errors for the values a component will run with: the requested ones, else what it has, else its default.

    Only requested values are checked on their own; the pair is checked as it will be in effect.
    """
    where = where or component
    default_qps, default_burst = DEFAULT_RATES.get(component, (None, None))
    errors = check_rate(qps, burst, where, *names)
    if errors:
        return errors
    effective_qps = qps if qps is not None else (current_qps if current_qps is not None else default_qps)
    effective_burst = burst if burst is not None else (current_burst if current_burst is not None else default_burst)
    if qps is None and burst is None:
        return []
    if effective_qps is None or effective_burst is None:
        return []
    pair_errors = check_rate(effective_qps, effective_burst, where, *names)
    if pair_errors and (qps is None or burst is None):
        kept = "QPS" if qps is None else "Burst"
        source = "current" if (current_qps if qps is None else current_burst) is not None else "built-in default"
        kept_value = effective_qps if qps is None else effective_burst
        return ["%s: with the %s %s (%s) kept: %s" % (where, source, kept, kept_value, "; ".join(pair_errors))]
    return pair_errors


def flag_rate_errors(component, set_flags, current_flags, where=None):
    """Errors for --kube-api-qps/--kube-api-burst given in `set_flags`, against the flags a manifest has."""
    qps = set_flags.get("kube-api-qps")
    burst = set_flags.get("kube-api-burst")
    if qps is None and burst is None:
        return []
    return check_component_rate(component, qps, burst, current_flags.get("kube-api-qps"),
                                current_flags.get("kube-api-burst"), where or component,
                                ("kube-api-qps", "kube-api-burst"))


def config_rate_errors(component, config, where=None):
    """Errors for clientConnection.qps/burst of a component config (a dict) as it will be written."""
    connection = config.get("clientConnection") if isinstance(config, dict) else None
    if connection is None:
        return []
    if not isinstance(connection, dict):
        return ["%s: clientConnection is not a mapping: give it as clientConnection: {qps: 75, burst: 150}"
                % (where or component)]
    qps, burst = connection.get("qps"), connection.get("burst")
    if qps is None and burst is None:
        return []
    default_qps, default_burst = DEFAULT_RATES.get(component, (None, None))
    errors = check_rate(qps, burst, where or component, "clientConnection.qps", "clientConnection.burst")
    if errors:
        return errors
    return check_rate(qps if qps is not None else default_qps, burst if burst is not None else default_burst,
                      where or component, "clientConnection.qps", "clientConnection.burst")


def _bool_flag(value):
    return value is None or str(value).strip().lower() == "true"


def scheduler_config_from_flags(flags, api_version=SCHEDULER_API_VERSION):
    """A new KubeSchedulerConfiguration carrying what the scheduler's deprecated flags said.

    Once --config is given, kube-scheduler ignores --kubeconfig, --kube-api-qps and the other
    deprecated flags (it honours only --leader-elect*), so a new file must take their values over,
    or the scheduler would lose its kubeconfig. `flags` is a flags_dict of the manifest.
    """
    config = {"apiVersion": api_version, "kind": SCHEDULER_KIND}
    for flag, path, kind in SCHEDULER_DEPRECATED_FLAGS:
        if flag not in flags:
            continue
        value = flags[flag]
        if isinstance(value, list):
            value = value[-1]
        if kind == "bool":
            value = _bool_flag(value)
        elif value is None:
            continue
        else:
            number = _number(value) if kind in (int, float) else value
            value = kind(number) if number is not None else value
        target = config
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    return config


def _rate_as_configz_prints(value):
    """75.0 -> 75, '7.5' -> 7.5; a value that is not a finite number stays as given, for
    component_flags to refuse with its message."""
    number = _number(value)
    if number is None:
        return value
    return int(number) if float(number) == int(number) else float(number)


def _configz_pattern(key, value):
    """A regex /configz must match once the component runs with clientConnection.<key> = value."""
    return '(?i)"clientConnection":\\{[^{}]*"%s":%s(\\.0+)?[,}]' % (key, re.escape(str(value)))


def tuning_requests(components, controller_manager, scheduler, scheduler_config):
    """What control_plane_tuning writes for each component it changes.

    components: the components the role may change; controller_manager and scheduler:
    {"qps": value or None, "burst": value or None}; scheduler_config: the path of the
    KubeSchedulerConfiguration file. A component with neither value set is left out.

    Returns {component: {"set_flags", "config_file", "configz"}}: kube-controller-manager's
    --kube-api-qps/--kube-api-burst flags, kube-scheduler's clientConnection merged into its
    config file, and per value the /configz pattern that shows the running process took it.
    """
    requests = {}
    for component, wanted in ((KUBE_CONTROLLER_MANAGER, controller_manager or {}), (KUBE_SCHEDULER, scheduler or {})):
        values = dict((key, _rate_as_configz_prints(wanted[key])) for key in ("qps", "burst")
                      if wanted.get(key) is not None)
        if component not in (components or []) or not values:
            continue
        configz = [_configz_pattern(key, value) for key, value in values.items()]
        if component == KUBE_CONTROLLER_MANAGER:
            requests[component] = {"set_flags": dict(("kube-api-" + k, v) for k, v in values.items()),
                                   "config_file": None, "configz": configz}
        else:
            requests[component] = {"set_flags": {}, "configz": configz,
                                   "config_file": {"path": scheduler_config, "merge": {"clientConnection": values}}}
    return requests
