"""An experience entry: one validated, solved search-split task the agent may be shown.

An entry is the instruction of a **search-split** task and the shell commands that solved
it, each with what it printed, plus where it came from: the task's reference solution
(provenance ``oracle``) or a passed trial of the lineage's own model (``model``). It is
kept only after its commands, replayed with no model in a fresh sandbox of the same task,
passed the task's verifier on every replay (:mod:`mindforge.experience.validation`) - as
Voyager (Wang et al., 2023), Agent Workflow Memory (Wang et al., 2024) and the source
paper's REPL harness keep a skill only once it has been re-executed and verified.

The entry id is a content hash over what identifies the experience (instruction, commands,
provenance, trial id, task hash), not over the outputs, which the validation replay fills in.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mindforge.hcp.examples import MAX_EXAMPLE_STEPS, ExampleStep, WorkedExample
from mindforge.hcp.model import canonical_json

#: the trial id written for entries mined from a reference solution
ORACLE_TRIAL = "oracle"
#: an entry may show at most this many commands (more is rejected as ``too_long``)
MAX_ENTRY_STEPS = MAX_EXAMPLE_STEPS
#: an entry's instruction plus commands may be at most this many characters (else ``too_long``)
MAX_ENTRY_CHARS = 3000
#: each step's recorded output is cut to this many characters (its tail is kept)
MAX_STEP_OUTPUT_CHARS = 600

_SPACE_RE = re.compile(r"\s+")


class Provenance(StrEnum):
    """Where an entry came from: a task's reference solution, or a passed model trial."""

    ORACLE = "oracle"
    MODEL = "model"


class EntryValidation(BaseModel):
    """How an entry was validated: its replays (no model, fresh sandbox, the task's verifier).

    Attributes:
        rewards: the verifier reward of each replay, in order (None = no real reward).
        replay_trial_ids: the trial id of each replay (their artifacts are under the run).
    """

    model_config = ConfigDict(frozen=True)

    rewards: list[float | None] = Field(min_length=1)
    replay_trial_ids: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when every replay scored the full reward."""
        return all(r is not None and r >= 1.0 for r in self.rewards)


class ExperienceEntry(BaseModel):
    """One entry of a lineage's experience library (immutable).

    Attributes:
        entry_id: ``exp-`` + 16 hex of a sha256 over the identity fields
            (:func:`entry_id_for`); set by :func:`make_entry`.
        instruction: the search-split task's instruction.
        steps: the commands that solved it, in order, each with its output (at least one).
        provenance: ``oracle`` or ``model``.
        trial_id: the passed trial it was mined from, or ``"oracle"``.
        task_id / task_hash: the task it was mined from (leave-one-out compares both).
        contract_hash: the contract of the trial it was mined from (``""`` for oracle).
        generation: the generation in which it was mined (0 for the seed).
        split: always ``search``: no entry ever comes from a selection or sealed task.
        validation: its replays, once validated (None for a candidate).
    """

    model_config = ConfigDict(frozen=True)

    entry_id: str
    instruction: str = Field(min_length=1)
    steps: list[ExampleStep] = Field(min_length=1)
    provenance: Provenance
    trial_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    task_hash: str = Field(min_length=1)
    contract_hash: str = ""
    generation: int = Field(default=0, ge=0)
    split: Literal["search"] = "search"
    validation: EntryValidation | None = None

    @field_validator("entry_id")
    @classmethod
    def _entry_id(cls, value: str) -> str:
        if not re.fullmatch(r"exp-[0-9a-f]{16}", value):
            raise ValueError(f"{value!r} is not an entry id ('exp-' and 16 lowercase hex)")
        return value

    @property
    def commands(self) -> list[str]:
        """The commands, in order."""
        return [step.command for step in self.steps]

    @property
    def dedupe_key(self) -> str:
        """The normalised commands joined by newlines: entries with equal keys are duplicates."""
        return "\n".join(normalise_command(c) for c in self.commands)

    @property
    def size_chars(self) -> int:
        """Characters of the instruction and the commands (what ``too_long`` measures)."""
        return len(self.instruction) + sum(len(c) for c in self.commands)

    @property
    def multi_line(self) -> bool:
        """True when a command spans lines (the ``command`` action format cannot show it)."""
        return any("\n" in c.strip() for c in self.commands)

    def to_example(self) -> WorkedExample:
        """The entry as a worked example named by its id (outputs included).

        Raises:
            pydantic.ValidationError: more than ``MAX_EXAMPLE_STEPS`` steps (a too-long
                entry is rejected before it can be shown).
        """
        return WorkedExample(name=self.entry_id, instruction=self.instruction, steps=list(self.steps))

    def with_validation(self, validation: EntryValidation, outputs: list[ExampleStep] | None = None) -> ExperienceEntry:
        """A copy with its validation record (and, when given, the replay's steps with outputs)."""
        update: dict[str, object] = {"validation": validation}
        if outputs is not None:
            update["steps"] = outputs
        return self.model_copy(update=update)


def normalise_command(command: str) -> str:
    """A command with runs of white space collapsed and trailing ``;`` removed (for dedupe)."""
    return _SPACE_RE.sub(" ", command).strip().rstrip(";").strip()


def entry_id_for(instruction: str, commands: list[str], provenance: Provenance, trial_id: str, task_hash: str) -> str:
    """``exp-`` + the first 16 hex of sha256 over the canonical JSON of the identity fields."""
    doc = {
        "instruction": instruction.strip(),
        "commands": [normalise_command(c) for c in commands],
        "provenance": str(provenance),
        "trial_id": trial_id,
        "task_hash": task_hash,
    }
    return "exp-" + hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()[:16]


def make_entry(
    *,
    instruction: str,
    steps: list[ExampleStep],
    provenance: Provenance,
    trial_id: str,
    task_id: str,
    task_hash: str,
    contract_hash: str = "",
    generation: int = 0,
) -> ExperienceEntry:
    """Build a candidate entry (not yet validated) with its content-hash id.

    Raises:
        pydantic.ValidationError: no steps, a blank command, or an empty instruction.
    """
    return ExperienceEntry(
        entry_id=entry_id_for(instruction, [s.command for s in steps], provenance, trial_id, task_hash),
        instruction=instruction.strip(),
        steps=steps,
        provenance=provenance,
        trial_id=trial_id,
        task_id=task_id,
        task_hash=task_hash,
        contract_hash=contract_hash,
        generation=generation,
    )


def cut_output(text: str) -> str:
    """The tail of a command's output, at most ``MAX_STEP_OUTPUT_CHARS`` characters."""
    return text if len(text) <= MAX_STEP_OUTPUT_CHARS else "...\n" + text[-MAX_STEP_OUTPUT_CHARS:]
