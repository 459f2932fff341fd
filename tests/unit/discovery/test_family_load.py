"""load_family refuses a bad family with an InputError naming the file, the field and the reason (pure)."""

from __future__ import annotations

import pytest

from mindforge.discovery.families import load_family
from mindforge.errors import InputError
from tests.unit.discovery.tmp_families import TEMPLATES, family_doc, write_family


def test_the_written_family_loads_and_its_example_renders(tmp_path):
    family = load_family(write_family(tmp_path, "counts"))
    assert family.render(family.example).task_id.startswith("counts-")


def test_a_schema_violation_names_family_toml_and_the_schema_field(tmp_path):
    doc = family_doc("counts")
    doc["schema"]["properties"]["count"]["minimum"] = "one"  # not a number: not a JSON Schema
    with pytest.raises(InputError) as err:
        load_family(write_family(tmp_path, "counts", doc))
    assert err.value.path.endswith("counts/family.toml") and err.value.field == "schema.properties.count.minimum"
    assert "not a JSON Schema" in err.value.reason


def test_an_example_outside_the_schema_names_the_field(tmp_path):
    doc = family_doc("counts")
    doc["example"]["count"] = 99
    with pytest.raises(InputError) as err:
        load_family(write_family(tmp_path, "counts", doc))
    assert err.value.path.endswith("counts/family.toml") and err.value.field == "params.count"


def test_a_lookup_missing_a_value_names_the_lookup(tmp_path):
    doc = family_doc("counts")
    del doc["lookup"]["shout"]["values"]["pear"]
    with pytest.raises(InputError) as err:
        load_family(write_family(tmp_path, "counts", doc))
    assert err.value.path.endswith("counts/family.toml") and err.value.field == "lookup.shout.values"
    assert "no text for word = pear" in err.value.reason


def test_a_template_naming_an_unknown_variable_names_the_template(tmp_path):
    templates = {**TEMPLATES, "instruction.md": "Count the %%{colour} lines of /app/data.txt.\n"}
    with pytest.raises(InputError) as err:
        load_family(write_family(tmp_path, "counts", templates=templates))
    assert err.value.path.endswith("counts/templates/instruction.md") and "colour" in err.value.reason
