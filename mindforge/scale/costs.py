"""One trial's measured cost, and its split into sandbox, tool and model time.

A trial record's phase timings (``build_sec``, ``start_sec``, ``agent_sec``, ``verify_sec``,
``teardown_sec``) and token counts come in as plain mappings (a store row, a JSON line):
this module never reads the store itself. The agent phase mixes model calls with command
execution in the sandbox; :func:`fit_token_rates` splits it by a non-negative least-squares
fit ``agent_sec ~ fixed + completion_tokens / decode_rate + prompt_tokens / prefill_rate``
over the measured trials, so a faster policy server can shorten the model part alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from scipy.optimize import nnls

#: the record fields a trial cost is read from
FIELDS = (
    "stage",
    "build_sec",
    "start_sec",
    "agent_sec",
    "verify_sec",
    "teardown_sec",
    "prompt_tokens",
    "completion_tokens",
    "num_turns",
)


class CostError(ValueError):
    """A trial record cannot be read as a cost (names the source, the field and the reason)."""


class TrialCost(BaseModel):
    """One measured trial, as the simulation needs it.

    Attributes:
        stage: the trial stage (``expansion``, ``search``, ``selection``, ``rollout``, ``sealed``).
        setup_sec: image build plus sandbox start, seconds (holds a sandbox slot, no model).
        agent_sec: the agent loop, seconds (model calls and commands in the sandbox).
        finish_sec: verifier plus teardown, seconds (holds a sandbox slot, no model).
        prompt_tokens: prompt tokens over the trial's model calls.
        completion_tokens: completion tokens over the trial's model calls.
        num_turns: model calls in the trial (at least 1 for the simulation's turn split).
    """

    model_config = ConfigDict(frozen=True)

    stage: str
    setup_sec: float = Field(ge=0)
    agent_sec: float = Field(ge=0)
    finish_sec: float = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    num_turns: int = Field(ge=0)


def costs_from_records(records: Iterable[Mapping[str, Any]], *, source: str) -> list[TrialCost]:
    """Read trial costs from plain records (a store row's columns, by name).

    Args:
        records: mappings with every key of :data:`FIELDS` (seconds as floats, tokens and
            turns as integers).
        source: where the records come from (a store URL and lineage), for error messages.

    Returns:
        one :class:`TrialCost` per record, in order.

    Raises:
        CostError: a record lacks a field or holds a negative or non-numeric value; the
            message names ``source``, the record's index and the field.
    """
    out: list[TrialCost] = []
    for i, rec in enumerate(records):
        missing = [f for f in FIELDS if f not in rec or rec[f] is None]
        if missing:
            raise CostError(f"{source}: trial record {i}: field {missing[0]!r} is missing")
        try:
            out.append(
                TrialCost(
                    stage=str(rec["stage"]),
                    setup_sec=float(rec["build_sec"]) + float(rec["start_sec"]),
                    agent_sec=float(rec["agent_sec"]),
                    finish_sec=float(rec["verify_sec"]) + float(rec["teardown_sec"]),
                    prompt_tokens=int(rec["prompt_tokens"]),
                    completion_tokens=int(rec["completion_tokens"]),
                    num_turns=int(rec["num_turns"]),
                )
            )
        except (ValidationError, TypeError, ValueError) as exc:
            field = exc.errors()[0]["loc"][0] if isinstance(exc, ValidationError) else "a numeric field"
            raise CostError(f"{source}: trial record {i}: field {field!r}: {exc}") from exc
    return out


class TokenRates(BaseModel):
    """How agent time splits into model time, fitted to measured trials.

    Attributes:
        fixed_sec: agent seconds a trial spends outside model calls (commands, HTTP), per trial.
        completion_tokens_per_sec: decode rate one request saw, tokens/s (0 when the fit gave none).
        prompt_tokens_per_sec: prompt rate one request saw (prefill, net of reused prefixes), tokens/s.
        r2: the fit's coefficient of determination over the trials.
        trials: the trials fitted.
    """

    fixed_sec: float = Field(ge=0)
    completion_tokens_per_sec: float = Field(ge=0)
    prompt_tokens_per_sec: float = Field(ge=0)
    r2: float
    trials: int = Field(ge=0)

    def model_sec(self, cost: TrialCost) -> float:
        """The model-call seconds of ``cost`` at the fitted rates (at most its agent seconds)."""
        decode = cost.completion_tokens / self.completion_tokens_per_sec if self.completion_tokens_per_sec else 0.0
        prefill = cost.prompt_tokens / self.prompt_tokens_per_sec if self.prompt_tokens_per_sec else 0.0
        return min(cost.agent_sec, decode + prefill)


def fit_token_rates(costs: list[TrialCost]) -> TokenRates:
    """Fit ``agent_sec ~ fixed + completion/decode_rate + prompt/prefill_rate`` (non-negative least squares).

    Args:
        costs: the measured trials (at least 3, with some tokens).

    Returns:
        the fitted :class:`TokenRates`.

    Raises:
        CostError: fewer than 3 trials, or none with tokens.
    """
    if len(costs) < 3 or not any(c.prompt_tokens or c.completion_tokens for c in costs):
        raise CostError(f"fit_token_rates: need at least 3 trials with tokens, got {len(costs)}")
    y = np.array([c.agent_sec for c in costs], dtype=float)
    a = np.array([[1.0, c.completion_tokens, c.prompt_tokens] for c in costs], dtype=float)
    coef, _ = nnls(a, y)
    resid = y - a @ coef
    total = float(((y - y.mean()) ** 2).sum())
    return TokenRates(
        fixed_sec=float(coef[0]),
        completion_tokens_per_sec=1.0 / coef[1] if coef[1] > 0 else 0.0,
        prompt_tokens_per_sec=1.0 / coef[2] if coef[2] > 0 else 0.0,
        r2=1.0 - float((resid**2).sum()) / total if total > 0 else 1.0,
        trials=len(costs),
    )


class TrialWork(BaseModel):
    """What one simulated trial does, in order: set up, turns of (model call, tool time), finish.

    Attributes:
        stage: the trial stage it was measured in.
        setup_sec: sandbox build and start, seconds.
        model_sec: model-call seconds over the whole trial at the measured server's speed.
        tool_sec: the rest of the agent phase, seconds.
        finish_sec: verifier and teardown, seconds.
        turns: model calls (model and tool time are split evenly over them; at least 1).
    """

    model_config = ConfigDict(frozen=True)

    stage: str
    setup_sec: float = Field(ge=0)
    model_sec: float = Field(ge=0)
    tool_sec: float = Field(ge=0)
    finish_sec: float = Field(ge=0)
    turns: int = Field(default=1, ge=1)

    @property
    def total_sec(self) -> float:
        """The trial's seconds with no queueing."""
        return self.setup_sec + self.model_sec + self.tool_sec + self.finish_sec


def split_trial(cost: TrialCost, rates: TokenRates) -> TrialWork:
    """Split a measured trial's agent time into model and tool seconds at ``rates``.

    The split keeps the trial's measured total: ``model_sec + tool_sec == cost.agent_sec``.
    """
    model = rates.model_sec(cost)
    return TrialWork(
        stage=cost.stage,
        setup_sec=cost.setup_sec,
        model_sec=model,
        tool_sec=cost.agent_sec - model,
        finish_sec=cost.finish_sec,
        turns=max(1, cost.num_turns),
    )


def pools_by_stage(works: Iterable[TrialWork]) -> dict[str, list[TrialWork]]:
    """Group trial works by stage: the empirical distributions the simulation resamples."""
    pools: dict[str, list[TrialWork]] = {}
    for w in works:
        pools.setdefault(w.stage, []).append(w)
    return pools
