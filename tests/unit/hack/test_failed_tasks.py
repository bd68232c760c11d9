"""hack/failed-tasks: the digest `make molecule` prints last when molecule fails."""
import os

from conftest import ROOT, load_script

LOGS = os.path.join(ROOT, "tests", "unit", "fixtures", "logs")


def load_tool():
    return load_script("hack/failed-tasks", "failed_tasks")


def test_recorded_molecule_failure_gives_task_and_stderr(capsys):
    tool = load_tool()
    tool.main(os.path.join(LOGS, "molecule-create-failed.log"))
    out = capsys.readouterr().out
    assert out.startswith("- localhost: TASK [Start the control plane, fake nodes and example driver plugins]\n")
    assert "rc: 1" in out
    assert "stderr: [cluster] ERROR: timed out after 60s waiting for API server" in out
    assert out.rstrip().endswith("logs kept in /root/.cache/dra-admin/state/molecule-dra.failed")


def test_wrapped_task_name_and_non_json_result():
    tool = load_tool()
    lines = tool.plain_lines(
        "  \x1b[2m│\x1b[0m TASK [dra.admin.driver : Wait for the rollout and the ResourceSlices of\n"
        "  \x1b[2m│\x1b[0m   the driver] ***\n"
        "  \x1b[2m│\x1b[0m fatal: [localhost]: FAILED! => not json\n"
        "  \x1b[2m│\x1b[0m   second line\n"
        "  \x1b[2m│\x1b[0m \n")
    assert list(tool.results(lines)) == [
        ("dra.admin.driver : Wait for the rollout and the ResourceSlices of the driver", "localhost",
         "not json second line")]
    assert tool.summary("not json second line") == "not json second line"


def test_log_without_failed_task_lists_its_errors(tmp_path, capsys):
    log = tmp_path / "m.log"
    log.write_text("INFO ok\nERROR    Molecule executed 1 scenario (1 failed)\n")
    load_tool().main(str(log))
    assert capsys.readouterr().out == ("no failed task in the log; its errors:\n"
                                       "  ERROR    Molecule executed 1 scenario (1 failed)\n")
