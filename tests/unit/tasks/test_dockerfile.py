"""The instance-steps marker: parsing Dockerfiles, inserting the marker, splitting at it, the env hash (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.errors import InputError
from mindforge.tasks.dockerfile import (
    MARKER,
    insert_marker,
    parse_instructions,
    shared_env_hash,
    split_instance_steps,
)

FAMILY_DOCKERFILE = """FROM mindforge/base:bookworm
WORKDIR /app
ENV APP_USER=builder
COPY gen.py /tmp/gen.py
RUN python3 /tmp/gen.py /app && rm /tmp/gen.py
"""
PATH = Path("t/environment/Dockerfile")


def test_logical_lines_join_continuations_and_skip_comments_and_heredocs():
    text = (
        "# syntax=docker/dockerfile:1\nFROM a\nRUN echo one \\\n  # a comment inside\n  && echo two\n"
        "RUN <<EOF\nFROM not-an-instruction\nEOF\ncopy [\"x y\", \"/d/\"]\n"
    )
    got = [(i.keyword, i.args, i.line) for i in parse_instructions(text)]
    assert got == [
        ("FROM", "a", 2),
        ("RUN", "echo one  && echo two", 3),
        ("RUN", "<<EOF", 6),
        ("COPY", '["x y", "/d/"]', 9),
    ]


def test_escape_directive_changes_the_continuation_character():
    got = parse_instructions("# escape=`\nFROM a\nRUN dir `\n  c:\\\n")
    assert [(i.keyword, i.args) for i in got] == [("FROM", "a"), ("RUN", "dir  c:\\")]


def test_marker_goes_before_the_first_copy_of_an_instance_file():
    marked = insert_marker(FAMILY_DOCKERFILE, ["gen.py"])
    assert marked is not None
    lines = marked.splitlines()
    assert lines[3] == MARKER and lines[4] == "COPY gen.py /tmp/gen.py"
    assert marked.replace(MARKER + "\n", "") == FAMILY_DOCKERFILE  # nothing else changed
    crlf = insert_marker(FAMILY_DOCKERFILE.replace("\n", "\r\n"), ["gen.py"])
    assert crlf is not None and f"{MARKER}\r\n" in crlf


@pytest.mark.parametrize(
    "tail",
    [
        "COPY gen.py /tmp/gen.py\nENV X=1\nRUN python3 /tmp/gen.py\n",  # ENV after the instance files
        "ADD gen.py /tmp/gen.py\nRUN python3 /tmp/gen.py\n",  # ADD is not run as a step
        "COPY --chmod=755 gen.py /tmp/gen.py\n",  # a flag
        "COPY gen.py /tmp/gen.py\nUSER nobody\n",
        "COPY other.txt /tmp/\n",  # no instance file copied
    ],
)
def test_no_marker_when_the_tail_cannot_run_as_steps(tail):
    assert insert_marker("FROM a\nWORKDIR /app\n" + tail, ["gen.py"]) is None


def test_no_marker_when_the_last_head_stage_has_arg():
    assert insert_marker("FROM a\nARG N=3\nCOPY gen.py /g.py\nRUN python3 /g.py\n", ["gen.py"]) is None


def test_split_gives_the_head_and_the_steps(tmp_path):
    (tmp_path / "gen.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    text = (
        "FROM a\nWORKDIR /app\n" + MARKER + "\nCOPY gen.py data /opt/\n"
        'RUN python3 /opt/gen.py \\\n    --out /app\nRUN ["python3", "-c", "print(2)"]\nCOPY ["gen.py", "rel/g.py"]\n'
    )
    split = split_instance_steps(text, PATH, tmp_path)
    assert split is not None and split.head == "FROM a\nWORKDIR /app\n"
    copy, run, exec_form, copy2 = split.steps
    assert (copy.kind, copy.sources, copy.dest, copy.line) == ("copy", ("gen.py", "data"), "/opt/", 4)
    assert (run.kind, run.command, run.line) == ("run", "python3 /opt/gen.py  --out /app", 5)
    assert exec_form.argv == ("python3", "-c", "print(2)") and exec_form.command == ""
    assert (copy2.sources, copy2.dest, copy2.line) == (("gen.py",), "rel/g.py", 8)
    assert split_instance_steps("FROM a\nRUN true\n", PATH) is None


@pytest.mark.parametrize(
    ("tail", "line", "words"),
    [
        ("RUN true\nENV X=1\n", "line 5", "only COPY and RUN"),
        ("COPY --from=build /x /y\n", "line 4", "COPY flags"),
        ("COPY missing.py /x\n", "line 4", "not in the build context"),
        ("COPY ../secret /x\n", "line 4", "not inside the build context"),
        ("COPY *.py /x/\n", "line 4", "glob"),
        ("COPY $SRC /x\n", "line 4", "variables"),
        ("RUN <<EOF\necho hi\nEOF\n", "line 4", "here-document"),
        (f"RUN true\n{MARKER}\n", "line 5", "second"),
    ],
)
def test_what_follows_the_marker_must_be_copy_or_run(tmp_path, tail, line, words):
    (tmp_path / "gen.py").write_text("")
    with pytest.raises(InputError) as err:
        split_instance_steps(f"FROM a\nWORKDIR /app\n{MARKER}\n{tail}", PATH, tmp_path)
    assert err.value.path == str(PATH) and err.value.field == line and words in err.value.reason, err.value


def test_head_must_have_from_and_no_arg_or_shell_in_its_last_stage():
    with pytest.raises(InputError, match="no FROM"):
        split_instance_steps(f"{MARKER}\nRUN true\n", PATH)
    with pytest.raises(InputError) as err:
        split_instance_steps(f"FROM a\nSHELL [\"/bin/bash\", \"-c\"]\n{MARKER}\nRUN true\n", PATH)
    assert err.value.field == "line 2" and "SHELL" in err.value.reason
    # an ARG of an earlier stage does not reach the last one: fine
    assert split_instance_steps(f"FROM a AS b\nARG N\nFROM c\n{MARKER}\nRUN true\n", PATH) is not None


def test_env_hash_reads_the_heads_files_and_never_the_instance_files(tmp_path):
    (tmp_path / "gen.py").write_text("instance one")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "base.txt").write_text("shared")
    head = "FROM a\nCOPY lib /opt/lib\n"
    first = shared_env_hash(head, tmp_path)
    (tmp_path / "gen.py").write_text("instance two")
    assert shared_env_hash(head, tmp_path) == first
    (tmp_path / "lib" / "base.txt").write_text("shared, changed")
    assert shared_env_hash(head, tmp_path) != first
    assert shared_env_hash(head + "RUN true\n", tmp_path) != shared_env_hash(head, tmp_path)
