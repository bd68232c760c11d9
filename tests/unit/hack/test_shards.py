"""tests/integration/shards.py: one release's KWOK suite split between processes by whole files."""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import shards  # noqa: E402  pylint: disable=wrong-import-position


def test_every_file_goes_to_exactly_one_shard_longest_first_to_the_least_loaded():
    seconds = {"a.py": 100, "b.py": 60, "c.py": 50, "d.py": 10}
    assigned = shards.assign(["d.py", "c.py", "b.py", "a.py", "e.py"], 2, seconds)
    assert sorted(assigned) == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    load = {1: 0, 2: 0}
    for name, shard in assigned.items():
        load[shard] += seconds.get(name, shards.DEFAULT_SECONDS)
    assert assigned["a.py"] == 1 and assigned["b.py"] == 2 and abs(load[1] - load[2]) <= 100


def test_the_two_processes_choose_complementary_files(monkeypatch):
    files = ["test_%02d.py" % i for i in range(30)]
    chosen = []
    for value in ("1/2", "2/2"):
        monkeypatch.setenv("DRA_IT_SHARD", value)
        chosen.append(shards.selected(files))
    assert chosen[0] and chosen[1] and not chosen[0] & chosen[1] and chosen[0] | chosen[1] == set(files)
    monkeypatch.delenv("DRA_IT_SHARD")
    assert shards.selected(files) == set(files)


@pytest.mark.parametrize("value", ["0/2", "3/2", "2", "a/b", "1/0"])
def test_a_malformed_shard_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match="DRA_IT_SHARD=%r" % value):
        shards.parse(value)
