"""Shared builders for the experience unit tests: validated entries on made-up chores."""

from __future__ import annotations

from mindforge.experience import EntryValidation, ExperienceEntry, Provenance, make_entry
from mindforge.hcp import ExampleStep

PASSED = EntryValidation(rewards=[1.0, 1.0], replay_trial_ids=["r0", "r1"])


def entry(
    task: str,
    instruction: str,
    commands: list[str],
    *,
    provenance: Provenance = Provenance.ORACLE,
    trial: str = "oracle",
    validated: bool = True,
) -> ExperienceEntry:
    """A (by default validated) entry mined from task ``task`` (its hash is ``h-<task>``)."""
    made = make_entry(
        instruction=instruction,
        steps=[ExampleStep(command=c, output="") for c in commands],
        provenance=provenance,
        trial_id=trial,
        task_id=task,
        task_hash=f"h-{task}",
    )
    return made.with_validation(PASSED) if validated else made


LIBRARY = [
    entry("count-words", "Write the number of words in essay.txt to words.txt.", ["wc -w < essay.txt > words.txt"]),
    entry("list-logs", "List the .log files under /var/app into logs.txt.", ["find /var/app -name '*.log' > logs.txt"]),
    entry("upper-case", "Convert names.txt to upper case into NAMES.txt.", ["tr a-z A-Z < names.txt > NAMES.txt"]),
    entry(
        "count-lines",
        "Write the number of lines in cities.txt to city_count.txt.",
        ["wc -l < cities.txt > city_count.txt"],
        provenance=Provenance.MODEL,
        trial="t-abc",
    ),
]
