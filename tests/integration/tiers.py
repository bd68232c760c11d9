"""The depth of a test run: DRA_TEST_TIER (hack/test-all sets it), and how many cases a generative test runs in it.

- ``ci`` (the default; ``make test``, the README's test command): a smaller count, chosen per test so that it
  still reaches every kind of case its generator draws;
- ``full`` (``make test-full``: every test on every pinned release): each generative test at its full count.

``sized(ci, full)`` is the count of the tier. A test that knows the kinds of its cases keeps them all at the
smaller count with one of two helpers: ``covering`` (cases drawn from a fixed seed: a prefix, plus the first case
of each kind the prefix lacks) and ``until_covered`` (Hypothesis: more short runs, each from a seed of its own,
while a kind is still missing, up to the full count).
"""
import os

TIERS = ("ci", "full")
TIER = os.environ.get("DRA_TEST_TIER", "ci")
if TIER not in TIERS:
    raise ValueError(f"DRA_TEST_TIER={TIER!r}: use ci (make test) or full (make test-full)")


def sized(ci, full):
    """The count of the tier: `ci` in tier ci, `full` in tier full."""
    return full if TIER == "full" else ci


def covering(kinds, count):
    """Indices into `kinds` (the set of kinds of each case, in the full run's order): the first `count`, and for
    each kind none of them has, the first case that has it. With `count` at least len(kinds): every case."""
    chosen = list(range(min(count, len(kinds))))
    seen = set().union(*(kinds[i] for i in chosen))
    for index in range(len(chosen), len(kinds)):
        if kinds[index] - seen:
            chosen.append(index)
            seen |= kinds[index]
    return chosen


def until_covered(run, count, full, missing, step=25):
    """Calls run(count, 0), then run(n, 1), run(n, 2)... (n = `step`, the last one less) while missing() is not
    empty and fewer than `full` cases have run. `run(n, offset)` runs n cases from the test's seed plus `offset`,
    so a seed still gives the same cases. Returns the number of cases run."""
    run(count, 0)
    done, offset = count, 0
    while missing() and done < full:
        offset += 1
        n = min(step, full - done)
        run(n, offset)
        done += n
    return done
