"""Fuzzing the HCP contract loader: every bad contract is a ContractError naming file and field."""

from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mindforge.hcp.io import ContractError, load_contract, loads_contract
from tests.conftest import REPO
from tests.unit.fuzz.strategies import FUZZ, HUGE, Mutation, dump_toml, garbage_bytes, garbage_text, mutations, non_utf8

CONTRACTS = sorted((REPO / "hcp_contracts").glob("*.toml"))
DOCUMENTS = [tomllib.loads(path.read_text(encoding="utf-8")) for path in CONTRACTS]
VALID_BYTES = [path.read_bytes() for path in CONTRACTS]


def _load_bytes(data: bytes) -> tuple[Path, ContractError | None]:
    """Write ``data`` to a contract file and load it; the file and the error (None when it loaded)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzzed.toml"
        path.write_bytes(data)
        try:
            load_contract(path)
        except ContractError as exc:
            return path, exc
        return path, None


@FUZZ
@given(garbage_text)
@example("version = 1\n[mindforge]\nname = 'x'\n" + "[" * 10_000)
@example("version = 2")
@example("version = 1\na = " + "[" * 5_000)
def test_garbage_text_is_a_contract_error(text: str) -> None:
    try:
        loads_contract(text, "garbage.toml")
    except ContractError as exc:
        assert str(exc).startswith("garbage.toml"), exc


@FUZZ
@given(garbage_bytes)
@example(b"\xff\xfeversion = 1")
def test_garbage_file_is_a_contract_error_naming_the_file(data: bytes) -> None:
    path, error = _load_bytes(data)
    if error is not None:
        assert error.path == str(path) and str(path) in str(error)


@FUZZ
@given(st.sampled_from(range(len(DOCUMENTS))).flatmap(lambda i: mutations(DOCUMENTS[i])))
@example(Mutation("retype", ("version",), {"version": "1"}))
@example(Mutation("huge", ("model", "id"), {**DOCUMENTS[0], "model": {**DOCUMENTS[0]["model"], "id": HUGE}}))
def test_one_mutated_field_is_refused_by_key_path(mutation: Mutation) -> None:
    data = dump_toml(mutation.document)
    if data is None:
        return
    path, error = _load_bytes(data)
    if error is None:
        return
    assert error.field, f"{mutation}: {error} names no field"
    assert str(path) in str(error) and error.field in str(error) and error.reason


@FUZZ
@given(st.sampled_from(VALID_BYTES).flatmap(non_utf8))
def test_non_utf8_contract_is_refused(data: bytes) -> None:
    path, error = _load_bytes(data)
    assert error is not None and "not UTF-8" in str(error) and str(path) in str(error)
