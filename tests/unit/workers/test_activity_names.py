"""Every activity name the workflows call is registered by the worker, and every registered one is called.

The workflows call activities by the stable names in :mod:`workflows.options`; a name
that no worker registers would leave a workflow waiting forever, and a registered name
no workflow calls is dead code or a typo.
"""

from __future__ import annotations

import ast
import re

from temporalio import activity

from tests.conftest import REPO
from workers.lineage_activities import LineageActivities
from workers.main import queue_activities
from workflows import options


def _registered(settings) -> dict[str, set[str]]:
    acts = LineageActivities(settings.db_url)
    out: dict[str, set[str]] = {}
    for queue, fns in queue_activities(acts, settings).items():
        out[queue] = {activity._Definition.must_from_callable(fn).name for fn in fns}
    return out


def test_every_called_name_is_registered_once_and_every_registered_name_is_called(settings) -> None:
    registered = _registered(settings)
    both = registered["orchestration"] & registered["sandbox"]
    assert not both, f"registered on both queues: {sorted(both)}"
    assert set(options.ACTIVITY_NAMES) == registered["orchestration"] | registered["sandbox"]


def test_names_are_verb_noun_and_workflows_use_only_the_constants() -> None:
    for name in options.ACTIVITY_NAMES:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)+", name), name
    for path in sorted((REPO / "workflows").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in options.ACTIVITY_NAMES and path.name != "options.py":
                raise AssertionError(f"{path.name} spells activity name {node.value!r}; use workflows.options")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "o":
                assert not node.attr.isupper() or hasattr(options, node.attr), f"{path.name}: o.{node.attr}"
