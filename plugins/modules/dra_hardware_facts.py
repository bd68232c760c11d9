#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_hardware_facts
short_description: Discover the accelerators, NICs and topology a node really has
version_added: 0.1.0
description:
  - Runs on a node and reads its hardware from sysfs and procfs, independently of any DRA driver,
    so that what a driver publishes in its ResourceSlices can be checked against what is there.
  - PCI functions from C(/sys/bus/pci/devices) with class and type (GPU, network, InfiniBand,
    processing accelerator, ...), vendor and device ids, names from the C(pci.ids) database when
    it is installed, the bound kernel driver, NUMA node, IOMMU group and SR-IOV state.
  - C(/dev/dri) render nodes and the GPU each belongs to, RDMA devices from
    C(/sys/class/infiniband) with their ports, and a CPU and NUMA summary.
  - NVIDIA GPUs through C(nvidia-smi) when it is installed (uuid, name, memory, MIG mode).
    A missing tool is reported in the facts, not an error.
  - An unreadable file, a dangling symlink or malformed tool output is reported per item in
    RV(ansible_facts.dra_hardware.errors); the module does not fail for them.
  - Read-only; the same answer in check mode. Needs no access to the Kubernetes API.
  - When O(compare_slices) is given, also compares the hardware with those ResourceSlices, per
    driver in O(drivers), and returns RV(ansible_facts.dra_hardware_drift).
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.facts
  - dra.admin.attributes.facts_module
  - dra.admin.attributes.platform
options:
  root:
    description:
      - Directory under which C(sys), C(proc), C(dev) and C(usr/share) are read.
      - Point it at a copy of another machine's tree to inspect that machine offline.
    type: path
    default: /
  nvidia_smi:
    description:
      - The C(nvidia-smi) program, as a path or a name looked up on E(PATH).
      - An empty string skips NVIDIA discovery.
      - The program runs on the managed host even when O(root) is not V(/).
    type: str
    default: nvidia-smi
  include:
    description:
      - Sections to discover.
    type: list
    elements: str
    choices: [pci, render_nodes, rdma, cpu, numa, nvidia]
    default: [pci, render_nodes, rdma, cpu, numa, nvidia]
  compare_slices:
    description:
      - ResourceSlice objects as the API returns them (any served C(resource.k8s.io) version),
        for example the C(resources) of M(kubernetes.core.k8s_info).
      - Only slices whose C(spec.nodeName) is O(node_name) count, and only the newest generation of
        each pool.
      - When omitted, no comparison is made.
    type: list
    elements: dict
  node_name:
    description:
      - The Kubernetes node name of this host, used to select its slices from O(compare_slices).
      - Required with O(compare_slices).
    type: str
  drivers:
    description:
      - Which DRA drivers to compare with, and how their devices map to hardware.
      - Without it, the built-in profiles of the drivers found in O(compare_slices) are used
        (C(gpu.example.com) and C(gpu.nvidia.com) are known; see the role documentation).
    type: list
    elements: dict
    suboptions:
      name:
        description: Driver name as in C(spec.driver) of its ResourceSlices.
        type: str
        required: true
      pci_types:
        description: PCI device types (the C(type) of each entry of RV(ansible_facts.dra_hardware.pci_devices)) that are this driver's devices.
        type: list
        elements: str
        default: [gpu]
      pci_vendors:
        description: Only PCI functions of these vendor ids (four hex digits) count; empty for any vendor.
        type: list
        elements: str
        default: []
      functions:
        description: Which PCI functions count when SR-IOV is in use.
        type: str
        choices: [physical, virtual, all]
        default: physical
      id_attribute:
        description:
          - Device attribute carrying a hardware id (for example V(uuid)); when set and the node reports
            ids of the kind O(drivers[].hardware_id), devices are matched by id instead of counted.
        type: str
      hardware_id:
        description: Which hardware id O(drivers[].id_attribute) holds.
        type: str
        choices: [nvidia_uuid, pci_address]
        default: nvidia_uuid
      device_match:
        description:
          - "Only published devices whose attributes have these values count (for example
            V({type: gpu}) to leave out MIG devices)."
        type: dict
        default: {}
attributes:
  platform:
    support: full
    platforms: linux
    details:
      - Reads the node's C(/sys) and C(/proc) (below O(root)) and runs C(nvidia-smi) when it is there.
notes:
  - The bound driver, IOMMU group and SR-IOV fields are read from the links and files the kernel
    exposes; a field the kernel does not expose is null, not an error.
  - Supports check mode; never changes anything.
"""

EXAMPLES = r"""
- name: What does this node have?
  dra.admin.dra_hardware_facts:

- name: Show GPUs and their NUMA nodes
  ansible.builtin.debug:
    msg: "{{ ansible_facts.dra_hardware.pci_devices | selectattr('type', 'equalto', 'gpu')
             | map(attribute='numa_node') | list }}"

- name: Inspect a tree copied from another node, without nvidia-smi
  dra.admin.dra_hardware_facts:
    root: /srv/recorded/gpu-node-17
    nvidia_smi: ""
    include: [pci, numa]

- name: Compare with the slices the API holds for this node
  dra.admin.dra_hardware_facts:
    compare_slices: "{{ slices.resources }}"
    node_name: "{{ inventory_hostname }}"
    drivers:
      - name: gpu.nvidia.com
        pci_types: [gpu]
        pci_vendors: ["10de"]
        id_attribute: uuid
        device_match: {type: gpu}
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: dict
  contains:
    dra_hardware:
      description: The node's hardware.
      returned: always
      type: dict
      contains:
        root:
          description: The root the facts were read from.
          type: str
          returned: always
          sample: /
        sections:
          description: The sections discovered.
          type: list
          elements: str
          returned: always
        pci_devices:
          description:
            - One entry per function listed in C(/sys/bus/pci/devices), in address order.
            - C(type) is one of V(gpu), V(bmc_vga) (a server management controller's display), V(network),
              V(infiniband), V(accelerator), V(storage), V(bridge), V(audio), V(usb), V(crypto),
              V(system), V(other).
            - C(numa_node) is V(-1) when the kernel reports no NUMA affinity.
            - C(sriov) is null unless the function is an SR-IOV physical function.
          type: list
          elements: dict
          returned: when pci is included
          sample:
            - address: "0000:18:00.0"
              class: "0x030200"
              class_code: "0302"
              prog_if: "00"
              class_name: 3D controller
              type: gpu
              vendor_id: 10de
              device_id: "2330"
              subsystem_vendor_id: 10de
              subsystem_device_id: 16c1
              vendor_name: NVIDIA Corporation
              device_name: GH100 [H100 SXM5 80GB]
              driver: nvidia
              numa_node: 0
              iommu_group: 31
              sriov: null
              physfn: null
              virtual_function: false
              render_nodes: [renderD128]
              rdma_devices: []
              net_interfaces: []
              readable: true
        pci_ids:
          description: The pci.ids database names were read from, or null when none is installed.
          type: str
          returned: when pci is included
          sample: /usr/share/misc/pci.ids
        pci_summary:
          description: Per device type, the number of functions, physical and virtual.
          type: dict
          returned: when pci is included
          sample: {gpu: {functions: 8, physical: 8, virtual: 0}}
        render_nodes:
          description: C(/dev/dri/renderD*) with the PCI address of their device.
          type: list
          elements: dict
          returned: when render_nodes is included
          sample: [{name: renderD128, path: /dev/dri/renderD128, pci_address: "0000:18:00.0"}]
        rdma_devices:
          description: RDMA devices with their PCI address, node GUID, firmware and ports.
          type: list
          elements: dict
          returned: when rdma is included
          sample:
            - name: mlx5_0
              pci_address: "0000:29:00.0"
              node_guid: "b83f:d203:00a1:2b40"
              fw_ver: 28.39.1002
              ports: [{port: 1, state: "4: ACTIVE", phys_state: "5: LinkUp", link_layer: InfiniBand,
                       rate: "400 Gb/sec (4X NDR)"}]
        cpu:
          description: Logical CPUs, sockets, cores, vendor and model from C(/proc/cpuinfo), and the online list.
          type: dict
          returned: when cpu is included
          sample: {logical_cpus: 112, sockets: 2, cores: 56, vendor: GenuineIntel, model: Intel(R) Xeon(R) Platinum 8480+,
                   online: 0-111, online_cpus: 112}
        numa:
          description: NUMA nodes with their CPU list, CPU count and memory.
          type: dict
          returned: when numa is included
          sample: {available: true, nodes: [{id: 0, cpulist: 0-55, cpus: 56, memory_kb: 1056231424}]}
        nvidia:
          description:
            - GPUs reported by C(nvidia-smi). C(available) is false, with a C(reason), when the tool is
              absent, skipped or failed.
            - C(mig_mode) is V(Enabled), V(Disabled), or null when the GPU does not support MIG.
          type: dict
          returned: when nvidia is included
          sample:
            available: true
            command: /usr/bin/nvidia-smi
            reason: null
            gpus: [{index: 0, uuid: GPU-5f2e1a9c-0d43-4b71-9a65-0c8e41d7a001, name: NVIDIA H100 80GB HBM3,
                    memory_mib: 81559, mig_mode: Disabled}]
        errors:
          description: Items that could not be read, each with its section, item, path (under the root) and error.
          type: list
          elements: dict
          returned: always
          sample: [{section: pci, item: "0000:18:00.0", path: /sys/bus/pci/devices/0000:18:00.0/class,
                    error: "is a directory, expected a file"}]
    dra_hardware_drift:
      description:
        - The comparison with O(compare_slices), one entry per driver.
        - C(missing) counts devices the node has that the driver does not publish; C(extra) counts
          published devices the node does not have; C(method) is V(id) when devices were matched by
          id, else V(count).
      returned: when compare_slices is given
      type: dict
      sample:
        node: kwok-node-0
        drift: true
        drivers:
          - driver: gpu.example.com
            method: count
            hardware: 8
            published: 6
            matching: 6
            missing: 2
            extra: 0
            drift: true
            status: missing
            missing_ids: []
            extra_ids: []
            notes: []
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.nodes.hardware import (
    NVIDIA_SMI_ARGS, SECTIONS, discover, nvidia_report,
)
from ansible_collections.dra.admin.plugins.module_utils.nodes.drift import compare_node


def argument_spec():
    driver_spec = dict(
        name=dict(type="str", required=True),
        pci_types=dict(type="list", elements="str", default=["gpu"]),
        pci_vendors=dict(type="list", elements="str", default=[]),
        functions=dict(type="str", choices=["physical", "virtual", "all"], default="physical"),
        id_attribute=dict(type="str"),
        hardware_id=dict(type="str", choices=["nvidia_uuid", "pci_address"], default="nvidia_uuid"),
        device_match=dict(type="dict", default={}),
    )
    return dict(
        root=dict(type="path", default="/"),
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        include=dict(type="list", elements="str", choices=list(SECTIONS), default=list(SECTIONS)),
        compare_slices=dict(type="list", elements="dict"),
        node_name=dict(type="str"),
        drivers=dict(type="list", elements="dict", options=driver_spec),
    )


def find_nvidia_smi(module, program):
    """The program's path, or None when it is not installed."""
    if not program:
        return None
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return module.get_bin_path(program)


def run_nvidia_smi(module, program):
    if not program:
        report = nvidia_report(None, 0, "", "")
        report["reason"] = "skipped (nvidia_smi is empty)"
        return report
    command = find_nvidia_smi(module, program)
    if command is None:
        report = nvidia_report(None, 0, "", "")
        report["reason"] = "%s not found%s" % (program, "" if os.sep in program else " on PATH")
        return report
    rc, out, err = module.run_command([command] + NVIDIA_SMI_ARGS, environ_update={"LC_ALL": "C"})
    return nvidia_report(command, rc, out, err)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           required_by={"compare_slices": "node_name"})
    params = module.params
    with fails_on_error(module):
        if not os.path.isdir(params["root"]):
            raise InputError("root %s is not a directory: give the directory that holds the node's sys/ and proc/ "
                             "(/ on the node itself)" % params["root"])
        nvidia = run_nvidia_smi(module, params["nvidia_smi"]) if "nvidia" in params["include"] else None
        facts = discover(params["root"], params["include"], nvidia)
        result = {"dra_hardware": facts}
        if params["compare_slices"] is not None:
            result["dra_hardware_drift"] = compare_node(facts, params["compare_slices"], params["node_name"],
                                                        params["drivers"])
    module.exit_json(changed=False, ansible_facts=result)


if __name__ == "__main__":
    main()
