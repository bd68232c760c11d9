"""The allocation oracle (hack/oracle, built per pinned release by hack/cluster/build): what
k8s.io/dynamic-resource-allocation itself answers, for the differential tests of the allocation explainer.

One process per release serves every question of a test session (``--serve``: a JSON document per line).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

# kube-scheduler's allocator features and the gates that switch each on (pkg/scheduler/framework/plugins/
# dynamicresources: allocatorFeatures); DeviceBindingAndStatus needs both of its gates.
ALLOCATOR_FEATURES = {
    "AdminAccess": ("DRAAdminAccess",),
    "PrioritizedList": ("DRAPrioritizedList",),
    "PartitionableDevices": ("DRAPartitionableDevices",),
    "DeviceTaints": ("DRADeviceTaints",),
    "DeviceBindingAndStatus": ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
    "ConsumableCapacity": ("DRAConsumableCapacity",),
    "FractionalCapacityRange": ("DRAFractionalCapacityRange",),
    "ListTypeAttributes": ("DRAListTypeAttributes",),
    "OptionalNodeOperations": ("DRAOptionalNodeOperations",),
    "DerivedAttributes": ("DRADerivedAttributes",),
    "CompatibilityGroups": ("DRADeviceCompatibilityGroups",),
}
# The allocator's features of the 1.33 module (its Features struct has only these).
FEATURES_133 = ("AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints")


def allocator_features(k8s_version, gates_on):
    """The oracle's Features for a release whose gates `gates_on` (names) are on."""
    minor = int(k8s_version.split(".")[1])
    names = FEATURES_133 if minor < 34 else tuple(ALLOCATOR_FEATURES)
    return dict((name, all(g in gates_on for g in ALLOCATOR_FEATURES[name])) for name in names)


class OracleError(Exception):
    pass


class Oracle:
    """The oracle of one release, serving until close()."""

    def __init__(self, k8s_version):
        self.version = k8s_version
        path = clusterlib.oracle_bin(k8s_version)
        if not os.access(path, os.X_OK):
            raise OracleError(f"the allocation oracle for {k8s_version} is not built ({path}): run "
                              f"hack/cluster/build --only dra-oracle (make build does)")
        self.proc = subprocess.Popen([path, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.asked = 0

    def ask(self, document):
        self.proc.stdin.write(json.dumps(document) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise OracleError(f"the oracle for {self.version} stopped (exit {self.proc.poll()})")
        answer = json.loads(line)
        if set(answer) == {"error"}:
            raise OracleError(answer["error"])
        self.asked += 1
        return answer

    def allocate(self, features, slices, classes, claims, allocated, nodes):
        """{node name: {"fits": bool, "error": text or None, "unschedulable": text or None, "results": [...]}} from
        the allocator, per node (error: the scheduling attempt fails; unschedulable: only the node is ruled out)."""
        answer = self.ask({"mode": "allocate", "features": features, "slices": slices, "classes": classes,
                           "claims": claims, "allocated": allocated, "nodes": nodes})
        return dict((n["node"], {"fits": n["fits"], "error": n.get("error"), "unschedulable": n.get("unschedulable"),
                                 "results": n.get("results")}) for n in answer["nodes"])

    def cel(self, cases, features=None):
        """[{"matches": bool, "error": text or None}] for [{"expression", "device": {driver, attributes,
        capacity}}]."""
        return [{"matches": c["matches"], "error": c.get("error")}
                for c in self.ask({"mode": "cel", "features": features or {}, "cases": cases})["cases"]]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
