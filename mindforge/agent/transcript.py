"""The trial transcript: one JSON object per line, appended as the conversation happens.

Events (``event`` key): ``request`` (the messages added since the previous request, and the
sampling parameters), ``reply`` (content, tool calls, finish reason, usage, and the sampled
token ids and log-probabilities when the server returned them), ``action``,
``observation``, ``harness`` (a message the harness injected: hooks, parse errors),
``experience`` (the contract's experience snapshot and the ids of the entries shown,
before the first request, when the contract retrieves experience) and ``end``. Line
numbers (1-based) are stable evidence for audits. An ATIF trajectory is
derived from the same events at the end of the trial (``mindforge.agent.atif_export``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class TranscriptWriter:
    """Append-only JSONL writer.

    Args:
        path: the ``transcript.jsonl`` file (created, truncated).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._fh = path.open("w", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> int:
        """Append one event; returns its 1-based line number."""
        rec = {"event": event, "ts": datetime.now(UTC).isoformat(), **fields}
        self.events.append(rec)
        self._fh.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()
        return len(self.events)

    def close(self) -> None:
        """Flush and close the file."""
        if not self._fh.closed:
            self._fh.close()


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """Read a transcript back as a list of events (line i+1 is element i)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
