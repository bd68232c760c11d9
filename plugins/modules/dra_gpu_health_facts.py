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
  - From nvidia-smi, uncorrectable ECC errors since the driver loaded and a pending row remapping, page retirement,
    channel or TPC repair (C(channel_repair_pending), C(tpc_repair_pending)) - what they ask for is O(pending) -,
    a failed row remapping, memory that cannot be repaired and uncorrectable SRAM errors past their threshold (NVIDIA
    asks to run the field diagnostics, C(run-field-diagnostics)), and the driver's own C(gpu_recovery_action) (NVML's
    actions 0-7 - None, GPU Reset, Node Reboot, Drain P2P, Drain and Reset, Recover IMEX Domain, Bus Reset, System
    Reboot). Lifetime (aggregate) counters are notes.
  - From the kernel log, the Xid errors of the last O(xid_window) seconds, matched to a GPU by PCI bus, each with its
    meaning and the immediate action of NVIDIA's Xid catalog for Ampere and newer GPUs; the driver's own text may ask
    for more, never for less (Xid 154 carries the new recovery action, C((GPU Reset Required)), C((Node Reboot
    Required)), C((PF FLR)), ...; a repair or remapping to activate - Xid 63 "reset gpu to activate", Xid 160
    "Perform node reboot to activate repair" - asks for it under O(pending), as nvidia-smi's flags for it do). The
    NVLink5 Xids 144-150 are decoded as NVIDIA's catalog says (the unit from the IntrInfo word, the action from the
    error status or link-down reason); a line the decode does not cover is a reset when printed Fatal, else
    C(look-up). Codes whose catalog action is to restart the application (13, 31, 94, ...) or to ignore them (43, 45,
    63, 92, 160, ...) are notes. A code the catalog sends to a person, gives no action for (162-172), or does not list
    makes the GPU C(unknown), never C(healthy).
  - A reset-class Xid ends before O(xid_window) does when the log shows the driver loaded again after it, or a later
    Xid 154 setting the GPU's recovery action to None.
  - A GPU the kernel driver knows that nvidia-smi cannot reach is taken as fallen off the bus (a node reboot),
    unless C(/proc) says C(GPU Excluded) C(Yes) (nvidia-smi does not list excluded GPUs; it is C(unknown)).
  - A GPU is C(unhealthy) when a reading asks for a drain, a reset, a reboot or the field diagnostics, C(unknown)
    when nvidia-smi gave no report on it or a reading needs a person (C(look-up)), C(healthy) otherwise.
  - Never changes the GPUs' settings. M(dra.admin.dra_device_health_info) and M(dra.admin.dra_device_remediation)
    take these facts (O(dra.admin.dra_device_health_info#module:gpu_health)) and match each GPU to the DRA device
    that publishes its UUID (a MIG device by its C(parentUUID)).
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
  pending:
    description:
      - What a pending memory repair (row remapping, page retirement, channel or TPC repair, from nvidia-smi's flags
        or from the Xid whose text asks to activate it) and uncorrectable ECC errors since the driver loaded ask
        for.
      - V(drain) takes the GPU out of service until a reset (a reboot for a channel or TPC repair) applies it, as
        DCGM's health checks answer.
      - V(allow) keeps it in service with a note, as NVIDIA's error recovery flags page allows (new work may start;
        reset when convenient).
    type: str
    choices: [drain, allow]
    default: drain
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
              ask for (mildest first C(none), C(watch), C(restart-app), C(look-up), C(drain-p2p),
              C(recover-imex-domain), C(reset-gpu), C(reset-bus), C(reboot-node), C(run-field-diagnostics));
              C(reasons) the readings that make the condition (what takes it out of service; for an C(unknown) GPU
              what needs a person), C(notes) the rest.
            - C(excluded) (C(GPU Excluded) in C(/proc)), C(ecc) (C(mode), C(volatile) and C(aggregate)
              C(uncorrectable) and C(correctable) counts, C(sram_threshold_exceeded), C(unrepairable_memory),
              C(channel_repair_pending), C(tpc_repair_pending)), C(remapped_rows) (C(correctable), C(uncorrectable),
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
          description: The Xids within O(xid_window), each with C(bus), C(code), C(text), C(time), C(line),
            C(age_seconds), C(meaning), C(action) and C(ended_by) (what ended a reset-class Xid, or null).
          type: list
          elements: dict
        unmatched_xids:
          description: Xids on a PCI bus of no GPU known here.
          type: list
          elements: dict
        xid_window:
          description: O(xid_window).
          type: int
        pending:
          description: O(pending).
          type: str
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
    PENDING_DRAIN, PENDING_POLICIES, GpuHealthError, judge_gpus, parse_smi_xml,
)

SMI_ARGS = ["-q", "-x"]


def argument_spec():
    return dict(
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        kernel_log=dict(type="list", elements="str", default=["dmesg"]),
        root=dict(type="path", default="/"),
        xid_window=dict(type="int", default=3600),
        pending=dict(type="str", choices=list(PENDING_POLICIES), default=PENDING_DRAIN),
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
        facts = judge_gpus(smi, kernel_log, [t for t in proc if t], uptime, params["xid_window"],
                           params["pending"])
        facts.update(node=params["node_name"], available=smi is not None, kernel_log_read=kernel_log is not None,
                     errors=errors)
    module.exit_json(changed=False, ansible_facts={"dra_gpu_health": facts})


if __name__ == "__main__":
    main()
