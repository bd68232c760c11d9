"""hack/test-all's per-release jobs: a release's KWOK suite, then (once the node images are built) its kind tests.

The jobs are built by the script's own lines (its phase-2 block, run by bash) with `make` replaced by a stand-in that
records its arguments and fails when told to: what runs, in which order, and the exit status are the script's."""
import os
import re
import signal
import subprocess

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "hack", "test-all")


def phase_two_block():
    with open(SCRIPT) as fh:
        text = fh.read()
    match = re.search(r"^# Phase 2: the images job.*?^done$", text, re.S | re.M)
    assert match, "hack/test-all has no phase-2 block"
    return match.group(0)


def jobs(tmp_path, images_status, fail_on="", molecule_status=0):
    """{job name: (exit status, make calls)}, the images having ended with images_status and molecule with
    molecule_status (None: still running; the block itself removes statuses left by an earlier run)."""
    fake = tmp_path / "fake-make"
    fake.write_text('#!/bin/bash\necho "$*" >> "%s"\n'
                    'for a in "$@"; do [ -n "$FAIL_ON" ] && [ "$a" = "$FAIL_ON" ] && exit 1; done\nexit 0\n'
                    % (tmp_path / "calls"))
    fake.chmod(0o755)
    script = "\n".join([
        "root=%s; logs=%s; mk=(%s)" % (ROOT, tmp_path, fake),
        "q() { printf '%q ' \"$@\"; }",
        phase_two_block(),
        'for ((i = 0; i < ${#jobs[@]}; i += 2)); do printf "%s\\0%s\\0" "${jobs[i]}" "${jobs[i+1]}"; done',
    ])
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    parts = out.split("\0")[:-1]
    timeout = 60 if molecule_status is not None else 8
    assert not (tmp_path / "images.status").exists() and not (tmp_path / "molecule.status").exists()
    (tmp_path / "images.status").write_text("%d\n" % images_status)
    if molecule_status is not None:
        (tmp_path / "molecule.status").write_text("%d\n" % molecule_status)
    results = {}
    for name, command in zip(parts[0::2], parts[1::2]):
        (tmp_path / "calls").write_text("")
        proc = subprocess.Popen(["bash", "-c", command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, FAIL_ON=fail_on), start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = "waiting"
        finally:
            if proc.poll() is None or status == "waiting":
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the job and the wait loop it started
                except ProcessLookupError:
                    pass
                proc.wait()
        results[name] = (status, (tmp_path / "calls").read_text().splitlines())
    return results


def releases():
    with open(os.path.join(ROOT, "hack", "cluster", "versions.env")) as fh:
        return re.search(r"^K8S_VERSIONS=(.*)$", fh.read(), re.M).group(1).split()


def test_each_release_runs_its_kwok_suite_then_its_kind_tests_and_the_extras_once(tmp_path):
    (tmp_path / "images.status").write_text("0\n")  # an earlier run's
    pinned = releases()
    results = jobs(tmp_path, 0)
    assert list(results) == ["release-%s" % r for r in pinned]
    for i, release in enumerate(pinned):
        status, calls = results["release-%s" % release]
        assert status == 0
        assert calls[0].endswith("integration KWOK_RELEASE=%s" % release)
        assert "integration-kind-nodes KIND_RELEASE=%s" % release in calls[1]
        assert ("integration-readme" in calls[1]) == (i == len(pinned) - 1)
        assert "molecule-kind" not in calls[1]


def test_only_the_first_release_goes_to_kind_while_molecules_cluster_is_up(tmp_path):
    pinned = releases()
    results = jobs(tmp_path, 0, molecule_status=None)
    assert results["release-%s" % pinned[0]][0] == 0 and len(results["release-%s" % pinned[0]][1]) == 2
    for release in pinned[1:]:
        status, calls = results["release-%s" % release]
        assert status == "waiting" and len(calls) == 1, (release, status, calls)


def test_the_images_job_runs_molecule_after_the_images_and_writes_both_statuses(tmp_path):
    fake = tmp_path / "fake-make"
    fake.write_text('#!/bin/bash\necho "$*" >> "%s"\nexit 3\n' % (tmp_path / "calls"))
    fake.chmod(0o755)
    build = tmp_path / "hack" / "cluster" / "build"
    build.parent.mkdir(parents=True)
    build.write_text("#!/bin/bash\nexit 0\n")
    build.chmod(0o755)
    script = "\n".join(["root=%s; logs=%s; mk=(%s)" % (tmp_path, tmp_path, fake), "q() { printf '%q ' \"$@\"; }",
                        phase_two_block().replace("\ndone", "\ndone\n", 1), 'bash -c "$images_then_molecule"'])
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False, timeout=60)
    assert res.returncode == 3
    assert (tmp_path / "calls").read_text().split() == ["molecule-kind"]
    assert (tmp_path / "images.status").read_text().strip() == "0"
    assert (tmp_path / "molecule.status").read_text().strip() == "3"


def test_a_failed_kwok_suite_stops_its_release_before_kind(tmp_path):
    for status, calls in jobs(tmp_path, 0, fail_on="integration").values():
        assert status != 0 and len(calls) == 1


def test_images_that_did_not_build_fail_the_release_jobs_without_kind(tmp_path):
    for status, calls in jobs(tmp_path, 2).values():
        assert status != 0 and len(calls) == 1 and "KWOK_RELEASE" in calls[0]


def test_a_release_that_is_not_pinned_is_refused_by_name():
    res = subprocess.run([os.path.join(ROOT, "hack", "integration-per-version"), "x", "python3", "tests/integration"],
                         capture_output=True, text=True, check=False, env=dict(os.environ, DRA_IT_RELEASE="v1.2.3"))
    assert res.returncode == 2
    assert "DRA_IT_RELEASE=v1.2.3 is not a pinned release" in res.stderr and releases()[0] in res.stderr
