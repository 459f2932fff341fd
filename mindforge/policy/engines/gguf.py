"""A GGUF file as a plain Hugging Face model directory: dequantised once, cached by sha256.

transformers reads GGUF files itself (``from_pretrained(dir, gguf_file=name)``, which
needs the PyPI package ``gguf``): it dequantises every tensor to float32 and rebuilds
the tokenizer, chat template and special tokens from the file's metadata. Loading that
way takes seconds per start (11-25 s for SmolLM2-135M on a shared 2-core CPU) and leaves a GGUF
quantizer marker on the model although its weights are plain floats, so it cannot be
saved and some PEFT/trainer code paths treat it as quantized. This module converts a
GGUF file once — clears the marker, saves model, tokenizer and generation config — into
a directory that both the policy server and the trainer load in well under a second.

Which architectures transformers can dequantise is its own table
(``transformers.modeling_gguf_pytorch_utils.GGUF_SUPPORTED_ARCHITECTURES``, see
:func:`supported_architectures`); the tokenizer must be a GGUF ``gpt2`` (byte-level
BPE), ``llama`` (SentencePiece) or ``t5`` (Unigram) tokenizer.

torch, transformers and gguf are imported inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from mindforge.errors import ModelSpecError
from mindforge.policy.engines.build_once import build_once

GGUF_MAGIC = b"GGUF"
#: bump when the conversion's output changes, so cached copies are rebuilt
GGUF_CACHE_VERSION = 1
STAMP_FILE = "mindforge_gguf.json"
#: keys of transformers' GGUF config table that are not model architectures
_NOT_ARCHITECTURES = {"general", "tokenizer"}


def is_gguf_file(path: Path) -> bool:
    """Whether ``path`` starts with the GGUF magic bytes."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


def file_sha256(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in ``chunk_bytes`` chunks (about 0.1 s per 100 MB here)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def supported_architectures() -> list[str]:
    """GGUF ``general.architecture`` values the installed transformers can dequantise.

    Read from transformers' own table, so the list follows the installed version
    (5.24: llama, mistral, qwen2, qwen2_moe, qwen3, qwen3_moe, gpt_oss, lfm2, falcon,
    phi3, bloom, t5, umt5, stablelm, gpt2, starcoder2, mamba, nemotron, gemma2, gemma3,
    gemma4, deci, minimax_m2).
    """
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return [a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in _NOT_ARCHITECTURES]


def read_architecture(path: Path) -> str | None:
    """The file's ``general.architecture``, or None when gguf cannot read it."""
    try:
        from gguf import GGUFReader

        field = GGUFReader(str(path)).fields.get("general.architecture")
        return None if field is None else str(field.contents())
    except Exception:  # noqa: BLE001 - only used to explain a failure already being reported
        return None


def model_name(gguf_path: Path) -> str:
    """A GGUF file's model name: its file name without ``.gguf`` (``SmolLM2-135M-Instruct.Q4_1``)."""
    name = Path(gguf_path).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def cached_dir(gguf_path: Path, sha256: str, cache_root: Path) -> Path:
    """The converted copy's directory: ``cache_root/<model name>-<first 16 hex of sha256>``."""
    return Path(cache_root) / f"{model_name(gguf_path)}-{sha256[:16]}"


def _is_current(path: Path, sha256: str) -> bool:
    try:
        stamp = json.loads((path / STAMP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp.get("version") == GGUF_CACHE_VERSION and stamp.get("sha256") == sha256


def _load_failure(gguf_path: Path, exc: Exception) -> ModelSpecError:
    import transformers

    if isinstance(exc, ImportError):
        return ModelSpecError(gguf_path, f"reading GGUF needs the PyPI package gguf (the train extra): {exc}")
    arch = read_architecture(gguf_path)
    supported = supported_architectures()
    if arch is None:
        why = "its header cannot be read: a damaged or truncated file?"
    elif arch not in supported:
        why = f"architecture {arch!r} is not one transformers can dequantise; supported: {', '.join(supported)}"
    else:
        why = f"architecture {arch!r}"
    reason = f"transformers {transformers.__version__} cannot load this GGUF file ({why}): {exc}"
    return ModelSpecError(gguf_path, reason)


def _clear_quantizer_marker(model) -> None:
    """Make a GGUF-loaded (already dequantised) model an ordinary float model.

    transformers keeps ``hf_quantizer`` (a GGUF quantizer that refuses to serialise),
    ``is_quantized`` and ``config.quantization_config`` on it, although ``dequantize``
    left float32 weights behind.
    """
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def convert_gguf(gguf_path: Path, out_dir: Path, sha256: str) -> Path:
    """Dequantise ``gguf_path`` into a plain Hugging Face directory ``out_dir``.

    Writes ``config.json``, ``model.safetensors`` (float32, the dequantised weights),
    ``generation_config.json`` (its EOS includes the tokenizer's, e.g. ``<|im_end|>``),
    the tokenizer files (``model_max_length`` set to the context length) with the GGUF's
    chat template, and a stamp ``mindforge_gguf.json`` (sha256, source, seconds).

    Args:
        gguf_path: the GGUF file.
        out_dir: an existing directory to write into.
        sha256: the file's sha256 (hex), recorded in the stamp.

    Returns:
        ``out_dir``.

    Raises:
        ModelSpecError: transformers cannot load the file (unsupported architecture or
            tokenizer, a damaged file, gguf not installed).
    """
    began = time.monotonic()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    except Exception as exc:  # transformers raises ValueError, KeyError, ImportError, OSError ... here
        raise _load_failure(gguf_path, exc) from exc
    _clear_quantizer_marker(model)
    context = getattr(model.config, "max_position_embeddings", None)
    if context:
        tokenizer.model_max_length = int(context)
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    if eos_ids:
        model.generation_config.eos_token_id = eos_ids.pop() if len(eos_ids) == 1 else sorted(eos_ids)
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    stamp = {
        "version": GGUF_CACHE_VERSION,
        "sha256": sha256,
        "source": str(gguf_path),
        "architecture": model.config.model_type,
        "convert_sec": round(time.monotonic() - began, 2),
    }
    (Path(out_dir) / STAMP_FILE).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    return Path(out_dir)


def ensure_gguf_model(gguf_path: Path, cache_root: Path, *, sha256: str | None = None) -> Path:
    """The converted copy of ``gguf_path`` under ``cache_root``, converting it first if needed.

    The copy is keyed by the file's sha256, so a changed file gets a new copy and the
    same file reached by two paths shares one. Safe to call from several processes at
    once (see :func:`mindforge.policy.engines.build_once.build_once`).

    Args:
        gguf_path: the GGUF file.
        cache_root: the directory holding converted copies.
        sha256: the file's sha256 when already known (saves a second read).

    Returns:
        the directory (``from_pretrained`` loads it).

    Raises:
        ModelSpecError: see :func:`convert_gguf`.
    """
    gguf_path = Path(gguf_path)
    sha256 = sha256 or file_sha256(gguf_path)
    target = cached_dir(gguf_path, sha256, cache_root)
    return build_once(target, lambda p: _is_current(p, sha256), lambda tmp: convert_gguf(gguf_path, tmp, sha256))
