"""The package's modules import each other without a cycle: every import statement, at the top
of a module or inside a function, read from the installed package's sources."""

from __future__ import annotations

import ast
from pathlib import Path

import mambazip

PACKAGE = Path(mambazip.__file__).resolve().parent


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name, path, known):
    """The mambazip modules that ``name`` (at ``path``) imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return {m for m in found if m in known and m != name}


def cycle(graph):
    """One cycle of ``graph`` ({module: set of modules}) as a list, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_relative_imports_resolve_to_modules_and_packages():
    known = modules()
    assert imports("mambazip.cli.train", known["mambazip.cli.train"], known) >= {
        "mambazip.signals",
        "mambazip.cli.common",
    }
    assert "mambazip.cli.common" in imports("mambazip.cli", known["mambazip.cli"], known)


def test_no_import_cycle_among_the_package_modules():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycle(graph) is None, " -> ".join(cycle(graph))
