"""The image map: loading, layering, reference normal forms and Dockerfile FROM rewriting."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.errors import InputError
from mindforge.settings import REPO_ROOT, Settings
from mindforge.tasks.image_map import (
    ImageMap,
    default_image_map,
    load_image_map,
    normalize_ref,
)

BASE = "mindforge/base:bookworm"
REPO_MAP = REPO_ROOT / "deploy" / "image_map.toml"


@pytest.fixture(scope="module")
def repo_map() -> ImageMap:
    return load_image_map(REPO_MAP)


def small_map(tmp_path: Path) -> ImageMap:
    path = tmp_path / "map.toml"
    path.write_text(
        '[map]\n"ubuntu:24.04" = "local/ubuntu:24"\n"docker.io/library/alpine:3" = "local/alpine"\n'
        '[[pattern]]\nmatch = "python:3.1[0-9]*"\nimage = "local/py3"\n'
        '[[pattern]]\nmatch = "python:*"\nimage = "local/py-any"\n'
    )
    return load_image_map(path)


@pytest.mark.parametrize(
    ("ref", "normal"),
    [
        ("ubuntu", "ubuntu:latest"),
        ("ubuntu:24.04", "ubuntu:24.04"),
        ("docker.io/library/ubuntu:24.04", "ubuntu:24.04"),
        ("index.docker.io/library/python", "python:latest"),
        ("docker.io/foo/bar:1", "foo/bar:1"),
        ("ghcr.io/org/img:tag", "ghcr.io/org/img:tag"),
        ("localhost:5000/img", "localhost:5000/img:latest"),
        ("python:3.12@sha256:abcd", "python:3.12@sha256:abcd"),
        ("ubuntu@sha256:abcd", "ubuntu@sha256:abcd"),
    ],
)
def test_normalize_ref(ref: str, normal: str) -> None:
    assert normalize_ref(ref) == normal


@pytest.mark.parametrize(
    "ref",
    [
        "ubuntu:24.04",
        "ubuntu:22.04",
        "ubuntu:20.04",
        "ubuntu",
        "docker.io/library/ubuntu:noble",
        "debian:bookworm",
        "debian:bookworm-slim",
        "debian:bookworm-20240110",
        "debian:bullseye-slim",
        "python:3.13",
        "python:3.11-slim",
        "python:3.12-slim-bookworm",
        "python:3.13-slim-bookworm@sha256:0123abcd",
        "python:3",
        "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
        "ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest",
        "ghcr.io/laude-institute/t-bench/python-3-13:20250620",
        "ghcr.io/laude-institute/t-bench/some-future-base:1",
    ],
)
def test_repo_map_covers_public_bases(repo_map: ImageMap, ref: str) -> None:
    assert repo_map.resolve(ref) == BASE


@pytest.mark.parametrize(
    "ref", ["alpine:3.19", "node:20", "rust:1.80", "ghcr.io/other/ubuntu:24.04", "nvidia/cuda:12.4"]
)
def test_repo_map_leaves_others_alone(repo_map: ImageMap, ref: str) -> None:
    assert repo_map.resolve(ref) is None


def test_exact_before_pattern_and_patterns_in_order(tmp_path: Path) -> None:
    m = small_map(tmp_path)
    assert m.resolve("ubuntu:24.04") == "local/ubuntu:24"
    assert m.resolve("docker.io/library/ubuntu:24.04") == "local/ubuntu:24"
    assert m.resolve("alpine:3") == "local/alpine"  # key was written in long form
    assert m.resolve("python:3.12-slim") == "local/py3"
    assert m.resolve("python:2.7") == "local/py-any"
    assert m.resolve("ubuntu:22.04") is None


def test_user_file_layers_on_top(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        '[map]\n"python:3.12-slim" = "mine/py312"\n'
        '[[pattern]]\nmatch = "ubuntu:*"\nimage = "mine/ubuntu"\n'
    )
    m = load_image_map(REPO_MAP, user)
    assert m.resolve("python:3.12-slim") == "mine/py312"
    # A user pattern beats a repo exact entry: the user's layer is consulted first.
    assert m.resolve("ubuntu:24.04") == "mine/ubuntu"
    assert m.resolve("python:3.11") == BASE
    assert [layer.source for layer in m.layers] == [str(user), str(REPO_MAP)]


def test_default_map_reads_data_dir_file(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, image_map_file=REPO_MAP)
    assert default_image_map(settings).resolve("node:20") is None
    (tmp_path / "image_map.toml").write_text('[map]\n"node:20" = "local/node"\n')
    m = default_image_map(settings)
    assert m.resolve("node:20") == "local/node"
    assert m.resolve("ubuntu:24.04") == BASE


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ('[map]\n"a" = 3\n', "map.a", "valid string"),
        ('[map]\n"a" = "has space"\n', "map.a", "pattern"),
        ('[map]\nubuntu.x = "b"\n', "map.ubuntu", "valid string"),
        ('[[pattern]]\nmatch = "x*"\n', "pattern[0].image", "Field required"),
        ('[[pattern]]\nmatch = ""\nimage = "b"\n', "pattern[0].match", "at least 1"),
        ('[maps]\n"a" = "b"\n', "maps", "Extra inputs"),
        ('[map\n', "", "malformed TOML at line 1"),
    ],
)
def test_bad_map_file(tmp_path: Path, text: str, field: str, reason: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_image_map(path)
    assert info.value.path == str(path)
    assert info.value.field == field
    assert reason in info.value.reason


def test_missing_map_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing file"):
        load_image_map(REPO_MAP, tmp_path / "absent.toml")


# --------------------------------------------------------------------------- rewriting


def test_rewrite_simple(repo_map: ImageMap) -> None:
    text, subs = repo_map.rewrite_dockerfile("FROM ubuntu:24.04\nRUN apt-get update\n")
    assert text == f"FROM {BASE}\nRUN apt-get update\n"
    assert subs == [("ubuntu:24.04", BASE)]


def test_rewrite_multi_stage_keeps_as_names_and_stage_refs(tmp_path: Path) -> None:
    m = small_map(tmp_path)
    dockerfile = (
        "# syntax=docker/dockerfile:1\n"
        "from --platform=linux/amd64 python:3.12-slim AS Builder\n"
        "RUN pip wheel -w /w .\n"
        "FROM builder AS tester\n"
        "FROM ubuntu:24.04 as final\n"
        "COPY --from=builder /w /w\n"
        "FROM tester\n"
    )
    text, subs = m.rewrite_dockerfile(dockerfile)
    assert text.splitlines() == [
        "# syntax=docker/dockerfile:1",
        "from local/py3 AS Builder",
        "RUN pip wheel -w /w .",
        "FROM builder AS tester",
        "FROM local/ubuntu:24 as final",
        "COPY --from=builder /w /w",
        "FROM tester",
    ]
    assert subs == [("python:3.12-slim", "local/py3"), ("ubuntu:24.04", "local/ubuntu:24")]


def test_rewrite_stage_name_only_after_declared(tmp_path: Path) -> None:
    m = small_map(tmp_path)
    # A FROM naming a stage declared *later* still pulls an image of that name.
    dockerfile = "FROM ubuntu AS first\nFROM first\nFROM ubuntu:24.04 AS ubuntu\nFROM ubuntu\n"
    m = m.merged(load_image_map_text(tmp_path, '[map]\n"ubuntu" = "local/ubuntu-latest"\n'))
    text, subs = m.rewrite_dockerfile(dockerfile)
    assert text == (
        "FROM local/ubuntu-latest AS first\nFROM first\n"
        "FROM local/ubuntu:24 AS ubuntu\nFROM ubuntu\n"
    )
    assert subs == [("ubuntu", "local/ubuntu-latest"), ("ubuntu:24.04", "local/ubuntu:24")]


def load_image_map_text(tmp_path: Path, text: str) -> ImageMap:
    path = tmp_path / "extra.toml"
    path.write_text(text)
    return load_image_map(path)


def test_rewrite_digest_and_platform(repo_map: ImageMap) -> None:
    text, subs = repo_map.rewrite_dockerfile(
        "FROM --platform=$BUILDPLATFORM python:3.13-slim-bookworm@sha256:deadbeef AS b\n"
    )
    assert text == f"FROM {BASE} AS b\n"
    assert subs == [("python:3.13-slim-bookworm@sha256:deadbeef", BASE)]


def test_rewrite_leaves_unmapped_and_scratch_alone(repo_map: ImageMap) -> None:
    original = "FROM alpine:3.19 AS a\nFROM scratch\nCOPY --from=a /x /x\n"
    text, subs = repo_map.rewrite_dockerfile(original)
    assert text == original
    assert subs == []


def test_rewrite_expands_global_args(repo_map: ImageMap) -> None:
    dockerfile = (
        "ARG BASE=ubuntu:22.04\nARG UNSET\n"
        "FROM ${BASE}\nFROM $UNSET\nFROM ${UNSET:-python:3.12}\n"
        "ARG BASE=alpine\nFROM $BASE\n"
    )
    text, subs = repo_map.rewrite_dockerfile(dockerfile)
    assert text.splitlines()[2:] == [
        f"FROM {BASE}", "FROM $UNSET", f"FROM {BASE}", "ARG BASE=alpine", f"FROM {BASE}"
    ]
    assert subs == [("ubuntu:22.04", BASE), ("python:3.12", BASE), ("ubuntu:22.04", BASE)]


def test_rewrite_skips_continuations_and_heredocs(repo_map: ImageMap) -> None:
    dockerfile = (
        "FROM python:3.12\r\n"
        "RUN python - <<'EOF'\r\n"
        "from ubuntu:24.04 import nothing\r\n"
        "EOF\r\n"
        "RUN echo a \\\r\n"
        "# a comment inside the continuation\r\n"
        "from debian:bookworm\r\n"
        "RUN <<-END\r\n"
        "\tFROM ubuntu:22.04\r\n"
        "\tEND\r\n"
        "FROM ubuntu:22.04"
    )
    text, subs = repo_map.rewrite_dockerfile(dockerfile)
    expected = dockerfile.replace("FROM python:3.12", f"FROM {BASE}").replace(
        "\tEND\r\nFROM ubuntu:22.04", f"\tEND\r\nFROM {BASE}"
    )
    assert text == expected
    assert subs == [("python:3.12", BASE), ("ubuntu:22.04", BASE)]


def test_rewrite_escape_directive(repo_map: ImageMap) -> None:
    dockerfile = "# escape=`\nFROM ubuntu:24.04\nRUN echo a `\nfrom ubuntu:22.04\n"
    text, subs = repo_map.rewrite_dockerfile(dockerfile)
    assert text == f"# escape=`\nFROM {BASE}\nRUN echo a `\nfrom ubuntu:22.04\n"
    assert subs == [("ubuntu:24.04", BASE)]
