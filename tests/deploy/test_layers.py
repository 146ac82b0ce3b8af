"""Layers point one way: read every module's imports (statically, with ast) and check the graph.

- `tiers/` is usable without the service: it imports nothing of `verifier_service` or `workers`.
- The service does not import `workers/` (the tasks, worker signals, the GRPO trainer), except
  the CLI, which wires every process together.
- The service's domain packages (jobs, ladder, policies, ...) form no loop.
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


def _domain(module: str) -> str | None:
    parts = module.split(".")
    if (
        parts[0] != "verifier_service"
        or len(parts) < 3
        or not (REPO / "verifier_service" / parts[1]).is_dir()
    ):
        return None  # top-level modules (app, cli, settings, health) wire the domains together
    return parts[1]


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


def test_the_checker_sees_a_loop() -> None:
    # The cycle finder itself: a graph with a loop must be reported.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


if __name__ == "__main__":  # print the domain graph: python tests/deploy/test_layers.py
    for source, targets in sorted(domain_graph().items()):
        print(f"{source} -> {', '.join(sorted(targets))}")
