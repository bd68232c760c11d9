# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one root of the collection's errors.

Every error the collection raises on purpose is a ``DraAdminError``: its message names the field or the
object and the fix, and ``details`` (a dict) is returned beside the message when a module fails. A module's
``main()`` catches ``DraAdminError`` once (``fail_result`` gives the arguments of ``fail_json``); a module
that writes host files catches ``OSError`` of the write too. Errors of bad input (``InputError`` and the
domains' own input errors) also derive from ``ValueError``.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class DraAdminError(Exception):
    """An error a user can act on: ``str(error)`` is the message, ``details`` what the failure returns."""

    def __init__(self, message="", details=None):
        super(DraAdminError, self).__init__(message)
        self.details = dict(details or {})


class InputError(DraAdminError, ValueError):
    """Bad input, refused before anything is read or written; the message names the field and the fix."""


def fail_result(error, msg_suffix="", **extra):
    """The keyword arguments of ``module.fail_json`` for an error: its message (with ``msg_suffix``), its
    details, and ``extra`` (for example ``api_requests`` or ``changed``) where the details do not set them."""
    result = dict(extra)
    result.update(getattr(error, "details", None) or {})
    result["msg"] = str(error) + msg_suffix
    return result
