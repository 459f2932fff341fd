"""ATIF, the Agent Trajectory Interchange Format, as pydantic models.

Source: Harbor's RFC 0001 "Agent Trajectory Interchange Format (ATIF) Specification"
(``docs/rfcs/0001-trajectory-format.md`` in laude-institute/harbor, now harbor-framework/harbor;
v1.8 as shipped in Harbor 0.26). Field names are the RFC's, unchanged, so that any ATIF
consumer reads MindForge transcripts and MindForge reads theirs:

- root: ``schema_version``, ``session_id``, ``trajectory_id``, ``agent``, ``steps``,
  ``notes``, ``final_metrics``, ``continued_trajectory_ref``, ``subagent_trajectories``,
  ``extra`` (v1.1);
- agent: ``name``, ``version``, ``model_name``, ``tool_definitions``, ``extra``;
- step: ``step_id`` (1-based, sequential), ``timestamp`` (ISO 8601), ``source``
  (``system`` | ``user`` | ``agent``), ``model_name``, ``reasoning_effort``, ``message``
  (a string, or content parts since v1.6), ``reasoning_content``, ``tool_calls``,
  ``observation``, ``metrics``, ``is_copied_context``, ``llm_call_count``, ``extra``;
- metrics: ``prompt_tokens`` (all input tokens, cached included), ``completion_tokens``,
  ``cached_tokens`` (subset of ``prompt_tokens``, v1.2), ``cost_usd``,
  ``prompt_token_ids`` (the whole prompt of that call, chat history included, v1.4),
  ``completion_token_ids`` (v1.3), ``logprobs`` (one per completion token), ``extra``.

The RFC's rules enforced here: step ids run 1, 2, 3, ...; an observation result's
``source_call_id`` names a ``tool_call_id`` of the same step; agent-only fields
(``model_name``, ``reasoning_effort``, ``reasoning_content``, ``tool_calls``,
``metrics``) appear only on agent steps; unknown keys are rejected (as Harbor's own
models do). Where the RFC says "should" (e.g. ``logprobs`` aligning with
``completion_token_ids``) this module accepts the document and the consumer decides
(the GRPO sample builder drops such a trajectory and counts why).

MindForge's own fields go under the ``extra`` objects, namespaced by
:data:`MINDFORGE_EXTRA_KEY` (e.g. ``trajectory.extra["mindforge"] = {"trial_id": ...}``).

This module is pure pydantic: no torch, no I/O beyond reading and writing one JSON file.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mindforge.errors import InputError

#: the ATIF version this module writes
SCHEMA_VERSION = "ATIF-v1.8"
#: versions this module reads (every v1.x addition is an optional field)
SUPPORTED_SCHEMA_VERSIONS = tuple(f"ATIF-v1.{minor}" for minor in range(9))
#: key under each ``extra`` object that holds MindForge's own fields
MINDFORGE_EXTRA_KEY = "mindforge"

StepSource = Literal["system", "user", "agent"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MediaSource(_Model):
    """Where an image or audio part's bytes are (RFC: content part ``source``)."""

    media_type: str
    path: str
    duration_sec: float | None = None


class ContentPart(_Model):
    """One part of a multimodal message or observation (v1.6; audio since v1.8)."""

    type: Literal["text", "image", "audio"]
    text: str | None = None
    source: MediaSource | None = None

    @model_validator(mode="after")
    def _check_kind(self) -> ContentPart:
        if self.type == "text" and (self.text is None or self.source is not None):
            raise ValueError("a text part has 'text' and no 'source'")
        if self.type != "text" and (self.source is None or self.text is not None):
            raise ValueError(f"an {self.type} part has 'source' and no 'text'")
        return self


Content = str | list[ContentPart]


class ToolCall(_Model):
    """One tool/function invocation in an agent step (RFC: ToolCallSchema)."""

    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class SubagentTrajectoryRef(_Model):
    """A reference to a delegated sub-agent's trajectory (RFC: SubagentTrajectoryRefSchema)."""

    session_id: str | None = None
    trajectory_id: str | None = None
    trajectory_path: str | None = None
    extra: dict[str, Any] | None = None


class ObservationResult(_Model):
    """Feedback from one tool call or action (RFC: ObservationResultSchema)."""

    source_call_id: str | None = None
    content: Content | None = None
    subagent_trajectory_ref: list[SubagentTrajectoryRef] | None = None
    extra: dict[str, Any] | None = None


class Observation(_Model):
    """Environment feedback after an agent's actions or a system event."""

    results: list[ObservationResult]


class Metrics(_Model):
    """Per-step LLM metrics (RFC: MetricsSchema); all optional.

    Attributes:
        prompt_tokens: input tokens of the call (tokens), cached ones included.
        completion_tokens: generated tokens (tokens).
        cached_tokens: the subset of ``prompt_tokens`` served from a prompt cache.
        cost_usd: cost of the call in US dollars.
        prompt_token_ids: the ids of the whole prompt sent in this call, chat history
            included; length ``prompt_tokens``.
        completion_token_ids: the ids of the generated tokens; length ``completion_tokens``.
        logprobs: natural-log probability of each generated token under the sampling
            policy; aligned with ``completion_token_ids``.
        extra: provider-specific metrics.
    """

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Model):
    """Aggregate metrics of a trajectory (RFC: FinalMetricsSchema); all optional."""

    total_prompt_tokens: int | None = Field(default=None, ge=0)
    total_completion_tokens: int | None = Field(default=None, ge=0)
    total_cached_tokens: int | None = Field(default=None, ge=0)
    total_cost_usd: float | None = Field(default=None, ge=0)
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class Agent(_Model):
    """The agent system that produced the trajectory (RFC: AgentSchema)."""

    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class Step(_Model):
    """One system prompt, user message or complete agent turn (RFC: StepObject)."""

    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: StepSource
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: Content
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso8601(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value)
            except ValueError as exc:
                raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
        return value

    @model_validator(mode="after")
    def _check_step(self) -> Step:
        if self.source != "agent":
            present = [name for name in _AGENT_ONLY if getattr(self, name) is not None]
            if present:
                raise ValueError(f"agent-only field(s) {present} on a {self.source} step")
        call_ids = [call.tool_call_id for call in self.tool_calls or []]
        if len(set(call_ids)) != len(call_ids):
            raise ValueError("duplicate tool_call_id in one step")
        for result in self.observation.results if self.observation else []:
            if result.source_call_id is not None and result.source_call_id not in call_ids:
                raise ValueError(
                    f"observation source_call_id {result.source_call_id!r} names no tool call of this step"
                )
        return self


class Trajectory(_Model):
    """A whole ATIF trajectory: agent description plus steps (RFC: root object)."""

    schema_version: str = SCHEMA_VERSION
    session_id: str
    trajectory_id: str | None = None
    agent: Agent
    steps: list[Step]
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    subagent_trajectories: list[Trajectory] | None = None
    extra: dict[str, Any] | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if value not in SUPPORTED_SCHEMA_VERSIONS:
            raise ValueError(f"unsupported ATIF version {value!r}; expected one of {SUPPORTED_SCHEMA_VERSIONS}")
        return value

    @model_validator(mode="after")
    def _sequential_ids(self) -> Trajectory:
        for index, step in enumerate(self.steps, start=1):
            if step.step_id != index:
                raise ValueError(f"steps[{index - 1}].step_id is {step.step_id}; step ids run 1, 2, 3, ...")
        return self

    def agent_steps(self) -> list[Step]:
        """The steps whose source is ``agent``, in order."""
        return [step for step in self.steps if step.source == "agent"]


def final_metrics_from_steps(steps: list[Step]) -> FinalMetrics:
    """Sum the per-step metrics into the RFC's ``final_metrics`` object.

    Args:
        steps: the trajectory's steps.

    Returns:
        totals over steps that report each field (None where no step does);
        ``total_steps`` is ``len(steps)``.
    """

    def total(name: str) -> Any:
        values = [getattr(s.metrics, name) for s in steps if s.metrics and getattr(s.metrics, name) is not None]
        return sum(values) if values else None

    return FinalMetrics(
        total_prompt_tokens=total("prompt_tokens"),
        total_completion_tokens=total("completion_tokens"),
        total_cached_tokens=total("cached_tokens"),
        total_cost_usd=total("cost_usd"),
        total_steps=len(steps),
    )


def trajectory_to_json(trajectory: Trajectory) -> str:
    """Serialise to the RFC's JSON (absent optional fields left out)."""
    return trajectory.model_dump_json(exclude_none=True, indent=2)


def write_trajectory(trajectory: Trajectory, path: Path) -> Path:
    """Write ``trajectory`` as JSON to ``path`` atomically (temp file + rename).

    Args:
        trajectory: a validated trajectory.
        path: destination file; parent directories are created.

    Returns:
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(trajectory_to_json(trajectory) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


_UNION_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list"})


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part) not in _UNION_TAGS and "[" not in str(part):  # skip pydantic's union-branch tags
            out += ("." if out else "") + str(part)
    return out


def parse_trajectory(data: Any, *, path: Path | str = "<trajectory>") -> Trajectory:
    """Validate a decoded JSON object as an ATIF trajectory.

    Args:
        data: the decoded JSON value.
        path: where it came from, for the error message.

    Returns:
        the trajectory.

    Raises:
        InputError: naming ``path``, the first offending field (``steps[2].metrics``)
            and the reason.
    """
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        # of a union's failed branches, the deepest error is the one that explains most
        first = max(exc.errors(), key=lambda e: len(e["loc"]))
        raise InputError(path, _field_path(tuple(first["loc"])), first["msg"]) from exc


def read_trajectory(path: Path) -> Trajectory:
    """Read and validate an ATIF JSON file.

    Args:
        path: the trajectory file.

    Returns:
        the trajectory.

    Raises:
        InputError: the file is missing or unreadable, is not JSON, or is not valid
            ATIF (the error names the field and the reason).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, "", f"cannot read trajectory: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, "", f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    return parse_trajectory(data, path=path)
