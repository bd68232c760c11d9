# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The modules' attributes (check mode, diff mode, facts, platform, action group), declared as
community.general declares them: the descriptions here, each module's support in its own DOCUMENTATION
or through INFO_MODULE / FACTS_MODULE / ACTIONGROUP_K8S."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Returns details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
"""

    # With DOCUMENTATION: a module that only reads.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
"""

    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that updates existing host facts.
"""

    # With DOCUMENTATION and FACTS: a module that only reads and returns facts.
    FACTS_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  facts:
    support: full
"""

    # The module gives its own support and platforms.
    PLATFORM = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
"""

    # The modules that talk to the API server (meta/runtime.yml, action_groups).
    ACTIONGROUP_K8S = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/dra.admin.k8s) in C(module_defaults) to set defaults for this module (for example
      C(kubeconfig), C(context), C(host)); the group also reaches kubernetes.core's k8s modules.
    support: full
    membership:
      - dra.admin.k8s
"""
