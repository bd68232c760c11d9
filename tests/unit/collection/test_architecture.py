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
ACCESS = {"access/api.py", "access/http.py", "access/prometheus.py", "access/files.py"}
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


# Packages import downward only. The floors: common (plumbing), releases (what each release serves), access (the
# clients of the API server, other endpoints and host files) and kube (Kubernetes' own vocabulary: node and label
# selection, slices, taints and DeviceTaintRules, CEL, quantities, pods and evictions, the metrics text). A floor
# imports only the floors below it; a domain imports the floors and only the domains named here.
FLOORS = {
    "common": set(),
    "releases": {"common"},
    "access": {"common", "releases"},
    "kube": {"common", "releases", "access"},
}
DOMAIN_IMPORTS = {
    "claims": set(),
    "control_plane": set(),
    "rbac": set(),
    "allocation": {"claims"},                       # the allocator reads claims, capacity rules and counters
    "canary": {"allocation", "claims"},             # a probe is a claim the explainer's extended resources name
    "drivers": {"rbac"},                            # a driver's plan includes its persona's RBAC
    "devices": {"allocation", "claims", "drivers"},  # the eviction preview; consumers; which DaemonSets are drivers'
    "nodes": {"allocation", "claims", "drivers"},   # the same, for a whole node
    "metrics": {"canary", "control_plane", "devices"},  # the canary's and the device map's series; built-in QPS/Burst
    "upgrade": {"allocation", "control_plane", "drivers", "nodes", "rbac"},  # what an upgrade changes in each; the drain preview per node
}


def package_imports(root):
    """{package: set of other packages of module_utils it imports}."""
    out = {}
    for rel in module_utils_files_under(root):
        package = rel.split("/")[0]
        for module in imported_modules(os.path.join(root, rel)):
            if module.startswith(PREFIX):
                target = module[len(PREFIX):].split(".")[0]
                if target != package:
                    out.setdefault(package, set()).add(target)
    return out


def module_utils_files_under(root):
    return sorted(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
                  for d, dummy, files in os.walk(root) for n in files if n.endswith(".py") and n != "__init__.py")


def upward_imports(imports):
    """"a -> b" for each package import that is neither down to a floor nor in DOMAIN_IMPORTS."""
    bad = []
    for package, targets in sorted(imports.items()):
        allowed = FLOORS.get(package)
        if allowed is None:
            allowed = set(FLOORS) | DOMAIN_IMPORTS.get(package, set())
        bad += ["%s -> %s" % (package, t) for t in sorted(targets - allowed)]
    return bad


def test_packages_import_downward_only():
    imports = package_imports(MODULE_UTILS)
    assert set(imports) | set(FLOORS) >= set(DOMAIN_IMPORTS)
    assert sorted(set(imports) - set(FLOORS) - set(DOMAIN_IMPORTS)) == []  # a new package is placed here
    assert upward_imports(imports) == []


def test_the_allowed_imports_have_no_cycle():
    graph = dict((p, set(t)) for p, t in FLOORS.items())
    graph.update((p, set(FLOORS) | t) for p, t in DOMAIN_IMPORTS.items())
    done, order = set(), []

    def visit(package, path):
        assert package not in path, " -> ".join(path + [package])
        if package not in done:
            for target in sorted(graph[package]):
                visit(target, path + [package])
            done.add(package)
            order.append(package)
    for package in sorted(graph):
        visit(package, [])
    assert len(order) == len(graph)


def test_the_direction_check_reports_an_import_upward_or_sideways(tmp_path):
    for package, text in (("kube", "from %sclaims.claims import x\n"), ("claims", "from %snodes.drain import y\n"),
                          ("nodes", "from %sclaims.claims import z\nfrom %skube.pods import k\n")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "a.py").write_text(text.replace("%s", PREFIX))
    assert upward_imports(package_imports(str(tmp_path))) == ["claims -> nodes", "kube -> claims"]


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


def defined_names(path):
    """Names a file defines at module level (functions, classes, assignments) and its classes' methods."""
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names.update(n.name for n in node.body if isinstance(n, ast.FunctionDef))
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def fact_rows(text):
    section = text.split("## Where each fact lives", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and not set(cells[0]) <= set("-") and cells[0] != "fact":
            yield cells


def misplaced_names(text, files):
    """"name: defined in X, the row names Y" for each `name` a fact row gives that module_utils defines, but in none
    of the module_utils files the row names (by `plugins/module_utils/pkg/file.py` or `pkg/file.py`)."""
    where = {}
    for rel in files:
        for name in defined_names(os.path.join(MODULE_UTILS, rel)):
            where.setdefault(name, set()).add(rel)
    bad = []
    for fact, source in fact_rows(text):
        named = set(re.findall(r"([a-z_]+/[a-z_]+\.py)", fact + " " + source)) & files
        for name in sorted(set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", fact)) - set(re.findall(r"`([a-z]+)`", fact))):
            homes = where.get(name, set())
            if homes and not homes & named:
                bad.append("%s: defined in %s, the row names %s"
                           % (name, ", ".join(sorted(homes)), ", ".join(sorted(named)) or "no file"))
    return bad


def dotted_references(text, files):
    """"pkg/file.name" or "pkg.file.name" references whose file does not define the name."""
    bad = []
    for package, module, name in sorted(set(re.findall(r"\b([a-z_]+)[./]([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)\b", text))):
        rel = "%s/%s.py" % (package, module)
        if rel in files and name != "py" and name not in defined_names(os.path.join(MODULE_UTILS, rel)):
            bad.append("%s.%s" % (rel, name))
    return bad


def test_each_name_a_fact_row_gives_is_defined_in_a_file_the_row_names():
    with open(DOC) as fh:
        text = fh.read()
    files = module_utils_files()
    assert len(list(fact_rows(text))) > 50
    assert misplaced_names(text, files) == []
    assert dotted_references(text, files) == []


def test_the_name_check_reports_a_row_that_names_the_wrong_file():
    files = {"kube/pods.py", "nodes/drain.py"}
    text = ("## Where each fact lives\n\n| fact | single source |\n|---|---|\n"
            "| pods' keys (`pod_key`) | `plugins/module_utils/nodes/drain.py` |\n"
            "| the drain's plan (`plan_drain`) | `plugins/module_utils/nodes/drain.py` (keys: `kube/pods.pod_key`) |\n")
    assert misplaced_names(text, files) == ["pod_key: defined in kube/pods.py, the row names nodes/drain.py"]
    assert dotted_references(text + " `nodes/drain.pod_key`", files) == ["nodes/drain.py.pod_key"]


IO_CLAUSE = re.compile(r"(?:read from the API|through the API|against the API|written|backed up)[^;|]*? by `([a-z_]+/[a-z_]+\.py)`")


def io_in_pure_files(text):
    """Files a fact row says read, write or call the API that are not services or access modules."""
    return sorted(set(f for dummy, source in fact_rows(text) for f in IO_CLAUSE.findall(source) if is_pure(f)))


def test_the_rows_name_a_service_where_the_api_or_the_host_is_used():
    with open(DOC) as fh:
        assert io_in_pure_files(fh.read()) == []
    row = "| x | `a/b.py`; read from the API by `claims/claims.py` |"
    assert io_in_pure_files("## Where each fact lives\n\n" + row + "\n") == ["claims/claims.py"]
