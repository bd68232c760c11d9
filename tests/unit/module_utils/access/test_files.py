"""Reading host files (module_utils/access/files.py): the one reader of component_flags, kubelet_config and Chart.yaml."""
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.access.files import read_regular_file, read_text


class Refused(Exception):
    pass


def test_text_is_read_as_utf8_unchanged(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_bytes("a: ü\r\nb: 2".encode("utf-8"))
    assert read_text(str(path)) == "a: ü\r\nb: 2"
    assert read_regular_file(str(path), "%s missing", "%s not a file", Refused) == "a: ü\r\nb: 2"


def test_a_missing_path_or_a_directory_raises_the_callers_error_naming_it(tmp_path):
    with pytest.raises(Refused, match="^%s missing$" % (tmp_path / "none")):
        read_regular_file(str(tmp_path / "none"), "%s missing", "%s not a file", Refused)
    with pytest.raises(Refused, match="^%s not a file$" % tmp_path):
        read_regular_file(str(tmp_path), "%s missing", "%s not a file", Refused)


def test_the_backup_defaults_have_one_home():
    """The doc fragment, the roles' defaults and argument specs repeat access/files' backup directories."""
    import yaml
    from ansible_collections.dra.admin.plugins.doc_fragments.backup import ModuleDocFragment
    from ansible_collections.dra.admin.plugins.module_utils.access.files import (
        CONTROLLER_BACKUP_DIR, NODE_BACKUP_DIR, backup_options)
    from conftest import ROOT
    assert yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]["backup_dir"]["default"] == NODE_BACKUP_DIR
    assert yaml.safe_load(ModuleDocFragment.CONTROLLER)["options"]["backup_dir"]["default"] == CONTROLLER_BACKUP_DIR
    assert backup_options(NODE_BACKUP_DIR)["backup_dir"]["default"] == NODE_BACKUP_DIR
    for role in ("feature_gates", "control_plane_tuning", "node_doctor"):
        variable = "dra_%s_backup_dir" % role
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as fh:
            assert yaml.safe_load(fh)[variable] == NODE_BACKUP_DIR
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as fh:
            spec = yaml.safe_load(fh)["argument_specs"]["main"]["options"][variable]
        assert spec["default"] == NODE_BACKUP_DIR
