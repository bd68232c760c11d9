"""Make the checkout importable as ansible_collections.dra.admin for unit tests; load hack/ scripts."""
import importlib.machinery
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

clusterlib.collection_on_path()

UNIT = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(UNIT, "fixtures")


def recorded_by_kind(filename):
    """A recorded List of tests/unit/fixtures/recorded/ (objects of several kinds) as {kind: [objects]}."""
    import json
    with open(os.path.join(FIXTURES, "recorded", filename)) as handle:
        items = json.load(handle)["items"]
    by_kind = {}
    for item in items:
        by_kind.setdefault(item["kind"], []).append(item)
    return by_kind


def load_script(relpath, module_name):
    """A script of the checkout without a .py suffix (e.g. hack/docs), imported as a module."""
    loader = importlib.machinery.SourceFileLoader(module_name, os.path.join(ROOT, relpath))
    spec = importlib.util.spec_from_loader(module_name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
