"""The GGUF LoRA converter refuses what it cannot convert, naming the file and the field.

Real files: a GGUF base written with the ``gguf`` package (no tensors: the architecture is
read first) and a PEFT adapter directory with a safetensors file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mindforge.policy.engines.gguf_lora import AdapterConversionError, peft_to_gguf_lora


def _gguf(path: Path, arch: str) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _adapter(folder: Path) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 4}))
    weight = np.zeros((2, 4), dtype=np.float32)
    save_file({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": weight},
              str(folder / "adapter_model.safetensors"))
    return folder


def test_a_base_of_another_architecture_is_refused_with_the_way_out(tmp_path) -> None:
    base = _gguf(tmp_path / "qwen.gguf", "qwen2")
    with pytest.raises(AdapterConversionError) as err:
        peft_to_gguf_lora(_adapter(tmp_path / "adapter"), base, tmp_path / "out.gguf")
    assert err.value.field == "general.architecture" and err.value.path == str(base)
    assert "'qwen2'" in err.value.reason and "--engine transformers" in err.value.reason
    assert not (tmp_path / "out.gguf").exists()
