"""docs/modules and docs/roles hold what hack/docs generates from the modules' and roles' specs."""
import difflib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, load_script

ROOT = Path(ROOT)
SCRIPT = ROOT / "hack" / "docs"


def load_docs_script():
    return load_script("hack/docs", "hack_docs")


@pytest.fixture(scope="module")
def docs():
    return load_docs_script()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("generated") / "docs"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--output", str(out)],
                          cwd=str(ROOT), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_every_module_and_role_has_a_generated_page(generated, docs):
    modules = sorted(p.stem for p in (generated / "modules").glob("*.md"))
    roles = sorted(p.stem for p in (generated / "roles").glob("*.md"))
    assert modules == docs.module_names()
    assert "dra_claims_info" in modules and "dra_node_drain" in modules
    assert roles == docs.role_names()
    assert "drain" in roles and "preflight" in roles


def test_committed_docs_are_current(generated):
    stale = []
    for page in sorted(generated.rglob("*.md")):
        rel = page.relative_to(generated)
        committed = ROOT / "docs" / rel
        want = page.read_text()
        have = committed.read_text() if committed.exists() else ""
        if have != want:
            diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                                "docs/%s" % rel, "generated", n=1))
            stale.append(diff[:3000])
    assert not stale, "docs are stale; run hack/docs:\n" + "\n".join(stale)


def test_every_role_has_a_current_readme(generated, docs):
    """Galaxy shows a role's README.md (galaxy-importer refuses a role without one): hack/docs writes the
    role's variables there, keeping prose written around the block."""
    for name in docs.role_names():
        want = (generated.parent / "roles" / name / "README.md").read_text()
        assert want.startswith("# ") and docs.BEGIN in want, name
        assert "](../modules/" not in want, name
        have_path = ROOT / "roles" / name / "README.md"
        have = have_path.read_text() if have_path.exists() else ""
        assert have == want, "roles/%s/README.md is stale; run hack/docs" % name


def test_generated_module_page_has_options_examples_and_returns(generated):
    page = (generated / "modules" / "dra_claims_info.md").read_text()
    assert "| `fail_if_any_on_node` | bool |  | `false` |" in page
    assert "## Examples" in page and "dra.admin.dra_claims_info:" in page
    assert "| `claims[].orphaned` | bool | always |" in page
    # The kubernetes.core auth options are named once, not copied as a table.
    assert "From `kubernetes.core.k8s_auth_options`:" in page
    assert "| `api_key` |" not in page
    # ansible-doc's absolute file name must not leak into the page.
    assert str(ROOT) not in page and ".tmp/collections" not in page


def test_generated_role_page_lists_every_argument_spec_option(generated):
    import yaml

    spec = yaml.safe_load((ROOT / "roles" / "drain" / "meta" / "argument_specs.yml").read_text())
    page = (generated / "roles" / "drain.md").read_text()
    for option in spec["argument_specs"]["main"]["options"]:
        assert "| `%s` |" % option in page, option


def test_check_mode_flags_a_hand_edit_inside_the_block(tmp_path):
    docs_copy = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs_copy)
    page = docs_copy / "roles" / "drain.md"
    text = page.read_text()
    assert "| `dra_drain_timeout` | int |" in text
    page.write_text(text.replace("| `dra_drain_timeout` | int |", "| `dra_drain_timeout` | str |"))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--docs", str(docs_copy), "--check"],
                          cwd=str(ROOT), capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "roles/drain.md" in proc.stderr
    assert "+| `dra_drain_timeout` | int |" in proc.stdout


def test_splice_keeps_prose_and_replaces_only_the_block(docs):
    page = "\n".join([
        "# Role `x`", "", "Hand-written intro.", "",
        docs.BEGIN, "", "old generated", "", docs.END, "",
        "## Hand-written notes", "", "kept", ""])
    out = docs.splice(page, ["new generated"], "# ignored")
    assert out.startswith("# Role `x`\n\nHand-written intro.\n\n" + docs.BEGIN)
    assert "old generated" not in out and "new generated" in out
    assert out.endswith(docs.END + "\n\n## Hand-written notes\n\nkept\n")
    # Idempotent.
    assert docs.splice(out, ["new generated"], "# ignored") == out


def test_splice_appends_block_to_page_without_markers_and_creates_missing_page(docs):
    out = docs.splice("# Role `x`\n\nProse only.\n", ["generated"], "# ignored")
    assert out == "# Role `x`\n\nProse only.\n\n%s\n\ngenerated\n\n%s\n" % (docs.BEGIN, docs.END)
    created = docs.splice(None, ["generated"], "# Module `dra.admin.y`")
    assert created.startswith("# Module `dra.admin.y`\n\n" + docs.BEGIN)


def test_splice_refuses_unbalanced_markers(docs):
    with pytest.raises(docs.DocsError):
        docs.splice("# x\n\n%s\n\nno end\n" % docs.BEGIN, ["g"], "# x")
    with pytest.raises(docs.DocsError):
        docs.splice("# x\n\n%s\n%s\n%s\n" % (docs.END, docs.BEGIN, docs.END), ["g"], "# x")


def test_markup_to_markdown(docs):
    assert docs.markup("C(a) O(b=c) V(d) I(e) B(f)") == "`a` `b=c` `d` *e* **f**"
    assert docs.markup("M(dra.admin.dra_claims_info)") == "[`dra.admin.dra_claims_info`](../modules/dra_claims_info.md)"
    assert docs.markup("M(kubernetes.core.k8s)") == "`kubernetes.core.k8s`"
    assert docs.markup("P(dra.admin.drain#role)") == "[`dra.admin.drain`](../roles/drain.md)"
    assert docs.markup("L(the page,https://example.invalid/p) U(https://example.invalid)") == \
        "[the page](https://example.invalid/p) <https://example.invalid>"
    assert docs.cell(["a | b", "c"]) == "a \\| b c"
    assert docs.flow([1, "x"]) == "`[1, x]`"
    assert docs.flow("") == '`""`'
