"""Reading and writing HCP contracts: TOML load/dump, secret checks, error key paths.

All validation happens here, at load, before any model call (an HCP RFC-0002 rule):
malformed TOML, a future major ``version``, secrets written as values, wrong types and
values, sha256 mismatches of embedded resources, and paths that escape the workspace.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from mindforge.errors import InputError
from mindforge.hcp.model import HCP_VERSION, FieldProblem, HCPContract


class ContractError(InputError):
    """An HCP contract is invalid.

    Args:
        path: the file (or a description of the source, e.g. ``derived from a@1``).
        field: the TOML key path of the first problem (``tools.bash_timeout_sec``,
            ``resources.embedded[0].sha256``), or ``""`` for the file as a whole.
        reason: what is wrong with it.
        problems: every ``(key path, reason)`` found; defaults to the one given.
    """

    def __init__(self, path: object, field: str, reason: str, problems: list[tuple[str, str]] | None = None) -> None:
        self.problems = problems or [(field, reason)]
        full = reason
        if len(self.problems) > 1:
            full += "; also " + "; ".join(f"{key or '(file)'}: {why}" for key, why in self.problems[1:])
        super().__init__(path, field, full)


# keys whose string value is a credential, wherever they appear
_SECRET_KEYS = frozenset(
    {
        "api_key", "apikey", "api_token", "access_token", "auth_token", "bearer_token", "token",
        "password", "passwd", "secret", "client_secret", "secret_key", "private_key", "access_key",
        "secret_access_key", "authorization",
    }
)  # fmt: skip
_SECRET_SUFFIXES = ("_api_key", "_password", "_secret", "_secret_key", "_access_token", "_auth_token", "_api_token")
# in [env] (variables handed to the agent) names like GITHUB_TOKEN are credentials too;
# elsewhere "*_token" is often a sampling option such as stop_token
_ENV_SECRET_SUFFIXES = ("_token", "_key", "_pass")
# keys that would carry the endpoint itself where `base_url_env` is expected
_URL_KEYS = frozenset({"base_url", "api_base", "api_url", "endpoint", "url"})
_URL_SECTIONS = frozenset({"model", "provider_options"})
# whole values shaped like well-known credentials (OpenAI/Anthropic, Hugging Face, GitHub,
# Slack, AWS, Google, bearer headers)
_SECRET_VALUE_RE = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}|Bearer\s+\S{16,}"
)
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USE_ENV = (
    "contracts carry only the NAMES of environment variables: set `api_key_env` "
    '(e.g. api_key_env = "OPENAI_API_KEY") and export the key in that variable'
)


def _walk(node: Any, path: str):
    """Yield ``(key path, key, value)`` for every leaf and table under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            child = f"{path}.{key}" if path else str(key)
            yield child, str(key), value
            yield from _walk(value, child)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


def find_secrets(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every place in a raw document where a secret or endpoint is written as a value.

    Args:
        document: the parsed TOML (any sections, known or not).

    Returns:
        ``(key path, reason)`` pairs, in document order; empty when clean.
    """
    found: list[tuple[str, str]] = []
    for path, key, value in _walk(document, ""):
        if not isinstance(value, str):
            continue
        lowered = key.lower()
        section = path.split(".", 1)[0]
        suffixes = _SECRET_SUFFIXES + _ENV_SECRET_SUFFIXES if section == "env" else _SECRET_SUFFIXES
        if value and (lowered in _SECRET_KEYS or lowered.endswith(suffixes)):
            found.append((path, f"looks like a secret written as a value; {_USE_ENV}"))
        elif _SECRET_VALUE_RE.fullmatch(value.strip()):
            found.append((path, f"the value looks like an API key; never write secrets into a contract: {_USE_ENV}"))
        elif lowered.endswith("_env") and value and not _ENV_NAME_RE.fullmatch(value):
            # the value is not echoed: it may be the secret itself
            found.append((path, f"not an environment variable name; `{key}` holds the NAME of a variable"))
        elif section in _URL_SECTIONS and lowered in _URL_KEYS:
            found.append(
                (path, "an endpoint written as a value; set `base_url_env` to the NAME of a variable holding it")
            )
    return found


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validation_problems(error: ValidationError) -> list[tuple[str, str]]:
    """``(key path, reason)`` for each error of a pydantic ``ValidationError``."""
    out = []
    for item in error.errors():
        kind = item["type"]
        message = item["msg"].removeprefix("Value error, ")
        if kind == "missing":
            message = "required key is missing"
        elif kind == "extra_forbidden":
            message = "unknown key"
        elif kind != "value_error":
            message += f" (got {type(item['input']).__name__} {_short(item['input'])})"
        out.append((_key_path(item["loc"]), message))
    return out


def _check_version(document: dict[str, Any], source: str) -> None:
    if "version" not in document:
        raise ContractError(
            source, "version", f"required key is missing; an HCP contract starts with `version = {HCP_VERSION}`"
        )
    version = document["version"]
    if type(version) is not int:
        raise ContractError(source, "version", f"must be an integer (got {type(version).__name__} {_short(version)})")
    if version > HCP_VERSION:
        raise ContractError(
            source,
            "version",
            f"HCP major version {version} is newer than this MindForge reads ({HCP_VERSION}); upgrade MindForge",
        )
    if version < 1:
        raise ContractError(source, "version", f"must be {HCP_VERSION} (got {version})")


def contract_from_document(document: dict[str, Any], source: str = "<contract>") -> HCPContract:
    """Validate a parsed TOML document into a contract.

    Args:
        document: the parsed TOML.
        source: the file (or description) named in errors.

    Returns:
        the validated, immutable contract.

    Raises:
        ContractError: future or missing version, secrets written as values, or any
            invalid key (named by its key path).
    """
    _check_version(document, source)
    secrets = find_secrets(document)
    if secrets:
        raise ContractError(source, secrets[0][0], secrets[0][1], secrets)
    try:
        # deep copy: pydantic keeps unknown (extra) values by reference, and a contract
        # must not change when the caller's document does
        return HCPContract.model_validate(copy.deepcopy(document))
    except ValidationError as exc:
        problems = validation_problems(exc)
        raise ContractError(source, problems[0][0], problems[0][1], problems) from None
    except FieldProblem as exc:
        raise ContractError(source, exc.field, exc.reason) from None


def loads_contract(text: str, source: str = "<string>") -> HCPContract:
    """Parse and validate a contract from TOML text.

    Args:
        text: the TOML document.
        source: the file (or description) named in errors.

    Returns:
        the validated contract.

    Raises:
        ContractError: malformed TOML (with line and column) or an invalid contract.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(source, "", f"malformed TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise ContractError(source, "", "malformed TOML: arrays or inline tables nested too deep") from None
    return contract_from_document(document, source)


def load_contract(path: str | os.PathLike[str]) -> HCPContract:
    """Read, parse and validate a contract file (UTF-8 TOML).

    Raises:
        ContractError: the file is missing, unreadable, not UTF-8, malformed or invalid.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ContractError(path, "", "file not found") from None
    except IsADirectoryError:
        raise ContractError(path, "", "is a directory, not a contract file") from None
    except UnicodeDecodeError as exc:
        raise ContractError(path, "", f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ContractError(path, "", f"cannot read: {exc.strerror}") from None
    return loads_contract(text, str(path))


def dump_contract(contract: HCPContract) -> str:
    """The contract as TOML text: defaults filled in, unknown sections and keys kept.

    Multi-line strings (prompts, embedded files) are written as TOML multi-line strings.
    """
    return tomli_w.dumps(contract.to_document(), multiline_strings=True)


def save_contract(contract: HCPContract, path: str | os.PathLike[str]) -> Path:
    """Write the contract to ``path`` atomically (temporary file, then rename).

    Returns:
        the path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; contracts are not secret
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(dump_contract(contract))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
