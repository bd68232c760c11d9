"""hack/test-all's lanes: which jobs a run has, what each waits for, and how the scheduler runs them.

The plan is the script's own (its plan() on the pinned releases); the scheduler runs stand-in commands (small
shell scripts) so that what starts, what is skipped and how many kind jobs run at once are the script's."""
import os
import subprocess
import threading

from conftest import ROOT, clusterlib, load_script

test_all = load_script("hack/test-all", "test_all")
MAKE = ["make"]


def by_name(jobs):
    return {job.name: job for job in jobs}


def test_every_pinned_release_has_its_builds_its_kwok_suite_and_its_kind_tests():
    pinned = clusterlib.supported_k8s_versions()
    jobs = by_name(test_all.plan(MAKE, pinned))
    default = pinned[0]
    for shard in ("1/2", "2/2"):
        job = jobs[f"kwok-{default}-{shard.replace('/', 'of')}"]
        assert job.argv == MAKE + ["integration", f"KWOK_RELEASE={default}", f"KWOK_SHARD={shard}"]
        assert job.needs == [f"build-{default}"]
    for release in pinned[1:]:
        assert jobs[f"kwok-{release}"].argv == MAKE + ["integration", f"KWOK_RELEASE={release}"]
        assert jobs[f"kwok-{release}"].needs == [f"build-{release}"]
    for release in pinned:
        assert jobs[f"kind-{release}"].argv == MAKE + ["integration-kind-nodes", f"KIND_RELEASE={release}"]
        assert jobs[f"kind-{release}"].needs == [f"build-kind-{release}"] and jobs[f"kind-{release}"].uses == test_all.KIND_CLUSTER
        assert jobs[f"build-kind-{release}"].needs == [f"build-{release}"]
        assert jobs[f"gates-{release}"].argv == MAKE + ["gate-matrix-test", f"RELEASE={release}"]
        assert jobs[f"gates-{release}"].needs == [f"build-{release}"] and jobs[f"gates-{release}"].uses == test_all.GATE_MATRIX
    assert jobs["checks"].needs == ["setup"] and jobs["checks"].nice > 0
    assert test_all.GATE_MATRIX["gates"] == 1 and test_all.KIND_CLUSTER["inotify"] > test_all.KWOK_SUITE["inotify"]


def test_builds_go_one_at_a_time_the_default_first_then_the_oldest():
    pinned = ["v1.37.2", "v1.36.3", "v1.33.13"]
    jobs = test_all.plan(MAKE, pinned)
    builds = [job for job in jobs if job.name.startswith("build-")]
    assert [job.name for job in builds] == [
        "build-v1.37.2", "build-kind-v1.37.2", "build-v1.33.13", "build-kind-v1.33.13", "build-v1.36.3",
        "build-kind-v1.36.3"]
    assert builds[0].needs == ["setup"]
    for previous, job in zip(builds, builds[1:]):
        assert job.needs == [previous.name]
    named = by_name(jobs)
    assert named["molecule"].argv == MAKE + ["molecule-kind", "K8S_VERSION=v1.33.13"]
    assert named["molecule"].needs == ["build-kind-v1.33.13"]
    assert named["readme"].needs == ["build-kind-v1.37.2"]
    assert "upgrade-minor" not in named and not [n for n in named if n.startswith("molecule-")]


def test_the_full_tier_adds_molecule_on_every_other_release_one_at_a_time_and_the_kind_upgrade():
    jobs = by_name(test_all.plan(MAKE, ["v1.37.2", "v1.36.3", "v1.33.13"], "full"))
    assert jobs["molecule-v1.37.2"].needs == ["build-kind-v1.37.2", "molecule"]
    assert jobs["molecule-v1.36.3"].needs == ["build-kind-v1.36.3", "molecule-v1.37.2"]
    assert jobs["upgrade-minor"].argv == MAKE + ["integration-kind-upgrade"]
    assert jobs["upgrade-minor"].needs == ["build-kind-v1.36.3"] and jobs["upgrade-minor"].uses == test_all.KIND_CLUSTER


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return [str(path)]


def test_a_job_whose_need_failed_is_skipped_and_the_others_go_on(tmp_path, monkeypatch):
    monkeypatch.setattr(test_all, "LOGS", str(tmp_path))
    ok, bad = script(tmp_path, "ok", "exit 0\n"), script(tmp_path, "bad", "exit 3\n")
    jobs = [test_all.Job("a", bad), test_all.Job("b", ok, needs=["a"]), test_all.Job("c", ok, needs=["b"]),
            test_all.Job("d", ok)]
    test_all.run(jobs, dict(os.environ))
    assert [job.status for job in jobs] == ["FAILED", "skipped", "skipped", "passed"]
    assert jobs[1].started is None and jobs[3].ended >= jobs[3].started


def test_jobs_share_the_room_they_use(tmp_path, monkeypatch):
    """Room for two of five jobs of 50: each counts itself in while it runs (under a lock) and records the highest
    count it saw; jobs that use nothing are not held."""
    monkeypatch.setattr(test_all, "LOGS", str(tmp_path))
    count, seen = tmp_path / "count", tmp_path / "seen"
    count.write_text("0")
    body = (f'bump() {{ flock {tmp_path}/lock bash -c "n=\\$(( \\$(cat {count}) + $1 )); echo \\$n > {count}; '
            f'echo \\$n >> {seen}"; }}\nbump 1; sleep 0.3; bump -1\n')
    kind = script(tmp_path, "kind", body)
    jobs = [test_all.Job(f"k{i}", kind, uses={"inotify": 50}) for i in range(5)]
    jobs += [test_all.Job("free", script(tmp_path, "free", "exit 0\n"))]
    test_all.run(jobs, dict(os.environ), capacity={"inotify": 110, "gates": 1})
    assert all(job.status == "passed" for job in jobs)
    assert max(int(n) for n in seen.read_text().split()) == 2


def test_freed_room_goes_to_the_waiting_job_of_the_lowest_priority_that_fits():
    """Room 100, 60 held; three jobs queue (waited for by the queue's length, not a time): 50 of priority 5, 50 of
    priority 0 and 10 of priority 9. The small one fits at once; once the 60 are freed the priority-0 job goes
    first, then the other."""
    lock = threading.Condition()
    room = test_all.Resources(lock, {"inotify": 100})
    holder = test_all.Job("holder", ["true"], uses={"inotify": 60})
    got = []

    def take(job):
        with lock:
            room.acquire(job)
            got.append(job.name)
            lock.notify_all()

    with lock:
        room.acquire(holder)
    waiting = [test_all.Job("low", ["true"], uses={"inotify": 50}, priority=5),
               test_all.Job("urgent", ["true"], uses={"inotify": 50}, priority=0),
               test_all.Job("small", ["true"], uses={"inotify": 10}, priority=9)]
    threads = []
    for job in waiting:
        threads.append(threading.Thread(target=take, args=(job,), daemon=True))
        threads[-1].start()
        with lock:
            assert lock.wait_for(lambda: len(room.queued) + len(got) == len(threads), timeout=30)
    with lock:
        assert got == ["small"] and room.free["inotify"] == 30
        room.release(holder)
        assert lock.wait_for(lambda: len(got) == 2, timeout=30)
        assert got == ["small", "urgent"] and room.free["inotify"] == 40 and [j.name for j in room.queued] == ["low"]
        room.release(waiting[1])
        assert lock.wait_for(lambda: len(got) == 3, timeout=30)
    for thread in threads:
        thread.join(timeout=30)
    assert got == ["small", "urgent", "low"]


def test_of_jobs_ready_at_once_the_lowest_priority_gets_the_room_whichever_thread_queues_first():
    """Room for one of two jobs that become ready together: the priority-0 job must get it even when the other's
    thread queues first (the other job's thread wakes while the urgent one's has not)."""
    lock = threading.Condition()
    later = test_all.Job("later", ["true"], uses={"inotify": 55}, priority=4)
    urgent = test_all.Job("urgent", ["true"], uses={"inotify": 55}, priority=0)
    room = test_all.Resources(lock, {"inotify": 60}, lambda: [j for j in (later, urgent) if j.ready is None])
    got = []

    def take(job):
        with lock:
            job.ready = True
            room.acquire(job)
            got.append(job.name)
            lock.notify_all()

    first = threading.Thread(target=take, args=(later,), daemon=True)
    first.start()
    with lock:
        assert lock.wait_for(lambda: room.queued == [later], timeout=30)
        assert got == []  # waits for the urgent job, which has not queued
    second = threading.Thread(target=take, args=(urgent,), daemon=True)
    second.start()
    with lock:
        assert lock.wait_for(lambda: got, timeout=30)
        assert got == ["urgent"] and [j.name for j in room.queued] == ["later"]
        room.release(urgent)
        assert lock.wait_for(lambda: len(got) == 2, timeout=30)
    for thread in (first, second):
        thread.join(timeout=30)
    assert got == ["urgent", "later"]


def test_the_report_reads_pytests_durations_from_each_jobs_log(tmp_path, monkeypatch):
    monkeypatch.setattr(test_all, "LOGS", str(tmp_path))
    job = test_all.Job("kind-v1.37.2", ["true"])
    (tmp_path / "kind-v1.37.2.log").write_text(
        "===== slowest 20 durations =====\n"
        "312.50s call     tests/integration/test_kind_nodes.py::test_drain[v1.37.2]\n"
        "2.01s setup    tests/integration/test_kind_nodes.py::test_x[v1.37.2]\n"
        "not a duration line 1.0s call\n")
    rows = test_all.slowest_tests(test_all.phase_durations([job]))
    assert rows[0] == (312.5, "call", "tests/integration/test_kind_nodes.py::test_drain[v1.37.2]", "kind-v1.37.2")
    assert len(rows) == 2


def test_a_tier_other_than_ci_or_full_is_refused_by_name():
    res = subprocess.run([os.path.join(ROOT, "hack", "test-all")], capture_output=True, text=True, check=False,
                         env=dict(os.environ, DRA_TEST_TIER="nightly"))
    assert res.returncode != 0 and "DRA_TEST_TIER='nightly'" in res.stderr


def test_a_release_that_is_not_pinned_is_refused_by_name():
    res = subprocess.run([os.path.join(ROOT, "hack", "integration-per-version"), "x", "python3", "tests/integration"],
                         capture_output=True, text=True, check=False, env=dict(os.environ, DRA_IT_RELEASE="v1.2.3"))
    assert res.returncode == 2
    assert "DRA_IT_RELEASE=v1.2.3 is not a pinned release" in res.stderr
    assert clusterlib.supported_k8s_versions()[0] in res.stderr


def test_the_report_reads_a_kwok_suites_own_pytest_log_too(tmp_path, monkeypatch):
    monkeypatch.setattr(test_all, "LOGS", str(tmp_path))
    monkeypatch.setattr(test_all, "ROOT", str(tmp_path))
    (tmp_path / ".tmp").mkdir()
    (tmp_path / "kwok-v1.37.2-1of2.log").write_text("make output only\n")
    (tmp_path / ".tmp" / "integration-v1.37.2-1of2.log").write_text(
        "12.50s call     tests/integration/test_drain.py::test_x[v1.37.2]\n")
    job = test_all.Job("kwok-v1.37.2-1of2", ["true"])
    assert test_all.slowest_tests(test_all.phase_durations([job])) == [
        (12.5, "call", "tests/integration/test_drain.py::test_x[v1.37.2]", "kwok-v1.37.2-1of2")]


def test_the_report_sums_the_default_releases_kwok_shards_per_test_file_counting_a_line_once(tmp_path, monkeypatch):
    monkeypatch.setattr(test_all, "LOGS", str(tmp_path))
    monkeypatch.setattr(test_all, "ROOT", str(tmp_path))
    (tmp_path / ".tmp").mkdir()
    drain = "tests/integration/test_drain.py::test_x[v1.37.2]"
    (tmp_path / "kwok-v1.37.2-1of2.log").write_text(f"12.50s call     {drain}\n")
    (tmp_path / ".tmp" / "integration-v1.37.2-1of2.log").write_text(
        f"12.50s call     {drain}\n2.00s setup    {drain}\n")
    (tmp_path / ".tmp" / "integration-v1.37.2-2of2.log").write_text(
        "30.00s call     tests/integration/test_site.py::test_y[v1.37.2]\n")
    (tmp_path / ".tmp" / "integration-v1.33.13.log").write_text(
        "99.00s call     tests/integration/test_site.py::test_y[v1.33.13]\n")
    jobs = [test_all.Job(name, ["true"]) for name in ("kwok-v1.37.2-1of2", "kwok-v1.37.2-2of2", "kwok-v1.33.13")]
    assert test_all.seconds_per_file(test_all.phase_durations(jobs), "v1.37.2") == {"test_drain.py": 14.5, "test_site.py": 30.0}


def test_the_per_file_seconds_are_wrapped_without_splitting_an_entry():
    entries = ['"test_a.py": 10,', '"test_bb.py": 9,', '"test_a_file_with_a_long_name.py": 8,']
    lines = test_all.lines_of(entries, 33)
    assert lines == ['"test_a.py": 10, "test_bb.py": 9,', '"test_a_file_with_a_long_name.py": 8,']
    assert test_all.lines_of([], 10) == []
