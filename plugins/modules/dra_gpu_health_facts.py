#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_gpu_health_facts
short_description: Read the health of a node's NVIDIA GPUs from nvidia-smi and the kernel log, per GPU UUID
version_added: 0.3.0
description:
  - Runs on a GPU node, read-only. Reads C(nvidia-smi -q -x) (the driver's full report), the kernel log's
    Xid lines, C(/proc/driver/nvidia/gpus/*/information) and C(/proc/uptime), and returns per GPU what a
    cluster admin acts on, with the action it asks for.
  - From nvidia-smi, uncorrectable ECC errors since the driver loaded (a GPU reset), a pending row remapping or
    page retirement (a reset applies it), a failed row remapping, memory that cannot be repaired and uncorrectable
    SRAM errors past their threshold (a replacement), and the driver's own C(gpu_recovery_action) (Reset, Reboot,
    Drain P2P, Drain and Reset). Lifetime (aggregate) counters are notes.
  - From the kernel log, the Xid errors of the last O(xid_window) seconds, matched to a GPU by PCI bus, each with its
    meaning and NVIDIA's immediate action (the Xid catalog for Ampere and newer GPUs; the codes this module knows
    are in RV(ansible_facts.dra_gpu_health.xids)). Codes the application causes (13, 31, 43, 94) are notes.
  - A GPU the kernel driver knows that nvidia-smi cannot reach is taken as fallen off the bus (a node reboot).
  - A GPU is C(unhealthy) when a reading asks for a reset, a reboot, a replacement or a P2P drain, C(unknown) when
    nvidia-smi gave no report on it, C(healthy) otherwise.
  - Never changes the GPUs' settings. M(dra.admin.dra_device_health_info) and M(dra.admin.dra_device_remediation)
    take these facts (O(dra.admin.dra_device_health_info#module:gpu_health)) and match each GPU to the DRA device
    that publishes its UUID.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.facts
  - dra.admin.attributes.facts_module
  - dra.admin.attributes.platform
options:
  nvidia_smi:
    description:
      - The C(nvidia-smi) program, as a path or a name looked up on E(PATH); it runs as C(nvidia-smi -q -x).
      - An empty string skips it (every GPU the kernel driver knows is then C(unknown), unless the kernel log says
        it fell off the bus).
    type: str
    default: nvidia-smi
  kernel_log:
    description:
      - The command that prints the kernel log, as a list of arguments; its lines stamped with seconds since boot
        (as C(dmesg) prints them) let the module tell an Xid's age.
      - An empty list does not read the kernel log. A command that fails (for example C(dmesg) without the right
        to read the log) is reported in RV(ansible_facts.dra_gpu_health.errors), not an error of the module.
    type: list
    elements: str
    default: [dmesg]
  root:
    description:
      - Directory under which C(proc/driver/nvidia/gpus) and C(proc/uptime) are read.
    type: path
    default: /
  xid_window:
    description:
      - Seconds before the reading within which an Xid counts. The kernel log keeps Xids until the node reboots,
        also those of a GPU reset since.
      - An Xid line without a time counts whatever its age.
    type: int
    default: 3600
  node_name:
    description:
      - The Kubernetes node name of this host, carried in the facts for the health modules' report.
    type: str
attributes:
  platform:
    support: full
    platforms: linux
    details:
      - Runs C(nvidia-smi) and O(kernel_log) on the node and reads its C(/proc).
notes:
  - Supports check mode; never changes anything.
seealso:
  - module: dra.admin.dra_hardware_facts
  - module: dra.admin.dra_device_health_info
"""

EXAMPLES = r"""
- name: Read the GPUs' health on every GPU node
  dra.admin.dra_gpu_health_facts:
    node_name: "{{ inventory_hostname }}"
  become: true  # dmesg may need it

- name: Take unhealthy GPUs out of service, matched to their DRA devices by UUID
  dra.admin.dra_device_remediation:
    effect: NoSchedule
    gpu_health: "{{ groups['gpu_nodes'] | map('extract', hostvars, ['ansible_facts', 'dra_gpu_health']) | list }}"
  run_once: true
"""

RETURN = r"""
ansible_facts:
  description: Facts added.
  returned: always
  type: dict
  contains:
    dra_gpu_health:
      description: The node's GPUs and their health.
      returned: always
      type: dict
      contains:
        node:
          description: O(node_name), or null.
          type: str
          sample: gpu-node-1
        available:
          description: Whether nvidia-smi gave a report.
          type: bool
        driver_version:
          description: The NVIDIA driver's version, from the report.
          type: str
          sample: 580.159.04
        kernel_log_read:
          description: Whether the kernel log was read.
          type: bool
        gpus:
          description:
            - One entry per GPU that nvidia-smi reports or the kernel driver knows, in PCI bus order.
            - C(condition) is C(healthy), C(unhealthy) or C(unknown); C(action) the most severe action its readings
              ask for (C(none), C(watch), C(look-up), C(restart-app), C(drain-p2p), C(reset-gpu), C(reboot-node),
              C(replace-gpu)); C(reasons) what takes it out of service, C(notes) the rest.
            - C(ecc) (C(mode), C(volatile) and C(aggregate) C(uncorrectable) and C(correctable) counts,
              C(sram_threshold_exceeded), C(unrepairable_memory)), C(remapped_rows) (C(correctable), C(uncorrectable),
              C(pending), C(failure); null on GPUs without row remapping), C(retired_pages) (C(single_bit),
              C(double_bit), C(pending); null on GPUs that do not retire pages), C(recovery_action), the Xids
              matched to it, and C(findings) (C(reason), C(action), C(source)).
          type: list
          elements: dict
          sample:
            - uuid: GPU-1b2c3d4e-0000-4000-8000-000000000001
              pci_bus: "0000:00:06"
              index: 0
              name: NVIDIA H100 80GB HBM3
              reported: true
              condition: unhealthy
              action: reset-gpu
              reasons: [a row remapping is pending (a GPU reset applies it)]
              notes: []
        unhealthy:
          description: UUIDs (the PCI bus where the UUID is not known) of the unhealthy GPUs.
          type: list
          elements: str
        xids:
          description: The Xids within O(xid_window), each with C(bus), C(code), C(text), C(time), C(age_seconds),
            C(meaning) and C(action).
          type: list
          elements: dict
        unmatched_xids:
          description: Xids on a PCI bus of no GPU known here.
          type: list
          elements: dict
        xid_window:
          description: O(xid_window).
          type: int
        errors:
          description: What could not be read (nvidia-smi's or the kernel log command's failure, unreadable files).
          type: list
          elements: str
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import (
    GpuHealthError, judge_gpus, parse_smi_xml,
)

SMI_ARGS = ["-q", "-x"]


def argument_spec():
    return dict(
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        kernel_log=dict(type="list", elements="str", default=["dmesg"]),
        root=dict(type="path", default="/"),
        xid_window=dict(type="int", default=3600),
        node_name=dict(type="str"),
    )


def program_path(module, program):
    """The program's path, or None when it is not installed."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return module.get_bin_path(program)


def read_smi(module, program, errors):
    """parse_smi_xml's reading, or None (the reason in errors)."""
    if not program:
        return None
    command = program_path(module, program)
    if command is None:
        errors.append("%s not found%s" % (program, "" if os.sep in program else " on PATH"))
        return None
    rc, out, err = module.run_command([command] + SMI_ARGS, environ_update={"LC_ALL": "C"})
    try:
        reading = parse_smi_xml(out)
    except GpuHealthError as exc:
        lines = [line.strip() for line in (err + "\n" + out).splitlines() if line.strip()]
        errors.append("%s -q -x exited with %s: %s (%s)" % (command, rc, lines[0][:300] if lines else "no message", exc))
        return None
    reading["messages"] += [line.strip() for line in err.splitlines() if line.strip()]
    return reading


def read_kernel_log(module, command, errors):
    if not command:
        return None
    path = program_path(module, command[0])
    if path is None:
        errors.append("%s not found: the kernel log was not read" % command[0])
        return None
    rc, out, err = module.run_command([path] + command[1:], environ_update={"LC_ALL": "C"})
    if rc != 0:
        message = (err or out).strip()[:300]
        errors.append("%s exited with %s: %s (the kernel log was not read)" % (" ".join(command), rc, message))
        return None
    return out


def read_file(path, errors):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        errors.append("%s: %s" % (path, exc.strerror or exc))
        return None


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    with fails_on_error(module):
        if params["xid_window"] < 0:
            raise InputError("xid_window is %d; give the seconds an Xid counts, 0 or more" % params["xid_window"])
        if not os.path.isdir(params["root"]):
            raise InputError("root %s is not a directory: give the directory that holds the node's proc/ (/ on the "
                             "node itself)" % params["root"])
        errors = []
        smi = read_smi(module, params["nvidia_smi"], errors)
        kernel_log = read_kernel_log(module, params["kernel_log"], errors)
        proc = [read_file(p, errors) for p in sorted(glob.glob(os.path.join(
            params["root"], "proc", "driver", "nvidia", "gpus", "*", "information")))]
        uptime = read_file(os.path.join(params["root"], "proc", "uptime"), errors)
        facts = judge_gpus(smi, kernel_log, [t for t in proc if t], uptime, params["xid_window"])
        facts.update(node=params["node_name"], available=smi is not None, kernel_log_read=kernel_log is not None,
                     errors=errors)
    module.exit_json(changed=False, ansible_facts={"dra_gpu_health": facts})


if __name__ == "__main__":
    main()
