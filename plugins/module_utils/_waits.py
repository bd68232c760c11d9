# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The check every module that waits makes of its timeout and poll interval, in one way.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def wait_parameter_errors(params, timeouts=(), intervals=("poll_interval",)):
    """Messages naming each timeout (whole seconds) or poll interval of `params` that is not above 0."""
    errors = ["%s must be a positive number of seconds, got %s" % (name, params[name])
              for name in timeouts if params[name] <= 0]
    errors += ["%s must be positive, got %s" % (name, params[name]) for name in intervals if params[name] <= 0]
    return errors
