"""Layers point one way: read every module's imports (statically, with ast) and check the graph.

- `tiers/` is usable without the service: it imports nothing of `verifier_service` or `workers`.
- The service does not import `workers/` (the tasks, worker signals, the GRPO trainer), except
  the CLI, which wires every process together.
- The service's domain packages (jobs, ladder, policies, ...) and its top-level modules
  (settings, health) form no loop; only the entry points (app, cli, wiring) import across all.
- Nothing imports an endpoint module (HTTP only) but the app, which mounts their routers: what
  other modules need of a domain is in its service.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def import_graph(*packages: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            graph[_module_name(path)] = _imports(path)
    return graph


def test_tiers_import_nothing_of_the_service() -> None:
    offending = {
        module: sorted(i for i in imports if i.split(".")[0] in ("verifier_service", "workers"))
        for module, imports in import_graph("tiers").items()
    }
    assert {m: i for m, i in offending.items() if i} == {}


def test_only_the_cli_imports_workers() -> None:
    offending = {
        module: sorted(i for i in imports if i.split(".")[0] == "workers")
        for module, imports in import_graph("verifier_service").items()
        if module != "verifier_service.cli"
    }
    assert {m: i for m, i in offending.items() if i} == {}


#: The modules that wire the domains together at start-up: they may import anything, and only
#: commands (`*.cli`) import them.
ENTRY_POINTS = frozenset({"app", "cli", "launcher", "wiring", "__main__"})


def _domain(module: str) -> str | None:
    """The node of the graph a module belongs to: its domain package, or the top-level module
    itself (settings, health, ...); None for the entry points and for what is not ours."""
    parts = module.split(".")
    if parts[0] != "verifier_service" or len(parts) < 2 or parts[1] in ENTRY_POINTS:
        return None
    here = REPO / "verifier_service"
    if (here / parts[1]).is_dir() or (here / f"{parts[1]}.py").is_file():
        return parts[1]
    return None


def domain_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imports in import_graph("verifier_service").items():
        source = _domain(module)
        if source is None:
            continue
        for imported in imports:
            target = _domain(imported)
            if target is not None and target != source:
                edges[source].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == path[0]:
                cycles.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                visit(nxt, [*path, nxt])

    for start in sorted(edges):
        visit(start, [start])
    return cycles


def test_domain_packages_form_no_loop() -> None:
    assert _cycles(domain_graph()) == []


def test_settings_import_no_domain() -> None:
    # Every domain reads the settings: one import back from settings closes a loop through all.
    assert {_domain(i) for i in import_graph("verifier_service")["verifier_service.settings"]} <= {
        None,
        "settings",
    }


def test_only_commands_import_the_entry_points() -> None:
    offending = {
        module: sorted(i for i in imports if i.split(".")[:2] in _ENTRY_POINT_PREFIXES)
        for module, imports in import_graph("verifier_service").items()
        if _domain(module) is not None and not module.endswith(".cli")
    }
    assert {m: i for m, i in offending.items() if i} == {}


_ENTRY_POINT_PREFIXES = [["verifier_service", name] for name in ENTRY_POINTS]


#: Where the code that may not import endpoint modules lives.
CODE = ("verifier_service", "workers", "tiers", "bench", "trainer")
#: The router wiring: the one module that imports endpoint modules (to mount their routers).
ROUTER_WIRING = frozenset({"verifier_service.app"})


def _endpoint_modules(imports: set[str]) -> list[str]:
    return sorted(i for i in imports if i.rsplit(".", 1)[-1].endswith("endpoints"))


def test_nothing_imports_an_endpoint_module() -> None:
    packages = [p for p in CODE if (REPO / p).is_dir()]
    offending = {
        module: _endpoint_modules(imports)
        for module, imports in import_graph(*packages).items()
        if module not in ROUTER_WIRING
    }
    assert {m: i for m, i in offending.items() if i} == {}


def test_the_checker_sees_the_apps_router_imports() -> None:
    # The predicate itself: the app's own imports of endpoint modules must be found.
    found = _endpoint_modules(import_graph("verifier_service")["verifier_service.app"])
    assert "verifier_service.jobs.endpoints" in found
    assert len(found) >= 5


def test_the_checker_sees_a_loop() -> None:
    # The cycle finder itself: a graph with a loop must be reported.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


if __name__ == "__main__":  # print the domain graph: python tests/deploy/test_layers.py
    for source, targets in sorted(domain_graph().items()):
        print(f"{source} -> {', '.join(sorted(targets))}")
