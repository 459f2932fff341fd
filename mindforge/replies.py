"""Strict parsing of a model reply that must be one JSON object.

Used wherever MindForge asks the policy for structured output (audit judge, prompt-edit
proposals, Discovery proposals): the reply is exactly one JSON object, optionally as the
whole content of one ```json fence. Nothing else is repaired.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", flags=re.DOTALL)


class ReplyFormatError(ValueError):
    """The reply is not one JSON object; the message says why."""


def load_json_object(text: str) -> dict[str, Any]:
    """The JSON object a reply consists of.

    Args:
        text: the reply content.

    Returns:
        the decoded object.

    Raises:
        ReplyFormatError: empty, not JSON, or JSON that is not an object.
    """
    body = text.strip()
    fence = _FENCE.fullmatch(body)
    if fence:
        body = fence.group(1)
    if not body:
        raise ReplyFormatError("empty reply")
    try:
        obj = json.loads(body)
    except ValueError as exc:  # JSONDecodeError, or a number past Python's digit limit
        raise ReplyFormatError(f"not one JSON object: {str(exc)[:200]}") from None
    except RecursionError:
        raise ReplyFormatError("not one JSON object: nested too deep") from None
    if not isinstance(obj, dict):
        raise ReplyFormatError(f"a JSON {type(obj).__name__}, not an object")
    return obj
