# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filter dra.admin.kubelet_errors: a kubelet journal's last error lines (see plugins/filter/kubelet_errors.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.nodes.readiness import KUBELET_ERRORS_KEPT, kubelet_errors


def kubelet_errors_filter(lines, keep=KUBELET_ERRORS_KEPT):
    if not isinstance(lines, (list, tuple)):
        raise AnsibleFilterError("dra.admin.kubelet_errors: give the journal's lines as a list (stdout_lines)")
    return kubelet_errors([str(line) for line in lines], int(keep))


class FilterModule(object):
    def filters(self):
        return {"kubelet_errors": kubelet_errors_filter}
