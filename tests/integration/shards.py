"""Splitting one release's KWOK suite between pytest processes (DRA_IT_SHARD=K/N, `make integration
KWOK_SHARD=K/N`): each process brings up its own cluster and runs whole test files, so a shard is as isolated as a
release. Files go to shards longest first, each to the shard with the least time so far (greedy), by the seconds
below; a file not listed counts DEFAULT_SECONDS.

SECONDS: the default release's seconds per file in `make test` (the sums of the file's phases in pytest's --durations
lines, which `hack/test-all` prints per file at the end of a run), measured in a cold run on two cores with every
job beside, where phases under about 27 s were not printed: each sum is rounded up to the next 10 s with 10 s added
for them; a file of only short phases counts DEFAULT_SECONDS. Replace them with the next run's sums when they drift.
A wrong number only makes the shards less even.
"""
import os

DEFAULT_SECONDS = 60
SECONDS = {
    "test_device_taints.py": 710, "test_driver.py": 580, "test_control_plane.py": 560, "test_job_identities.py": 440,
    "test_rbac.py": 350, "test_monitoring.py": 340, "test_site.py": 310, "test_drain.py": 280,
    "test_guardrails.py": 240, "test_upgrade_check.py": 180, "test_bad_input_cluster.py": 150,
    "test_allocation_explain.py": 140, "test_claim_consumers.py": 140, "test_kubelet_restart.py": 130,
    "test_claims_on_nodes.py": 120, "test_claims_info.py": 100, "test_claims_doctor.py": 90,
    "test_device_health.py": 70, "test_canary_admission.py": 50, "test_cluster_is_real.py": 50,
    "test_device_eviction.py": 50, "test_capacity.py": 40, "test_cluster_access.py": 40, "test_dcgm_health.py": 40,
    "test_explain_shared_claim.py": 40,
}


def parse(value):
    """(index from 1, count) of a DRA_IT_SHARD value K/N; ValueError naming the variable when malformed."""
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        index = count = 0
    if not 1 <= index <= count:
        raise ValueError(f"DRA_IT_SHARD={value!r}: write K/N with 1 <= K <= N, e.g. 1/2")
    return index, count


def assign(files, count, seconds=None):
    """{file: shard index from 1} for the files (basenames), longest first to the least loaded shard."""
    seconds = SECONDS if seconds is None else seconds
    load = [0.0] * count
    shards = {}
    for name in sorted(set(files), key=lambda f: (-seconds.get(f, DEFAULT_SECONDS), f)):
        target = min(range(count), key=lambda i: (load[i], i))
        shards[name] = target + 1
        load[target] += seconds.get(name, DEFAULT_SECONDS)
    return shards


def selected(files):
    """The files of this process's shard (all of them without DRA_IT_SHARD)."""
    value = os.environ.get("DRA_IT_SHARD")
    if not value:
        return set(files)
    index, count = parse(value)
    return {name for name, shard in assign(files, count).items() if shard == index}
