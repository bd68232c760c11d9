# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's one deep merge of nested mappings.

Used for component config files (KubeletConfiguration, KubeSchedulerConfiguration)
and for Helm chart values. Pure; standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


def deep_merge(base, updates):
    """A copy of `base` with `updates` merged in.

    Mappings merge recursively; anything else (lists included) replaces what was there; a None
    update removes the key, as a null value does in Helm values. `base` that is not a mapping
    counts as empty; neither argument is changed.
    """
    result = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in (updates or {}).items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
