# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes quantities (``80Gi``, ``100``, ``500m``, ``1e3``) as exact Fractions.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_SUFFIX = {"": 1, "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
           "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
           "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}


class QuantityError(DraAdminError, ValueError):
    pass


def quantity(text):
    """A Kubernetes quantity (``80Gi``, ``100``, ``500m``, ``1e3``) as a Fraction."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise QuantityError("not a quantity: %r" % (text,))
    number, suffix = match.groups()
    try:
        value = Fraction(number)
    except ValueError:
        raise QuantityError("not a quantity: %r" % (text,))
    if suffix[:1] in ("e", "E"):
        return value * Fraction(10) ** int(suffix[1:])
    if suffix not in _SUFFIX:
        raise QuantityError("unknown quantity suffix %r in %r" % (suffix, text))
    return value * _SUFFIX[suffix]
