"""The explainer's CEL layer (kube.cel) against k8s.io/dynamic-resource-allocation's own CEL environment, per
pinned release (the oracle: hack/oracle), no cluster.

A corpus of device selectors over the DRA CEL library (the device variable, the string, list, regex, sets, semver,
quantity and optional extensions the releases enable, cel-go's list extension (1.34+), the math extension no release
declares, and the corners where cel-python and cel-go part:
``split("")``, ``lastIndexOf`` with an offset, NaN, mixed numeric types), plus expressions generated from its
atoms, each evaluated on a few devices. The explainer's answer must be the oracle's: the same match, or a
failure where the oracle fails; "cannot evaluate" (``Unsupported``) is allowed and counted, never a match or a
miss. Generated expressions per release: the tier's (tests/integration/tiers.py), 400 in tier full, 100 in tier ci
(more short runs while a kind of expression, EXPRESSION_KINDS, is still missing, up to 400); DRA_ORACLE_CASES sets
an exact count, DRA_ORACLE_SEED the seed, as in test_explain_oracle.py.
"""
import collections
import os
import random
import sys

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import tiers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.kube import cel  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_fields  # noqa: E402

FULL_CASES = 400
CASES = int(os.environ.get("DRA_ORACLE_CASES") or tiers.sized(100, FULL_CASES))
MAX_CASES = CASES if os.environ.get("DRA_ORACLE_CASES") else FULL_CASES  # tier ci's top-up stops there
SEED = int(os.environ.get("DRA_ORACLE_SEED") or random.SystemRandom().randrange(2 ** 32))
D = "gpu.example.com"
A = f'device.attributes["{D}"]'
C = f'device.capacity["{D}"]'

DEVICES = [
    {"attributes": {"model": {"string": "h100-sxm"}, "index": {"int": 3}, "nvlink": {"bool": True},
                    "driverVersion": {"version": "1.2.3"}, "uuid": {"string": "GPU-1a2b"}},
     "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "132"}}},
    {"attributes": {"model": {"string": "a100"}, "index": {"int": 0}, "nvlink": {"bool": False},
                    "driverVersion": {"version": "2.0.0-rc.1"}, "other.example.com/rack": {"string": "r1"}},
     "capacity": {"memory": {"value": "40Gi"}, "cores": {"value": "1500m"}}},
    {"attributes": {}, "capacity": {}},
]

CORPUS = [
    f'device.driver == "{D}"', 'device.driver.startsWith("gpu.")', f'{A}.model == "h100-sxm"',
    f'"model" in {A}', f'{A}.index > 1', f'{A}.index % 2 == 1', f'{A}.nvlink', f'!{A}.nvlink',
    f'{A}.model.endsWith("sxm")', f'{A}.model.contains("100")', f'{A}.model.matches("^h[0-9]+")',
    f'{A}.model.size() > 4', f'{A}.model.split("-").size() == 2', f'{A}.model.split("").size() > 0',
    f'{A}.model.lowerAscii() == "h100-sxm"', f'{A}.model.upperAscii().startsWith("H")',
    f'{A}.model.replace("-", "_") == "h100_sxm"', f'{A}.model.substring(1, 3) == "10"', f'{A}.model.charAt(0) == "h"',
    f'{A}.model.indexOf("1") == 1', f'{A}.model.indexOf("", 8) == 8', f'{A}.model.indexOf("", 9) == 9',
    f'{A}.model.lastIndexOf("0") == 3', f'{A}.model.lastIndexOf("0", 2) == 2', f'{A}.model.trim() == {A}.model',
    '["a", "b"].join("-") == "a-b"', f'{A}.model.format([]) == {A}.model',
    f'{A}.driverVersion.isGreaterThan(semver("1.0.0"))', f'{A}.driverVersion.compareTo(semver("1.2.3")) == 0',
    f'{A}.driverVersion.major() == 1', f'{A}.driverVersion.minor() >= 2', f'{A}.driverVersion.patch() < 4',
    f'{A}.driverVersion.isLessThan(semver("2.0.0"))', 'isSemver("1.2.3")', 'isSemver("v1.2.3")',
    'semver("1.2.3").major() == 1',
    f'{C}.memory.compareTo(quantity("64Gi")) >= 0', f'{C}.memory.isGreaterThan(quantity("40Gi"))',
    f'{C}.memory.isLessThan(quantity("1Ti"))', f'{C}.cores.asApproximateFloat() > 100.0',
    f'{C}.cores.isInteger()', f'{C}.cores.asInteger() == 132', f'{C}.memory.add(quantity("1Gi")).isGreaterThan({C}.memory)',
    f'{C}.memory.sub(quantity("1Gi")).sign() == 1', 'isQuantity("10Gi")', 'isQuantity("ten")',
    'quantity("1k").asInteger() == 1000', f'"memory" in {C}',
    '0.0 / 0.0 < 1.0', '1.0 / 0.0 > 1.0', '2.5 * 2 == 5.0', '2.5 * 2.0 == 5.0', 'int(2.9) == 2', 'uint(3) == 3u',
    '3u > 2', '1 == 1.0', 'dyn(1) == 1.0', '1 < 2.5', '[1, 2, 3].exists(x, x > 2)', '[1, 2, 3].all(x, x > 0)',
    '[1, 2, 3].map(x, x * 2)[2] == 6', '[1, 2, 3].filter(x, x > 1).size() == 2', '2 in [1, 2]',
    '[1, 2, 3].exists_one(x, x == 2)', 'math.greatest(1, 5, 3) == 5', 'math.least([1.5, 0.5]) == 0.5',
    'math.ceil(1.2) == 2.0', 'math.floor(-1.2) == -2.0', 'math.round(2.5) == 3.0', 'math.abs(-3) == 3',
    'math.sign(-2.0) == -1.0', 'math.isNaN(0.0 / 0.0)', 'math.bitAnd(6, 3) == 2', 'math.sqrt(16.0) == 4.0',
    f'{A}.?model.orValue("x") == "h100-sxm"', f'{A}.?missing.orValue("x") == "x"', f'{A}.?missing.hasValue()',
    'optional.of(1).value() == 1', 'optional.none().orValue(2) == 2', f'{A}.missing == "x"',
    f'{A}["other.example.com/rack"] == "r1"', 'device.attributes["other.example.com"].rack == "r1"',
    'has(device.attributes.gpu)', f'has({A}.model)', f'{A}.index + 9223372036854775807 > 0',
    f'{A}.index - 1 < 0', 'cel.bind(x, 2, x * x == 4)',
    # Arithmetic with an attribute (dyn to the type checker): mixed kinds fail only at run time.
    f'1.5 * {A}.index != 0.0', f'{A}.index * 1.5 > 1.0', f'{A}.index + 0.5 > 0.0', f'{A}.index * 2 == 6',
    f'{A}.index % 2u == 1u', f'{A}.model + "-x" == "h100-sxm-x"', f'{A}.index - 1u < 5u', '"abc" < "abd"', 'b"ab" == b"ab"', 'size("héllo") == 5',
    '"%d items".format([3]) == "3 items"', 'duration("1h") > duration("30m")',
    'timestamp("2026-01-01T00:00:00Z") < timestamp("2027-01-01T00:00:00Z")', '"a,b".split(",", 1).size() == 1',
    'strings.quote("a") == "\\"a\\""', '"ab".reverse() == "ba"', 'type(1) == int', 'dyn([1])[0] == 1',
    # Kubernetes' regex library (Go's regexp; patterns outside kube.go_regex's subset: cannot evaluate).
    f'{A}.model.find("[0-9]+") == "100"', f'{A}.model.find("^h[0-9]+$") == ""', f'{A}.model.find("\\\\bsxm") == "sxm"',
    f'{A}.model.findAll("[0-9]").size() == 3', f'{A}.model.findAll("0", 1) == ["0"]', f'{A}.model.findAll("x*").size() > 3',
    f'{A}.model.findAll("(1|10)0?") == ["100"]', '"a1b22".findAll("\\\\d+") == ["1", "22"]', '"aaa".findAll("a*?").size() == 4',
    f'{A}.model.find("(") == ""', '"baaa".findAll("a*") == ["", "aaa"]',
    'false && "a".find("(") == ""', f'{A}.uuid.find("(?i)gpu") == "GPU"', f'{A}.model.find(".{{2}}-") == "00-"',
    # Kubernetes' list library: sum, min, max, isSorted, indexOf, lastIndexOf, includes (1.37+).
    '[3, 1, 2].sum() == 6', '[1.5, 2.5].sum() == 4.0', f'[{A}.index, {A}.index].sum() == 6',
    '[9223372036854775807, 1].sum() > 0', '[1, 2, 3].isSorted()', '["b", "a"].isSorted()',
    f'[{A}.model, {A}.uuid].isSorted()', f'[{A}.index, {A}.nvlink].max() == 3', f'[{A}.nvlink, {A}.index].max() == true',
    '["b", "a", "c"].min() == "a"', '[2.5, 1.0].max() == 2.5', f'[{A}.index, {A}.index].max() == 3', '[].min() == 1',
    '[1, 2, 1].indexOf(1) == 0', '[1, 2, 1].lastIndexOf(1) == 2', 'dyn([1, 2]).indexOf(2.0) == 1',
    f'[{A}.model, {A}.model].lastIndexOf("a100") == 1', '[1, 2].includes(2)', f'[{A}.index].includes(3)',
    # cel-go's list extension (1.34+): lists.range, reverse, slice, flatten, distinct.
    'lists.range(3) == [0, 1, 2]', f'lists.range({A}.index).size() == 3', '[1, 2, 3].reverse()[0] == 3',
    '[1, 2, 3].slice(1, 3) == [2, 3]', '[1, 2].slice(1, 3).size() == 1', '[[1], [2, 3]].flatten().size() == 3',
    '[1, 1, 2].distinct() == [1, 2]', f'[{A}.index, {A}.index].distinct().size() == 1',
    # cel-go's sets extension.
    'sets.contains([1, 2, 3], [2])', 'sets.equivalent([1, 2], [2, 1, 1])', f'sets.intersects([{A}.model], ["a100", "x"])',
    # Two-variable comprehensions (cannot evaluate).
    '[1, 2].all(i, v, i < v)', '[1, 2].map(x, x > 1, x * 2) == [4]',
]

# Atoms for generated expressions (boolean-valued) and how they combine.
ATOMS = [c for c in CORPUS if "format" not in c]


@st.composite
def expression(draw, depth=0):
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(("and", "or", "not", "ternary")))
    left, right = draw(expression(depth + 1)), draw(expression(depth + 1))
    if kind == "not":
        return f"!({left})"
    if kind == "ternary":
        return f"({left}) ? ({right}) : ({draw(expression(depth + 1))})"
    return f"({left}) {'&&' if kind == 'and' else '||'} ({right})"


# What `expression` draws: an atom alone, each combinator (by its mark; no atom has one), one inside another.
COMBINATORS = {"&&": ") && (", "||": ") || (", "!": "!(", "ternary": ") ? ("}
EXPRESSION_KINDS = ("an atom alone", "a combination inside another") + tuple(COMBINATORS)


def expression_kinds(expr):
    out = set(k for k, mark in COMBINATORS.items() if mark in expr)
    if sum(expr.count(mark) for mark in COMBINATORS.values()) > 1:
        out.add("a combination inside another")
    if expr in ATOMS:
        out.add("an atom alone")
    return out


def explainer_answer(env, expression, device):
    """(kind, value): ("match", bool), ("error", message) or ("unknown", why)."""
    try:
        activation = env.device_activation(D, device_fields(device))
        return "match", env.matches(expression, activation)
    except cel.Unsupported as exc:
        return "unknown", str(exc)
    except cel.SelectorError as exc:
        return "error", str(exc)


def compare(oracle, env, expressions, counts):
    cases = [{"expression": e, "device": {"driver": D, "attributes": d["attributes"], "capacity": d["capacity"]}}
             for e in expressions for d in DEVICES]
    answers = oracle.cel(cases)
    for case, answer in zip(cases, answers):
        kind, value = explainer_answer(env, case["expression"], dict(case["device"], name="dev"))
        counts[kind] += 1
        counts["oracle " + ("error" if answer["error"] else "match")] += 1
        if kind == "unknown":
            continue
        where = f"{oracle.version}: {case['expression']!r} on {case['device']['attributes']}"
        if answer["error"]:
            assert kind == "error", f"{where}: the oracle fails ({answer['error']}), the explainer says {value}"
        else:
            assert (kind, value) == ("match", answer["matches"]), (
                f"{where}: the oracle says {answer['matches']}, the explainer {kind} {value}")


@pytest.mark.every_release("the CEL environment of the release's own k8s.io/dynamic-resource-allocation (hack/oracle)")
def test_the_corpus_agrees_with_the_release_cel(release_oracle, capsys):
    env = cel.Environment(int(release_oracle.version.split(".")[1]))
    counts = collections.Counter()
    compare(release_oracle, env, CORPUS, counts)
    with capsys.disabled():
        print(f"\n{release_oracle.version}: {len(CORPUS)} expressions x {len(DEVICES)} devices: {dict(counts)}")
    assert counts["match"] > len(CORPUS), counts


@pytest.mark.every_release("the CEL environment of the release's own k8s.io/dynamic-resource-allocation (hack/oracle)")
def test_generated_expressions_agree_with_the_release_cel(release_oracle, capsys):
    env = cel.Environment(int(release_oracle.version.split(".")[1]))
    counts, reached = collections.Counter(), set()

    def run(cases, offset):
        @seed(SEED + offset)
        @settings(max_examples=cases, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(expression())
        def check(expr):
            reached.update(expression_kinds(expr))
            counts["expressions"] += 1
            compare(release_oracle, env, [expr], counts)

        counts["runs"] += 1
        check()

    possible = set(EXPRESSION_KINDS)
    try:
        tiers.until_covered(run, CASES, MAX_CASES, lambda: possible - reached)
    finally:
        with capsys.disabled():  # the seed and the counts belong in the run's log, passed or not
            print(f"\n{release_oracle.version}: seed {SEED}, tier {tiers.TIER}, {counts['expressions']} generated "
                  f"expressions: {dict(counts)}; kinds not drawn: {sorted(possible - reached)}")
    assert counts["expressions"] >= min(CASES, 50)
