"""``docs/architecture.md`` is true to the tree, so the one-page map cannot go stale silently.

Checked, all from the source text (``ast``) except the CLI commands and the queues:

- every path under a code folder (``mindforge/``, ``workflows/``, ``workers/``, ``tests/``,
  ``deploy/``, ``benchmarks/``, ``hcp_contracts/``), backticked or in the diagram, exists
  (with or without ``.py``); ``path.py:name`` and ``path.py:Class.member`` name a definition
  in that file; a dotted ``mindforge.x.y`` names a module (or a name defined in one);
- every backticked snake_case or CamelCase identifier is an activity name
  (``workflows.options.ACTIVITY_NAMES``) or is defined (or spelled as a string) in the
  shipped code; every backticked ``mindforge <command>`` is a CLI command;
- the stage table lists each activity exactly once, in the module that defines it, on the
  queue the worker registers it on, under a workflow that calls it;
- the layering table states exactly the rules of ``tests/unit/test_layering.py``, the list
  of core modules the workflows import is exactly what they import, and the list of
  store tables is exactly the tables of ``mindforge/store/models.py``.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.test_layering import NO_ORCHESTRATION, NO_STORE, NO_TORCH, RULES
from workflows import options

DOC = REPO / "docs" / "architecture.md"
CODE_DIRS = ("mindforge", "workflows", "workers", "tests", "deploy", "benchmarks", "hcp_contracts")
SHIPPED = ("mindforge", "workflows", "workers")
GROUPS = {"orchestration": NO_ORCHESTRATION, "store": NO_STORE, "torch": NO_TORCH}
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(rf"^(?:{'|'.join(CODE_DIRS)})/[\w./-]*$")
DIAGRAM_PATH = re.compile(rf"\b(?:{'|'.join(CODE_DIRS)})/[\w./-]*")
DOTTED = re.compile(r"^(?:mindforge|workflows|workers)(?:\.\w+)+$")
IDENT = re.compile(r"^(?:[A-Za-z]\w*_\w*[A-Za-z0-9]|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)$")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _spans(text: str) -> list[str]:
    return SPAN.findall(FENCE.sub("", text))


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Names a module or class body defines: defs, classes, assignments, imports."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            out.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.ImportFrom | ast.Import):
            out.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    return out


def _defines(path: Path, dotted: str) -> bool:
    """True when ``path`` defines ``dotted`` (``name`` or ``Class.member``)."""
    body: list[ast.stmt] = _tree(path).body
    for part in dotted.split("."):
        node = _names(body).get(part)
        if node is None:
            return False
        body = node.body if isinstance(node, ast.ClassDef) else []
    return True


def _module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _shipped_words() -> frozenset[str]:
    """Every name defined anywhere in the shipped code, and every identifier-like string constant."""
    words: set[str] = set()
    for folder in SHIPPED:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    words.add(node.name)
                elif isinstance(node, ast.Name | ast.arg):
                    words.add(node.id if isinstance(node, ast.Name) else node.arg)
                elif isinstance(node, ast.Attribute):
                    words.add(node.attr)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    words.add(node.value)
    return frozenset(words)


def _check_path(span: str) -> str | None:
    """None when ``span`` (a path, ``path.py:name`` or a dotted module) holds, else why not."""
    if DOTTED.match(span):
        parts = span.split(".")
        for i in range(len(parts), 0, -1):
            found = _module_file(".".join(parts[:i]))
            if found is not None:
                rest = ".".join(parts[i:])
                return None if not rest or _defines(found, rest) else f"{found.relative_to(REPO)} defines no {rest}"
        return "no such module"
    path, _, name = span.partition(":")
    target = REPO / path
    if not (target.exists() or target.with_suffix(".py").is_file()):
        return "no such file or folder"
    if name and not (target.suffix == ".py" and _defines(target, name)):
        return f"{path} defines no {name}"
    return None


def test_every_path_and_module_exists() -> None:
    text = _doc()
    spans = [s for s in _spans(text) if PATH.match(s.partition(":")[0]) or DOTTED.match(s)]
    spans += [m for block in FENCE.findall(text) for m in DIAGRAM_PATH.findall(block)]
    assert len(spans) > 50, "the page names modules; the parser found almost none"
    stale = {s: why for s in spans if (why := _check_path(s))}
    assert not stale, f"docs/architecture.md names what the tree lacks: {stale}"


def test_every_identifier_is_an_activity_or_defined() -> None:
    idents = [s for s in _spans(_doc()) if IDENT.match(s)]
    unknown = sorted({s for s in idents if s not in options.ACTIVITY_NAMES and s not in _shipped_words()})
    assert not unknown, f"docs/architecture.md names what no code defines: {unknown}"


def test_every_cli_command_exists() -> None:
    from typer.main import get_command

    from mindforge.cli.main import app

    root = get_command(app)
    commands = [s for s in _spans(_doc()) if s.startswith("mindforge ")]
    assert commands
    for span in commands:
        cmd = root
        for word in span.split()[1:]:
            if word.startswith(("<", "-")):
                break
            subcommands = getattr(cmd, "commands", {})  # a group's sub-commands; a command has none
            assert word in subcommands, f"`{span}`: no command {word!r}"
            cmd = subcommands[word]


def _table(header_words: tuple[str, ...]) -> list[list[str]]:
    """The rows (cells as text) of the one Markdown table whose header has all ``header_words``."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in _doc().splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if current is None:
            current = [cells]
            tables.append(current)
        elif not all(set(c) <= set("-: ") for c in cells):
            current.append(cells)
    found = [t for t in tables if all(w in t[0] for w in header_words)]
    assert len(found) == 1, f"expected one table with columns {header_words}"
    return found[0]


def _activity_defs(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call):
                    keywords = [k.value for k in dec.keywords if k.arg == "name"]
                    names |= {k.value for k in keywords if isinstance(k, ast.Constant)}
    return names


def _workflow_calls(workflow: str) -> set[str]:
    """Activity names the file defining ``workflow`` calls through ``workflows.options``."""
    for path in (REPO / "workflows").glob("*.py"):
        if workflow in _names(_tree(path).body):
            attrs = {n.attr for n in ast.walk(_tree(path)) if isinstance(n, ast.Attribute)}
            called = {getattr(options, a) for a in attrs if a.isupper() and isinstance(getattr(options, a, None), str)}
            called &= options.ACTIVITY_NAMES
            return called | ({options.RUN_TRIALS} if "run_trials" in attrs else set())
    raise AssertionError(f"no workflow file defines {workflow}")


def test_the_stage_table_matches_the_activities(settings) -> None:
    from temporalio import activity

    from workers.lineage_activities import LineageActivities
    from workers.main import queue_activities

    registered = {
        activity._Definition.must_from_callable(fn).name: queue
        for queue, fns in queue_activities(LineageActivities(settings.db_url), settings).items()
        for fn in fns
    }
    header, *rows = _table(("activities", "queue", "implemented in"))
    col = {name: i for i, name in enumerate(header)}
    listed: list[str] = []
    workflow = ""
    for row in rows:
        workflow = SPAN.findall(row[col["workflow"]])[0] if row[col["workflow"]] else workflow
        names = SPAN.findall(row[col["activities"]])
        module = REPO / SPAN.findall(row[col["implemented in"]])[0]
        listed += names
        for name in names:
            assert name in _activity_defs(module), f"{module.relative_to(REPO)} does not define activity {name}"
            assert registered.get(name) == row[col["queue"]], f"{name} is registered on {registered.get(name)}"
            assert name in _workflow_calls(workflow), f"{workflow} does not call {name}"
    assert sorted(listed) == sorted(set(listed)), "an activity is listed twice"
    assert set(listed) == set(options.ACTIVITY_NAMES)


def test_the_layering_table_states_test_layering_rules() -> None:
    header, *rows = _table(("module", "must not pull in"))
    stated: dict[str, set[str]] = {}
    for modules, banned in rows:
        packages = set(SPAN.findall(banned))
        for word in re.findall(r"\b(orchestration|store|torch)\b", SPAN.sub("", banned)):
            packages |= set(GROUPS[word])
        stated.update({m: packages for m in SPAN.findall(modules)})
    assert stated == {module: set(banned) for module, banned in RULES.items()}


def test_the_workflow_imports_are_listed() -> None:
    listed = re.search(r"Workflows import from the core only:(.*?)\.\s*Beside", _doc(), re.S)
    assert listed is not None
    stated = {s for s in SPAN.findall(listed.group(1)) if s.startswith("mindforge.")}
    imported = {
        node.module
        for path in (REPO / "workflows").glob("*.py")
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mindforge")
    }
    assert stated == imported


def test_the_store_tables_are_listed() -> None:
    listed = re.search(r"Its tables:(.*?)\.\s", _doc(), re.S)
    assert listed is not None
    tables = {
        node.value.value
        for node in ast.walk(_tree(REPO / "mindforge" / "store" / "models.py"))
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__tablename__" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    }
    assert set(SPAN.findall(listed.group(1))) == tables


@pytest.mark.parametrize("span", ["mindforge/no_such.py", "mindforge/trials/run.py:no_such", "mindforge.no_such"])
def test_a_stale_name_is_caught(span: str) -> None:
    assert _check_path(span) is not None
