"""Task families: templates whose parameters a small model can propose.

A family is data under ``tasks/families/<name>/``:

* ``family.toml`` - ``name``, ``category``, ``summary`` (one line for the prompt),
  ``[schema]`` (a JSON Schema object of the parameters, Draft 2020-12), ``[example]``
  (parameters that must render a valid task), ``[difficulty]`` (how the parameters move
  the difficulty, :class:`DifficultyRule`) and ``[lookup.<var>]`` tables (a template
  variable whose text is chosen by one parameter's value, :class:`Lookup`);
* ``templates/`` - ``instruction.md``, ``environment/...``, ``tests/...``,
  ``solution/solve.sh``; every file is rendered with :class:`FamilyTemplate`
  (:class:`string.Template` with the delimiter ``%%``: ``%%name`` or ``%%{name}``),
  and files under ``templates/common/`` go into both ``environment/`` and ``tests/``
  (the generator the image runs to make the inputs, which the verifier runs again to
  compute the truth it checks against - the "privileged truth" of Endless Terminals).

Template variables: every parameter, every lookup, ``seed`` (an integer derived from
the family and the canonical parameters, so one instance always renders the same files)
and ``difficulty`` (the level). An instance is a
:class:`~mindforge.discovery.schema.TaskProposal`, so it is materialised and checked
like any proposal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import string
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, TypeVar

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mindforge.discovery.schema import TaskProposal
from mindforge.errors import InputError
from mindforge.tasks.dockerfile import insert_marker
from mindforge.tomlfile import read_toml

logger = logging.getLogger(__name__)
_M = TypeVar("_M", bound=BaseModel)

FAMILY_TOML = "family.toml"
TEMPLATES = "templates"
COMMON = "common"
#: difficulty levels in order; a score below ``levels[i]`` is level ``i``
LEVELS = ("easy", "medium", "hard")
#: families already warned about for rendering no instance-steps marker
_UNMARKED: set[str] = set()


class FamilyTemplate(string.Template):
    """:class:`string.Template` with ``%%`` as the delimiter (shell and Python keep their ``$``)."""

    delimiter = "%%"


class DifficultyRule(BaseModel):
    """How parameters move a family's difficulty.

    The score is ``base + sum(weights[p] * value)`` over integer parameters plus
    ``sum(choices[p][str(value)])`` over enum and boolean parameters (booleans as
    ``"true"`` / ``"false"``); the level is ``easy`` below ``thresholds[0]``, ``medium``
    below ``thresholds[1]``, else ``hard``.

    Attributes:
        base: the score of the simplest instance.
        weights: integer parameter -> points per unit.
        choices: enum or boolean parameter -> value -> points.
        thresholds: two ascending score limits.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: float = 0.0
    weights: dict[str, float] = Field(default_factory=dict)
    choices: dict[str, dict[str, float]] = Field(default_factory=dict)
    thresholds: tuple[float, float]


class Lookup(BaseModel):
    """A template variable chosen by one parameter's value.

    Attributes:
        param: the parameter.
        values: the parameter's value (as text; booleans ``"true"``/``"false"``) -> text.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    param: str
    values: dict[str, str]


class Family(BaseModel):
    """One task family, as loaded from its folder.

    Attributes:
        name: the family's name (the folder's name).
        category: the category its instances get (the micro suite's categories).
        summary: what an instance asks, in one line (shown to the proposing model).
        params_schema: JSON Schema of the parameters (``[schema]``).
        example: parameters that render a valid task.
        difficulty_rule: ``[difficulty]``.
        lookups: ``[lookup.<var>]`` tables.
        root: the family's folder.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    category: str
    summary: str
    params_schema: dict[str, Any]
    example: dict[str, Any]
    difficulty_rule: DifficultyRule
    lookups: dict[str, Lookup] = Field(default_factory=dict)
    root: Path

    @cached_property
    def _validator(self) -> jsonschema.protocols.Validator:
        return jsonschema.Draft202012Validator(self.params_schema)

    def check_params(self, params: Any) -> dict[str, Any]:
        """The parameters, checked against the family's schema.

        Args:
            params: the proposed parameters (a JSON object).

        Returns:
            ``params`` as a dict (unchanged).

        Raises:
            InputError: naming ``family.toml``, the field ``params.<name>`` and the
                reason of the first violation (unknown, missing, wrong type, out of range).
        """
        errors = sorted(self._validator.iter_errors(params), key=lambda e: (list(e.absolute_path), e.message))
        if errors:
            err = errors[0]
            path = ".".join(str(p) for p in err.absolute_path)
            if err.validator == "additionalProperties" and isinstance(params, dict):
                allowed = set(self.params_schema.get("properties", {}))
                path = ", ".join(sorted(set(params) - allowed)) or path
            elif err.validator == "required":
                path = err.message.split("'")[1] if "'" in err.message else path
            field = "params" + (f".{path}" if path else "")
            raise InputError(self.root / FAMILY_TOML, field, f"family {self.name!r}: {_cut(err.message)}")
        return dict(params)

    def difficulty(self, params: dict[str, Any]) -> tuple[float, str]:
        """The difficulty score and level (:data:`LEVELS`) of checked parameters."""
        rule = self.difficulty_rule
        score = rule.base
        for key, weight in rule.weights.items():
            score += weight * float(params[key])
        for key, table in rule.choices.items():
            score += table.get(_text(params[key]), 0.0)
        level = next((LEVELS[i] for i, limit in enumerate(rule.thresholds) if score < limit), LEVELS[-1])
        return score, level

    def instance_id(self, params: dict[str, Any]) -> str:
        """``<family>-<8 hex>``: the family and a hash of the canonical parameters."""
        return f"{self.name}-{canonical_hash(self.name, params)[:8]}"

    def variables(self, params: dict[str, Any]) -> dict[str, str]:
        """Template variables of checked parameters (see the module docstring)."""
        out = {key: _text(value) for key, value in params.items()}
        for var, lookup in self.lookups.items():
            out[var] = lookup.values[_text(params[lookup.param])]
        out["seed"] = str(int(canonical_hash(self.name, params)[:8], 16))
        out["difficulty"] = self.difficulty(params)[1]
        return out

    def render(self, params: Any) -> TaskProposal:
        """Render one instance.

        Args:
            params: the parameters (checked here).

        The rendered ``environment/Dockerfile`` gets the instance-steps marker
        (:data:`mindforge.tasks.dockerfile.MARKER`) before its first ``COPY`` of a
        ``templates/common/`` file when everything from there on is ``COPY``/``RUN``:
        all instances then share one image per family and make their data when the
        sandbox starts (:meth:`_mark_instance_steps`). The marker is a comment, so the
        file still builds the whole instance with ``docker build``.

        Returns:
            The instance as a proposal (id :meth:`instance_id`, the family's category,
            the level as its difficulty).

        Raises:
            InputError: parameters outside the schema (naming the field), a lookup
                without the parameter's value, a template naming an unknown variable,
                or a template folder without a required file.
        """
        checked = self.check_params(params)
        variables = self.variables_checked(checked)
        files: dict[str, str] = {}
        common: list[str] = []
        base = self.root / TEMPLATES
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            rel = path.relative_to(base).as_posix()
            try:
                text = FamilyTemplate(path.read_text(encoding="utf-8")).substitute(variables)
            except (KeyError, ValueError) as exc:
                raise InputError(path, "", f"template variable problem: {exc!r} (known: {sorted(variables)})") from exc
            if rel.startswith(f"{COMMON}/"):
                common.append(rel[len(COMMON) + 1:])
                files[f"environment/{common[-1]}"] = text
                files[f"tests/{common[-1]}"] = text
            else:
                files[rel] = text
        if "environment/Dockerfile" in files:
            files["environment/Dockerfile"] = self._mark_instance_steps(files["environment/Dockerfile"], common)
        return self._proposal(checked, files)

    def _mark_instance_steps(self, dockerfile: str, common: list[str]) -> str:
        """The rendered Dockerfile with the instance-steps marker, when its tail allows one.

        Without a marker (no ``COPY`` of a ``templates/common/`` file, or instructions
        after it that are not ``COPY``/``RUN``: see
        :func:`mindforge.tasks.dockerfile.insert_marker`) every instance builds its own
        image, as before; that is logged once per family.
        """
        marked = insert_marker(dockerfile, common) if common else None
        if marked is None and self.name not in _UNMARKED:
            _UNMARKED.add(self.name)
            logger.warning(
                "%s: no instance-steps marker (the Dockerfile's tail is not COPY/RUN of templates/common/ "
                "files): each instance builds its own image",
                self.root / TEMPLATES / "environment" / "Dockerfile",
            )
        return marked or dockerfile

    def variables_checked(self, params: dict[str, Any]) -> dict[str, str]:
        """:meth:`variables`, with a lookup missing the parameter's value an :class:`InputError`."""
        for var, lookup in self.lookups.items():
            if _text(params[lookup.param]) not in lookup.values:
                value = params[lookup.param]
                where = f"lookup.{var}.values"
                raise InputError(self.root / FAMILY_TOML, where, f"no text for {lookup.param}={_cut(repr(value))}")
        return self.variables(params)

    def _proposal(self, params: dict[str, Any], files: dict[str, str]) -> TaskProposal:
        required = ("instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh")
        missing = [r for r in required if r not in files]
        if missing:
            raise InputError(self.root / TEMPLATES, "", f"missing template(s): {', '.join(missing)}")
        env = {k[len("environment/"):]: v for k, v in files.items() if k.startswith("environment/")}
        tests = {k[len("tests/"):]: v for k, v in files.items() if k.startswith("tests/")}
        try:
            return TaskProposal(
                task_id=self.instance_id(params),
                instruction=files["instruction.md"],
                category=self.category,
                difficulty=self.difficulty(params)[1],  # type: ignore[arg-type]  # the level is one of LEVELS, the Literal TaskProposal wants
                dockerfile=env.pop("Dockerfile"),
                files=env,
                test_sh=tests.pop("test.sh"),
                test_files=tests,
                solve_sh=files["solution/solve.sh"],
            )
        except ValidationError as exc:
            raise InputError(self.root, "", f"rendered instance is not a valid task: {exc}") from exc

    def prompt_line(self) -> str:
        """The family in one prompt line: name, category, summary, parameters and what makes it harder."""
        props = self.params_schema.get("properties", {})
        parts = []
        for key, spec in props.items():
            if "enum" in spec:
                parts.append(f"{key}: one of {', '.join(json.dumps(v) for v in spec['enum'])}")
            elif spec.get("type") == "integer":
                parts.append(f"{key}: integer {spec.get('minimum', '?')}..{spec.get('maximum', '?')}")
            else:
                parts.append(f"{key}: {spec.get('type', 'value')}")
            if spec.get("description"):
                parts[-1] += f" ({spec['description']})"
        return (
            f"{self.name} [{self.category}]: {self.summary} Parameters: {'; '.join(parts)}. "
            f"Harder with: {self.harder_with()}."
        )

    def harder_with(self) -> str:
        """What raises the difficulty, in words: the weighted parameters and the costliest choices."""
        rule = self.difficulty_rule
        words = [f"larger {key}" for key, weight in rule.weights.items() if weight > 0]
        for key, table in rule.choices.items():
            if table:
                top = max(table.values())
                words.append(" or ".join(f"{key}={v}" for v, pts in table.items() if pts == top))
        return ", ".join(words) or "nothing (one level)"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def canonical_hash(family: str, params: dict[str, Any]) -> str:
    """sha256 hex of ``{"family", "params"}`` as canonical JSON (sorted keys, no spaces)."""
    doc = json.dumps({"family": family, "params": params}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


def load_family(root: Path) -> Family:
    """Load the family in ``root`` and check its ``[example]`` against its schema.

    Raises:
        InputError: ``family.toml`` missing, not TOML, a key missing or of the wrong
            shape, a schema that is not a valid JSON Schema, a lookup without a text
            for one of its parameter's values (field ``lookup.<var>.values``), an
            example outside the schema (naming ``family.toml`` and the field), or a
            template naming an unknown variable (naming the template).
    """
    root = Path(root)
    path = root / FAMILY_TOML
    doc = read_toml(path)
    if doc.get("name") != root.name:
        raise InputError(path, "name", f"must equal the folder name {root.name!r} (got {_cut(repr(doc.get('name')))})")
    for key in ("schema", "example", "difficulty", "lookup"):
        if not isinstance(doc.get(key, {}), dict):
            raise InputError(path, key, f"expected a table (got {type(doc[key]).__name__})")
    try:
        jsonschema.Draft202012Validator.check_schema(doc.get("schema", {}))
    except jsonschema.SchemaError as exc:
        where = ".".join(["schema", *map(str, exc.absolute_path)])
        raise InputError(path, where, f"not a JSON Schema: {_cut(exc.message)}") from exc
    rule = _validated(DifficultyRule, doc.get("difficulty", {}), path, "difficulty")
    lookups = {k: _validated(Lookup, v, path, f"lookup.{k}") for k, v in doc.get("lookup", {}).items()}
    family = _validated(
        Family,
        {"name": doc["name"], "category": doc.get("category", ""), "summary": doc.get("summary", ""),
         "params_schema": doc.get("schema", {}), "example": doc.get("example", {}), "difficulty_rule": rule,
         "lookups": lookups, "root": root},
        path,
        "",
    )
    _check_shape(family, path)
    _check_lookups(family, path)
    _check_templates(family)
    family.check_params(family.example)
    return family


_FAMILY_KEYS = {"params_schema": "schema", "difficulty_rule": "difficulty", "lookups": "lookup"}


def _validated(model: type[_M], data: Any, path: Path, prefix: str) -> _M:
    """``model`` validated from ``data``, a ``family.toml`` table at key path ``prefix``.

    Raises:
        InputError: naming ``path``, the key path of the first problem and the reason.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = [str(part) for part in err["loc"]]
        if loc and not prefix:
            loc[0] = _FAMILY_KEYS.get(loc[0], loc[0])
        field = ".".join([prefix, *loc] if prefix else loc)
        got = f" (got {_cut(repr(err['input']))})" if err["type"] != "missing" else ""
        raise InputError(path, field, f"{err['msg']}{got}") from exc


def _cut(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters: a hostile megabyte value is not echoed whole."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


#: the most values an integer parameter may take (instances are drawn from the whole range)
MAX_INTEGER_VALUES = 1_000_000


def _check_shape(family: Family, path: Path) -> None:
    schema = family.params_schema
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        raise InputError(path, "schema", "must be an object schema with additionalProperties = false")
    props = schema.get("properties", {})
    if set(schema.get("required", [])) != set(props):
        raise InputError(path, "schema.required", "every parameter must be required")
    for key, spec in props.items():
        where = f"schema.properties.{key}"
        if not isinstance(spec, dict):
            raise InputError(path, where, f"expected a table (a parameter's schema), got {_cut(repr(spec))}")
        if spec.get("type") == "integer":
            _check_integer_range(spec, path, where)
        if spec.get("type") not in ("integer", "boolean") and "enum" not in spec:
            raise InputError(path, where, "parameters are bounded integers, booleans or enums")
    rule = family.difficulty_rule
    for key in [*rule.weights, *rule.choices, *(lk.param for lk in family.lookups.values())]:
        if key not in props:
            raise InputError(path, "difficulty", f"names {_cut(repr(key))}, which is not a parameter")
    for key in rule.weights:
        if props[key].get("type") not in ("integer", "boolean"):
            raise InputError(path, f"difficulty.weights.{key}", "weights are for integer or boolean parameters")


def _check_integer_range(spec: dict[str, Any], path: Path, where: str) -> None:
    """An integer parameter has integer ``minimum`` <= ``maximum``, at most :data:`MAX_INTEGER_VALUES` apart."""
    low, high = spec.get("minimum"), spec.get("maximum")
    if low is None or high is None:
        raise InputError(path, where, "an integer parameter needs minimum and maximum")
    if type(low) is not int or type(high) is not int:
        raise InputError(path, where, f"minimum and maximum must be integers (got {low!r} and {high!r})")
    if not 0 <= high - low < MAX_INTEGER_VALUES:
        raise InputError(
            path, where, f"minimum..maximum must be ascending and span at most {MAX_INTEGER_VALUES} values"
        )


def param_values(family: Family) -> dict[str, list[Any]]:
    """Every parameter's values, in schema order: an enum's list, ``[False, True]``, an integer range."""
    out: dict[str, list[Any]] = {}
    for key, spec in family.params_schema.get("properties", {}).items():
        if "enum" in spec:
            out[key] = list(spec["enum"])
        elif spec.get("type") == "boolean":
            out[key] = [False, True]
        else:
            out[key] = list(range(int(spec["minimum"]), int(spec["maximum"]) + 1))
    return out


def _check_lookups(family: Family, path: Path) -> None:
    values = param_values(family)
    for var, lookup in family.lookups.items():
        missing = [_text(v) for v in values[lookup.param] if _text(v) not in lookup.values]
        if missing:
            raise InputError(path, f"lookup.{var}.values", f"no text for {lookup.param} = {', '.join(missing)}")


def _check_templates(family: Family) -> None:
    """Every ``%%name`` of every template is a parameter, a lookup, ``seed`` or ``difficulty``."""
    known = {*family.params_schema.get("properties", {}), *family.lookups, "seed", "difficulty"}
    base = family.root / TEMPLATES
    for path in sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []:
        try:
            template = FamilyTemplate(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(path, "", f"cannot read the template: {exc}") from exc
        if not template.is_valid():
            raise InputError(path, "", "a bad %% placeholder (write %%%% for a literal %%)")
        unknown = sorted(set(template.get_identifiers()) - known)
        if unknown:
            raise InputError(path, "", f"unknown template variable(s) {', '.join(unknown)} (known: {sorted(known)})")


def load_families(root: Path | None = None) -> dict[str, Family]:
    """Every family under ``root`` (default the bundled ``tasks/families``), by name.

    Raises:
        InputError: a family does not load (see :func:`load_family`), or none is found.
    """
    if root is None:
        from mindforge.settings import REPO_ROOT

        root = REPO_ROOT / "tasks" / "families"
    root = Path(root)
    dirs = sorted(d for d in root.iterdir() if (d / FAMILY_TOML).is_file()) if root.is_dir() else []
    if not dirs:
        raise InputError(root, "", "no task families (folders with family.toml) found")
    return {d.name: load_family(d) for d in dirs}


PromptMode = Literal["task", "families"]
