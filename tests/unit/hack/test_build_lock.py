"""hack/cluster/build: two builds of one component at once (two `build` runs) build it once; the second waits for
the first, then finds it built. Other components are not held up."""
import os
import threading

from conftest import load_script


def build_script(tmp_path, monkeypatch):
    build = load_script("hack/cluster/build", "cluster_build")
    monkeypatch.setattr(build, "component_dir", lambda name, version: str(tmp_path / ("%s-%s" % (name, version))))
    said = []
    waiting = threading.Event()

    def log(message):
        said.append(message)
        if "another build of it is running" in message:
            waiting.set()
    monkeypatch.setattr(build, "log", log)
    return build, said, waiting


def builder(calls, started=None, release=None):
    def build(version, dest, logfile):
        calls.append(dest)
        if started:
            started.set()
            assert release.wait(60), "the test never released the first build"
        tool = os.path.join(dest, "bin", "tool")
        with open(tool, "w") as fh:
            fh.write("#!/bin/sh\n")
        os.chmod(tool, 0o755)
        return 0
    return build


def test_a_second_build_of_a_component_waits_for_the_first_and_builds_nothing(tmp_path, monkeypatch):
    build, said, waiting = build_script(tmp_path, monkeypatch)
    calls, started, release = [], threading.Event(), threading.Event()
    items = [("tool", "v1", ["tool"], builder(calls, started, release))]
    first = threading.Thread(target=build.build_all, args=(items,))
    first.start()
    assert started.wait(60)
    second = threading.Thread(target=build.build_all, args=(items,))
    second.start()
    assert waiting.wait(60), said
    release.set()
    first.join(60)
    second.join(60)
    assert calls == [str(tmp_path / "tool-v1")]
    assert said[-1] == "tool v1: cached in %s" % (tmp_path / "tool-v1"), said


def test_another_component_builds_while_one_is_building(tmp_path, monkeypatch):
    build, said, waiting = build_script(tmp_path, monkeypatch)
    calls, started, release = [], threading.Event(), threading.Event()
    first = threading.Thread(target=build.build_all, args=([("tool", "v1", ["tool"], builder(calls, started, release))],))
    first.start()
    try:
        assert started.wait(60)
        other = []
        build.build_all([("other", "v2", ["tool"], builder(other))])
        assert other == [str(tmp_path / "other-v2")] and not waiting.is_set()
    finally:
        release.set()
        first.join(60)
