"""docs/testing.md lists every test file with what `make test` and `make test-full` run of it (hack/test-list), and
each marker that sends a test to a release other than the default names a catalog fact that differs there."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, clusterlib, load_script

test_list = load_script("hack/test-list", "test_list")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import release_facts  # noqa: E402  pylint: disable=wrong-import-position

PINNED = clusterlib.supported_k8s_versions()
MARKED = [(path, test, marker, args, kwargs) for path in test_list.test_files()
          for test, marker, args, kwargs in test_list.release_markers(path)]


def test_the_list_is_the_trees():
    res = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "test-list"), "--check"], capture_output=True,
                         text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_test_file_the_list_lacks_makes_the_check_fail(monkeypatch):
    with open(test_list.DOC) as fh:
        current = fh.read()
    files = test_list.test_files()
    monkeypatch.setattr(test_list, "test_files", lambda: sorted(files + ["tests/unit/test_new.py"]))
    wanted = test_list.rendered(current)
    assert wanted != current and "| `tests/unit/test_new.py` | unit |" in wanted


def test_the_list_names_every_test_file_once():
    with open(test_list.DOC) as fh:
        rows = [line for line in fh if line.startswith("| `")]
    named = [row.split("`")[1] for row in rows]
    assert sorted(named) == test_list.test_files() and len(set(named)) == len(named)


def test_markers_are_only_on_tests_the_pinned_releases_parametrize():
    for path, test, marker, args, kwargs in MARKED:
        assert path.startswith("tests/integration/"), (path, test)
        if marker == "every_release":
            assert len(args) == 1 and isinstance(args[0], str) and args[0], (path, test, "every_release(reason)")


@pytest.mark.parametrize("path,test,args,kwargs", [(p, t, a, k) for p, t, m, a, k in MARKED if m == "per_release"],
                         ids=lambda v: v if isinstance(v, str) and v.startswith("test_") else "")
def test_each_per_release_fact_exists_and_differs_on_a_pinned_release(path, test, args, kwargs):
    fact, rest, key = args[0], tuple(args[1:]), kwargs.get("key")
    release_facts.value(fact, PINNED[0], rest, key)  # KeyError naming the fact
    others = [r for r in PINNED[1:] if release_facts.differs_from(fact, r, PINNED[0], rest, key)]
    assert others, (f"{path}::{test}: per_release{args} has the default release's value on every other pinned "
                    f"release ({', '.join(PINNED)}): it would run nowhere but the default; name the fact that differs "
                    f"or drop the marker")


def test_an_unknown_fact_is_refused_naming_it_and_the_file():
    with pytest.raises(KeyError, match="no_such_fact"):
        release_facts.value("no_such_fact", PINNED[0])
    with pytest.raises(KeyError, match="claims/capacity.py"):
        release_facts.value("claims.capacity:NO_SUCH_TABLE", PINNED[0])


def test_the_ci_tier_sends_a_test_where_its_fact_differs_and_nowhere_else():
    class Marker:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class Item:
        def __init__(self, **markers):
            self.markers = markers

        def get_closest_marker(self, name):
            return self.markers.get(name)

    default = "v1.37.2"
    plain = Item()
    dra_gates = Item(per_release=Marker("gates_for_dra"))
    smoke = Item(every_release=Marker("the release's own binaries"))
    assert release_facts.runs_on(plain, default, default) and release_facts.runs_on(plain, None, default)
    assert not release_facts.runs_on(plain, "v1.33.13", default)
    assert release_facts.runs_on(dra_gates, "v1.33.13", default)       # DRA's gates must be set on 1.33
    assert not release_facts.runs_on(dra_gates, "v1.36.3", default)    # on by default, as on 1.37
    assert release_facts.runs_on(smoke, "v1.36.3", default)
