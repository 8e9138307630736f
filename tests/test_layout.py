"""The import rules of the layout (README, "How it is built"), read from the source itself:
every import statement of every module, function-local ones included. A module that breaks
a rule fails here with the line that does."""

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("agent", "config", "core", "loans", "metering")
# loans' wiring for operators and the demo may reach metering's models: the admin's inlines
# and the demo's seeding. The commands go through the demo, usage and services like the rest
# (simulate_agents read metering's models).
LOANS_WIRING = ("loans/admin.py", "loans/admin_ledger.py", "loans/demo.py")
# What loans may import of metering: its reads (metering.usage), its writes (metering.services)
# and the face of its schedulers (metering.schedulers itself: the protocol and Slurm's pure
# readers of its accounting formats, no model behind them), never a scheduler's own modules.
METERING_SURFACE = ("metering.usage", "metering.services")
METERING_FACES = ("metering.schedulers",)


def modules(folder: str) -> list[Path]:
    """The house's modules: not migrations, nor code generated from a published API (the
    kubelet's gRPC stubs), which imports as its generator writes it."""
    return sorted(p for p in (ROOT / folder).rglob("*.py")
                  if "migrations" not in p.parts and "_pb2" not in p.name)


def parsed(path: Path) -> ast.Module:
    """The file's syntax tree, each text parsed once a run (the rules read every file)."""
    return _parse(path.read_text(), str(path))


@functools.cache
def _parse(text: str, name: str) -> ast.Module:
    return ast.parse(text, name)


def is_module(dotted: str) -> bool:
    """A module or package of the tree (generated ones too): `from package import module`
    reads the module, not what the package's __init__ gives."""
    where = ROOT.joinpath(*dotted.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, resolved to absolute names."""
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package
                package = path.relative_to(ROOT).parent.parts
                base = ".".join(package[: len(package) - node.level + 1] + (base,)).strip(".")
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
            if not all(is_module(f"{base}.{alias.name}") for alias in node.names):
                found.append((node.lineno, base))  # a name the package itself gives
    return found


def breaks(folder: str, refused) -> list[str]:
    out = []
    for path in modules(folder):
        name = str(path.relative_to(ROOT))
        for line, module in imports(path):
            why = refused(name, module)
            if why:
                out.append(f"{name}:{line} imports {module}: {why}")
    return sorted(set(out))


def top(module: str) -> str:
    return module.split(".")[0]


def within(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_core_imports_no_app():
    assert breaks("core", lambda _n, m: "core is below every app"
                  if top(m) in APPS and top(m) != "core" else None) == []


def test_metering_imports_nothing_of_loans():
    assert breaks("metering", lambda _n, m: "metering knows a tenant only as a foreign key"
                  if top(m) == "loans" else None) == []


def test_loans_reaches_metering_through_usage_services_and_the_schedulers_face_only():
    known = {module_name(p) for p in modules("metering")}

    def refused(name: str, module: str):
        if top(module) != "metering" or name.startswith(LOANS_WIRING):
            return None
        if module == "metering" or within(module, *METERING_SURFACE):
            return None
        if module in METERING_FACES or (module.rpartition(".")[0] in METERING_FACES
                                        and module not in known):
            return None  # the face itself, or a name it gives
        return ("loans reads through metering.usage and metering.schedulers' face, and writes "
                "through metering.services")

    assert breaks("loans", refused) == []


@pytest.mark.parametrize("folder", ["loans/services", "loans/schedulers",
                                    "metering/services.py"])
def test_services_import_no_views_api_or_tasks(folder):
    layers = ("loans.web", "loans.api", "loans.tasks", "metering.tasks", "metering.intake.api",
              "metering.viewsets", "config.urls")

    def refused(_name: str, module: str):
        return "services are called by views, the API and tasks, never the other way" if within(
            module, *layers) else None

    if folder.endswith(".py"):
        path = ROOT / folder
        assert [f"{folder}:{line} imports {m}" for line, m in imports(path)
                if refused(folder, m)] == []
    else:
        assert breaks(folder, refused) == []


def test_the_arithmetic_touches_no_database_or_request():
    outside = ("django", "rest_framework", "celery", "metering", "loans.models",
               "loans.services", "loans.web", "loans.api", "config")
    assert breaks("loans/maths", lambda _n, m: "loans.maths is pure arithmetic"
                  if within(m, *outside) else None) == []


def test_tasks_are_queued_by_name():
    """Only the Celery application and the tasks' own tests know the task modules; the rest
    queues a job by its name (loans.services.alerts.notify.enqueue)."""
    def refused(name: str, module: str):
        return "queue the task by name" if within(
            module, "loans.tasks", "metering.tasks") else None

    for folder in ("core", "loans", "metering", "config"):
        assert breaks(folder, refused) == [], folder


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def graph() -> dict[str, set[str]]:
    """Every module of the apps and the configuration, with the project modules it imports
    (an import of a name inside a module counts as an import of that module)."""
    paths = {module_name(p): p for folder in (*APPS, "config") for p in modules(folder)}
    edges = {}
    for name, path in paths.items():
        edges[name] = set()
        for _line, imported in imports(path):
            while imported and imported not in paths:
                if is_module(imported):  # generated code, read as a library
                    imported = ""
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                edges[name].add(imported)
    return edges


def reach(edges: dict[str, set[str]], start: str, refused) -> list[str] | None:
    """The chain of imports from `start` to the first module `refused` names, if any."""
    seen, queue = {start: [start]}, [start]
    while queue:
        current = queue.pop(0)
        for nxt in sorted(edges.get(current, ())):
            if nxt in seen:
                continue
            seen[nxt] = seen[current] + [nxt]
            if refused(nxt):
                return seen[nxt]
            queue.append(nxt)
    return None


def chains(starts, refused) -> list[str]:
    edges = graph()
    found = (reach(edges, start, refused) for start in sorted(edges) if starts(start))
    return [" -> ".join(chain) for chain in found if chain]


def test_no_app_imports_the_configuration_even_through_another():
    """config wires the apps together; an app that reached it would reach every other app."""
    assert chains(lambda m: top(m) in APPS and top(m) != "config",
                  lambda m: top(m) == "config") == []


def test_metering_reaches_nothing_of_loans_even_through_another():
    assert chains(lambda m: top(m) == "metering", lambda m: top(m) == "loans") == []


def test_the_api_reaches_no_page_code_even_through_another():
    """The API answers from services and the arithmetic, never from loans.web (the pages)."""
    assert chains(lambda m: within(m, "loans.api"), lambda m: within(m, "loans.web")) == []


def test_the_pages_reach_no_api_code_even_through_another():
    """The pages and the API are two faces of the same services: neither reads the other."""
    assert chains(lambda m: within(m, "loans.web"), lambda m: within(m, "loans.api")) == []


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(out)


def test_no_two_modules_import_each_other_even_through_others():
    """A circle of imports (loans.services.advice and pooled_advice imported each other) means
    neither can be read, tested or moved alone."""
    assert cycles(graph()) == []


def test_the_circle_finder_sees_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_rules_see_a_break():
    """The reader itself: a function-local import of loans inside metering is found."""
    path = ROOT / "metering" / "_layout_probe_imports.py"
    path.write_text("def f():\n    from loans.models import Tenant\n    return Tenant\n")
    try:
        assert breaks("metering", lambda _n, m: "x" if top(m) == "loans" else None) == [
            "metering/_layout_probe_imports.py:2 imports loans.models.Tenant: x",
            "metering/_layout_probe_imports.py:2 imports loans.models: x"]
    finally:
        path.unlink()


def test_slurm_accounting_is_read_in_one_place():
    """AllocTRES (`gres/gpu=2`, `gres/gpu:h100=1`) is parsed by metering.schedulers.slurm.sacct
    alone: there were two readers (the importer's and the advice's history), which disagreed
    on typed counts. A string that starts a TRES key or a pattern over one is a parser."""
    home = ROOT / "metering" / "schedulers" / "slurm"
    found = []
    for folder in ("config", "core", "loans", "metering"):
        for path in modules(folder):
            if path.is_relative_to(home):
                continue
            for node in ast.walk(parsed(path)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                        node.value.startswith("gres/gpu") or "gres/gpu(" in node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value[:40]!r}")
    assert found == []


def test_services_import_at_the_top():
    """A function-local import hid a cycle (services.alerts and services.bursts imported notify
    inside functions); with the layers one-way, every service imports at the top."""
    local = []
    for folder in ("loans/services", "loans/maths", "metering/usage"):
        for path in modules(folder):
            for node in ast.walk(parsed(path)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    local += [f"{path.relative_to(ROOT)}:{inner.lineno}"
                              for inner in ast.walk(node)
                              if isinstance(inner, ast.Import | ast.ImportFrom)]
    assert local == []


WRITES = {"create", "bulk_create", "bulk_update", "update", "delete", "get_or_create",
          "update_or_create", "save", "atomic", "select_for_update"}


def writes_in(path: Path) -> list[str]:
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in WRITES:
            receiver = node.func.value
            # a dict's update is no write: update and delete count on a manager or a queryset
            on_rows = isinstance(receiver, ast.Call) or (
                isinstance(receiver, ast.Attribute) and receiver.attr == "objects")
            if node.func.attr not in ("update", "delete") or on_rows:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.func.attr}()")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.lstrip().upper().startswith(("INSERT", "UPDATE ", "DELETE")):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.strip()[:30]!r}")
    return found


def test_metering_usage_only_reads():
    """metering.usage is what loans reads of usage; the recount and the bulk insert lived in
    it and moved to metering.recount."""
    assert [w for path in modules("metering/usage") for w in writes_in(path)] == []


def test_the_write_finder_sees_a_write():
    path = ROOT / "metering" / "_layout_probe_writes.py"
    path.write_text("def f(m):\n    m.objects.filter(x=1).delete()\n    return 'INSERT INTO t'\n")
    try:
        assert writes_in(path) == ["metering/_layout_probe_writes.py:2 .delete()",
                                   "metering/_layout_probe_writes.py:3 'INSERT INTO t'"]
    finally:
        path.unlink()


ROLE_TESTS = {"is_operator", "is_lead", "may", "is_staff", "is_superuser"}
# core is below every app and cannot ask loans.access: its operators' API base class asks the
# role itself (core.roles defines it).
ROLE_HOMES = ("loans/access.py", "core/roles.py", "core/api.py")


def role_tests_in(path: Path) -> list[str]:
    found = []
    for node in ast.walk(parsed(path)):
        name = (node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                else node.attr if isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load) else None)
        if name in ROLE_TESTS:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_every_access_rule_is_in_access_py():
    """Pages, admin and API ask loans.access (allowed, require, tenants_for ...), never the
    role tests themselves: a rule written twice drifts (the operator check of the fleet pages,
    the sharing API and the advice page each had its own)."""
    found = [hit for folder in ("loans", "config", "core", "metering") for path in modules(folder)
             if str(path.relative_to(ROOT)) not in ROLE_HOMES for hit in role_tests_in(path)]
    assert found == []


def test_the_tests_mirror_the_code():
    """A test module of an app sits in the folder of what it tests (tests/loans/services/ledger
    tests loans/services/ledger): a reader finds one from the other."""
    strays = []
    for app in ("loans", "metering", "agent"):
        for path in sorted((ROOT / "tests" / app).rglob("test_*.py")):
            folder = path.parent.relative_to(ROOT / "tests")
            if not (ROOT / folder).is_dir():
                strays.append(str(path.relative_to(ROOT)))
    assert strays == []


def rooms(edges: dict[str, set[str]], app: str) -> dict[str, set[str]]:
    """The app's modules drawn as rooms, a sub-package or a top-level module each
    (metering.intake, metering.models, metering.services), with the rooms each imports."""
    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for name, imported in edges.items():
        if top(name) != app or name == app:
            continue
        here = room(name)
        out.setdefault(here, set()).update(
            room(m) for m in imported if top(m) == app and m != app and room(m) != here)
    return out


@pytest.mark.parametrize("app", APPS)
def test_no_two_rooms_of_an_app_import_each_other(app):
    """A room below another never reaches back up to it: the interval bounds of a sample lived
    in the intake's parser, which the models imported, and the intake's owners lived in a
    module of metering that imported the intake back."""
    assert cycles(rooms(graph(), app)) == []
