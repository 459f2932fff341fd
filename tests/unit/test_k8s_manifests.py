"""deploy/k8s/ checked offline: Kubernetes kinds against Kubernetes' JSON schemas, KubeRay kinds
against KubeRay's CRD schemas, the commands the pods run against MindForge's CLI, and what
a schema cannot catch against what KubeRay and MindForge do with the manifests.

Kubernetes' schemas come with the PyPI package ``kubernetes-validate`` (the test extra),
strict: an unknown field is refused, as ``kubectl apply --validate=strict`` refuses it.
KubeRay's come from its CRDs (ray-project/kuberay, ``ray-operator/config/crd/bases/``,
release v1.7.0), vendored unmodified under :data:`KUBERAY_CRDS` with KubeRay's licence;
their OpenAPI v3 schemas are made strict the same way (an object schema that lists its
properties admits no others, unless it says ``x-kubernetes-preserve-unknown-fields``).
Every check runs everywhere, CI included; none skips.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.metadata
import re
import shlex
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
#: the vendored CRDs (tests/fixtures/kuberay-v1.7.0/README.md says where they come from)
KUBERAY_CRDS = REPO / "tests" / "fixtures" / f"kuberay-{KUBERAY_VERSION}"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayCronJob": "ray.io_raycronjobs.yaml"}
#: their sha256 at KubeRay's tag v1.7.0 (commit 59d663aeec13760646da3db9c1cf8cfe883e30b7)
CRD_SHA256 = {
    "ray.io_rayclusters.yaml": "c44704442eef0c6721ad40c1d66782c8bd3fdab9d3344306a5820910a679baa1",
    "ray.io_raycronjobs.yaml": "31c2c753bba01f7e8e89cb8e8c504131b58ee42090ca536d87f5ac27605a568e",
}


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

    A KubeRay object's pod templates are checked as Kubernetes ``PodTemplate``s, the whole
    object against its CRD.
    """
    if doc.get("apiVersion", "").startswith("ray.io/"):
        if doc.get("apiVersion") != "ray.io/v1" or doc.get("kind") not in CRD_FILES:
            return [f"no KubeRay {doc.get('apiVersion')} {doc.get('kind')} in the checked CRDs"]
        found = []
        for where, template in _pod_templates(doc):
            wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
            found += [line.replace("template", where, 1) for line in _k8s_refusals(wrapped)]
        validator = jsonschema.Draft4Validator(_crd_schema(doc["kind"]))
        found += [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
        return found
    return _k8s_refusals(doc)


def test_the_vendored_crds_are_kuberays_own() -> None:
    for name, digest in CRD_SHA256.items():
        assert hashlib.sha256((KUBERAY_CRDS / name).read_bytes()).hexdigest() == digest, name
    assert "Apache License" in (KUBERAY_CRDS / "LICENSE").read_text()


@pytest.mark.parametrize("doc", [d for _, d in DOCUMENTS], ids=[i for i, _ in DOCUMENTS])
def test_every_manifest_is_valid(doc: dict[str, Any]) -> None:
    assert refusals(doc) == []


def test_the_set_is_complete() -> None:
    kinds = sorted(i.split(":")[1] for i, _ in DOCUMENTS)
    assert kinds == sorted([
        "RayCluster/mindforge", "RayCronJob/mindforge-nightly", "ConfigMap/mindforge-settings",
        "PersistentVolumeClaim/mindforge-artifacts", "Deployment/mindforge-orchestration-worker",
        "Deployment/mindforge-sandbox-worker", "Service/mindforge-redis", "PersistentVolumeClaim/mindforge-redis",
        "Deployment/mindforge-redis",
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


def _mutated_cluster_ft() -> dict[str, Any]:
    doc = _doc("RayCluster", "mindforge")
    doc["spec"]["gcsFaultToleranceOptions"]["redisPassword"] = "plain"
    return doc


def _mutated_cronjob() -> dict[str, Any]:
    doc = _doc("RayCronJob", "mindforge-nightly")
    del doc["spec"]["schedule"]
    return doc


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (_mutated_sandbox_worker, "spec.template.spec.containers.0: Additional properties"),
        (_mutated_cluster, "spec.workerGroupSpecs.0.replicas: '2' is not of type 'integer'"),
        (_mutated_cluster_pod, "spec.workerGroupSpecs.0.template.spec.volumes.0: Additional properties"),
        (_mutated_cronjob, ": 'schedule' is a required property"),
        (_mutated_cluster_ft, "spec.gcsFaultToleranceOptions.redisPassword: 'plain' is not of type 'object'"),
    ],
    ids=["unknown-container-field", "raycluster-replicas-string", "raycluster-pod-field", "cronjob-no-schedule",
         "raycluster-redis-password-inline"],
)
def test_a_mutated_manifest_is_refused(mutate, why: str) -> None:
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


# ---------------------------------------------------------------- what a schema cannot catch


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return pod["spec"]["containers"]


def ray_cpus(group: dict[str, Any]) -> float:
    """The CPUs a KubeRay group's Ray node offers, as KubeRay v1.7.0 decides them.

    ``resources.CPU``, else ``rayStartParams["num-cpus"]``, else the Ray container's CPU
    limit (then its request): ``updateRayStartParamsResources`` and the num-cpus default of
    ``ray-operator/controllers/ray/common/pod.go``.
    """
    if "CPU" in (group.get("resources") or {}):
        return float(group["resources"]["CPU"])
    if "num-cpus" in (group.get("rayStartParams") or {}):
        return float(group["rayStartParams"]["num-cpus"])
    limits = _containers(group["template"])[0].get("resources") or {}
    cpu = str((limits.get("limits") or {}).get("cpu") or (limits.get("requests") or {}).get("cpu") or "0")
    return float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)


def test_the_head_takes_no_trial_and_trials_ask_for_the_sandbox_slots_only_workers_offer() -> None:
    from mindforge.settings import Settings

    spec = _doc("RayCluster", "mindforge")["spec"]
    head, [sandbox] = spec["headGroupSpec"], spec["workerGroupSpecs"]
    assert ray_cpus(head) == 0  # without it KubeRay gives the head its CPU limit, and trials land there
    assert "sandbox" not in (head.get("resources") or {})
    assert float(sandbox["resources"]["sandbox"]) >= 1 and ray_cpus(sandbox) > 0
    for group in (head, sandbox):  # KubeRay refuses a group that sets both (validateRayGroupResources)
        starts = group.get("rayStartParams") or {}
        assert not (group.get("resources") and {"num-cpus", "num-gpus", "memory", "resources"} & starts.keys())
    # the workers' settings make every trial ask for a slot (workers.trial_activities.run_trial_ref)
    env = _doc("ConfigMap", "mindforge-settings")["data"]
    cpus = {"trial_cpus": env["MINDFORGE_TRIAL_CPUS"]} if "MINDFORGE_TRIAL_CPUS" in env else {}
    settings = Settings(trial_sandboxes=env["MINDFORGE_TRIAL_SANDBOXES"], **cpus)
    assert 1 <= settings.trial_sandboxes <= float(sandbox["resources"]["sandbox"])
    # a sandbox pod's slots fit its CPUs at the trials' CPU request
    assert float(sandbox["resources"]["sandbox"]) * settings.trial_cpus <= ray_cpus(sandbox)


def _pinned_ray() -> str:
    text = (REPO / "deploy" / "constraints.txt").read_text()
    [pin] = re.findall(r"^ray==(\S+)$", text, flags=re.M)
    return pin


def test_ray_version_is_the_images_and_probes_need_no_tool_in_it() -> None:
    cluster = _doc("RayCluster", "mindforge")
    version = cluster["spec"]["rayVersion"]
    # the worker image installs this venv's Ray, which deploy/constraints.txt pins
    assert version == _pinned_ray() == importlib.metadata.version("ray")
    # KubeRay v1.7.0 (supportsUnifiedHealthCheck): from Ray 2.53.0 its probes are HTTP GETs of the
    # dashboard agent's /api/healthz; older or unset, `wget` commands the image does not have
    assert tuple(int(p) for p in version.split(".")[:2]) >= (2, 53)
    pods = [g["template"] for g in [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]]
    workers = ("mindforge-orchestration-worker", "mindforge-sandbox-worker")
    pods += [_doc("Deployment", n)["spec"]["template"] for n in workers]
    for pod in pods:
        for container in _containers(pod):
            assert container["image"].startswith("mindforge/worker:") and container["imagePullPolicy"] == "IfNotPresent"
            for probe in ("livenessProbe", "readinessProbe"):
                assert "exec" not in (container.get(probe) or {})  # nothing that needs a tool in the image


def test_autoscaling_is_on_with_bounds_that_hold() -> None:
    spec = _doc("RayCluster", "mindforge")["spec"]
    assert spec["enableInTreeAutoscaling"] is True  # without it minReplicas/maxReplicas do nothing
    for group in spec["workerGroupSpecs"]:
        assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    assert spec["autoscalerOptions"]["idleTimeoutSeconds"] > 0


def test_the_head_keeps_its_state_in_the_redis_of_the_set() -> None:
    ft = _doc("RayCluster", "mindforge")["spec"]["gcsFaultToleranceOptions"]
    service = _doc("Service", "mindforge-redis")
    host, port = ft["redisAddress"].split(":")
    assert host == service["metadata"]["name"] and int(port) in [p["port"] for p in service["spec"]["ports"]]
    [redis] = _containers(_doc("Deployment", "mindforge-redis")["spec"]["template"])
    [password_env] = [e for e in redis["env"] if e["name"] == "REDIS_PASSWORD"]
    assert ft["redisPassword"]["valueFrom"] == password_env["valueFrom"]  # the same Secret on both sides
    assert "$(REDIS_PASSWORD)" in redis["args"]
    labels = _doc("Deployment", "mindforge-redis")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_secrets_reach_pods_as_files_never_as_settings_in_the_environment() -> None:
    from mindforge.settings import Settings

    settings_env = _doc("ConfigMap", "mindforge-settings")["data"]
    Settings(**{k.removeprefix("MINDFORGE_").lower(): v for k, v in settings_env.items()})  # every key is a setting
    cluster = _doc("RayCluster", "mindforge")["spec"]
    pods = {"head": cluster["headGroupSpec"]["template"], "sandbox": cluster["workerGroupSpecs"][0]["template"]}
    pods |= {n: _doc("Deployment", n)["spec"]["template"] for n in
             ("mindforge-orchestration-worker", "mindforge-sandbox-worker")}
    files = [v for k, v in settings_env.items() if k.endswith("_FILE")]
    for name, pod in pods.items():
        for container in _containers(pod):
            assert not [e for e in container.get("envFrom") or [] if "secretRef" in e], name
            secret_env = [e["name"] for e in container.get("env") or [] if "secretKeyRef" in e.get("valueFrom", {})]
            assert not [e for e in secret_env if e.startswith("MINDFORGE_")], name  # Ray jobs could carry those
            if {"configMapRef": {"name": "mindforge-settings"}} in (container.get("envFrom") or []):
                mounts = [m["mountPath"] for m in container.get("volumeMounts") or []]
                assert all(any(f.startswith(m + "/") for m in mounts) for f in files), (name, files)
