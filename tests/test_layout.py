"""The shape the code keeps: the exporter stands alone, no two modules of the portal import each other, directly or
round a loop, and each app of the portal imports only apps on its own floor or below (function-level imports count:
hiding a cycle or an upward import inside a function still makes it)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("exporter", "portal")

# The portal's parts, bottom floor first (docs/architecture.md, "The order of the apps"). A module may import the
# modules of its own part, of another part of its floor, and of the parts on the floors below; never above. A part
# is an app (``portal/<app>/``) or a module of the project's root: ``portal/__init__.py`` (the package, which
# starts Celery), ``celery.py`` and ``env.py`` import no app and stand below them all; the settings and the URL
# configurations name every app and stand above them all. Studies and access share a floor: a role is granted in
# a study and a study's pages check roles (the cycle test keeps their modules from importing each other round a
# loop). There is no ``if TYPE_CHECKING:`` import in the portal, so none is exempt.
FLOORS = (
    ("__init__", "celery", "env"),
    ("core",),
    ("audit",),
    ("studies", "access"),
    ("accounts",),
    ("fixity",),
    ("notifications",),
    ("recordings",),
    ("faces",),
    ("releases",),
    ("research",),
    ("demo",),
    ("settings", "urls", "api_urls", "wsgi"),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")
            if "migrations" not in path.parts}


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    """Every module of this repository that ``path`` imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                     for alias in node.names]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] in PACKAGES)
    return found


def test_the_exporter_imports_neither_django_nor_the_portal():
    offenders = []
    for path in (REPO / "exporter").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(REPO)}: {name}" for name in names
                          if name.split(".")[0] in ("django", "portal", "rest_framework", "celery")]
    assert not offenders


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules():
    modules = _modules()
    graph = {name: {target for target in _imports(path, modules) if target in modules and target != name}
             for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _part(module: str) -> str:
    """The part of the portal a module belongs to: its app (``portal.studies.models`` -> ``studies``), or the
    module itself for one of the project's root (``portal.urls`` -> ``urls``, ``portal`` -> ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _upward(graph: dict[str, set[str]], floors: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import of ``graph`` (module -> modules it imports) from a part to a part on a higher floor."""
    floor = {part: level for level, parts in enumerate(floors) for part in parts}
    return sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets
                  if floor[_part(target)] > floor[_part(module)])


def _portal_graph() -> dict[str, set[str]]:
    modules = _modules()
    portal = {name: path for name, path in modules.items() if name.split(".")[0] == "portal"}
    return {name: {target for target in _imports(path, modules) if target in portal and target != name}
            for name, path in portal.items()}


def test_every_part_of_the_portal_has_a_floor():
    placed = {part for parts in FLOORS for part in parts}
    assert {_part(module) for module in _portal_graph()} == placed


def test_no_app_imports_an_app_above_it():
    assert _upward(_portal_graph(), FLOORS) == []


def test_the_floor_checker_finds_an_upward_import():
    graph = {"portal.core.views": {"portal.core.forms", "portal.studies.models"},
             "portal.studies.views": {"portal.access.permissions", "portal.core.views"},
             "portal.access.permissions": {"portal.studies.models"}, "portal.urls": {"portal.studies.views"}}
    floors = (("core",), ("studies", "access"), ("urls",))
    assert _upward(graph, floors) == ["portal.core.views -> portal.studies.models"]


CLIENT = REPO / "clients" / "ceres-pull" / "src" / "ceres_pull"
# What the researchers' client may import besides the standard library and itself: its declared dependencies.
CLIENT_DEPENDENCIES = ("httpx", "cryptography", "tqdm")


def test_the_client_imports_only_the_standard_library_and_its_dependencies():
    """``ceres-pull`` installs alone on a researcher's laptop: nothing of the portal, the exporter or Django."""
    import sys

    modules = sorted(CLIENT.rglob("*.py"))
    assert {path.name for path in modules} >= {"pull.py", "manifest.py", "pinning.py", "safefs.py"}
    offenders = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.relative_to(REPO)}: {name}" for name in names
                          if name.split(".")[0] not in (*sys.stdlib_module_names, *CLIENT_DEPENDENCIES, "ceres_pull")]
    assert not offenders
