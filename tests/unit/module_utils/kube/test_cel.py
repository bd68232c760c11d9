"""DRA's CEL environment on cel-python: the scheduler's semantics (cel-go with Kubernetes' libraries) on one
device shaped like a v1 ResourceSlice entry, and what is answered "cannot evaluate"."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import cel

DRIVER = "gpu.example.com"
DEVICE = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "LATEST-GPU-MODEL"},
        "index": {"int": 0},
        "mig": {"bool": True},
        "dra.example.com/driverVersion": {"version": "1.2.3"},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}
ERROR = "error"
UNSUPPORTED = "unsupported"

CASES = [
    ('device.driver == "gpu.example.com"', True),
    ('device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ('device.attributes["dra.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))', True),
    ('"gpu.example.com" in device.attributes', True),
    ('"other.example.com" in device.attributes', False),
    ('has(device.attributes["gpu.example.com"].model)', True),
    ('has(device.attributes["gpu.example.com"].missing)', False),
    # An unknown domain is an empty map: has() false, a lookup in it a missing-key error.
    ('has(device.attributes["other.example.com"].model)', False),
    ('device.attributes["other.example.com"].size() == 0', True),
    ('device.attributes["gpu.example.com"].missing == "x"', ERROR),
    ('device.attributes["other.example.com"].model == "x"', ERROR),
    # Errors are absorbed by && and || as in cel-go, in either order.
    ('device.attributes["gpu.example.com"].missing == "x" || true', True),
    ('device.attributes["gpu.example.com"].missing == "x" && false', False),
    ('device.attributes["gpu.example.com"].index < 1.5', True),
    ('device.attributes["gpu.example.com"].model == 1', False),
    ('device.attributes["gpu.example.com"].model', ERROR),
    ('device.attributes["gpu.example.com"].model.lowerAscii() == "latest-gpu-model"', True),
    ('device.attributes.all(d, d.endsWith(".example.com"))', True),
    ('9223372036854775807 + 1 > 0', ERROR),
    ('1 / 0 == 0', ERROR),
    ('device.attributes["dra.example.com"].driverVersion == semver("1.2.3")', True),
    ('device.attributes["dra.example.com"].driverVersion.isLessThan(semver("1.10.0"))', True),
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
    ('semver("v1.2", true) == semver("1.2.0")', True),
    ('semver("bogus") == semver("1.0.0")', ERROR),
    ('device.attributes["dra.example.com"].driverVersion == "1.2.3"', ERROR),
    ('device.capacity["gpu.example.com"].memory == quantity("81920Mi")', True),
    ('device.capacity["gpu.example.com"].memory.asInteger() == 85899345920', True),
    ('quantity("50k").sub(20000).asApproximateFloat() == 30000.0', True),
    ('isQuantity("1Gi") && !isQuantity("1GB")', True),
    ('cel.bind(d, device.attributes["gpu.example.com"], d.model == "LATEST-GPU-MODEL" && d.mig)', True),
    ('device.allowMultipleAllocations == false', True),
    ('device.attributes["gpu.example.com"].?missing.orValue("none") == "none"', UNSUPPORTED),
    ('sets.contains([1, 2], [1]) && sets.equivalent([1, 2], [2, 1, 1]) && !sets.intersects([1], [2])', True),
    ('device.attributes["gpu.example.com"].model.find("GPU") == "GPU"', True),
    ('device.attributes["gpu.example.com"].model.find("(?i)gpu") == "GPU"', UNSUPPORTED),
    ('"a1b22".findAll("[0-9]+") == ["1", "22"] && "a1b22".findAll("[0-9]+", 1) == ["1"]', True),
    ('"baaa".findAll("a*") == ["", "aaa"]', True),  # Go skips the empty match right after "aaa"; finditer would not
    ('false && "a".find("(") == ""', ERROR),  # a literal pattern is compiled with the program
    ('[3, 1, 2].sum() == 6 && [1.5, 2.5].sum() == 4.0', True),
    ('[9223372036854775807, 1].sum() > 0', ERROR),
    ('[].sum() == 0', UNSUPPORTED),  # the zero's type is the list's static type
    ('[1, 2, 3].isSorted() && !["b", "a"].isSorted() && ["b", "a", "c"].min() == "a" && [2.5, 1.0].max() == 2.5',
     True),
    ('[].min() == 1', ERROR),
    ('[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && "abcb".lastIndexOf("b") == 3', True),
    ('[1, 2].includes(2)', True),
    ('lists.range(3) == [0, 1, 2] && [1, 2, 3].reverse()[0] == 3 && [1, 2, 3].slice(1, 3) == [2, 3]', True),
    ('[[1], [2, 3]].flatten().size() == 3 && [1, 1, 2].distinct() == [1, 2]', True),
    ('"ab".reverse() == "ba" || true', ERROR),  # no string overload: a compile error
    ('math.greatest(1, 2) == 2 || true', ERROR),  # no release declares the math extension
    ('[1, 2].all(i, v, i < v)', UNSUPPORTED),  # two-variable comprehensions
    ('[1, 2].map(x, x > 1, x * 2) == [4]', UNSUPPORTED),
    ('cel.bind(sets, [1], sets.size() == 1)', UNSUPPORTED),
    ('device.attributes["gpu.example.com"] ==', UNSUPPORTED),
]


@pytest.fixture(scope="module")
def env():
    return cel.Environment(37)


@pytest.mark.parametrize("expression,expected", CASES)
def test_selector_semantics(env, expression, expected):
    activation = env.device_activation(DRIVER, DEVICE)
    if expected == ERROR:
        with pytest.raises(cel.SelectorError):
            env.matches(expression, activation)
    elif expected == UNSUPPORTED:
        with pytest.raises(cel.Unsupported):
            env.matches(expression, activation)
    else:
        assert env.matches(expression, activation) is expected


def test_list_valued_attribute_makes_the_device_unevaluable(env):
    device = dict(DEVICE, attributes={"models": {"strings": ["a", "b"]}})
    assert env.device_activation(DRIVER, device) is None
    with pytest.raises(cel.Unsupported):
        env.matches('device.driver == "gpu.example.com"', None)


def test_release_before_1_34_has_no_allow_multiple_allocations():
    env = cel.Environment(33)
    with pytest.raises(cel.SelectorError):
        env.matches("device.allowMultipleAllocations == false", env.device_activation(DRIVER, DEVICE))


def test_quantity_finer_than_nano_is_not_guessed():
    with pytest.raises(cel.Unsupported):
        cel.parse_quantity("0.0000000001")
    assert cel.parse_quantity("1.5Gi") == 3 * 2 ** 29


def test_semver_orders_prereleases_as_semver_2():
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
               "1.0.0-rc.1", "1.0.0"]
    versions = [cel.Semver(v) for v in ordered]
    assert all(a.compare(b) < 0 for a, b in zip(versions, versions[1:]))


@pytest.mark.parametrize("expression", ['[1, 2].includes(2)', 'lists.range(2).size() == 2', '[1].reverse() == [1]'])
def test_functions_a_release_does_not_declare_do_not_compile(expression):
    env = cel.Environment(33)
    with pytest.raises(cel.SelectorError, match="undeclared reference"):
        env.matches(expression, env.device_activation(DRIVER, DEVICE))


def test_an_error_given_to_distinct_fails_the_whole_evaluation_before_1_38():
    expression = '[device.attributes["gpu.example.com"].missing].distinct().size() == 1 || true'
    with pytest.raises(cel.Unsupported):
        cel.Environment(37).matches(expression, cel.Environment(37).device_activation(DRIVER, DEVICE))
    env = cel.Environment(cel.ERROR_ARGUMENT_ABSORBED_FROM)
    assert env.matches(expression, env.device_activation(DRIVER, DEVICE)) is True
