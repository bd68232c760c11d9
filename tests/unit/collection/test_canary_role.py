"""Role canary: its defaults are its argument specs' and the module's (DEFAULT_EXPECT_ENV is the one home of the
example driver's variable; the YAML copies are checked here)."""
import os

import yaml

from ansible_collections.dra.admin.plugins.module_utils.canary import canary
from ansible_collections.dra.admin.plugins.modules import dra_canary
from conftest import ROOT

ROLE = os.path.join(ROOT, "roles", "canary")
# Role variable -> module option it is passed as.
PASSED = {"drivers": "drivers", "pools": "pools", "device_classes": "device_classes", "namespace": "namespace",
          "image": "image", "expect_env": "expect_env", "expect_paths": "expect_paths",
          "tolerations": "tolerations", "allocation_timeout": "allocation_timeout",
          "prepare_timeout": "prepare_timeout", "unprepare_timeout": "unprepare_timeout",
          "poll_interval": "wait_sleep"}


def load(*path):
    with open(os.path.join(ROLE, *path)) as handle:
        return yaml.safe_load(handle)


def test_argument_specs_cover_every_default():
    defaults = load("defaults", "main.yml")
    options = load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(options) == set(defaults)
    for name, value in defaults.items():
        assert options[name]["default"] == value, name
        assert options[name]["description"], name


def test_role_defaults_are_the_modules():
    defaults = load("defaults", "main.yml")
    spec = dra_canary.argument_spec()
    documented = yaml.safe_load(dra_canary.DOCUMENTATION)["options"]
    for variable, option in PASSED.items():
        assert defaults["dra_canary_" + variable] == spec[option]["default"], variable
        assert documented[option]["default"] == spec[option]["default"], option
    assert spec["expect_env"]["default"] == canary.DEFAULT_EXPECT_ENV
    tasks = open(os.path.join(ROLE, "tasks", "main.yml")).read()
    for variable, option in PASSED.items():
        assert "%s: \"{{ dra_canary_%s }}\"" % (option, variable) in tasks, variable
