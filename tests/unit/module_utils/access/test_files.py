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


def test_backups_are_pruned_to_the_newest_of_the_same_file_only(tmp_path):
    """backup_keep: after a backup, that file's oldest backups beyond the limit go; the backups of another file, a
    file of the same name with another suffix and the user's own files stay."""
    import yaml
    from ansible_collections.dra.admin.plugins.doc_fragments.backup import ModuleDocFragment
    from ansible_collections.dra.admin.plugins.module_utils.access.files import (
        DEFAULT_BACKUP_KEEP, backup_file, backup_options, backup_text, backups_to_prune)
    assert backup_options("/x")["backup_keep"]["default"] == DEFAULT_BACKUP_KEEP == \
        yaml.safe_load(ModuleDocFragment.KEEP)["options"]["backup_keep"]["default"]
    backups = tmp_path / "backups"
    backups.mkdir()
    stamps = ["20261201T0000%02d.000000" % i for i in range(5)]
    for stamp in stamps:
        (backups / ("kube-apiserver.yaml." + stamp)).write_text("old")
    others = ["kube-scheduler.yaml." + stamps[0], "kube-apiserver.yaml.orig", "kube-apiserver.yaml." + stamps[0] + ".mine",
              "notes.txt"]
    for name in others:
        (backups / name).write_text("keep")
    source = tmp_path / "kube-apiserver.yaml"
    source.write_text("new")
    written = backup_file(str(source), str(backups), keep=3)
    left = sorted(p.name for p in backups.iterdir())
    assert left == sorted(others + ["kube-apiserver.yaml." + s for s in stamps[-2:]] + [os.path.basename(written)])
    assert backups_to_prune(left, "kube-apiserver.yaml", 0) == []
    for dummy in range(3):
        backup_text("x", "kubeadm-config.ClusterConfiguration", str(backups), keep=2)
    assert len([p for p in backups.iterdir() if p.name.startswith("kubeadm-config.")]) == 2
