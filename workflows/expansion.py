"""ExpansionWorkflow: run the current pair on the search split and record coverage.

Steps (each an activity by stable name): plan the trials (deterministic ids), run them in
batches on the sandbox queue (each batch fans out to Ray), summarise coverage. Audit and
configuration search join this workflow in the Expansion issue.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from mindforge.orchestration import (
        ExpansionInput,
        ExpansionResult,
        RunTrialsInput,
        Stage,
        TrialSpec,
    )
    from workflows import options as o


@workflow.defn(name="ExpansionWorkflow")
class ExpansionWorkflow:
    """Base evaluation of the pair on the search split; more steps come with the Expansion issue."""

    @workflow.run
    async def run(self, inp: ExpansionInput) -> ExpansionResult:
        """Run ``spec.attempts`` trials per search task and return coverage counts."""
        trials: list[TrialSpec] = await workflow.execute_activity(
            o.PLAN_TRIALS,
            inp,
            result_type=list[TrialSpec],
            start_to_close_timeout=o.STORE_TIMEOUT,
            retry_policy=o.STORE_RETRY,
        )
        size = inp.spec.trial_batch_size
        batches = [trials[i : i + size] for i in range(0, len(trials), size)]
        await asyncio.gather(
            *(
                o.run_trials(
                    RunTrialsInput(
                        lineage_id=inp.lineage_id,
                        generation=inp.generation,
                        stage=Stage.EXPANSION,
                        contract_hash=inp.contract_hash,
                        adapter=inp.adapter,
                        policy_url=inp.spec.policy_url,
                        trials=batch,
                    ),
                    inp.spec.heartbeat_timeout_sec,
                )
                for batch in batches
            )
        )
        return await workflow.execute_activity(
            o.SUMMARIZE_EXPANSION,
            inp,
            result_type=ExpansionResult,
            start_to_close_timeout=o.STORE_TIMEOUT,
            retry_policy=o.STORE_RETRY,
        )
