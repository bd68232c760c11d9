"""Benchmark: hardware discovery on a generated tree with N PCI functions.

    python bench/hardware_discovery.py [--devices 256] [--repeat 20]

Generates the tree in a temporary directory (tests/unit/fixtures/hardware/
make_trees.py --large: GPUs with render nodes, InfiniBand HCAs with RDMA
ports, SR-IOV NICs with 7 VFs each, NVMe, bridges, 2 NUMA nodes, and a
pci.ids of the real database's size), then times
hardware.discover() over it: every section except nvidia, as the module
runs it. The first run is reported apart (cold page cache for the tree and
pci.ids); the figure to compare is the median of the warm runs.
"""
import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "hardware"))
COLLECTIONS = os.path.join(ROOT, ".tmp", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "dra", "admin")
if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
sys.path.insert(0, COLLECTIONS)

import make_trees  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.nodes import hardware  # noqa: E402

SECTIONS = ["pci", "render_nodes", "rdma", "cpu", "numa"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--devices", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="dra-hw-bench-")
    try:
        made = make_trees.large_tree(tmp, args.devices)
        timings = []
        facts = None
        for dummy in range(args.repeat + 1):
            started = time.perf_counter()
            facts = hardware.discover(tmp, include=SECTIONS)
            timings.append(time.perf_counter() - started)
        found = len(facts["pci_devices"])
        if found != made or facts["errors"]:
            print("discovery found %d of %d functions, errors: %s" % (found, made, facts["errors"][:3]))
            return 1
        named = sum(1 for d in facts["pci_devices"] if d["vendor_name"])
        warm = timings[1:]
        print("machine: %s, %d CPUs, Python %s" % (platform.processor() or platform.machine(), os.cpu_count(),
                                                   platform.python_version()))
        print("tree: %d PCI functions (%d VFs, %d with a vendor name), %d render nodes, %d RDMA devices"
              % (found, sum(1 for d in facts["pci_devices"] if d["virtual_function"]), named,
                 len(facts["render_nodes"]), len(facts["rdma_devices"])))
        print("first run: %.1f ms" % (timings[0] * 1000))
        print("warm runs (%d): median %.1f ms, min %.1f ms, max %.1f ms"
              % (len(warm), statistics.median(warm) * 1000, min(warm) * 1000, max(warm) * 1000))
        return 0 if max(timings) < 1.0 else 2
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
