"""DiscoveryWorkflow: propose -> check each proposal (in parallel, on Ray) -> admit.

The current pair proposes ``discovery.count`` tasks; every staged proposal is checked by
its own activity on the sandbox queue (static checks, build, oracle twice, nop,
difficulty under the pair); the admission activity dedupes within the batch, assigns
splits and provenance, and grows the pool.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.discovery.records import ProposalBatch, ProposalVerdict
    from mindforge.payloads import (
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
        batch: ProposalBatch = await o.store_activity(o.PROPOSE_TASKS, inp, ProposalBatch, timeout=o.PROPOSE_TIMEOUT)
        verdicts: list[ProposalVerdict] = await asyncio.gather(
            *(
                o.sandbox_activity(
                    o.CHECK_PROPOSAL,
                    CheckProposalInput(
                        lineage_id=inp.lineage_id,
                        generation=inp.generation,
                        task_dir=staged.path,
                        contract_hash=inp.contract_hash,
                        policy_url=inp.runtime.policy_url,
                        attempts=inp.discovery.attempts,
                    ),
                    ProposalVerdict,
                    timeout=o.CHECK_PROPOSAL_TIMEOUT,
                    heartbeat_timeout_sec=inp.runtime.heartbeat_timeout_sec,
                )
                for staged in batch.staged
            )
        )
        admit = AdmitInput(
            lineage_id=inp.lineage_id, generation=inp.generation, evaluation=inp.evaluation, batch=batch,
            verdicts=list(verdicts),
        )
        return await o.store_activity(o.ADMIT_TASKS, admit, DiscoveryResult)
