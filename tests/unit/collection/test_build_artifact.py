"""`ansible-galaxy collection build` packs what the collection ships and nothing a test run leaves behind.

The checkout's tracked files are copied to a scratch directory together with the leftovers of a
development session (pytest's and Python's caches, ansible-test output, the linked collections path,
a virtual environment, an ansible-builder context, an earlier artifact); the built artifact's file list
must then match the allow-list below (docs/decisions.md, "What the built collection contains").
"""
import fnmatch
import os
import shutil
import subprocess
import sys
import tarfile
from conftest import ROOT

GALAXY = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")

# Files (fnmatch, '*' crosses '/') the artifact may hold.
ALLOWED = [
    "MANIFEST.json", "FILES.json", "README.md", "LICENSE", "requirements.txt", "bindep.txt",
    "requirements-awx.yml", "meta/*", "plugins/*", "roles/*", "playbooks/*", "docs/*", "changelogs/*",
    "inventory/example.yml", "tests/sanity/*",
]
# Files it must hold (a build_ignore entry too wide would drop them).
REQUIRED = [
    "meta/runtime.yml", "meta/execution-environment.yml", "plugins/module_utils/access/api.py",
    "plugins/modules/dra_node_drain.py", "roles/feature_gates/tasks/main.yml", "playbooks/site.yml",
    "docs/decisions.md", "requirements.txt", "bindep.txt", "inventory/example.yml", "requirements-awx.yml",
    "tests/sanity/ignore-2.19.txt", "tests/sanity/ignore-2.21.txt", "LICENSE", "docs/benchmarks/README.md",
]
# The benchmarks' raw samples and plots stay in the repository (docs/decisions.md): 1,086,830 bytes
# and 223 files before they were left out, 397,695 bytes and 216 files after.
LEFT_OUT = ["docs/benchmarks/*.json", "docs/benchmarks/*.png"]
MAX_ARTIFACT_BYTES = 896 * 1024  # 865,775 bytes with the jobs' identities and host reads (docs/decisions.md)
LEFTOVERS = [
    ".pytest_cache/v/cache/lastfailed", "tests/unit/.pytest_cache/README.md",
    "__pycache__/x.cpython-311.pyc", "plugins/modules/__pycache__/dra_node_drain.cpython-311.pyc",
    "tests/unit/__pycache__/conftest.cpython-311-pytest-9.2.0.pyc",
    "tests/output/.tmp/sanity/x.json", ".tmp/molecule.log", ".venv/bin/python", ".ansible/collections/x",
    "roles/driver/.ansible/x", "context/Containerfile", "dra-admin-0.0.9.tar.gz", "stray.retry",
    ".hypothesis/examples/0123abcd/4567ef", ".hypothesis/constants/89abcdef",
]


def tracked_copy(dest):
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        source = os.path.join(ROOT, rel)
        if not os.path.isfile(source):  # deleted in the work tree
            continue
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)


def built_artifact(tmp_path, leftovers=()):
    """(artifact path, sorted file names in it) built from a copy of the tracked files plus `leftovers`."""
    source = tmp_path / "src"
    tracked_copy(str(source))
    for rel in leftovers:
        path = source / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left over by a test run\n")
    out = tmp_path / "out"
    res = subprocess.run([GALAXY, "collection", "build", "--output-path", str(out), str(source)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    (artifact,) = list(out.iterdir())
    with tarfile.open(str(artifact)) as tar:
        return artifact, sorted(m.name for m in tar.getmembers() if not m.isdir())


def test_artifact_holds_the_allow_list_only(tmp_path):
    artifact, files = built_artifact(tmp_path, LEFTOVERS)
    unexpected = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in ALLOWED)]
    assert unexpected == []
    assert [f for f in files if "__pycache__" in f or ".pytest_cache" in f or f.endswith(".pyc")] == []
    assert [f for f in REQUIRED if f not in files] == []
    assert [f for f in files if any(fnmatch.fnmatch(f, pattern) for pattern in LEFT_OUT)] == []
    assert artifact.stat().st_size < MAX_ARTIFACT_BYTES, artifact.stat().st_size


def test_what_the_artifact_ships_passes_its_own_checks(tmp_path):
    """ansible-test's `ignores` test fails on an ignore entry whose file is not there, and galaxy-importer
    refuses a role without README.md: both are judged on the installed artifact, so every path the
    shipped ignore files name, and every role's README.md, must be in it."""
    files = set(built_artifact(tmp_path)[1])
    ignore_files = sorted(f for f in files if fnmatch.fnmatch(f, "tests/sanity/ignore-*.txt"))
    assert ignore_files, "no sanity ignore file shipped"
    named = set()
    for rel in ignore_files:
        for line in open(os.path.join(ROOT, rel)):
            if line.strip() and not line.startswith("#"):
                named.add(line.split()[0])
    assert sorted(named - files) == []
    roles = sorted(set(f.split("/")[1] for f in files if f.startswith("roles/")))
    assert len(roles) >= 13
    assert [r for r in roles if "roles/%s/README.md" % r not in files] == []
