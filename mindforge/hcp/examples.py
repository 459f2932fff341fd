"""Worked examples of an HCP contract: few-shot demonstrations shown before the task.

A worked example is a small solved task - an instruction and the shell commands that
solve it, each with the output it printed. The contract stores the *actions* (commands),
not reply text: the agent renders them in the contract's own action format and
observation style (:func:`mindforge.agent.prompts.render_examples`), so an example
stays right when a search edit changes the action format. They are part of the
document, so the content hash covers them.

TOML shape::

    [[resources.examples]]
    name = "count_lines"
    instruction = "Write the number of lines of planets.txt to planet_count.txt."

    [[resources.examples.steps]]
    command = "wc -l < planets.txt > planet_count.txt"

    [[resources.examples.steps]]
    command = "cat planet_count.txt"
    output = "8\\n"
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: the most commands one worked example may show
MAX_EXAMPLE_STEPS = 5
#: the most worked examples one contract may carry
MAX_EXAMPLES = 8

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


class _Strict(BaseModel):
    # like the contract's sections: unknown keys kept, known keys strictly typed
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)


class ExampleStep(_Strict):
    """``[[resources.examples.steps]]``: one command of a worked example and what it printed.

    Attributes:
        command: the bash command line (not blank).
        output: what it printed (stdout then stderr, as a terminal shows them); may be empty.
        exit_code: its exit status (0 to 255).
    """

    command: str
    output: str = ""
    exit_code: int = Field(default=0, ge=0, le=255)

    @field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the command is blank")
        return value


class WorkedExample(_Strict):
    """``[[resources.examples]]``: one solved task shown to the model before its own.

    Attributes:
        name: a slug naming the example (the library file's stem for library examples);
            ``""`` for an unnamed one. Names are unique within a contract.
        instruction: the example task's instruction (rendered through
            ``resources.instruction_template`` like a real one).
        steps: the commands that solve it, in order (1 to 5).
    """

    name: str = ""
    instruction: str = Field(min_length=1)
    steps: list[ExampleStep] = Field(min_length=1, max_length=MAX_EXAMPLE_STEPS)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if value and not _NAME_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not an example name (lowercase letters, digits, '.', '_', '-')")
        return value

    @property
    def commands(self) -> list[str]:
        """The step commands, in order."""
        return [step.command for step in self.steps]
