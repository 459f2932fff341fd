"""Task families: loading, rendering, parameter errors, the grammar schema, parsing family replies,
family-aware near-duplicates, and admission off the sealed split (pure: no Docker, no model)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import jsonschema
import pytest

from mindforge.discovery.checks import PoolIndex
from mindforge.discovery.families import load_families
from mindforge.discovery.family_proposal import parse_family_reply, render_family_prompt, reply_schema
from mindforge.discovery.materialise import materialise
from mindforge.discovery.proposal import PoolSummary
from mindforge.discovery.records import PairInfo, ProposalBatch, ProposalVerdict, RejectReason, StagedProposal
from mindforge.discovery.run import DiscoveryConfig, admission_record
from mindforge.errors import InputError
from mindforge.evaluation import PoolSplit, SplitConfig
from mindforge.hcp import load_contract
from mindforge.settings import REPO_ROOT
from mindforge.tasks.loader import load_task

FAMILIES = load_families()


def test_at_least_twelve_families_over_six_micro_categories():
    micro = {load_task(d).config.metadata.category for d in (REPO_ROOT / "tasks" / "micro").iterdir() if d.is_dir()}
    cats = {f.category for f in FAMILIES.values()}
    assert len(FAMILIES) >= 12
    assert len(cats & micro) >= 6, cats


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_example_renders_a_loadable_task_with_family_metadata(name, tmp_path):
    family = FAMILIES[name]
    proposal = family.render(family.example)
    assert proposal.task_id.startswith(f"{name}-") and proposal.category == family.category
    task = load_task(materialise(proposal, tmp_path, metadata={"family": name, "family_params": family.example}))
    assert task.config.metadata.model_extra["family"] == name
    assert "%%" not in task.instruction and "%%" not in proposal.solve_sh
    # the same parameters always render the same files; other parameters other files
    assert family.render(dict(family.example)) == proposal


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_difficulty_moves_with_the_parameters(name):
    family = FAMILIES[name]
    scores = {family.difficulty(p)[0] for p in variants(family)}
    assert len(scores) > 1, f"{name}: no parameter moves the difficulty"


def variants(family):
    """The example, and the example with each parameter moved to each of its bounds or values."""
    out = [dict(family.example)]
    for key, spec in family.params_schema["properties"].items():
        bounds = [spec["minimum"], spec["maximum"]] if spec.get("type") == "integer" else [False, True]
        values = spec.get("enum") or bounds
        out += [{**family.example, key: v} for v in values]
    return out


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_variant_renders(name):
    family = FAMILIES[name]
    ids = {family.render(p).task_id for p in variants(family)}
    assert len(ids) == len({json.dumps(p, sort_keys=True) for p in variants(family)})


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"records": 5, "field": "city", "depth": 1, "colour": "red"}, "params.colour", "Additional properties"),
        ({"records": 500, "field": "city", "depth": 1}, "params.records", "maximum"),
        ({"records": 5, "field": "email", "depth": 1}, "params.field", "is not one of"),
        ({"records": 5, "field": "city"}, "params.depth", "required"),
        ({"records": "5", "field": "city", "depth": 1}, "params.records", "is not of type"),
    ],
)
def test_parameters_outside_the_schema_name_the_field(params, field, words):
    with pytest.raises(InputError) as err:
        FAMILIES["json-field-lines"].render(params)
    assert err.value.field == field and words in err.value.reason
    assert "family.toml" in err.value.path


def test_grammar_schema_admits_exactly_the_family_schemas():
    exact, grammar = reply_schema(FAMILIES, 2), reply_schema(FAMILIES, 2, for_grammar=True)
    for family in FAMILIES.values():
        for p in variants(family):
            doc = {"proposals": [{"family": family.name, "params": p}] * 2}
            jsonschema.validate(doc, exact)
            jsonschema.validate(doc, grammar)
        spec = next(s for s in family.params_schema["properties"].values() if s.get("type") == "integer") if any(
            s.get("type") == "integer" for s in family.params_schema["properties"].values()) else None
        if spec is not None:
            key = next(k for k, s in family.params_schema["properties"].items() if s is spec)
            bad = {"proposals": [{"family": family.name, "params": {**family.example, key: spec["maximum"] + 1}}] * 2}
            for schema in (exact, grammar):
                with pytest.raises(jsonschema.ValidationError):
                    jsonschema.validate(bad, schema)


def test_parse_family_reply_renders_and_rejects_with_reasons():
    ok = {"family": "sum-by-key", "params": {"rows": 10, "keys": 3, "separator": "tab"}}
    reply = json.dumps({"proposals": [
        ok,
        {"family": "no-such", "params": {}},
        {"family": "sum-by-key", "params": {"rows": 10, "keys": 30, "separator": "tab"}},
        ok,
    ]})
    out = parse_family_reply(reply, FAMILIES, k=4)
    assert out[0].proposal is not None and out[0].family == "sum-by-key" and out[0].reason is None
    assert out[1].reason == RejectReason.MALFORMED and "unknown family" in out[1].detail
    assert out[2].reason == RejectReason.MALFORMED and "params.keys" in out[2].detail
    assert out[3].reason == RejectReason.MALFORMED and "same instance" in out[3].detail
    assert parse_family_reply("not json", FAMILIES, k=1)[0].index == -1


def test_prompt_shows_families_pass_rates_and_the_harder_instruction():
    contract = load_contract(REPO_ROOT / "hcp_contracts" / "smollm2.toml")
    summary = PoolSummary(families={"sum-by-key": {"easy": (2, 3)}})
    text = render_family_prompt(contract, FAMILIES, summary, 2)[1]["content"]
    assert all(name in text for name in FAMILIES)
    assert "sum-by-key: easy 2/3" in text and "a little harder" in text and "Harder with: larger rows" in text


def _instance(tmp_path: Path, name: str, params: dict, sub: str):
    family = FAMILIES[name]
    path = materialise(family.render(params), tmp_path / sub, metadata={"family": name, "family_params": params})
    return load_task(path)


def test_family_near_duplicates(tmp_path):
    base = {"rows": 10, "keys": 3, "separator": "comma"}
    first = _instance(tmp_path, "sum-by-key", base, "a")
    pool = PoolIndex.from_tasks([first])
    # same instruction and solution (only the data size differs): a near-duplicate
    same = _instance(tmp_path, "sum-by-key", {**base, "rows": 12}, "b")
    dup = pool.find_duplicate(same)
    assert dup is not None and dup.reason == RejectReason.DUPLICATE_INSTRUCTION and "family" in dup.detail
    # another separator changes the instruction and the solution: a new instance
    assert pool.find_duplicate(_instance(tmp_path, "sum-by-key", {**base, "separator": "tab"}, "c")) is None


def test_admitted_tasks_never_join_the_sealed_split(tmp_path):
    pair = PairInfo(contract_hash="h", contract_ref="c@1", model="m")
    batch = ProposalBatch(run_id="r", generation=1, pair=pair, requested=8, proposed=8)
    verdicts = []
    chars = ("space", "dash", "dot", "slash")
    params = [{"lines": n, "character": c, "longest_run": 3} for n, c in itertools.product((3, 4), chars)]
    for i, p in enumerate(params):
        task = _instance(tmp_path, "squeeze-repeats", p, f"s{i}")
        batch.staged.append(StagedProposal(task_id=task.id, proposed_id=task.id, path=str(task.path), category="text",
                                           declared_difficulty="easy", family="squeeze-repeats", params=p))
        verdicts.append(ProposalVerdict(task_id=task.id, path=str(task.path), content_hash=task.content_hash))
    config = DiscoveryConfig(count=8, splits=SplitConfig(selection_fraction=0.3, sealed_fraction=0.5, min_tasks=0),
                             split_key="lineage-x")
    record = admission_record(batch, verdicts, config)
    assert record.admitted and all(a.split != PoolSplit.SEALED for a in record.admitted)
    assert {a.provenance["family"]["name"] for a in record.admitted} == {"squeeze-repeats"}
    assert len(record.admitted) + len(record.rejected) == 8
