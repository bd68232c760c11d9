# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The gpu_health option of the modules that judge device health (dra_device_health_info, dra_device_remediation);
its check: plugins/module_utils/devices/gpu_health.gpus_by_uuid."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  gpu_health:
    description:
      - The GPUs' own readings on the nodes, a third health source - the C(dra_gpu_health) fact of
        M(dra.admin.dra_gpu_health_facts), one per node (for example
        C(groups['gpu_nodes'] | map('extract', hostvars, ['ansible_facts', 'dra_gpu_health']) | list)).
      - Each GPU is matched to the published device whose C(uuid) attribute (plain, or qualified with its driver's
        name) is the GPU's UUID, as the NVIDIA DRA driver publishes it, or - for a MIG device, published with
        C(uuid) C(MIG-...) - whose C(parentUUID) attribute is. An C(unhealthy) GPU makes its device unhealthy, with
        the GPU's reasons and the action they ask for; an C(unknown) GPU (no report, or a reading that needs a
        person) makes a device no pod reports on C(unknown), with its reasons; a C(healthy) GPU makes it
        C(healthy).
      - A GPU that no published device names is listed in the health report's C(gpus_unmatched), and is a problem
        when unhealthy.
      - An entry that is not such a fact is refused before any request, naming it.
    type: list
    elements: dict
    default: []
"""
