"""What makes a test release-dependent: a fact of the version catalog (plugins/module_utils/releases/catalog.py).

In the `ci` tier (`make test`) the default release (the first of hack/cluster/versions.env) runs every test;
another pinned release runs a test only where its marker says why:

- `@pytest.mark.per_release(FACT, *ARGS, key=KEY)`: FACT names a catalog function of a version or a catalog
  table; the test runs on a release where the fact's value differs from the default release's. A fact outside
  catalog.py is named `package.module:NAME` (below plugins/module_utils);
- `@pytest.mark.every_release(REASON)`: what every release gets whatever the catalog says (the release's own
  binaries, its allocator, a real-node run of site.yml's gate plays, a drain and the health stream).

In `full` (`make test-full`) every test runs on every release. tests/unit/collection/test_testing_list.py
checks docs/testing.md against the markers, that each named fact exists, and that it differs on at least one
pinned release: the choice is checked against the catalog, not remembered.

How a fact is read for a release (value()):
- a function: called with the release and ARGS (`gate_info("v1.33.13", "DRAExtendedResource")`), then
  indexed by KEY when given;
- a table of minors (`_DEVICE_TAINT_RULE_API`): the entry of the newest minor at or below the release's;
- a table of first patches per minor (`..._FROM = {37: 1}`, `..._FIXED_IN`): whether the release has the change;
- a first minor (`..._FROM = 35`): whether the release is at or above it.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402

PER_RELEASE = "per_release"
EVERY_RELEASE = "every_release"


def _resolve(fact):
    clusterlib.collection_on_path()
    import importlib  # pylint: disable=import-outside-toplevel
    module, name = fact.rsplit(":", 1) if ":" in fact else ("", fact)
    path = "ansible_collections.dra.admin.plugins.module_utils." + (module or "releases.catalog")
    owner = importlib.import_module(path)
    if not hasattr(owner, name):
        raise KeyError(f"per_release({fact!r}): plugins/module_utils/{path.split('module_utils.')[1].replace('.', '/')}"
                       f".py has no function or table {name!r}")
    return owner, name, getattr(owner, name)


def value(fact, release, args=(), key=None):
    """The answer of `fact` on `release`; KeyError naming the fact when there is no such name."""
    owner, name, attr = _resolve(fact)
    catalog = _resolve("parse_minor")[0]
    minor = catalog.parse_minor(release)
    if callable(attr):
        answer = attr(release, *args)
    elif isinstance(attr, dict) and (name.endswith("_FROM") or name.endswith("_FIXED_IN")) \
            and all(isinstance(v, int) for v in attr.values()):
        answer = catalog.has_patch_change(attr, release)
    elif isinstance(attr, dict):
        below = [m for m in attr if m <= minor]
        answer = attr[max(below)] if below else None
    elif isinstance(attr, int) and name.endswith("_FROM"):
        answer = minor >= attr
    else:
        raise KeyError(f"per_release({fact!r}): a {type(attr).__name__} is neither a function of a version nor a "
                       f"table by minor")
    return answer if key is None else (answer or {}).get(key)


def marker_fact(marker):
    """(fact, args, key) of a per_release marker."""
    if not marker.args or not isinstance(marker.args[0], str) or set(marker.kwargs) - {"key"}:
        raise ValueError('per_release takes a fact, its arguments and key=, e.g. per_release("gate_info", '
                         '"DRAExtendedResource")')
    return marker.args[0], tuple(marker.args[1:]), marker.kwargs.get("key")


def differs_from(fact, release, default, args=(), key=None):
    """Whether the fact's value on `release` is not its value on `default`."""
    return repr(value(fact, release, args, key)) != repr(value(fact, default, args, key))


def runs_on(item, release, default):
    """Whether the ci tier runs `item` on `release` (the default release runs every test)."""
    if release in (None, default) or item.get_closest_marker(EVERY_RELEASE) is not None:
        return True
    marker = item.get_closest_marker(PER_RELEASE)
    if marker is None:
        return False
    fact, args, key = marker_fact(marker)
    return differs_from(fact, release, default, args, key)
