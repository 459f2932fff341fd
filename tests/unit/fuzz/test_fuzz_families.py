"""Fuzzing family.toml and family parameters: every defect is an InputError naming file and field."""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mindforge.discovery.families import load_family
from mindforge.discovery.schema import TaskProposal
from mindforge.errors import InputError
from tests.conftest import BUNDLED_TASKS
from tests.unit.fuzz.strategies import FUZZ, HUGE, Mutation, dump_toml, garbage_bytes, mutations, non_utf8, toml_values

FAMILIES = BUNDLED_TASKS / "families"
#: a few bundled families of different shapes (integers, enums, booleans, lookups)
NAMES = ("sum-by-key", "base64-transcode", "install-with-mode", "env-isolated-run")
DOCUMENTS = {name: tomllib.loads((FAMILIES / name / "family.toml").read_text(encoding="utf-8")) for name in NAMES}
LOADED = {name: load_family(FAMILIES / name) for name in NAMES}


def _load(name: str, data: bytes) -> tuple[Path, InputError | None]:
    """Load family ``name`` (its templates copied) with ``data`` as its family.toml."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / name
        shutil.copytree(FAMILIES / name / "templates", root / "templates")
        (root / "family.toml").write_bytes(data)
        try:
            load_family(root)
        except InputError as exc:
            return root / "family.toml", exc
        return root / "family.toml", None


@FUZZ
@given(st.sampled_from(NAMES), garbage_bytes)
@example("sum-by-key", b'name = "sum-by-key"\nx = ' + b"[" * 5_000)
def test_garbage_family_toml_is_an_input_error(name: str, data: bytes) -> None:
    path, error = _load(name, data)
    if error is not None:
        assert error.path == str(path) and error.reason, error


@st.composite
def mutated_families(draw: st.DrawFn) -> tuple[str, Mutation]:
    name = draw(st.sampled_from(NAMES))
    return name, draw(mutations(DOCUMENTS[name]))


def _mutated(name: str, kind: str, path: tuple, value: object) -> tuple[str, Mutation]:
    doc = tomllib.loads((FAMILIES / name / "family.toml").read_text(encoding="utf-8"))
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return name, Mutation(kind, path, doc)


@FUZZ
@given(mutated_families())
@example(_mutated("sum-by-key", "retype", ("schema", "properties", "rows", "maximum"), 2**62))
@example(_mutated("sum-by-key", "retype", ("schema", "properties", "rows", "maximum"), float("inf")))
@example(_mutated("sum-by-key", "retype", ("lookup",), "x"))
@example(_mutated("sum-by-key", "retype", ("schema", "properties", "rows"), True))
@example(_mutated("sum-by-key", "retype", ("lookup", "sep", "param"), 3))
@example(_mutated("sum-by-key", "retype", ("difficulty", "thresholds"), "x"))
@example(_mutated("sum-by-key", "huge", ("category",), HUGE))
def test_one_mutated_family_field_is_refused_by_key_path(case: tuple[str, Mutation]) -> None:
    name, mutation = case
    data = dump_toml(mutation.document)
    if data is None:
        return
    path, error = _load(name, data)
    if error is not None:
        assert str(path.parent) in error.path and error.reason, error
        if error.path == str(path):
            assert error.field, f"{mutation}: {error} names no field"
        assert len(str(error)) < 4_000, f"{mutation}: the message echoes the whole value"


@FUZZ
@given(st.sampled_from(NAMES).flatmap(lambda n: st.tuples(st.just(n), non_utf8(dump_toml(DOCUMENTS[n]) or b""))))
def test_non_utf8_family_toml_is_refused(case: tuple[str, bytes]) -> None:
    path, error = _load(*case)
    assert error is not None and error.path == str(path) and "UTF-8" in error.reason


def _params(name: str) -> st.SearchStrategy:
    """Near-valid parameters: the example with one key removed, retyped, or an unknown one added; or anything."""
    example_params = LOADED[name].example
    keys = st.sampled_from(sorted(example_params))
    return st.one_of(
        keys.map(lambda k: {p: v for p, v in example_params.items() if p != k}),
        st.tuples(keys, toml_values).map(lambda kv: {**example_params, kv[0]: kv[1]}),
        st.tuples(st.text(min_size=1, max_size=8), toml_values).map(lambda kv: {**example_params, **{kv[0]: kv[1]}}),
        toml_values,
    )


@FUZZ
@given(st.sampled_from(NAMES).flatmap(lambda n: st.tuples(st.just(n), _params(n))))
@example(("sum-by-key", {"rows": 8, "keys": 3, "separator": HUGE}))
@example(("sum-by-key", {"rows": 8.0, "keys": 3, "separator": "comma"}))
@example(("sum-by-key", {"rows": True, "keys": 3, "separator": "comma"}))
def test_fuzzed_parameters_render_or_name_the_parameter(case: tuple[str, object]) -> None:
    name, params = case
    family = LOADED[name]
    try:
        proposal = family.render(params)
    except InputError as exc:
        assert exc.path == str(family.root / "family.toml") and exc.field.startswith(("params", "lookup.")), exc
        assert len(str(exc)) < 4_000, "the message echoes the whole value"
    else:
        assert isinstance(proposal, TaskProposal)
