"""DiscoveryWorkflow: propose -> check each proposal (in parallel, on Ray) -> admit.

The current pair proposes ``spec.discovery_count`` tasks; every staged proposal is checked
by its own activity on the sandbox queue (static checks, build, oracle twice, nop,
difficulty under the pair); the admission activity dedupes within the batch, assigns
splits and provenance, and grows the pool.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.payloads import (
        SANDBOX_QUEUE,
        AdmitInput,
        CheckProposalInput,
        DiscoveryInput,
        DiscoveryResult,
    )
    from workflows import options as o


@workflow.defn(name="DiscoveryWorkflow")
class DiscoveryWorkflow:
    """Discovery stage of one generation."""

    @workflow.run
    async def run(self, inp: DiscoveryInput) -> DiscoveryResult:
        """Propose, check in parallel, admit; returns the counts."""
        batch: dict = await workflow.execute_activity(
            o.DISCOVERY_PROPOSE,
            inp,
            result_type=dict,
            start_to_close_timeout=timedelta(minutes=30),
            retry_policy=o.STORE_RETRY,
        )
        verdicts = await asyncio.gather(
            *(
                workflow.execute_activity(
                    o.DISCOVERY_CHECK,
                    CheckProposalInput(
                        lineage_id=inp.lineage_id,
                        generation=inp.generation,
                        task_dir=staged["path"],
                        contract_hash=inp.contract_hash,
                        policy_url=inp.spec.policy_url,
                        attempts=inp.spec.discovery_attempts,
                    ),
                    result_type=dict,
                    task_queue=SANDBOX_QUEUE,
                    start_to_close_timeout=timedelta(hours=2),
                    heartbeat_timeout=timedelta(seconds=inp.spec.heartbeat_timeout_sec),
                    retry_policy=o.TRIALS_RETRY,
                )
                for staged in batch["staged"]
            )
        )
        return await o.store_activity(
            o.DISCOVERY_ADMIT,
            AdmitInput(
                lineage_id=inp.lineage_id, generation=inp.generation, spec=inp.spec, batch=batch, verdicts=list(verdicts)
            ),
            DiscoveryResult,
        )
