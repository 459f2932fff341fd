"""Hypothesis strategies and the settings profile shared by the input fuzzers.

Two kinds of input: garbage (random text and bytes) and near-valid documents (a valid
TOML document with one field mutated: deleted, given a value of another type, a huge
string, an unknown key beside it, or the file's bytes made non-UTF-8).

The profile: ``FUZZ_EXAMPLES`` examples per property (300 unless the environment sets
``MINDFORGE_FUZZ_EXAMPLES``), no deadline (the CI machine has 2 busy cores), derandomized
so a run is the same on every machine, and no example database (nothing written to the
work tree). ``MINDFORGE_FUZZ_GENERATED_ONLY=1`` skips the ``@example`` regressions, to
count what the generated inputs alone find (run against an older tree).
"""

from __future__ import annotations

import copy
import os
from typing import Any

import tomli_w
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

#: examples per property
FUZZ_EXAMPLES = int(os.environ.get("MINDFORGE_FUZZ_EXAMPLES", "300"))

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[p for p in Phase if p != Phase.explicit or os.environ.get("MINDFORGE_FUZZ_GENERATED_ONLY") != "1"],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

#: a string long enough to find quadratic code and unbounded echoes (1 MB)
HUGE = "x" * 1_000_000

_scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.dates(),
    st.datetimes(),
    st.times(),
)

#: any value TOML can hold (tables, arrays, scalars)
toml_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(min_size=1, max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)

#: random text of the kind found in broken files and model replies
garbage_text = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=st.sampled_from('[]{}="\'\n\t .,:#`$-_0123456789abcdeftrunl\\'), max_size=400),
)

garbage_bytes = st.one_of(st.binary(max_size=400), garbage_text.map(lambda t: t.encode("utf-8", "surrogatepass")))


def key_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in a TOML document: tuples of keys (str) and array indices (int)."""
    out: list[tuple] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out.extend(key_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if isinstance(value, (dict, list)):
                out.append((*prefix, index))
                out.extend(key_paths(value, (*prefix, index)))
    return out


def dotted(path: tuple) -> str:
    """A key path as text: ``('a', 0, 'b')`` -> ``a[0].b``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class Mutation:
    """One field of a valid document mutated.

    Attributes:
        kind: ``delete``, ``retype``, ``huge`` or ``unknown_key``.
        path: the key path mutated (for ``unknown_key`` the table the key was added to).
        document: the mutated document.
    """

    def __init__(self, kind: str, path: tuple, document: dict[str, Any]) -> None:
        self.kind, self.path, self.document = kind, path, document

    def __repr__(self) -> str:  # hypothesis prints this for a failing example; keep it short
        return f"Mutation({self.kind}, {dotted(self.path)!r})"


def _parent(doc: Any, path: tuple) -> Any:
    node = doc
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def mutations(draw: st.DrawFn, document: dict[str, Any]) -> Mutation:
    """A copy of ``document`` with one field deleted, retyped, made huge, or an unknown key added."""
    doc = copy.deepcopy(document)
    path = draw(st.sampled_from(key_paths(doc)))
    kind = draw(st.sampled_from(["delete", "retype", "huge", "unknown_key"]))
    parent = _parent(doc, path)
    last = path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "retype":
        parent[last] = draw(toml_values)
    elif kind == "huge":
        parent[last] = HUGE
    else:
        target = parent[last] if isinstance(parent[last], dict) else parent
        key = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in target))
        target[key] = draw(toml_values)
        if target is parent:
            path = path[:-1]
    return Mutation(kind, path, doc)


def dump_toml(document: dict[str, Any]) -> bytes | None:
    """``document`` as TOML bytes, or None where TOML cannot write it (nothing to test then)."""
    try:
        return tomli_w.dumps(document).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):
        return None


@st.composite
def non_utf8(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with one byte that is never valid UTF-8 inserted at a drawn position."""
    at = draw(st.integers(min_value=0, max_value=len(data)))
    bad = draw(st.sampled_from([b"\xff", b"\xfe", b"\xc3", b"\x80", b"\xed\xa0\x80"]))
    return data[:at] + bad + data[at:]
