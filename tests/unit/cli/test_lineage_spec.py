"""``build_spec`` resolves the Update stage's base model the way the policy server resolves ``--model``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.cli.lineage import build_spec, split_config
from mindforge.policy.engines.models import ModelSpecError, resolve_model
from tests.conftest import BUNDLED_TASKS, REPO, require_module

TASKS = [BUNDLED_TASKS / "log-5xx-report"]


def _spec(contract: str, base_model: str | None):
    return build_spec(
        # one task, no selection split: no gate may run (one that could never pass is refused),
        # so Expansion without search; the Update's base model is resolved all the same
        "n", TASKS, REPO / "hcp_contracts" / contract, 1, 2, split_config(0.0, 0.0, 1), 0, None, "expansion", 16,
        base_model, search_attempts=0,
    )


def test_tiny_contract_trains_on_the_tiny_model_the_server_serves(settings) -> None:
    require_module("transformers")
    spec = _spec("tiny.toml", None)
    assert spec.update.base_model_path == resolve_model("tiny").hf_dir == str(settings.data_dir / "models" / "tiny")
    assert _spec("baseline.toml", "tiny").update.base_model_path == spec.update.base_model_path


def test_hub_model_id_passes_through_and_a_directory_becomes_absolute(settings, tmp_path, monkeypatch) -> None:
    assert _spec("baseline.toml", None).update.base_model_path == "Qwen/Qwen2.5-0.5B-Instruct"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert _spec("baseline.toml", "./m").update.base_model_path == str((tmp_path / "m").resolve())


def test_unloadable_base_model_fails_at_start(settings, tmp_path: Path) -> None:
    with pytest.raises(ModelSpecError, match="no such model directory or GGUF file"):
        _spec("baseline.toml", str(tmp_path / "missing.gguf"))


def test_examples_folder_seeds_the_search_and_a_bad_file_is_named(settings, tmp_path: Path) -> None:
    """``--examples DIR``: the folder's examples travel in the spec; none by default."""
    from mindforge.errors import InputError

    assert _spec("baseline.toml", None).expansion.search.examples == []
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "list_srv.toml").write_text('instruction = "List /srv."\n[[steps]]\ncommand = "ls /srv"\n')
    spec = build_spec(
        "n", TASKS, REPO / "hcp_contracts" / "baseline.toml", 1, 2, split_config(0.0, 0.0, 1), 0, None,
        "expansion", 16, None, search_attempts=0, examples=folder,
    )
    assert [e.name for e in spec.expansion.search.examples] == ["list_srv"]
    (folder / "broken.toml").write_text('instruction = "x"\n')
    with pytest.raises(InputError, match=r"broken\.toml.*steps"):
        build_spec(
            "n", TASKS, REPO / "hcp_contracts" / "baseline.toml", 1, 2, split_config(0.0, 0.0, 1), 0, None,
            "expansion", 16, None, search_attempts=0, examples=folder,
        )


def test_the_experience_library_grows_by_default_and_can_be_switched_off(settings) -> None:
    """``--no-experience`` turns both growth rounds off; the default keeps them on."""
    assert _spec("baseline.toml", None).expansion.experience.enabled is True
    spec = build_spec(
        "n", TASKS, REPO / "hcp_contracts" / "baseline.toml", 1, 2, split_config(0.0, 0.0, 1), 0, None,
        "expansion", 16, None, search_attempts=0, experience=False,
    )
    assert spec.expansion.experience.enabled is False and spec.expansion.experience.replays == 2


def test_an_example_that_restates_a_pool_task_is_refused_naming_file_and_task(settings, tmp_path: Path) -> None:
    """Any pool task can be a selection or sealed task: an example carrying its answer is refused at start."""
    from mindforge.errors import InputError

    task = tmp_path / "pool" / "count-it"
    (task / "solution").mkdir(parents=True)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\nset -e\nwc -l < /app/notes.txt > /app/count.txt\n")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "list_srv.toml").write_text('instruction = "List /srv."\n[[steps]]\ncommand = "ls /srv"\n')
    (folder / "lines.toml").write_text('instruction = "Count lines."\n[[steps]]\ncommand = "wc -l < a.txt > n.txt"\n')
    with pytest.raises(InputError, match=r"lines\.toml: steps: .*pool task\(s\) pool/count-it"):
        build_spec(
            "n", [*TASKS, tmp_path / "pool"], REPO / "hcp_contracts" / "baseline.toml", 1, 2,
            split_config(0.0, 0.0, 1), 0, None, "expansion", 16, None, search_attempts=0, examples=folder,
        )
