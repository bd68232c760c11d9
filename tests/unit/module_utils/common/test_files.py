"""Reading host files (module_utils/files.py): the one reader of component_flags, kubelet_config and Chart.yaml."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.common.files import read_regular_file, read_text


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
