"""Where a contract's model is reached: the endpoint URL and API key, resolved one way everywhere."""

from __future__ import annotations

import os
from typing import Any


def resolve_endpoint(contract: Any, base_url: str | None = None, api_key: str | None = None) -> tuple[str, str]:
    """The OpenAI-compatible endpoint and API key for a contract's model.

    Order: the explicit argument, then the environment variable the contract names
    (``model.base_url_env`` / ``model.api_key_env``; HCP keeps secrets as variable
    names only), then settings' ``policy_url``; the key falls back to ``"EMPTY"``
    (what vLLM and the embedded server accept).

    Args:
        contract: a :class:`mindforge.hcp.HCPContract`.
        base_url: endpoint base URL (``.../v1``) that overrides the contract's.
        api_key: API key that overrides the contract's.

    Returns:
        ``(base_url, api_key)``.
    """
    from mindforge.settings import get_settings

    m = contract.model
    url = base_url or os.environ.get(m.base_url_env or "", "") or get_settings().policy_url
    key = api_key or os.environ.get(m.api_key_env or "", "") or "EMPTY"
    return url, key
