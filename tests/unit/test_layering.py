"""The layering rules hold in code: what each layer pulls in when it is imported on its own.

Each module is imported in a fresh interpreter (``sys.modules`` starts clean), so one
test's imports cannot hide another's. The rules (``docs/architecture.md``):

- the core (``mindforge/``) imports neither Temporal nor Ray, and torch only lazily;
- the domain logic (audit, search, Discovery, evaluation, the coverage ledger, the HCP
  contract, tasks, the agent loop) knows no store: no SQLModel, no SQLAlchemy;
- workflows import no activity code (``workers``) and no store.
"""

from __future__ import annotations

import json
import subprocess
import sys

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
    "mindforge.experience.replay": NO_ORCHESTRATION + NO_STORE + NO_TORCH,
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
