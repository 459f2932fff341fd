"""deploy/k8s/ checked offline: Kubernetes kinds against Kubernetes' JSON schemas, KubeRay kinds
against KubeRay's CRD schemas, and the commands the pods run against MindForge's CLI.

Kubernetes' schemas come with the PyPI package ``kubernetes-validate`` (the test extra),
strict: an unknown field is refused, as ``kubectl apply --validate=strict`` refuses it.
KubeRay's come from its CRDs (ray-project/kuberay, ``ray-operator/config/crd/bases/``,
release v1.7.0), read from :data:`KUBERAY_CRDS`; their OpenAPI v3 schemas are made
strict the same way (an object schema that lists its properties admits no others, unless
it says ``x-kubernetes-preserve-unknown-fields``). No registry this project installs from
ships those CRDs and the repository does not carry a copy, so where they are absent (CI)
the checks that need them are skipped with that reason; the pod templates inside the
RayCluster are Kubernetes' own ``PodTemplateSpec`` and are checked everywhere.
"""

from __future__ import annotations

import copy
import functools
import os
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
import yaml

from tests.conftest import REPO

K8S_DIR = REPO / "deploy" / "k8s"
#: the oldest Kubernetes release whose API the manifests are checked against
KUBERNETES_VERSION = "1.30"
#: KubeRay release whose CRDs the RayCluster and RayCronJob are checked against
KUBERAY_VERSION = "v1.7.0"
#: where the CRD files lie: ``$MINDFORGE_KUBERAY_CRDS``, or ``shared/kuberay-<version>/`` beside the checkout
KUBERAY_CRDS = Path(os.environ.get("MINDFORGE_KUBERAY_CRDS") or REPO.parent / "shared" / f"kuberay-{KUBERAY_VERSION}")
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayCronJob": "ray.io_raycronjobs.yaml"}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return found


DOCUMENTS = _documents()


def _strict(schema: Any) -> Any:
    """A copy of an OpenAPI v3 schema where objects with listed properties admit no others."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    open_ended = "additionalProperties" in out or out.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and not open_ended:
        out["additionalProperties"] = False
    return out


def _crd_missing(kind: str) -> str | None:
    """Why ``kind``'s CRD cannot be checked here (its file is absent), or None."""
    path = KUBERAY_CRDS / CRD_FILES[kind]
    if path.is_file():
        return None
    return (
        f"{path}: KubeRay's {kind} CRD is not here (ray-operator/config/crd/bases/{CRD_FILES[kind]} of "
        f"ray-project/kuberay {KUBERAY_VERSION}; point MINDFORGE_KUBERAY_CRDS at a folder holding it)"
    )


def _need_crd(kind: str) -> None:
    """Skip the calling test, with the reason, where ``kind``'s CRD is absent."""
    missing = _crd_missing(kind)
    if missing:
        pytest.skip(missing)


def _pod_templates(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``PodTemplateSpec``s inside a RayCluster: the head group's and each worker group's."""
    spec = doc.get("spec") or {}
    found = [("spec.headGroupSpec.template", (spec.get("headGroupSpec") or {}).get("template"))]
    found += [
        (f"spec.workerGroupSpecs.{i}.template", group.get("template"))
        for i, group in enumerate(spec.get("workerGroupSpecs") or [])
    ]
    return [(where, tpl) for where, tpl in found if tpl is not None]


def _k8s_refusals(doc: dict[str, Any], prefix: str = "") -> list[str]:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{prefix}{'.'.join(map(str, exc.absolute_path))}: {exc.message}"]
    return []


@functools.cache
def _crd_schema(kind: str) -> dict[str, Any]:
    path = KUBERAY_CRDS / CRD_FILES[kind]
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return _strict(version["schema"]["openAPIV3Schema"])


def refusals(doc: dict[str, Any]) -> list[str]:
    """Why the API server would refuse ``doc`` (empty when it is valid), checked offline.

    A KubeRay object's pod templates are checked as Kubernetes ``PodTemplate``s always,
    the whole object against its CRD where the CRD is here (:func:`_crd_missing`).
    """
    if doc.get("apiVersion", "").startswith("ray.io/"):
        if doc.get("apiVersion") != "ray.io/v1" or doc.get("kind") not in CRD_FILES:
            return [f"no KubeRay {doc.get('apiVersion')} {doc.get('kind')} in the checked CRDs"]
        found = []
        for where, template in _pod_templates(doc):
            wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
            found += [line.replace("template", where, 1) for line in _k8s_refusals(wrapped)]
        if _crd_missing(doc["kind"]) is None:
            validator = jsonschema.Draft4Validator(_crd_schema(doc["kind"]))
            found += [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
        return found
    return _k8s_refusals(doc)


@pytest.mark.parametrize("doc", [d for _, d in DOCUMENTS], ids=[i for i, _ in DOCUMENTS])
def test_every_manifest_is_valid(doc: dict[str, Any]) -> None:
    if doc["kind"] in CRD_FILES and not _pod_templates(doc):
        _need_crd(doc["kind"])  # nothing of it is Kubernetes' own: only its CRD can check it
    assert refusals(doc) == []


def test_the_set_is_complete() -> None:
    kinds = sorted(i.split(":")[1] for i, _ in DOCUMENTS)
    assert kinds == sorted([
        "RayCluster/mindforge", "RayCronJob/mindforge-nightly", "ConfigMap/mindforge-settings",
        "PersistentVolumeClaim/mindforge-artifacts", "Deployment/mindforge-orchestration-worker",
        "Deployment/mindforge-sandbox-worker",
    ])


def _doc(kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for _, d in DOCUMENTS if d["kind"] == kind and d["metadata"]["name"] == name]
    return copy.deepcopy(doc)


def _mutated_sandbox_worker() -> dict[str, Any]:
    doc = _doc("Deployment", "mindforge-sandbox-worker")
    doc["spec"]["template"]["spec"]["containers"][0]["envfrom"] = doc["spec"]["template"]["spec"]["containers"][0].pop(
        "envFrom"
    )
    return doc


def _mutated_cluster() -> dict[str, Any]:
    doc = _doc("RayCluster", "mindforge")
    doc["spec"]["workerGroupSpecs"][0]["replicas"] = "2"
    return doc


def _mutated_cluster_pod() -> dict[str, Any]:
    doc = _doc("RayCluster", "mindforge")
    doc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["volumes"][0]["hostpath"] = {"path": "/x"}
    return doc


def _mutated_cronjob() -> dict[str, Any]:
    doc = _doc("RayCronJob", "mindforge-nightly")
    del doc["spec"]["schedule"]
    return doc


@pytest.mark.parametrize(
    ("mutate", "why", "crd"),
    [
        (_mutated_sandbox_worker, "spec.template.spec.containers.0: Additional properties", None),
        (_mutated_cluster, "spec.workerGroupSpecs.0.replicas: '2' is not of type 'integer'", "RayCluster"),
        (_mutated_cluster_pod, "spec.workerGroupSpecs.0.template.spec.volumes.0: Additional properties", None),
        (_mutated_cronjob, ": 'schedule' is a required property", "RayCronJob"),
    ],
    ids=["unknown-container-field", "raycluster-replicas-string", "raycluster-pod-field", "cronjob-no-schedule"],
)
def test_a_mutated_manifest_is_refused(mutate, why: str, crd: str | None) -> None:
    if crd is not None:
        _need_crd(crd)
    found = refusals(mutate())
    assert any(why in line for line in found), found


def _parse_cli(argv: list[str]) -> Any:
    """Parse ``argv`` (after ``mindforge``) as the real CLI would, down to the leaf command, without running it.

    Raises:
        AssertionError: a command name the CLI lacks.
        UsageError (Typer's own copy of click's): an option or argument the command refuses.
    """
    from mindforge.cli.main import app

    command = typer.main.get_command(app)
    ctx, args = command.context_class(command, info_name="mindforge"), list(argv)
    while hasattr(command, "get_command"):  # a group (Typer's click is its own, not the click package)
        name, *args = args
        sub = command.get_command(ctx, name)
        assert sub is not None, f"no command {name!r} in {ctx.command_path}"
        command, ctx = sub, sub.context_class(sub, info_name=name, parent=ctx)
    return command.make_context(ctx.info_name, args, parent=ctx.parent)


def test_the_pods_run_real_cli_commands() -> None:
    queues = {}
    for name in ("mindforge-orchestration-worker", "mindforge-sandbox-worker"):
        [container] = _doc("Deployment", name)["spec"]["template"]["spec"]["containers"]
        assert container["command"][0] == "mindforge"
        queues[name] = _parse_cli(container["command"][1:]).params["queue"]
    # the names workers.main.build_workers knows
    assert queues == {"mindforge-orchestration-worker": ["orchestration"], "mindforge-sandbox-worker": ["sandbox"]}
    argv = shlex.split(_doc("RayCronJob", "mindforge-nightly")["spec"]["jobTemplate"]["entrypoint"])
    assert argv[0] == "mindforge"
    assert _parse_cli(argv[1:]).params == {"name": "nightly", "generations": 1, "wait": False}


def test_a_command_the_cli_lacks_is_refused() -> None:
    with pytest.raises(Exception, match="No such option: --generation"):
        _parse_cli(["lineage", "extend", "nightly", "--generation", "1"])
    with pytest.raises(AssertionError, match="no command"):
        _parse_cli(["lineage", "continue", "nightly"])


def test_the_manifests_refer_to_each_other() -> None:
    cluster = _doc("RayCluster", "mindforge")
    assert _doc("RayCronJob", "mindforge-nightly")["spec"]["jobTemplate"]["clusterSelector"] == {
        "ray.io/cluster": cluster["metadata"]["name"]
    }
    settings = _doc("ConfigMap", "mindforge-settings")["data"]
    assert settings["MINDFORGE_RAY_ADDRESS"] == f"ray://{cluster['metadata']['name']}-head-svc:10001"
    claim = _doc("PersistentVolumeClaim", "mindforge-artifacts")["metadata"]["name"]
    pods = [_doc("Deployment", n)["spec"]["template"] for n in
            ("mindforge-orchestration-worker", "mindforge-sandbox-worker")]
    pods += [cluster["spec"]["workerGroupSpecs"][0]["template"]]
    for pod in pods:
        assert {"persistentVolumeClaim": {"claimName": claim}} in [
            {k: v for k, v in vol.items() if k != "name"} for vol in pod["spec"]["volumes"]
        ]
    for name in ("mindforge-orchestration-worker", "mindforge-sandbox-worker"):
        spec = _doc("Deployment", name)["spec"]
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
