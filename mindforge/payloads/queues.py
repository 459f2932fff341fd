"""Task queues and custom search attributes: the names workers, workflows and the CLI agree on."""

from __future__ import annotations

#: task queue for workflow tasks and store-only activities
ORCHESTRATION_QUEUE = "mindforge-orchestration"
#: task queue for activities that run sandboxes (fan out to Ray)
SANDBOX_QUEUE = "mindforge-sandbox"

#: custom search attributes (registered on the dev server by ``mindforge dev up``)
SA_LINEAGE = "MindForgeLineage"
SA_GENERATION = "MindForgeGeneration"
SA_STAGE = "MindForgeStage"
