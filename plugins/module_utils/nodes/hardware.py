# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a node really has: devices read from a sysfs/procfs root.

Pure functions over a root directory (``/`` on a node, a recorded tree in
tests): PCI devices with class, ids, names, kernel driver, NUMA node, IOMMU
group and SR-IOV state; ``/dev/dri`` render nodes; RDMA devices; a CPU and
NUMA summary; and the parsing of ``nvidia-smi`` CSV output (the command itself
is run by the caller).

Nothing here raises on bad input: every unreadable or malformed item becomes
an entry ``{"section", "item", "path", "error"}`` in an error list, and the
rest of the discovery carries on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re

SECTIONS = ("pci", "render_nodes", "rdma", "cpu", "numa", "nvidia")

PCI_DEVICES_DIR = "sys/bus/pci/devices"
PCI_IDS_PATHS = ("usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids", "usr/share/pci.ids",
                 "usr/local/share/pci.ids")

# (class << 8 | subclass) -> (type, class name). Types are what DRA drivers publish.
PCI_CLASSES = {
    0x0100: ("storage", "SCSI storage controller"),
    0x0104: ("storage", "RAID bus controller"),
    0x0106: ("storage", "SATA controller"),
    0x0107: ("storage", "Serial Attached SCSI controller"),
    0x0108: ("storage", "Non-Volatile memory controller"),
    0x0180: ("storage", "Mass storage controller"),
    0x0200: ("network", "Ethernet controller"),
    0x0207: ("infiniband", "Infiniband controller"),
    0x0208: ("network", "Fabric controller"),
    0x0280: ("network", "Network controller"),
    0x0300: ("gpu", "VGA compatible controller"),
    0x0302: ("gpu", "3D controller"),
    0x0380: ("gpu", "Display controller"),
    0x0403: ("audio", "Audio device"),
    0x0600: ("bridge", "Host bridge"),
    0x0601: ("bridge", "ISA bridge"),
    0x0604: ("bridge", "PCI bridge"),
    0x0680: ("bridge", "Bridge"),
    0x0880: ("system", "System peripheral"),
    0x0b40: ("accelerator", "Co-processor"),
    0x0c03: ("usb", "USB controller"),
    0x0c05: ("system", "SMBus"),
    0x1080: ("crypto", "Encryption controller"),
    0x1200: ("accelerator", "Processing accelerators"),
    0x1300: ("system", "Non-Essential Instrumentation"),
}
PCI_BASE_CLASSES = {
    0x00: ("other", "Unclassified device"), 0x01: ("storage", "Mass storage controller"),
    0x02: ("network", "Network controller"), 0x03: ("gpu", "Display controller"),
    0x04: ("multimedia", "Multimedia controller"), 0x05: ("memory", "Memory controller"),
    0x06: ("bridge", "Bridge"), 0x07: ("communication", "Communication controller"),
    0x08: ("system", "Generic system peripheral"), 0x0c: ("usb", "Serial bus controller"),
    0x0b: ("accelerator", "Processor"), 0x10: ("crypto", "Encryption controller"),
    0x11: ("system", "Signal processing controller"), 0x12: ("accelerator", "Processing accelerators"),
    0x13: ("system", "Non-Essential Instrumentation"),
}
# VGA functions of server management controllers: a display for the console, never a DRA device.
BMC_VGA_VENDORS = {"1a03": "ASPEED", "102b": "Matrox", "19e5": "Huawei iBMC", "1556": "PLDA"}

_CPULIST_RE = re.compile(r"^\s*(\d+)(?:-(\d+))?\s*$")
_RENDER_RE = re.compile(r"^renderD\d+$")
_NVIDIA_FIELDS = ("index", "uuid", "name", "memory.total", "mig.mode.current")
NVIDIA_SMI_ARGS = ["--query-gpu=" + ",".join(_NVIDIA_FIELDS), "--format=csv,noheader,nounits"]


class Errors(object):
    """Collects per-item problems instead of raising."""

    def __init__(self, root):
        self.root = root
        self.items = []

    def add(self, section, item, path, error):
        self.items.append({"section": section, "item": item, "path": self.rel(path), "error": error})

    def rel(self, path):
        if path is None:
            return None
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        return "/" if rel == "." else ("/" + rel if not rel.startswith("../") else path)


def _join(root, rel):
    return os.path.join(root, *rel.split("/"))


def _describe(exc):
    if isinstance(exc, EnvironmentError):
        if exc.errno == errno.ENOENT:
            return "no such file (dangling symlink or removed device)"
        if exc.errno == errno.EISDIR:
            return "is a directory, expected a file"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied"
        return os.strerror(exc.errno) if exc.errno else str(exc)
    return str(exc)


def read_kernel_text(path, errors, section, item, required=False):
    """A small sysfs/procfs file's text, stripped; None when absent (an error when required or broken).

    Not files.read_text: what the kernel reports is read leniently (at most 1 MiB, undecodable bytes
    replaced) and a failure is recorded in `errors` instead of raised."""
    if not os.path.lexists(path):
        if required:
            errors.add(section, item, path, "missing")
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 20)
    except EnvironmentError as exc:
        errors.add(section, item, path, _describe(exc))
        return None
    return data.decode("utf-8", "replace").strip()


def read_int(path, errors, section, item, base=10, required=False):
    text = read_kernel_text(path, errors, section, item, required)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        errors.add(section, item, path, "not an integer: %r" % text[:60])
        return None


def link_name(path, errors, section, item):
    """Basename of a symlink's target (driver, iommu_group, physfn); None when absent."""
    if not os.path.lexists(path):
        return None
    if not os.path.islink(path):
        errors.add(section, item, path, "expected a symlink")
        return None
    try:
        return os.path.basename(os.readlink(path).rstrip("/"))
    except EnvironmentError as exc:
        errors.add(section, item, path, _describe(exc))
        return None


def list_dir(path, errors=None, section=None, item=None):
    """Sorted entries of a directory; [] when absent (an error only when it exists but cannot be listed)."""
    try:
        return sorted(os.listdir(path))
    except EnvironmentError as exc:
        if errors is not None and os.path.lexists(path):
            errors.add(section, item, path, _describe(exc))
        return []


def parse_cpulist(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; ValueError on anything else."""
    cpus = []
    if not text:
        return cpus
    for part in text.split(","):
        match = _CPULIST_RE.match(part)
        if not match:
            raise ValueError("bad cpulist element %r" % part)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError("bad cpulist range %r" % part)
        cpus.extend(range(first, last + 1))
    return cpus


# --- PCI ---------------------------------------------------------------------

def decode_pci_class(code, vendor_id=None):
    """24-bit class code -> {class, class_code, prog_if, class_name, type}."""
    subclass_key = (code >> 8) & 0xFFFF
    pci_type, name = PCI_CLASSES.get(subclass_key) or PCI_BASE_CLASSES.get(code >> 16) or ("other", None)
    if subclass_key == 0x0300 and vendor_id in BMC_VGA_VENDORS:
        pci_type = "bmc_vga"
    return {"class": "0x%06x" % code, "class_code": "%04x" % subclass_key, "prog_if": "%02x" % (code & 0xFF),
            "class_name": name, "type": pci_type}


def find_pci_ids(root):
    """The first pci.ids database under root, or None."""
    for rel in PCI_IDS_PATHS:
        path = _join(root, rel)
        if os.path.isfile(path):
            return path
    return None


def lookup_pci_names(path, wanted, errors=None):
    """Names for the wanted {vendor_id: set(device_ids)} from a pci.ids file.

    Reads line by line and keeps only the wanted vendor and device lines; stops
    at the device class section or once past the highest wanted vendor (the
    file is sorted by vendor id). Returns ({vendor: name}, {(vendor, device): name}).
    """
    vendors, devices = {}, {}
    if not path or not wanted:
        return vendors, devices
    last_vendor = max(wanted)
    current = None
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                if raw[:1] == b"#" or not raw.strip():
                    continue
                if raw[:1] == b"\t":
                    if current is None or raw[1:2] == b"\t":
                        continue
                    line = raw.decode("utf-8", "replace").strip()
                    device_id = line[:4].lower()
                    if device_id in wanted[current]:
                        devices[(current, device_id)] = line[4:].strip()
                    continue
                if raw[:2] == b"C ":
                    break
                line = raw.decode("utf-8", "replace").rstrip()
                vendor_id = line[:4].lower()
                current = vendor_id if vendor_id in wanted else None
                if current is not None:
                    vendors[vendor_id] = line[4:].strip()
                elif vendor_id > last_vendor and len(vendor_id) == 4:
                    break
    except EnvironmentError as exc:
        if errors is not None:
            errors.add("pci", "pci.ids", path, _describe(exc))
    return vendors, devices


def _hex_id(path, errors, item, required=True):
    value = read_int(path, errors, "pci", item, base=16, required=required)
    return None if value is None else "%04x" % value


def read_pci_device(root, address, errors):
    """One PCI function from sys/bus/pci/devices/<address>; unreadable fields are None plus an error."""
    base = _join(root, PCI_DEVICES_DIR + "/" + address)
    device = {"address": address, "class": None, "class_code": None, "prog_if": None, "class_name": None,
              "type": None, "vendor_id": None, "device_id": None, "subsystem_vendor_id": None,
              "subsystem_device_id": None, "vendor_name": None, "device_name": None, "driver": None,
              "numa_node": None, "iommu_group": None, "sriov": None, "physfn": None, "virtual_function": False,
              "render_nodes": [], "rdma_devices": [], "net_interfaces": [], "readable": True}
    if not os.path.isdir(base):
        errors.add("pci", address, base, "device entry is not a directory (dangling symlink?)")
        device["readable"] = False
        return device
    device["vendor_id"] = _hex_id(os.path.join(base, "vendor"), errors, address)
    device["device_id"] = _hex_id(os.path.join(base, "device"), errors, address)
    device["subsystem_vendor_id"] = _hex_id(os.path.join(base, "subsystem_vendor"), errors, address, False)
    device["subsystem_device_id"] = _hex_id(os.path.join(base, "subsystem_device"), errors, address, False)
    code = read_int(os.path.join(base, "class"), errors, "pci", address, base=16, required=True)
    if code is not None:
        device.update(decode_pci_class(code, device["vendor_id"]))
    device["driver"] = link_name(os.path.join(base, "driver"), errors, "pci", address)
    device["numa_node"] = read_int(os.path.join(base, "numa_node"), errors, "pci", address)
    group = link_name(os.path.join(base, "iommu_group"), errors, "pci", address)
    if group is not None:
        device["iommu_group"] = int(group) if group.isdigit() else group
    total_vfs = read_int(os.path.join(base, "sriov_totalvfs"), errors, "pci", address)
    if total_vfs is not None:
        vfs = []
        for name in list_dir(base):
            if name.startswith("virtfn") and name[6:].isdigit():
                vfs.append((int(name[6:]), link_name(os.path.join(base, name), errors, "pci", address)))
        device["sriov"] = {"total_vfs": total_vfs,
                           "num_vfs": read_int(os.path.join(base, "sriov_numvfs"), errors, "pci", address),
                           "vfs": [vf for dummy, vf in sorted(vfs)]}
    device["physfn"] = link_name(os.path.join(base, "physfn"), errors, "pci", address)
    device["virtual_function"] = device["physfn"] is not None
    device["render_nodes"] = [n for n in list_dir(os.path.join(base, "drm"), errors, "pci", address)
                              if _RENDER_RE.match(n)]
    device["rdma_devices"] = list_dir(os.path.join(base, "infiniband"), errors, "pci", address)
    device["net_interfaces"] = list_dir(os.path.join(base, "net"), errors, "pci", address)
    return device


def read_pci(root, errors, with_names=True):
    """Every function listed in sys/bus/pci/devices, with names from pci.ids when installed."""
    path = _join(root, PCI_DEVICES_DIR)
    if not os.path.isdir(path):
        errors.add("pci", PCI_DEVICES_DIR, path, "missing: no sysfs PCI bus under this root")
        return [], None
    devices = [read_pci_device(root, address, errors) for address in list_dir(path, errors, "pci", PCI_DEVICES_DIR)]
    ids_path = find_pci_ids(root) if with_names else None
    if ids_path:
        wanted = {}
        for dev in devices:
            if dev["vendor_id"]:
                wanted.setdefault(dev["vendor_id"], set()).add(dev["device_id"])
        vendors, names = lookup_pci_names(ids_path, wanted, errors)
        for dev in devices:
            dev["vendor_name"] = vendors.get(dev["vendor_id"])
            dev["device_name"] = names.get((dev["vendor_id"], dev["device_id"]))
    return devices, (errors.rel(ids_path) if ids_path else None)


def summarize_pci(devices):
    """{type: {"functions": n, "physical": n, "virtual": n}} over readable devices."""
    summary = {}
    for dev in devices:
        entry = summary.setdefault(dev["type"] or "unknown", {"functions": 0, "physical": 0, "virtual": 0})
        entry["functions"] += 1
        entry["virtual" if dev["virtual_function"] else "physical"] += 1
    return summary


# --- /dev/dri and RDMA --------------------------------------------------------

def _device_address(root, class_entry, errors, section, item):
    """The PCI address a class device (sys/class/<x>/<name>) belongs to, via its `device` link."""
    if os.path.lexists(class_entry) and not os.path.exists(class_entry):
        errors.add(section, item, class_entry, "class entry points nowhere (device removed?)")
        return None
    link = os.path.join(class_entry, "device")
    if not os.path.lexists(link):
        return None
    real = os.path.realpath(link)
    if not os.path.exists(real):
        errors.add(section, item, link, "device link points nowhere")
        return None
    return os.path.basename(real)


def read_render_nodes(root, errors):
    """/dev/dri/renderD* with the PCI device each belongs to (from sys/class/drm)."""
    nodes = []
    for name in list_dir(_join(root, "dev/dri"), errors, "render_nodes", "dev/dri"):
        if not _RENDER_RE.match(name):
            continue
        entry = _join(root, "sys/class/drm/" + name)
        nodes.append({"name": name, "path": "/dev/dri/" + name,
                      "pci_address": _device_address(root, entry, errors, "render_nodes", name)})
    return nodes


def read_rdma(root, errors):
    """RDMA devices from sys/class/infiniband (InfiniBand HCAs and RoCE NICs) with their ports."""
    devices = []
    base = _join(root, "sys/class/infiniband")
    for name in list_dir(base, errors, "rdma", "sys/class/infiniband"):
        entry = os.path.join(base, name)
        ports = []
        for port in list_dir(os.path.join(entry, "ports"), errors, "rdma", name):
            port_dir = os.path.join(entry, "ports", port)
            item = "%s port %s" % (name, port)
            ports.append({
                "port": int(port) if port.isdigit() else port,
                "state": read_kernel_text(os.path.join(port_dir, "state"), errors, "rdma", item),
                "phys_state": read_kernel_text(os.path.join(port_dir, "phys_state"), errors, "rdma", item),
                "link_layer": read_kernel_text(os.path.join(port_dir, "link_layer"), errors, "rdma", item),
                "rate": read_kernel_text(os.path.join(port_dir, "rate"), errors, "rdma", item),
            })
        devices.append({"name": name,
                        "pci_address": _device_address(root, entry, errors, "rdma", name),
                        "node_guid": read_kernel_text(os.path.join(entry, "node_guid"), errors, "rdma", name),
                        "fw_ver": read_kernel_text(os.path.join(entry, "fw_ver"), errors, "rdma", name),
                        "ports": ports})
    return devices


# --- CPU and NUMA -------------------------------------------------------------

def parse_cpuinfo(text):
    """Summary of /proc/cpuinfo: logical CPUs, sockets, cores, vendor and model (None when not stated)."""
    logical, sockets, cores = 0, set(), set()
    vendor = model = None
    physical = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            logical += 1
            physical = None
        elif key == "vendor_id" and vendor is None:
            vendor = value
        elif key in ("model name", "Model", "cpu model") and model is None:
            model = value
        elif key == "physical id":
            physical = value
            sockets.add(value)
        elif key == "core id":
            cores.add((physical, value))
    return {"logical_cpus": logical, "sockets": len(sockets) or None, "cores": len(cores) or None,
            "vendor": vendor, "model": model}


def read_cpu(root, errors):
    path = _join(root, "proc/cpuinfo")
    text = read_kernel_text(path, errors, "cpu", "proc/cpuinfo", required=True)
    cpu = parse_cpuinfo(text or "")
    online = read_kernel_text(_join(root, "sys/devices/system/cpu/online"), errors, "cpu", "cpu/online")
    cpu["online"] = online
    if online is not None:
        try:
            cpu["online_cpus"] = len(parse_cpulist(online))
        except ValueError as exc:
            errors.add("cpu", "cpu/online", _join(root, "sys/devices/system/cpu/online"), str(exc))
    return cpu


def read_numa(root, errors):
    """NUMA nodes from sys/devices/system/node: CPUs and memory per node."""
    base = _join(root, "sys/devices/system/node")
    if not os.path.isdir(base):
        return {"available": False, "nodes": []}
    nodes = []
    for name in list_dir(base, errors, "numa", "sys/devices/system/node"):
        if not (name.startswith("node") and name[4:].isdigit()):
            continue
        node_dir = os.path.join(base, name)
        node = {"id": int(name[4:]), "cpulist": None, "cpus": None, "memory_kb": None}
        node["cpulist"] = read_kernel_text(os.path.join(node_dir, "cpulist"), errors, "numa", name, required=True)
        if node["cpulist"] is not None:
            try:
                node["cpus"] = len(parse_cpulist(node["cpulist"]))
            except ValueError as exc:
                errors.add("numa", name, os.path.join(node_dir, "cpulist"), str(exc))
        meminfo = read_kernel_text(os.path.join(node_dir, "meminfo"), errors, "numa", name)
        for line in (meminfo or "").splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[2] == "MemTotal:" and fields[3].isdigit():
                node["memory_kb"] = int(fields[3])
        nodes.append(node)
    nodes.sort(key=lambda n: n["id"])
    return {"available": True, "nodes": nodes}


# --- nvidia-smi -----------------------------------------------------------------

def _nvidia_value(text):
    """nvidia-smi writes [N/A], [Not Supported] or [Unknown Error] for values it has not got."""
    return None if (text.startswith("[") and text.endswith("]")) or text == "" else text


def parse_nvidia_smi(text):
    """Parse `nvidia-smi --query-gpu=index,uuid,name,memory.total,mig.mode.current
    --format=csv,noheader,nounits` output. Returns (gpus, errors); a bad line is an
    error for that line only."""
    gpus, problems = [], []
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        item = "line %d" % number
        if len(fields) == 1:
            # A message instead of a row, e.g. "Unable to determine the device handle for GPU...".
            problems.append({"section": "nvidia", "item": item, "path": None,
                             "error": "nvidia-smi: %s" % line.strip()[:300]})
            continue
        if len(fields) > len(_NVIDIA_FIELDS) and fields[0].isdigit():
            # No quoting in nvidia-smi CSV: a comma in the product name splits it.
            fields = fields[:2] + [", ".join(fields[2:-2])] + fields[-2:]
        if len(fields) != len(_NVIDIA_FIELDS):
            problems.append({"section": "nvidia", "item": item, "path": None,
                             "error": "expected %d comma-separated fields (%s), got %d: %r"
                                      % (len(_NVIDIA_FIELDS), ",".join(_NVIDIA_FIELDS), len(fields), line[:120])})
            continue
        index, uuid, name, memory, mig = fields
        if not index.isdigit():
            problems.append({"section": "nvidia", "item": item, "path": None,
                             "error": "index is not a number: %r" % index[:40]})
            continue
        if not uuid.startswith(("GPU-", "MIG-")):
            problems.append({"section": "nvidia", "item": item, "path": None,
                             "error": "uuid does not look like an NVIDIA GPU uuid: %r" % uuid[:60]})
            continue
        memory = _nvidia_value(memory)
        if memory is not None and not memory.isdigit():
            problems.append({"section": "nvidia", "item": item, "path": None,
                             "error": "memory.total is not a number of MiB: %r" % memory[:40]})
            memory = None
        gpus.append({"index": int(index), "uuid": uuid, "name": _nvidia_value(name),
                     "memory_mib": int(memory) if memory is not None else None,
                     "mig_mode": _nvidia_value(mig)})
    return gpus, problems


def nvidia_report(command, rc, stdout, stderr):
    """The `nvidia` section from one nvidia-smi run (command None when the tool is absent).

    A non-zero exit with no GPU rows (driver not loaded, library mismatch) makes
    the section unavailable with the tool's first message as the reason; rows
    printed before a failure are kept.
    """
    if command is None:
        return {"available": False, "command": None, "gpus": [], "errors": [],
                "reason": "nvidia-smi not found"}
    gpus, problems = parse_nvidia_smi(stdout)
    report = {"available": True, "command": command, "gpus": gpus, "errors": problems, "reason": None}
    if rc != 0:
        lines = [text.strip() for text in ((stderr or "") + "\n" + (stdout or "")).splitlines()
                 if text.strip() and "," not in text]
        message = "nvidia-smi exited with %s: %s" % (rc, lines[0][:300] if lines else "no message")
        if not gpus:
            report["available"] = False
            report["reason"] = message
            problems = []
        report["errors"] = [{"section": "nvidia", "item": command, "path": None, "error": message}] + problems
    return report


# --- everything -------------------------------------------------------------------

def discover(root="/", include=SECTIONS, nvidia=None):
    """The dra_hardware facts for one root.

    ``nvidia`` is the output of :func:`nvidia_report` (the caller runs the tool);
    when None and the section is included, it is reported as not run.
    """
    root = os.path.abspath(root)
    errors = Errors(root)
    facts = {"root": root, "sections": [s for s in SECTIONS if s in include]}
    if not os.path.isdir(root):
        errors.items.append({"section": "root", "item": root, "path": None, "error": "root is not a directory"})
        facts["errors"] = errors.items
        return facts
    if "pci" in include:
        devices, ids_path = read_pci(root, errors)
        facts["pci_devices"] = devices
        facts["pci_ids"] = ids_path
        facts["pci_summary"] = summarize_pci(devices)
    if "render_nodes" in include:
        facts["render_nodes"] = read_render_nodes(root, errors)
    if "rdma" in include:
        facts["rdma_devices"] = read_rdma(root, errors)
    if "cpu" in include:
        facts["cpu"] = read_cpu(root, errors)
    if "numa" in include:
        facts["numa"] = read_numa(root, errors)
    if "nvidia" in include:
        report = dict(nvidia if nvidia is not None else {
            "available": False, "command": None, "gpus": [], "reason": "not run"})
        errors.items.extend(report.pop("errors", None) or [])
        facts["nvidia"] = report
    facts["errors"] = errors.items
    return facts
