# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether a toleration matches a taint: node taints (pods) and device taints (claims) follow the same
rule (core/v1 Toleration.ToleratesTaint, which resource.k8s.io's DeviceToleration copies).

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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
