# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The wait options of the modules that wait (their argument spec: plugins/module_utils/common/waits.wait_options;
their one check: wait_parameter_errors). Each module gives its own defaults and former names (aliases), and says
under its O(wait) what it waits for."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  wait_timeout:
    description:
      - Seconds the wait may take; a finite number above 0. V(nan), V(inf), V(0) and negative numbers are refused
        before anything is read or written, the message naming the option (and the alias the task used).
    type: int
  wait_sleep:
    description:
      - Seconds between two looks at what is waited for; a finite number above 0, checked as O(wait_timeout) is.
    type: float
"""
