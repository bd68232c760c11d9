# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether a toleration matches a taint: node taints (pods) and device taints (claims) follow the same
rule (core/v1 Toleration.ToleratesTaint, which resource.k8s.io's DeviceToleration copies).

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.names import label_value_error, qualified_name_error

TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
OPERATORS = ("Equal", "Exists")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def toleration_errors(field, tolerations):
    """Every reason the API server would refuse these pod tolerations (core/v1 validation), each naming
    `field`, the entry and the fix; [] when there is none. Checked before a module writes an object with them."""
    errors = []
    for index, toleration in enumerate(tolerations or ()):
        at = "%s[%d]" % (field, index)
        if not isinstance(toleration, dict):
            errors.append("%s must be a dict with key, operator, value, effect, tolerationSeconds" % at)
            continue
        unknown = sorted(set(toleration) - set(TOLERATION_FIELDS), key=str)
        if unknown:
            errors.append("%s: unknown field(s) %s; a toleration has %s"
                          % (at, ", ".join(map(str, unknown)), ", ".join(TOLERATION_FIELDS)))
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        value, effect = toleration.get("value") or "", toleration.get("effect") or ""
        if operator not in OPERATORS:
            errors.append("%s: operator %r: use Equal or Exists" % (at, operator))
        if key:
            errors.append(qualified_name_error("%s key" % at, key, example="nvidia.com/gpu"))
        elif operator != "Exists":
            errors.append("%s: an empty key (every taint) needs operator Exists" % at)
        if operator == "Exists" and value:
            errors.append("%s: value %r must be empty with operator Exists" % (at, value))
        elif operator == "Equal":
            errors.append(label_value_error("%s value" % at, value))
        if effect not in ("",) + EFFECTS:
            errors.append("%s: effect %r: use NoSchedule, PreferNoSchedule or NoExecute (or leave it empty for "
                          "every effect)" % (at, effect))
        seconds = toleration.get("tolerationSeconds")
        if seconds is not None and effect != "NoExecute":
            errors.append("%s: tolerationSeconds needs effect NoExecute" % at)
        elif seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            errors.append("%s: tolerationSeconds %r must be a whole number of seconds" % (at, seconds))
    return [e for e in errors if e]


def tolerates(toleration, taint):
    """An empty effect or key matches any; operator Exists matches any value, Equal (the default) the same one."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"
