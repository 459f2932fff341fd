"""One image per family on the real Docker engine: the instance's data made when the sandbox starts.

* instances of F families (two bundled, one written here) validate, and the engine then
  holds exactly F family images for them and no image per instance;
* every bundled family's example makes the same ``/app`` tree (names, modes, owners,
  bytes) built the old way (the whole Dockerfile by ``docker build``) and the new way (the
  shared image, then the instance steps at start); so does a Dockerfile exercising every
  step form (relative and directory destinations, ``ENV``, continuations, the JSON form,
  a ``COPY`` after a ``RUN``);
* a generator that exits 1 is ``env_build_failed`` with its stderr in the detail and the
  family's ``templates/common/gen.py`` named; a family whose example fails names
  ``family.toml``'s ``example``.

Images this module builds are tagged ``mindforge-family/...`` (labels ``mindforge.family``,
``mindforge.env_hash``) or ``mindforge-task/...`` (the old way, removed at the end); the
family written here has a fresh name per run, and its image is removed too.
"""

from __future__ import annotations

import json
import shlex
import uuid
from pathlib import Path

import docker.errors
import pytest

from mindforge.agent.simple import OracleAgent
from mindforge.discovery.families import load_families, load_family
from mindforge.discovery.family_pool import materialise_instances, validate_instances
from mindforge.discovery.materialise import materialise
from mindforge.discovery.sampling import sample_instances
from mindforge.tasks.dockerfile import MARKER
from mindforge.tasks.loader import load_task
from mindforge.trials.record import FailureClass
from mindforge.trials.run import run_trial
from mindforge.trials.validate import Verdict
from tests.unit.discovery.tmp_families import GEN_PY, TEMPLATES, family_doc, write_family

pytestmark = pytest.mark.docker

#: prints /app's tree as JSON: path -> [mode, uid, gid, sha256 | "dir" | "link:<target>"]
TREE = r"""
import hashlib, json, os, stat, sys
out = {}
for root, dirs, files in os.walk(sys.argv[1]):
    for name in dirs + files:
        p = os.path.join(root, name); st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode): what = "link:" + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode): what = "dir"
        else: what = hashlib.sha256(open(p, "rb").read()).hexdigest()
        out[p] = [oct(st.st_mode), st.st_uid, st.st_gid, what]
print(json.dumps(out, sort_keys=True))
"""
#: git's index caches each file's inode and times: it differs between any two builds
UNSTABLE = ("/.git/index",)


def tree(engine, task, root: str = "/app", gone: str = "/tmp/gen.py") -> dict[str, list]:
    """The tree under ``root`` in a fresh sandbox of ``task`` (removed after), checking ``gone`` is not there."""
    with engine.start(task, run_id="test-family-images", trial_id=f"tree-{uuid.uuid4().hex[:8]}") as sb:
        res = sb.exec(f"python3 -c {shlex.quote(TREE)} {root} && test ! -e {gone}", timeout_sec=60)
        assert res.ok, res
        got = json.loads(res.stdout)
    # the listing's own exec leaves its scratch folder in /tmp while it runs
    return {k: v for k, v in got.items() if not k.endswith(UNSTABLE) and "/.mindforge-exec." not in k}


def old_way(task):
    """The same task without its instance steps: the whole Dockerfile built as one image per task."""
    return task.model_copy(update={"instance_steps": (), "shared_dockerfile": "", "env_hash": ""})


def family_images(engine, tasks) -> set[str]:
    """Ids of the engine's images labelled with one of ``tasks``' families and env hashes."""
    wanted = {(t.family, t.env_hash) for t in tasks}
    found = engine.client.api.images(filters={"label": "mindforge.family"})
    return {
        img["Id"] for img in found
        if ((img.get("Labels") or {}).get("mindforge.family"), (img.get("Labels") or {}).get("mindforge.env_hash"))
        in wanted
    }


def remove_image(engine, tag: str) -> None:
    try:
        engine.client.api.remove_image(tag, force=True)
    except docker.errors.ImageNotFound:
        pass


def test_instances_of_f_families_share_f_images(docker_engine, image_map, settings, tmp_path):
    name = f"mftest-{uuid.uuid4().hex[:8]}"
    families = {**{n: f for n, f in load_families().items() if n in ("sum-by-key", "env-isolated-run")},
                name: load_family(write_family(tmp_path / "families", name))}
    tasks = []
    for family in families.values():
        sample = sample_instances(family, 4, seed=2)
        tasks += [load_task(d) for d in materialise_instances(family, sample.instances, tmp_path / "staging")]
    try:
        results = validate_instances(tasks, docker_engine, artifact_root=settings.artifacts, image_map=image_map,
                                     workers=4, families=families)
        assert {r.task_id: r.verdict for r in results} == {t.id: Verdict.VALID for t in tasks}, [
            r.reasons for r in results if r.verdict != Verdict.VALID
        ]
        assert len(family_images(docker_engine, tasks)) == len(families) == 3
        assert len({t.run_image for t in tasks}) == 3
        for task in tasks:  # and no image per instance
            with pytest.raises(docker.errors.ImageNotFound):
                docker_engine.client.api.inspect_image(task.image_tag)
        assert all(r.timings.instance_steps_sec > 0 for v in results for r in v.trials)
        # the generator (it computes the verifier's truth) reaches the sandbox on a pipe: no process shows it
        with docker_engine.start(tasks[0], run_id="test-family-images", trial_id=f"proc-{name}") as sb:
            seen = sb.exec("cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ /tmp/gen.py 2>/dev/null", timeout_sec=30)
        assert "def generate" not in seen.stdout and "def generate" in (tasks[0].environment_dir / "gen.py").read_text()
    finally:
        remove_image(docker_engine, tasks[-1].run_image)


@pytest.mark.parametrize("name", sorted(load_families()))
def test_example_tree_is_the_same_built_old_and_new(docker_engine, image_map, tmp_path, name):
    family = load_families()[name]
    task = load_task(materialise(family.render(family.example), tmp_path, metadata={"family": name}))
    assert task.instance_steps and MARKER in task.dockerfile.read_text()
    old = old_way(task)
    try:
        docker_engine.build_image(old, image_map=image_map)
        docker_engine.build_image(task, image_map=image_map)
        new_tree, old_tree = tree(docker_engine, task), tree(docker_engine, old)
        assert new_tree == old_tree  # (script-argstat makes nothing under /app: its data is its arguments)
    finally:
        remove_image(docker_engine, old.image_tag)


STEPS_DOCKERFILE = f"""FROM mindforge/base:bookworm
WORKDIR /work
ENV STAGE=one
{MARKER}
COPY gen.py data ./
COPY gen.py /opt/
COPY gen.py /tmp
RUN python3 gen.py && \\
    echo "$STAGE $HOME $(id -u) $(pwd)" > env.txt && env | grep -v HOSTNAME | sort > allenv.txt
RUN ["sh", "-c", "echo json-form > json.txt"]
COPY data/a.txt later/
RUN cat later/a.txt >> json.txt && chmod 600 json.txt
"""


def test_every_step_form_makes_what_docker_build_makes(docker_engine, image_map, tmp_path):
    root = tmp_path / f"steps-{uuid.uuid4().hex[:8]}"
    for sub in ("environment/data", "tests"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n[environment]\nworkdir = "/elsewhere"\nenv = { SECRET = "x" }\n')
    (root / "instruction.md").write_text("Nothing.\n")
    (root / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (root / "environment" / "Dockerfile").write_text(STEPS_DOCKERFILE)
    (root / "environment" / "gen.py").write_text("open('gen.txt', 'w').write('made\\n')\n")
    (root / "environment" / "data" / "a.txt").write_text("a\n")
    (root / "environment" / "data" / "run.sh").write_text("#!/bin/sh\n")
    (root / "environment" / "data" / "run.sh").chmod(0o750)
    task = load_task(root)
    assert [s.kind for s in task.instance_steps] == ["copy", "copy", "copy", "run", "run", "copy", "run"]
    old = old_way(task)
    try:
        docker_engine.build_image(old, image_map=image_map)
        docker_engine.build_image(task, image_map=image_map)
        for where in ("/work", "/opt", "/tmp"):
            assert tree(docker_engine, task, where, "/nothing") == tree(docker_engine, old, where, "/nothing"), where
        new_work = tree(docker_engine, task, "/work", "/nothing")
        assert {"/work/gen.txt", "/work/a.txt", "/work/run.sh", "/work/later/a.txt"} <= set(new_work)
    finally:
        remove_image(docker_engine, old.image_tag)
        remove_image(docker_engine, task.run_image)


FALLBACK_HEADS = {
    # the first process runs as nobody: it cannot write root's files, so the copies go in by the archive API
    "user-nobody": "RUN mkdir /w && chown nobody /w\nWORKDIR /w\nUSER nobody\n",
    # no tar in the image to unpack copies sent on stdin: the archive API again
    "no-tar": "RUN rm /usr/bin/tar\nWORKDIR /w\n",
}


@pytest.mark.parametrize("head", sorted(FALLBACK_HEADS))
def test_copies_without_tar_or_root_go_in_by_the_archive_api(docker_engine, image_map, tmp_path, head):
    root = tmp_path / f"{head}-{uuid.uuid4().hex[:8]}"
    for sub in ("environment", "tests"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n')
    (root / "instruction.md").write_text("Nothing.\n")
    (root / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (root / "environment" / "Dockerfile").write_text(
        f"FROM mindforge/base:bookworm\n{FALLBACK_HEADS[head]}{MARKER}\nCOPY gen.py ./\n"
        "RUN python3 gen.py && id -u > uid.txt\n"
    )
    (root / "environment" / "gen.py").write_text("open('gen.txt', 'w').write('made\\n')\n")
    task = load_task(root)
    old = old_way(task)
    try:
        docker_engine.build_image(old, image_map=image_map)
        docker_engine.build_image(task, image_map=image_map)
        config = docker_engine._image_config(task.run_image)
        assert (config.root, config.tar) == ((False, True) if head == "user-nobody" else (True, False))
        new_tree = tree(docker_engine, task, "/w", "/nothing")
        assert new_tree == tree(docker_engine, old, "/w", "/nothing") and "/w/uid.txt" in new_tree
    finally:
        remove_image(docker_engine, old.image_tag)
        remove_image(docker_engine, task.run_image)


def test_a_failing_generator_is_env_build_failed_naming_the_generator(docker_engine, image_map, settings, tmp_path):
    name = f"mftest-{uuid.uuid4().hex[:8]}"
    main = 'if __name__ == "__main__":'
    broken = GEN_PY.replace(main, f'{main}\n    sys.exit("generator exploded")')
    family = load_family(write_family(tmp_path, name, templates={**TEMPLATES, "common/gen.py": broken}))
    task = load_task(materialise_instances(family, sample_instances(family, 1, seed=0).instances, tmp_path / "s")[0])
    try:
        rec = run_trial(task, OracleAgent(), docker_engine, run_id="test-family-images", trial_id=f"gen-{name}",
                        artifact_root=settings.artifacts, image_map=image_map)
        assert rec.failure_class == FailureClass.ENV_BUILD_FAILED and rec.reward is None
        assert "generator exploded" in rec.failure_detail and "line 5" in rec.failure_detail, rec.failure_detail
        assert "generator exploded" in Path(rec.artifacts["instance_log"]).read_text()
        (result,) = validate_instances([task], docker_engine, artifact_root=settings.artifacts, image_map=image_map,
                                       families={name: family})
        assert result.verdict == Verdict.INVALID
        assert f"{name}/templates/common/gen.py: the generator failed" in result.reasons[0], result.reasons
        assert "generator exploded" in result.reasons[0]
    finally:
        remove_image(docker_engine, task.run_image)


def test_a_family_whose_example_fails_names_the_example(docker_engine, image_map, settings, tmp_path):
    name = f"mftest-{uuid.uuid4().hex[:8]}"
    wrong = {**TEMPLATES, "solution/solve.sh": "#!/usr/bin/env bash\necho 0 > /app/count.txt\n"}
    family = load_family(write_family(tmp_path, name, family_doc(name), wrong))
    task = load_task(materialise(family.render(family.example), tmp_path,
                                 metadata={"family": name, "family_params": family.example}))
    try:
        (result,) = validate_instances([task], docker_engine, artifact_root=settings.artifacts, image_map=image_map,
                                       families={name: family})
        assert result.verdict == Verdict.BROKEN
        assert f"{name}/family.toml: example: the family's example does not validate" in result.reasons[0]
    finally:
        remove_image(docker_engine, task.run_image)
