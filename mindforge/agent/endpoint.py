"""Where a contract's model is reached: the endpoint URL and API key, resolved one way everywhere."""

from __future__ import annotations

import os
from typing import Any

from pydantic import SecretStr


def resolve_endpoint(
    contract: Any,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    policy_key: SecretStr | None = None,
) -> tuple[str, str]:
    """The OpenAI-compatible endpoint and API key for a contract's model.

    The URL: the explicit argument, then the environment variable the contract names
    (``model.base_url_env``; HCP keeps secrets as variable names only), then settings'
    ``policy_url``. The key: the explicit argument; then, for the policy endpoint (a URL
    given here, or settings' ``policy_url``, which the shipped contracts' ``base_url_env``
    ``MINDFORGE_POLICY_URL`` also sets), the policy API key (``policy_key``, else
    settings' ``policy_api_key``), so it never goes to another endpoint a contract names;
    then the contract's ``model.api_key_env`` variable; then ``"EMPTY"`` (what vLLM and
    the embedded server accept without a key).

    Args:
        contract: a :class:`mindforge.hcp.HCPContract`.
        base_url: endpoint base URL (``.../v1``) that overrides the contract's.
        api_key: API key that overrides every other.
        policy_key: the policy endpoint's key where this process's settings lack it (a
            Ray task gets the worker's through its payload); None: settings'.

    Returns:
        ``(base_url, api_key)``.
    """
    from mindforge.settings import get_settings

    settings = get_settings()
    m = contract.model
    contract_url = os.environ.get(m.base_url_env or "", "")
    url = base_url or contract_url or settings.policy_url
    if api_key:
        return url, api_key
    own = (policy_key or settings.policy_api_key) if (base_url or url == settings.policy_url) else None
    key = (own.get_secret_value() if own else "") or os.environ.get(m.api_key_env or "", "") or "EMPTY"
    return url, key
