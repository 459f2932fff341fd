"""HCP contracts: validation at load, round trip, hashing, diff, derive, registry, CLI."""

from __future__ import annotations

import hashlib
import math
import subprocess
import tomllib
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from pydantic import ValidationError
from typer.testing import CliRunner

from mindforge.cli.hcp import app
from mindforge.errors import InputError
from mindforge.hcp import (
    KNOWN_TOOLS,
    ContractError,
    ContractImmutableError,
    ContractRegistry,
    HCPContract,
    check_registration,
    contract_from_document,
    derive,
    diff_contracts,
    dump_contract,
    format_diff,
    load_contract,
    loads_contract,
    make_embedded,
    save_contract,
)

SHIPPED = Path(__file__).resolve().parents[2] / "hcp_contracts"
BASELINE = SHIPPED / "baseline.toml"
SCRIPT = "#!/bin/sh\necho hello\n"
FAKE_KEY = "sk-proj-" + "a1B2c3D4" * 4
TEMPLATE = "resources.instruction_template"
PARENT = "mindforge.parent"


def baseline_doc() -> dict[str, Any]:
    return tomllib.loads(BASELINE.read_text())


def minimal_doc() -> dict[str, Any]:
    return {"version": 1, "mindforge": {"name": "mini", "revision": "1"}, "model": {"id": "tiny"}}


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        *tables, last = path.split(".")
        node = doc
        for part in tables:
            node = node.setdefault(part, {})
        node[last] = value

    return mutate


def _embed(path: str = "skills/a.sh", sha: str | None = None, **extra: Any) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        item = {"kind": "skill", "path": path, "content": SCRIPT}
        item["sha256"] = sha or hashlib.sha256(SCRIPT.encode()).hexdigest()
        item.update(extra)
        doc.setdefault("resources", {})["embedded"] = [item]

    return mutate


def _both(*mutations: Callable[[dict], None]) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        for m in mutations:
            m(doc)

    return mutate


def _embed_again(doc: dict) -> None:
    doc["resources"]["embedded"].append(dict(doc["resources"]["embedded"][0]))


def _drop_version(doc: dict) -> None:
    del doc["version"]


# (case id, mutation of the baseline document, expected key path, expected words in the reason)
# fmt: off
MALFORMED = [
    ("wrong type number", _set("tools.bash_timeout_sec", "6"), "tools.bash_timeout_sec", "valid number (got str '6')"),
    ("wrong type bool", _set("hooks.plan_first", 1), "hooks.plan_first", "valid boolean"),
    ("wrong type table", _set("tools", "bash"), "tools", "valid dictionary"),
    ("negative limit", _set("tools.max_observation_bytes", -1), "tools.max_observation_bytes", "greater than 0"),
    ("infinite timeout", _set("tools.bash_timeout_sec", math.inf), "tools.bash_timeout_sec", "finite number"),
    ("zero turns", _set("workspace.max_turns", 0), "workspace.max_turns", "greater than 0"),
    ("zero token budget", _set("workspace.max_total_tokens", 0), "workspace.max_total_tokens", "greater than 0"),
    ("temperature range", _set("provider_options.temperature", 2.5), "provider_options.temperature", "or equal to 2"),
    ("top_p range", _set("provider_options.top_p", 1.5), "provider_options.top_p", "less than or equal to 1"),
    ("max_tokens over window", _set("model.max_tokens", 40000), "model.max_tokens", "does not fit the context window"),
    ("missing model id", lambda d: d["model"].pop("id"), "model.id", "required key is missing"),
    ("future major version", _set("version", 2), "version", "newer than this MindForge reads"),
    ("version missing", _drop_version, "version", "required key is missing"),
    ("version as string", _set("version", "1"), "version", "must be an integer"),
    ("sha256 mismatch", _embed(sha="0" * 64), "resources.embedded[0].sha256", "sha256 mismatch"),
    ("sha256 not hex", _embed(sha="abc"), "resources.embedded[0].sha256", "not a lowercase hex sha256"),
    ("bad base64", _embed(encoding="base64"), "resources.embedded[0].content", "not valid base64"),
    ("api key as value", _set("model.api_key", FAKE_KEY), "model.api_key", "api_key_env"),
    ("password as value", _set("session.password", "hunter2"), "session.password", "api_key_env"),
    ("token in [env]", _set("env.GITHUB_TOKEN", "abc123"), "env.GITHUB_TOKEN", "api_key_env"),
    ("key-shaped value anywhere", _set("x_vendor.auth", FAKE_KEY), "x_vendor.auth", "looks like an API key"),
    ("key in *_env", _set("model.api_key_env", FAKE_KEY), "model.api_key_env", "api_key_env"),
    ("url in base_url", _set("model.base_url", "http://localhost:8000/v1"), "model.base_url", "base_url_env"),
    ("url in base_url_env", _set("model.base_url_env", "http://h:80/v1"), "model.base_url_env", "not an environment"),
    ("embedded path escape", _embed(path="../etc/passwd"), "resources.embedded[0].path", "escapes the workspace"),
    ("embedded absolute path", _embed(path="/etc/passwd"), "resources.embedded[0].path", "is absolute"),
    ("skills path escape", _set("skills.paths", ["skills/../../x.sh"]), "skills.paths", "escapes the workspace"),
    ("skill not embedded", _set("skills.paths", ["skills/no.sh"]), "skills.paths[0]", "not the path of a [[resources"),
    ("duplicate embedded path", _both(_embed(), _embed_again), "resources.embedded", "listed twice"),
    ("relative workspace root", _set("workspace.root", "app"), "workspace.root", "not an absolute POSIX path"),
    ("unknown tool", _set("tools.allow", ["bash", "python"]), "tools.allow[1]", "got str 'python'"),
    ("duplicate tool", _set("tools.allow", ["bash", "bash"]), "tools.allow", "listed twice: bash"),
    ("unknown action format", _set("tools.action_format", "xml"), "tools.action_format", "'fenced_bash' or 'command'"),
    ("shell format with file tools", _set("tools.action_format", "command"), "tools.allow", "acts through bash alone"),
    ("constrained decoding outside json",
     _both(_set("tools.action_format", "tool_calls"), _set("tools.constrained_decoding", True)),
     "tools.constrained_decoding", "the tool_calls format has none"),
    ("shell format without bash", _both(_set("tools.action_format", "fenced_bash"), _set("tools.allow", ["finish"])),
     "tools.allow", "acts through bash alone"),
    ("multi-line command example", _both(_set("tools.action_format", "command"), _set("tools.allow", ["bash"]),
     _set("resources.examples", [{"instruction": "x", "steps": [{"command": "cd a\nls"}]}])),
     "resources.examples[0].steps[0].command", "one command line per reply"),
    ("example without steps", _set("resources.examples", [{"instruction": "x", "steps": []}]),
     "resources.examples[0].steps", "at least 1 item"),
    ("example blank command", _set("resources.examples", [{"instruction": "x", "steps": [{"command": " "}]}]),
     "resources.examples[0].steps[0].command", "the command is blank"),
    ("example bad exit code",
     _set("resources.examples", [{"instruction": "x", "steps": [{"command": "ls", "exit_code": 300}]}]),
     "resources.examples[0].steps[0].exit_code", "less than or equal to 255"),
    ("example names twice",
     _set("resources.examples", [{"name": "a", "instruction": "x", "steps": [{"command": "ls"}]}] * 2),
     "resources.examples", "example names listed twice: a"),
    ("empty stop string", _set("provider_options.stop", ["\n", ""]), "provider_options.stop", "cannot be empty"),
    ("too many stop strings", _set("provider_options.stop", ["a", "b", "c", "d", "e"]), "provider_options.stop",
     "at most 4 items"),
    ("stop as a string", _set("provider_options.stop", "\n"), "provider_options.stop", "valid list"),
    ("unknown truncation", _set("tools.observation_truncation", "middle"), "tools.observation_truncation",
     "'head' or 'tail'"),
    ("unknown mode", _set("workspace.mode", "chat"), "workspace.mode", "'multi_turn' or 'single_command'"),
    ("unknown error hook", _set("hooks.on_command_error", "all"), "hooks.on_command_error", "'tail', 'full' or 'none'"),
    ("template without placeholder", _set(TEMPLATE, "Do it."), TEMPLATE, "must contain the {instruction}"),
    ("template unknown placeholder", _set(TEMPLATE, "{instruction} in {workdir}"), TEMPLATE, "placeholder {workdir}"),
    ("template malformed brace", _set(TEMPLATE, "{instruction"), TEMPLATE, "malformed placeholder"),
    ("parent without edit", _set("mindforge.parent", "baseline@0.9"), "mindforge.edit", "must record the edit"),
    ("parent not a ref", _both(_set(PARENT, "b"), _set("mindforge.edit", "x")), PARENT, "not 'name@revision'"),
    ("bad name", _set("mindforge.name", "Base Line"), "mindforge.name", "not a contract name"),
    ("revision with slash", _set("mindforge.revision", "1/2"), "mindforge.revision", "not a revision"),
]
# fmt: on


@pytest.mark.parametrize(("mutate", "field", "words"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_contract_names_key_and_reason(mutate, field, words, tmp_path):
    doc = baseline_doc()
    mutate(doc)
    path = tmp_path / "bad.toml"
    path.write_text(tomli_w.dumps(doc))
    with pytest.raises(ContractError) as info:
        load_contract(path)
    assert isinstance(info.value, InputError)
    assert info.value.field == field, info.value
    assert words in info.value.reason
    assert str(path) in str(info.value) and field in str(info.value)
    assert FAKE_KEY not in str(info.value)  # errors never echo a secret


def test_secret_check_spares_ordinary_keys():
    doc = baseline_doc()
    doc["provider_options"]["stop_token"] = "</s>"
    doc["env"] = {"PATH_EXTRA": "/opt/bin", "LANG": "C.UTF-8"}
    doc["mcp"] = {"servers": [{"name": "web", "url": "http://127.0.0.1:9000/mcp"}]}
    contract = contract_from_document(doc)
    assert contract.env["LANG"] == "C.UTF-8" and contract.provider_options.stop_token == "</s>"


def test_malformed_toml_reports_line_and_column(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("version = 1\n[model\nid = 'x'\n")
    with pytest.raises(ContractError) as info:
        load_contract(path)
    assert info.value.field == "" and "malformed TOML" in info.value.reason
    assert "line 2, column" in info.value.reason and str(path) in str(info.value)


def test_several_problems_are_all_reported():
    doc = baseline_doc()
    doc["tools"]["bash_timeout_sec"] = -1.0
    doc["workspace"]["max_turns"] = "many"
    with pytest.raises(ContractError) as info:
        contract_from_document(doc)
    assert [key for key, _ in info.value.problems] == ["tools.bash_timeout_sec", "workspace.max_turns"]
    assert "workspace.max_turns" in str(info.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(ContractError, match="file not found"):
        load_contract(tmp_path / "none.toml")
    (tmp_path / "latin1.toml").write_bytes(b"version = 1\n# caf\xe9\n")
    with pytest.raises(ContractError, match="not UTF-8"):
        load_contract(tmp_path / "latin1.toml")


@pytest.mark.parametrize("path", sorted(SHIPPED.glob("*.toml")), ids=lambda p: p.name)
def test_round_trip_is_identical_and_hash_stable(path, tmp_path):
    first = load_contract(path)
    text = dump_contract(first)
    second = loads_contract(text)
    assert second == first
    assert second.content_hash == first.content_hash
    assert dump_contract(second) == text
    saved = save_contract(second, tmp_path / "again.toml")
    assert load_contract(saved).content_hash == first.content_hash


def test_hash_ignores_key_order_and_explicit_defaults():
    doc = minimal_doc()
    reordered = dict(reversed(list(doc.items())))
    explicit = minimal_doc() | {"tools": {"action_format": "json"}, "workspace": {"root": "/app"}}
    hashes = {contract_from_document(d).content_hash for d in (doc, reordered, explicit)}
    assert len(hashes) == 1
    changed = minimal_doc() | {"tools": {"action_format": "tool_calls"}}
    assert contract_from_document(changed).content_hash not in hashes


def test_unknown_sections_and_keys_survive_round_trip():
    doc = baseline_doc()
    doc["mcp"] = {"servers": [{"name": "files", "command": "mcp-files", "args": ["--root", "/app"]}]}
    doc["x_vendor"] = {"mode": "fast", "nested": {"level": 2, "since": date(2026, 1, 5)}}
    doc["tools"]["x_retry"] = 3
    _embed(x_mode="0755")(doc)
    doc["skills"]["paths"] = ["skills/a.sh"]
    contract = contract_from_document(doc)
    assert set(contract.unknown_keys()) == {"x_vendor", "tools.x_retry", "resources.embedded[0].x_mode"}
    text = dump_contract(contract)
    assert "[[mcp.servers]]" in text and "[x_vendor.nested]" in text
    again = tomllib.loads(text)
    assert again["mcp"] == doc["mcp"] and again["x_vendor"] == doc["x_vendor"]
    assert again["tools"]["x_retry"] == 3 and again["resources"]["embedded"][0]["x_mode"] == "0755"
    assert loads_contract(text).content_hash == contract.content_hash
    doc["x_vendor"]["mode"] = "slow"  # unknown content is part of the hash ...
    assert contract.to_document()["x_vendor"]["mode"] == "fast"  # ... and was copied at load
    assert contract_from_document(doc).content_hash != contract.content_hash


def test_shipped_contracts_validate_and_form_a_lineage():
    contracts = {p.stem: load_contract(p) for p in SHIPPED.glob("*.toml")}
    assert {"baseline", "planner", "native-tools"} <= set(contracts)
    for stem, contract in contracts.items():
        assert contract.mindforge.name == stem
    base = contracts["baseline"]
    assert base.mindforge.parent == "" and list(base.tools.allow) == list(KNOWN_TOOLS)
    assert (base.tools.action_format, base.tools.max_observation_bytes, base.workspace.max_turns) == ("json", 16384, 30)
    assert not base.hooks.plan_first and base.hooks.on_command_error == "tail"
    assert (base.model.base_url_env, base.model.api_key_env) == ("MINDFORGE_POLICY_URL", "OPENAI_API_KEY")
    for name in ("planner", "native-tools"):
        variant = contracts[name]
        assert variant.mindforge.parent == base.ref and variant.mindforge.edit
        harness_changes = diff_contracts(base, variant, include_identity=False)
        assert harness_changes and all(c.key.split(".")[0] in {"tools", "hooks", "skills", "resources", "workspace"}
                                       for c in harness_changes)  # fmt: skip
    assert contracts["planner"].hooks.plan_first and contracts["planner"].hooks.verify_before_finish
    native = contracts["native-tools"]
    assert native.tools.action_format == "tool_calls" and native.tools.max_observation_bytes > 16384
    skill = native.resources.resource("skills/show_tree.sh")
    assert skill is not None and hashlib.sha256(skill.data).hexdigest() == skill.sha256
    assert native.skills.paths == ["skills/show_tree.sh"]


def test_shipped_show_tree_skill_runs(tmp_path):
    skill = load_contract(SHIPPED / "native-tools.toml").resources.resource("skills/show_tree.sh")
    script = tmp_path / skill.path
    script.parent.mkdir(parents=True)
    script.write_bytes(skill.data)
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / ".git").mkdir()
    out = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "skills/",
        f"  show_tree.sh ({len(skill.data)} bytes)",
        "src/",
        "  pkg/",
        "    mod.py (6 bytes)",
    ]


def test_diff_and_text_form():
    base = load_contract(BASELINE)
    child = derive(
        base,
        revision="1.1.0",
        edit="plan first, fewer turns, terse system prompt",
        changes={
            "hooks.plan_first": True,
            "workspace.max_turns": 20,
            "resources.system_prompt": "Be terse.\nAct.",
            "provider_options.seed": 7,
        },  # fmt: skip
    )
    changes = {c.key: c for c in diff_contracts(base, child, include_identity=False)}
    assert set(changes) == {
        "hooks.plan_first",
        "workspace.max_turns",
        "resources.system_prompt",
        "provider_options.seed",
    }
    assert (changes["workspace.max_turns"].old, changes["workspace.max_turns"].new) == (30, 20)
    assert changes["provider_options.seed"].kind == "added"
    text = format_diff(list(changes.values()))
    assert "~ hooks.plan_first: false -> true" in text and "+ provider_options.seed = 7" in text
    assert "~ workspace.max_turns: 30 -> 20" in text
    assert "    --- a/resources.system_prompt" in text and "    +Be terse." in text
    assert "    -Nobody will answer questions: decide for yourself, check your work by running it, and" in text
    identity = {c.key for c in diff_contracts(base, child)}
    assert {"mindforge.revision", "mindforge.parent", "mindforge.edit"} <= identity
    assert diff_contracts(base, load_contract(BASELINE)) == [] and format_diff([]) == ""
    removed = format_diff(diff_contracts(child, base, include_identity=False))
    assert "- provider_options.seed = 7" in removed


def test_derive_records_lineage_and_validates():
    base = load_contract(BASELINE)
    skill = make_embedded("skill", "skills/hello.sh", SCRIPT)
    child = derive(base, name="hello", revision="1", edit="add hello skill",
                   changes={"resources.embedded": [skill], "skills.paths": ["skills/hello.sh"]})  # fmt: skip
    assert child.mindforge.parent == "baseline@1.0.0" and child.mindforge.edit == "add hello skill"
    assert child.ref == "hello@1" and child.resources.embedded[0].data == SCRIPT.encode()
    assert child.mindforge.description == base.mindforge.description
    binary = make_embedded("file", "data/blob.bin", b"\xff\x00\x01")
    assert binary.encoding == "base64" and binary.data == b"\xff\x00\x01"
    unset = derive(child, revision="2", edit="drop seed", changes={"provider_options.seed": None})
    assert unset.provider_options.seed is None and unset.mindforge.parent == "hello@1"

    with pytest.raises(ContractError) as info:
        derive(base, revision="2", edit="bad cap", changes={"tools.max_observation_bytes": -5})
    assert info.value.field == "tools.max_observation_bytes" and "derived from baseline@1.0.0" in str(info.value)
    for key, words in [
        ("mindforge.name", "identity and lineage"),
        ("version", "not a harness setting"),
        ("workspace.timeout_sec", "belong to the task"),
        ("tools.allow[0]", "dotted key path"),
        ("tools.allow.x", "is not a table"),
    ]:
        with pytest.raises(ContractError, match=words):
            derive(base, revision="2", edit="x", changes={key: 1})
    with pytest.raises(ContractError, match="must record its edit"):
        derive(base, revision="2", edit=" ", changes={})
    with pytest.raises(ContractError, match="parent's own"):
        derive(base, revision="1.0.0", edit="same", changes={})
    with pytest.raises(ContractError, match="escapes the workspace"):
        make_embedded("skill", "../x.sh", "x")


def test_registry_is_immutable(tmp_path):
    registry = ContractRegistry(tmp_path / "contracts")
    base = load_contract(BASELINE)
    path = registry.register(base)
    assert path == tmp_path / "contracts" / "baseline" / "1.0.0.toml"
    assert registry.register(base) == path  # same hash: idempotent
    assert registry.register(loads_contract(path.read_text())) == path
    assert registry.get("baseline@1.0.0") == base and "baseline@1.0.0" in registry
    doc = base.to_document()
    doc["tools"]["max_observation_bytes"] = 1024
    tampered = contract_from_document(doc)
    with pytest.raises(ContractImmutableError) as info:
        registry.register(tampered)
    assert info.value.ref == "baseline@1.0.0" and info.value.new_hash == tampered.content_hash
    assert "new revision" in str(info.value)
    assert registry.get("baseline@1.0.0").content_hash == base.content_hash
    child = derive(base, revision="1.0.1", edit="smaller observations", changes={"tools.max_observation_bytes": 1024})
    registry.register(child)
    assert registry.refs() == ["baseline@1.0.0", "baseline@1.0.1"]
    with pytest.raises(InputError, match="no contract registered"):
        registry.get("baseline@9")
    assert check_registration("a@1", "h1", None) is True
    assert check_registration("a@1", "h1", "h1") is False
    with pytest.raises(ContractImmutableError):
        check_registration("a@1", "h2", "h1")


def test_contract_is_frozen():
    contract = load_contract(BASELINE)
    with pytest.raises(ValidationError, match="frozen_instance"):
        contract.workspace.max_turns = 99  # type: ignore[misc] - assigning is the error under test
    assert isinstance(contract, HCPContract)


runner = CliRunner(env={"COLUMNS": "200"})


def test_cli_validate_and_hash(tmp_path):
    files = [str(p) for p in sorted(SHIPPED.glob("*.toml"))]
    result = runner.invoke(app, ["validate", *files])
    assert result.exit_code == 0, result.output
    assert "baseline@1.0.0" in result.output and "planner@1.0.0" in result.output
    bad = tmp_path / "bad.toml"
    doc = baseline_doc()
    doc["model"]["api_key"] = FAKE_KEY
    bad.write_text(tomli_w.dumps(doc))
    result = runner.invoke(app, ["validate", str(BASELINE), str(bad)])
    assert result.exit_code == 1
    assert "model.api_key" in result.output and "api_key_env" in result.output and "ok" in result.output
    result = runner.invoke(app, ["hash", str(BASELINE)])
    assert result.exit_code == 0 and result.output.split()[0] == load_contract(BASELINE).content_hash


def test_cli_show_diff_register(tmp_path):
    native = SHIPPED / "native-tools.toml"
    result = runner.invoke(app, ["show", str(native)])
    assert result.exit_code == 0, result.output
    for words in (
        "native-tools@1.0.0",
        load_contract(native).content_hash,
        "[tools]",
        "[hooks]",
        "skills/show_tree.sh",
    ):
        assert words in result.output
    result = runner.invoke(app, ["diff", str(BASELINE), str(SHIPPED / "planner.toml"), "--no-identity"])
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "~ hooks.plan_first: false -> true",
        "~ hooks.verify_before_finish: false -> true",
    ]
    assert runner.invoke(app, ["diff", str(BASELINE), str(BASELINE)]).output.strip() == "no differences"
    assert runner.invoke(app, ["show", str(tmp_path / "none.toml")]).exit_code == 1
    registry = tmp_path / "reg"
    for _ in range(2):
        result = runner.invoke(app, ["register", str(BASELINE), "--registry", str(registry)])
        assert result.exit_code == 0, result.output
    changed = tmp_path / "baseline.toml"
    changed.write_text(BASELINE.read_text().replace("max_turns = 30", "max_turns = 31"))
    result = runner.invoke(app, ["register", str(changed), "--registry", str(registry)])
    assert result.exit_code == 1 and "already registered" in result.output


def test_late_keys_at_their_default_leave_hashes_and_files_unchanged():
    """Keys added after the 1.0.0 contracts are written only when set, so older contracts keep their hash."""
    base = load_contract(BASELINE)
    late = {"provider_options": {"stop": []},
            "tools": {"observation_truncation": "head_tail", "show_exit_code": True, "show_turn_budget": True},
            "resources": {"examples": []}, "workspace": {"mode": "multi_turn"}}
    doc = base.to_document()
    for section, keys in late.items():
        assert not set(keys) & set(doc[section]), section
    explicit = baseline_doc()
    for section, keys in late.items():
        explicit[section].update(keys)
    assert contract_from_document(explicit).content_hash == base.content_hash
    assert dump_contract(base) == BASELINE.read_text()  # the shipped file is exactly what we write


def test_harness_features_round_trip_and_count_in_the_hash(tmp_path):
    doc = baseline_doc()
    doc["tools"].update(allow=["bash", "finish"], action_format="command", observation_truncation="tail",
                        show_exit_code=False, show_turn_budget=False)
    doc["provider_options"]["stop"] = ["\n"]
    doc["workspace"]["mode"] = "single_command"
    doc["resources"]["examples"] = [
        {"name": "count", "instruction": "Count the lines of a.txt.", "x_source": "hand-written",
         "steps": [{"command": "wc -l < a.txt", "output": "3\n", "x_note": "kept"}]}
    ]
    contract = contract_from_document(doc)
    assert contract.unknown_keys() == ["resources.examples[0].x_source", "resources.examples[0].steps[0].x_note"]
    text = dump_contract(contract)
    assert "[[resources.examples]]" in text and "[[resources.examples.steps]]" in text
    again = load_contract(save_contract(contract, tmp_path / "c.toml"))
    assert again == contract and again.content_hash == contract.content_hash
    assert again.resources.example("count").steps[0].output == "3\n"
    assert (again.provider_options.stop, again.workspace.mode) == (["\n"], "single_command")
    hashes = {contract.content_hash}
    for key, value in [("provider_options.stop", ["\n\n"]), ("tools.show_exit_code", True),
                       ("resources.examples", []), ("workspace.mode", "multi_turn")]:
        changed = derive(contract, revision=f"x-{len(hashes)}", edit="test", changes={key: value})
        assert changed.content_hash not in hashes, key
        hashes.add(changed.content_hash)
    diff = format_diff(diff_contracts(load_contract(BASELINE), contract, include_identity=False))
    assert '+ workspace.mode = "single_command"' in diff and "+ resources.examples[0].instruction" in diff
