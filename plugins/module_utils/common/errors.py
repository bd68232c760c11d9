# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one root of the collection's errors.

Every error the collection raises on purpose is a ``DraAdminError``: its message names the field or the
object and the fix, and ``details`` (a dict) is returned beside the message when a module fails. Every
module's ``main()`` fails through one path, ``fails_on_error``: a ``DraAdminError`` (and, where a module writes
host files, an ``OSError`` of the write) becomes ``fail_json`` with the message, the details and the extras
the module keeps (``changed``, ``api_requests``, ``diff``, ...); no module calls ``fail_json`` itself. A
module's own bad-input message is raised as an ``InputError`` (``raise_input_errors``). Errors of bad input
(``InputError`` and the domains' own input errors) also derive from ``ValueError``.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from contextlib import contextmanager


class DraAdminError(Exception):
    """An error a user can act on: ``str(error)`` is the message, ``details`` what the failure returns."""

    def __init__(self, message="", details=None):
        super(DraAdminError, self).__init__(message)
        self.details = dict(details or {})


class InputError(DraAdminError, ValueError):
    """Bad input, refused before anything is read or written; the message names the field and the fix."""

    changed = False


def fail_result(error, msg_suffix="", **extra):
    """The keyword arguments of ``module.fail_json`` for an error: its message (with ``msg_suffix``), its
    details, and ``extra`` (for example ``api_requests`` or ``changed``) where the details do not set them."""
    result = dict(extra)
    result.update(getattr(error, "details", None) or {})
    result["msg"] = str(error) + msg_suffix
    return result


def raise_input_errors(errors, msg_suffix=""):
    """Raise one ``InputError`` of every problem found (``errors``: messages, each naming the option and the fix;
    joined by ``"; "``, then ``msg_suffix``); nothing when there is none."""
    problems = [e for e in errors if e]
    if problems:
        raise InputError("; ".join(problems) + msg_suffix)


class Failure(object):
    """What a failing module returns beside the error's message and details: the extras kept as the run goes.

    ``keep(mapping, **extra)``: a mapping is read when the failure comes (a result the run fills in); a callable
    value is called then (``api_requests=lambda: api.requests``)."""

    def __init__(self, extra):
        self.sources = [dict(extra)]

    def keep(self, mapping=None, **extra):
        if mapping is not None:
            self.sources.append(mapping)
        self.sources.append(extra)

    def extras(self, error):
        merged = {}
        for source in self.sources:
            merged.update(source)
        merged = dict((key, value() if callable(value) else value) for key, value in merged.items())
        if hasattr(error, "changed"):  # an error that knows whether the run wrote anything before it stopped
            merged["changed"] = error.changed
        return merged

    def arguments(self, error, details_key=None, refused_suffix=""):
        """The keyword arguments of ``fail_json`` for ``error``."""
        suffix = refused_suffix if isinstance(error, ValueError) else ""
        if details_key is None:
            return fail_result(error, suffix, **self.extras(error))
        extras = self.extras(error)
        extras[details_key] = dict(getattr(error, "details", None) or {})
        return fail_result(DraAdminError(str(error)), suffix, **extras)


@contextmanager
def fails_on_error(module, host_error=None, details_key=None, refused_suffix="", **extra):
    """The one path from an error to ``module.fail_json``, which every module's ``main()`` takes::

        with fails_on_error(module, changed=False) as failure:
            raise_input_errors(input_errors(module.params))
            api = DraApi(module)
            failure.keep(api_requests=lambda: api.requests)
            result = run(api, module.params)

    A ``DraAdminError`` fails the module with its message, its details (beside the message, or under
    ``details_key``) and the extras (``extra`` and what ``failure.keep`` added; details win over extras).
    ``host_error``: the message of an ``OSError`` of a host write, ``{error}`` standing for the error; without
    it such an error is not caught. ``refused_suffix`` ends the message of a bad-input error (a ``ValueError``:
    refused before anything was written)."""
    failure = Failure(extra)
    try:
        yield failure
    except DraAdminError as error:
        module.fail_json(**failure.arguments(error, details_key, refused_suffix))
    except (IOError, OSError) as error:
        if host_error is None:
            raise
        message = host_error.replace("{error}", str(error))
        module.fail_json(**failure.arguments(DraAdminError(message), details_key))
