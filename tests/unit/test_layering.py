"""The layering rules hold in code: what each layer imports, at runtime and in its source.

Two views of ``docs/architecture.md``'s rules:

- **At runtime.** Each module of ``RULES`` is imported in a fresh interpreter
  (``sys.modules`` starts clean), so one test's imports cannot hide another's, and none
  of the named top-level packages may then be loaded: the core imports neither Temporal
  nor Ray and torch only lazily; the domain logic knows no store; workflows import no
  activity code and no store.
- **In the source.** Every ``import`` statement of every module of ``mindforge/``,
  ``workflows/`` and ``workers/`` is read from its syntax tree, including imports inside
  functions (the usual lazy pattern here, which the runtime view cannot see):

  - the core (``mindforge/`` but the CLI) imports no ``temporalio``, ``ray``,
    ``workflows`` or ``workers``; the domain (the core but ``mindforge/store/``,
    ``mindforge/reports/``) imports no store (``mindforge.store``, SQLModel, SQLAlchemy);
  - the CLI imports ``temporalio`` only in ``mindforge/cli/temporal_client.py`` and
    ``mindforge/cli/schedule.py``, ``workflows`` only in ``temporal_client.py`` and
    ``workers`` only in ``mindforge/cli/worker.py``, each inside a function;
  - workflows import no ``workers``, ``ray`` or store, and from the core only pure
    records (what ``mindforge/payloads/`` may import);
  - workers never import the CLI;
  - ``mindforge/payloads/`` (what travels between layers) imports only pure records: no
    stage package (trainer, policy, agent, sandbox, ...);
  - the packages (each ``mindforge/<pkg>``, ``workflows``, ``workers``) import one
    another without a cycle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cache

import pytest

from tests.conftest import REPO

NO_ORCHESTRATION = ("temporalio", "ray")
NO_STORE = ("sqlmodel", "sqlalchemy")
NO_TORCH = ("torch", "transformers", "peft", "trl")

#: module -> packages it must not pull in
RULES = {
    "mindforge.audit": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.search": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.discovery": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.evaluation": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.search.coverage": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.domain": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.hcp": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.tasks.loader": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.agent.loop": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.payloads": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.trainer": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.experience": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.trials.replay": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.scale.simulate": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.scale.nightly": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
    "mindforge.store": NO_ORCHESTRATION + NO_TORCH,
    "mindforge.reports": NO_ORCHESTRATION + NO_TORCH,
    "mindforge.cli.main": NO_ORCHESTRATION + NO_TORCH,
    "workflows.lineage": ("ray", "workers", "sqlmodel", "sqlalchemy") + NO_TORCH,
}


def _imported(module: str) -> set[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", sorted(RULES))
def test_a_layer_pulls_in_nothing_it_must_not(module: str) -> None:
    pulled = _imported(module) & set(RULES[module])
    assert not pulled, f"importing {module} pulls in {sorted(pulled)}"


# --- the source view -------------------------------------------------------------------

SHIPPED = ("mindforge", "workflows", "workers")
STORE = ("mindforge.store", "sqlmodel", "sqlalchemy")
#: what ``mindforge/payloads/`` may import besides the standard library and pydantic:
#: records that are themselves pure data (no stage package: trainer, policy, agent, ...)
PAYLOAD_IMPORTS = (
    "mindforge.payloads",
    "mindforge.domain",
    "mindforge.errors",
    "mindforge.evaluation",
    "mindforge.trials.record",
    "mindforge.discovery.records",
    "mindforge.search.edits",
    "mindforge.search.state",
    # worked-example records (pydantic, no I/O): a lineage's --examples seeds travel in the spec
    "mindforge.hcp.examples",
    # the worker's settings (a pydantic model) travel to the Ray tasks in their typed input
    "mindforge.settings",
)
#: CLI modules that may import a layer above the core (inside functions only)
CLI_MAY_IMPORT = {
    "temporalio": ("mindforge.cli.temporal_client", "mindforge.cli.schedule"),
    "workflows": ("mindforge.cli.temporal_client",),
    "workers": ("mindforge.cli.worker",),
}


@dataclass(frozen=True)
class Import:
    """One import statement's target, as the importing module's source spells it.

    Attributes:
        source: the importing module, dotted (``workers.main``).
        target: the imported module, dotted and absolute (``from x import y`` names
            ``x.y`` when that is a module of the tree, else ``x``).
        line: line number in the source file.
        lazy: inside a function or an ``if TYPE_CHECKING:`` block (not run at import).
    """

    source: str
    target: str
    line: int
    lazy: bool

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def _module_name(path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = REPO.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join(anchor + ([node.module] if node.module else []))
    subs = [f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")]
    return subs if len(subs) == len(node.names) else [base, *subs]


def _walk(node: ast.AST, module: str, is_package: bool, lazy: bool, out: list[Import]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            out += [Import(module, t, child.lineno, lazy) for t in _targets(child, module, is_package)]
            continue
        inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            inner = True
        _walk(child, module, is_package, inner, out)


@cache
def all_imports() -> tuple[Import, ...]:
    """Every import statement of the shipped code (``mindforge/``, ``workflows/``, ``workers/``)."""
    out: list[Import] = []
    for folder in SHIPPED:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            _walk(tree, _module_name(path), path.name == "__init__.py", False, out)
    return tuple(out)


def _within(dotted: str, *prefixes: str) -> bool:
    return any(dotted == p or dotted.startswith(p + ".") for p in prefixes)


def _layer(module: str) -> str:
    if _within(module, "mindforge.cli"):
        return "cli"
    if _within(module, "mindforge"):
        return "core"
    return module.split(".")[0]


def _breaks(imp: Import) -> str | None:
    """Why ``imp`` breaks a layer rule, or None."""
    layer, target = _layer(imp.source), imp.target
    impure = _within(target, "mindforge") and not _within(target, *PAYLOAD_IMPORTS)
    if layer == "core" and _within(target, "temporalio", "ray", "workflows", "workers"):
        return "the core imports no orchestration, workflows or workers"
    if layer == "core" and not _within(imp.source, "mindforge.store", "mindforge.reports") and _within(target, *STORE):
        return "the domain knows no store"
    if layer == "cli":
        for top, allowed in CLI_MAY_IMPORT.items():
            if _within(target, top) and (imp.source not in allowed or not imp.lazy):
                return f"the CLI imports {top} only inside functions of {', '.join(allowed)}"
        if _within(target, "ray"):
            return "the CLI imports no ray"
    if layer == "workflows" and _within(target, "workers", "ray", *STORE):
        return "workflows import no activity code, ray or store"
    if layer == "workflows" and impure:
        return "workflows import pure records only from the core, no stage package"
    if layer == "workers" and _within(target, "mindforge.cli"):
        return "workers never import the CLI"
    if _within(imp.source, "mindforge.payloads") and impure:
        return "payloads import pure records only, no stage package"
    return None


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "mindforge" and len(parts) > 1 else parts[0]


def package_cycles() -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in all_imports():
        a, b = _package(imp.source), _package(imp.target)
        if a != b and b.split(".")[0] in SHIPPED and a != "mindforge":
            graph[a].add(b)
    return strongly_connected(graph)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node of ``graph`` (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            groups.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(g for g in groups if len(g) > 1)


def test_the_source_walk_sees_imports_inside_functions() -> None:
    imports = all_imports()
    assert len({i.source for i in imports}) > 100, "the walk found almost no modules"
    lazy = [i for i in imports if i.lazy and i.source == "mindforge.cli.temporal_client"]
    assert any(i.target == "workflows.options" for i in lazy), "imports inside functions are missed"


#: package cycles not yet broken
KNOWN_CYCLES: list[list[str]] = []


def test_every_import_keeps_to_its_layer() -> None:
    broken = sorted(f"{imp}: {why}" for imp in all_imports() if (why := _breaks(imp)))
    assert not broken, "\n".join(broken)


def test_no_package_cycle() -> None:
    cycles = package_cycles()
    edges = [
        str(i)
        for group in cycles
        for i in all_imports()
        if _package(i.source) in group and _package(i.target) in group and _package(i.source) != _package(i.target)
    ]
    assert cycles == KNOWN_CYCLES, f"package cycles {cycles}, through:\n" + "\n".join(edges)


@pytest.mark.parametrize(
    ("source", "target", "lazy"),
    [
        ("workers.main", "mindforge.cli.temporal_client", False),
        ("mindforge.payloads.update", "mindforge.trainer.selection", False),
        ("mindforge.cli.lineage", "temporalio.service", True),
        ("mindforge.search.allocator", "ray", True),
        ("workflows.update", "mindforge.store.models", True),
        ("mindforge.audit", "sqlmodel", True),
    ],
)
def test_a_broken_rule_is_caught(source: str, target: str, lazy: bool) -> None:
    assert _breaks(Import(source, target, 1, lazy)) is not None


def module_cycles() -> list[list[str]]:
    """Groups of modules of the shipped code and the benchmarks that import each other, in a circle.

    Every import counts, inside functions too (a lazy import still ties the two modules);
    a module importing a package that contains it (its ``__init__``) does not.
    """
    out: list[Import] = []
    for folder in (*SHIPPED, "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            _walk(tree, _module_name(path), path.name == "__init__.py", False, out)
    modules = {i.source for i in out}
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in out:
        if imp.target in modules and imp.target != imp.source and not imp.source.startswith(imp.target + "."):
            graph[imp.source].add(imp.target)
    return strongly_connected(graph)


def test_no_module_imports_itself_through_a_circle() -> None:
    """E.g. cli.lineage -> cli.schedule -> cli.lineage, even when both imports sit inside functions."""
    assert module_cycles() == []
