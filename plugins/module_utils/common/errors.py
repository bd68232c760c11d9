# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one root of the collection's errors.

Every error the collection raises on purpose is a ``DraAdminError``: its message names the field or the
object and the fix, and ``details`` (a dict) is returned beside the message when a module fails. A module's
``main()`` catches ``DraAdminError`` once (``fail_result`` gives the arguments of ``fail_json``). Errors of
bad input also derive from ``ValueError``, as they did before the root existed.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class DraAdminError(Exception):
    """An error a user can act on: ``str(error)`` is the message, ``details`` what the failure returns."""

    def __init__(self, message="", details=None):
        super(DraAdminError, self).__init__(message)
        self.details = dict(details or {})


def fail_result(error, **extra):
    """The keyword arguments of ``module.fail_json`` for an error: its message, its details, then ``extra``
    (for example ``api_requests`` or ``changed``) where the details do not set them."""
    result = dict(extra)
    result.update(getattr(error, "details", None) or {})
    result["msg"] = str(error)
    return result
