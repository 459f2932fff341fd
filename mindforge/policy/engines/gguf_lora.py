"""Convert a PEFT LoRA adapter directory to a GGUF LoRA adapter that llama.cpp loads.

Needs ``gguf`` and ``safetensors`` (numpy only, no torch). The file follows what
llama.cpp's own ``convert_lora_to_gguf.py`` writes and ``llama_adapter_lora_init``
checks (``src/llama-adapter.cpp``): metadata ``general.type = adapter``,
``general.architecture`` equal to the base model's, ``adapter.type = lora`` and
``adapter.lora.alpha``; per adapted weight ``W`` (GGUF name, e.g. ``blk.3.attn_q.weight``)
two tensors ``W.lora_a`` (numpy shape (r, in)) and ``W.lora_b`` (shape (out, r)). llama.cpp
applies ``W x + (alpha / r) * B A x``, PEFT's update with ``scaling = lora_alpha / r``.

Llama-architecture GGUFs store ``attn_q`` / ``attn_k`` with their rows permuted for
llama.cpp's RoPE layout (``LlamaModel.permute`` in ``convert_hf_to_gguf.py``), and
transformers undoes that when it loads the GGUF; an adapter trained on the transformers
model therefore gets the same row permutation on ``lora_B`` of ``q_proj`` and ``k_proj``.

Supported: plain LoRA (no DoRA, no rsLoRA, one rank and alpha for all modules, no bias,
no extra saved modules) on a ``llama``-architecture base (SmolLM2); anything else is
refused with :class:`AdapterConversionError` naming the file and field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

#: architectures whose GGUF permutes q/k rows, with that permutation known to match transformers
_SUPPORTED_ARCHS = {"llama"}

_PEFT_NAME = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<ab>[AB])\.weight$")


class AdapterConversionError(ValueError):
    """A PEFT adapter that cannot be converted to a GGUF LoRA adapter (file, field, reason)."""

    def __init__(self, path: Path | str, field: str, reason: str) -> None:
        self.path, self.field, self.reason = str(path), field, reason
        super().__init__(f"{path}: {field}: {reason}" if field else f"{path}: {reason}")


def _permute_rows(b: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order: per head, interleaved halves become consecutive pairs.

    Args:
        b: ``lora_B`` of ``q_proj`` or ``k_proj``, shape (n_head * head_dim, r).
        n_head: heads of that projection (attention heads for q, KV heads for k).
    """
    out = b.shape[0]
    return b.reshape(n_head, 2, out // n_head // 2, *b.shape[1:]).swapaxes(1, 2).reshape(b.shape)


def _check_config(config_path: Path) -> dict[str, Any]:
    try:
        cfg = json.loads(config_path.read_text())
    except (OSError, ValueError) as exc:
        raise AdapterConversionError(config_path, "", f"cannot read adapter config: {exc}") from exc
    refusals = {
        "peft_type": (cfg.get("peft_type", "LORA") != "LORA", "only LoRA adapters convert"),
        "use_dora": (bool(cfg.get("use_dora")), "DoRA has no llama.cpp adapter form"),
        "use_rslora": (bool(cfg.get("use_rslora")), "rsLoRA scaling (alpha / sqrt(r)) is not converted"),
        "rank_pattern": (bool(cfg.get("rank_pattern")), "per-module ranks are not converted"),
        "alpha_pattern": (bool(cfg.get("alpha_pattern")), "per-module alphas are not converted"),
        "bias": (cfg.get("bias", "none") != "none", "adapter biases are not converted"),
        "modules_to_save": (bool(cfg.get("modules_to_save")), "fully trained extra modules are not converted"),
    }
    for field, (bad, reason) in refusals.items():
        if bad:
            raise AdapterConversionError(config_path, field, f"{reason} (got {cfg.get(field)!r})")
    if not isinstance(cfg.get("lora_alpha"), (int, float)) or not isinstance(cfg.get("r"), int):
        raise AdapterConversionError(config_path, "lora_alpha", "r (int) and lora_alpha (number) are required")
    return cfg


def _base_info(base_gguf: Path) -> tuple[str, int, int, int, dict[str, tuple[int, ...]]]:
    import gguf

    reader = gguf.GGUFReader(str(base_gguf))
    arch = str(reader.fields["general.architecture"].contents())
    if arch not in _SUPPORTED_ARCHS:
        raise AdapterConversionError(
            base_gguf, "general.architecture",
            f"{arch!r}: trained adapters convert to GGUF for llama-architecture bases only "
            f"({sorted(_SUPPORTED_ARCHS)}, e.g. SmolLM2); serve this model with --engine transformers, "
            "which loads PEFT adapters directly",
        )

    def num(key: str) -> int:
        return int(reader.fields[f"{arch}.{key}"].contents())

    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}  # ggml order: (in, out)
    return arch, num("block_count"), num("attention.head_count"), num("attention.head_count_kv"), shapes


def peft_to_gguf_lora(adapter_dir: Path | str, base_gguf: Path | str, out_path: Path | str) -> Path:
    """Write ``adapter_dir``'s PEFT LoRA as a GGUF LoRA adapter for the model ``base_gguf``.

    Args:
        adapter_dir: a PEFT adapter directory (``adapter_config.json`` and
            ``adapter_model.safetensors``), trained on the transformers form of ``base_gguf``.
        base_gguf: the base model's GGUF file (architecture, head counts, tensor shapes).
        out_path: the ``.gguf`` file to write (its directory must exist).

    Returns:
        ``out_path``.

    Raises:
        AdapterConversionError: unsupported adapter settings or architecture, a tensor
            with no GGUF counterpart, an unpaired ``lora_A``/``lora_B``, or shapes that do
            not fit the base model.
    """
    import gguf
    from safetensors.numpy import load_file

    adapter_dir, base_gguf, out_path = Path(adapter_dir), Path(base_gguf), Path(out_path)
    cfg = _check_config(adapter_dir / "adapter_config.json")
    weights_path = adapter_dir / "adapter_model.safetensors"
    if not weights_path.is_file():
        raise AdapterConversionError(
            weights_path, "", "no adapter_model.safetensors (only safetensors adapters convert)"
        )
    arch, n_blocks, n_head, n_head_kv, shapes = _base_info(base_gguf)
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch.upper()), n_blocks)
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key, tensor in load_file(str(weights_path)).items():
        match = _PEFT_NAME.match(key)
        if match is None:
            raise AdapterConversionError(weights_path, key, "not a lora_A/lora_B weight")
        module = match["module"]
        dest = names.get_name(f"{module}.weight", try_suffixes=(".weight",))
        if dest is None or dest not in shapes:
            raise AdapterConversionError(weights_path, key, f"no tensor in {base_gguf.name} for module {module}")
        b = tensor.astype(np.float32)
        if match["ab"] == "B" and module.endswith("self_attn.q_proj"):
            b = _permute_rows(b, n_head)
        elif match["ab"] == "B" and module.endswith("self_attn.k_proj"):
            b = _permute_rows(b, n_head_kv)
        pairs.setdefault(dest, {})[match["ab"]] = b
    if not pairs:
        raise AdapterConversionError(weights_path, "", "no LoRA weights")
    writer = gguf.GGUFWriter(str(out_path), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(cfg["lora_alpha"]))
    for dest, ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise AdapterConversionError(weights_path, dest, f"lora_A and lora_B must come in pairs, got {sorted(ab)}")
        a, b = ab["A"], ab["B"]
        n_in, n_out = shapes[dest]
        if a.shape != (cfg["r"], n_in) or b.shape != (n_out, cfg["r"]):
            raise AdapterConversionError(
                weights_path, dest, f"shapes A{a.shape} B{b.shape} do not fit base ({n_out}, {n_in}) at rank {cfg['r']}"
            )
        writer.add_tensor(f"{dest}.lora_a", np.ascontiguousarray(a))
        writer.add_tensor(f"{dest}.lora_b", np.ascontiguousarray(b))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out_path
