"""docs/architecture.md matches the tree, and module_utils keeps its layers.

Layers of plugins/module_utils (docs/architecture.md): pure modules, `*_service.py` (requests to the
API server through the client passed in), and the access modules of `common/` (api, http, files).
A pure module imports none of the others' kind, nor Ansible's module runtime.
"""
import ast
import os
import re
from conftest import ROOT

MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
DOC = os.path.join(ROOT, "docs", "architecture.md")
PREFIX = "ansible_collections.dra.admin.plugins.module_utils."
ACCESS = {"common/api.py", "common/http.py", "common/files.py"}
NOT_PURE_ANSIBLE = ("ansible.module_utils.basic", "ansible.module_utils.urls")


def module_utils_files():
    found = set()
    for directory, dummy, files in os.walk(MODULE_UTILS):
        for name in files:
            if name.endswith(".py") and name != "__init__.py":
                found.add(os.path.relpath(os.path.join(directory, name), MODULE_UTILS).replace(os.sep, "/"))
    return found


def is_pure(relpath):
    return relpath not in ACCESS and not relpath.endswith("_service.py")


def imported_modules(path):
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(node.module + "." + alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def collection_target(root, module):
    """root-relative file (root: a module_utils tree) an import names, or None."""
    if not module.startswith(PREFIX):
        return None
    rel = module[len(PREFIX):].replace(".", "/") + ".py"
    return rel if os.path.isfile(os.path.join(root, rel)) else None


def layer_violations(root, files):
    bad = []
    for rel in sorted(f for f in files if is_pure(f)):
        for module in sorted(imported_modules(os.path.join(root, rel))):
            target = collection_target(root, module)
            if (target and not is_pure(target)) or module.startswith(NOT_PURE_ANSIBLE):
                bad.append("%s imports %s" % (rel, module))
    return bad


def domain_table(text):
    """{package: set of file names} from the doc's 'module_utils by domain' table."""
    section = text.split("### module_utils by domain", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[a-z_]+/`", cells[0]):
            table[cells[0].strip("`/")] = set(re.findall(r"`([a-z_]+\.py)`", cells[2]))
    return table


def test_pure_modules_import_no_service_no_access_module_and_no_ansible_runtime():
    files = module_utils_files()
    assert len(files) > 40
    assert layer_violations(MODULE_UTILS, files) == []


def test_the_layer_check_reports_a_pure_module_that_imports_a_service_or_the_runtime(tmp_path):
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "claims_service.py").write_text("")
    (tmp_path / "claims" / "slices.py").write_text("")
    (tmp_path / "claims" / "claims.py").write_text(
        "from %sclaims import claims_service\nfrom %sclaims.slices import x\n"
        "from ansible.module_utils.basic import AnsibleModule\n" % (PREFIX, PREFIX))
    files = {"claims/claims.py", "claims/claims_service.py", "claims/slices.py"}
    assert layer_violations(str(tmp_path), files) == [
        "claims/claims.py imports ansible.module_utils.basic",
        "claims/claims.py imports ansible.module_utils.basic.AnsibleModule",
        "claims/claims.py imports %sclaims.claims_service" % PREFIX,
    ]


def test_the_domain_table_lists_exactly_the_files_of_each_package():
    with open(DOC) as fh:
        table = domain_table(fh.read())
    listed = {"%s/%s" % (package, name) for package, names in table.items() for name in names}
    assert listed == module_utils_files()


def test_every_path_the_page_names_exists():
    with open(DOC) as fh:
        text = fh.read()
    paths = set(re.findall(r"`((?:plugins|roles|hack|tests|bench|docs|playbooks|inventory)/[^`*<> ]+)`", text))
    assert len(paths) > 30
    missing = sorted(p for p in paths if not os.path.exists(os.path.join(ROOT, p.split(" ")[0].rstrip("/"))))
    assert missing == []


MAX_FUNCTION_LINES = 60


def long_functions(paths):
    """(lines, path, name) of every function or method over MAX_FUNCTION_LINES lines (docstring included)."""
    out = []
    for path in paths:
        with open(path) as fh:
            tree = ast.parse(fh.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    out.append((lines, os.path.relpath(path, ROOT), node.name))
    return sorted(out)


def test_no_function_of_the_collection_is_over_60_lines(tmp_path):
    plugins = [os.path.join(d, n) for d, dummy, files in os.walk(os.path.join(ROOT, "plugins"))
               for n in files if n.endswith(".py")]
    assert len(plugins) > 60
    assert long_functions(plugins) == []
    long_one = tmp_path / "long.py"
    long_one.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    assert [(lines, name) for lines, dummy, name in long_functions([str(long_one)])] == [(61, "f")]


def test_every_error_class_of_the_collection_derives_from_the_one_root():
    import importlib
    import inspect
    from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
    found, stray = [], []
    for directory, dummy, files in os.walk(os.path.join(ROOT, "plugins")):
        for name in files:
            if not name.endswith(".py") or name == "__init__.py" or "doc_fragments" in directory:
                continue
            rel = os.path.relpath(os.path.join(directory, name), ROOT)[:-3].replace(os.sep, ".")
            module = importlib.import_module("ansible_collections.dra.admin." + rel)
            for cname, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == module.__name__ and issubclass(cls, BaseException):
                    found.append(cname)
                    if not issubclass(cls, DraAdminError):
                        stray.append("%s.%s" % (rel, cname))
    assert len(found) > 15
    assert stray == []


def test_every_module_utils_file_the_page_names_by_its_domain_path_exists():
    with open(DOC) as fh:
        text = fh.read()
    packages = {d for d in os.listdir(MODULE_UTILS) if os.path.isdir(os.path.join(MODULE_UTILS, d))}
    named = set(re.findall(r"`([a-z_]+/[a-z_]+\.py)`", text))
    in_packages = [n for n in named if n.split("/")[0] in packages]
    assert len(in_packages) > 20
    assert sorted(n for n in in_packages if not os.path.isfile(os.path.join(MODULE_UTILS, n))) == []
