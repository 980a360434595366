"""The example overlay, rendered as `kubectl apply -k` would apply it, deploys safely (issue 35).

`kubectl kustomize compose/k8s/overlays/example` (its secrets.env from secrets.env.example) must
give objects that are valid against the Kubernetes and KEDA schemas and that:
- name in each KEDA TriggerAuthentication a Secret the render has (the generator hashes names);
- have a PodDisruptionBudget per Deployment that selects its pods and lets a drain through;
- run every container (init containers and the Job's too) hardened: read-only root filesystem,
  no privilege escalation, every capability dropped, seccomp RuntimeDefault, non-root; the paths
  the image writes (/tmp, VAR_DIR) mounted from emptyDir volumes;
- start each process of the fleet (workers, scheduler) after an init container running
  `fleet db wait` with the same image and settings;
- name the migration Job per release (two tags, two Jobs; the same release twice, one Job);
- scale each worker on the backlog the scheduler serves (which honours BROKER_NAMESPACE and reads
  0 while the queue is paused), through the scheduler's Service in the rendered namespace;
- use no image without a tag or on `latest`.
The manifests as files (commands, ports, plan rows): tests/unit/test_k8s.py; the backlog against
a real send and pause: tests/integration/test_k8s_scaling.py.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml

from shared.launcher import plan
from tests.unit.test_k8s import K8S, KEDA, KUBERNETES

OVERLAY = Path("overlays") / "example"
FLEET = set(plan.names())  # the workers and the scheduler
ROOT = K8S.parents[1]


def image_var_dir() -> str:
    """VAR_DIR as the image sets it (the Dockerfile's `ENV VAR_DIR=...`)."""
    (line,) = [
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if "VAR_DIR=" in line
    ]
    return line.split("VAR_DIR=", 1)[1].split()[0]


# Where the image writes: temporary files (tempfile, tesseract, XLSX, XDG_CACHE_HOME) and VAR_DIR.
WRITABLE = {"/tmp", image_var_dir()}


def kustomize() -> list[str]:
    for tool in (["kubectl", "kustomize"], ["kustomize", "build"]):
        if shutil.which(tool[0]):
            return tool
    pytest.fail("kubectl (1.27 or later, with kustomize v5) is needed to render compose/k8s")


def render_tree(
    tree: Path, *, tag: str | None = None, digest: str | None = None
) -> list[dict[str, Any]]:
    """`kubectl kustomize` of a copy of compose/k8s whose overlay's secrets.env is the example's,
    and whose image is `tag` / `digest` when given (a release)."""
    overlay = tree / OVERLAY
    shutil.copy(overlay / "secrets.env.example", overlay / "secrets.env")
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    if tag is not None:
        image["newTag"] = tag
    if digest is not None:
        image["digest"] = digest
    if tag is not None or digest is not None:
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    done = subprocess.run(
        [*kustomize(), str(overlay)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render(tmp: Path, **release: str) -> list[dict[str, Any]]:
    tree = tmp / "k8s"
    shutil.copytree(K8S, tree)
    return render_tree(tree, **release)


@cache
def rendered() -> tuple[dict[str, Any], ...]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return tuple(render(Path(tmp)))


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in rendered() if doc["kind"] == kind}


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ("Deployment", "Job"):
        for name, obj in of_kind(kind).items():
            yield f"{kind}/{name}", obj["spec"]["template"]["spec"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_every_rendered_object_is_valid_against_its_schema() -> None:
    for doc in rendered():
        if doc["apiVersion"].startswith("keda.sh/"):
            jsonschema.validate(doc, KEDA[doc["kind"]])
        else:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_each_keda_trigger_authentication_names_a_secret_of_the_render() -> None:
    secrets = set(of_kind("Secret"))
    auths = of_kind("TriggerAuthentication")
    assert auths
    for name, auth in auths.items():
        for ref in auth["spec"]["secretTargetRef"]:
            assert ref["name"] in secrets, f"{name} names Secret {ref['name']}; rendered: {secrets}"


def test_each_deployment_has_a_disruption_budget_that_selects_its_pods_and_lets_a_drain_through() -> (
    None
):
    budgets = list(of_kind("PodDisruptionBudget").values())
    for name, deployment in of_kind("Deployment").items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        mine = [
            b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(mine) == 1, f"Deployment {name}: {len(mine)} PodDisruptionBudgets select it"
        (budget,) = mine
        assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]
        spec = budget["spec"]
        replicas = deployment["spec"].get("replicas", 1)
        # A budget that allows no eviction blocks every node drain.
        assert spec.get("maxUnavailable", 0) >= 1 or spec.get("minAvailable", replicas) < replicas


def test_every_container_runs_hardened_with_emptydirs_where_the_image_writes() -> None:
    for where, pod in pod_specs():
        pod_context = pod.get("securityContext", {})
        emptydirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
        for container in containers(pod):
            what = f"{where} container {container['name']}"
            context = container.get("securityContext", {})
            assert context.get("readOnlyRootFilesystem") is True, what
            assert context.get("allowPrivilegeEscalation") is False, what
            assert "ALL" in context.get("capabilities", {}).get("drop", []), what
            seccomp = context.get("seccompProfile") or pod_context.get("seccompProfile") or {}
            assert seccomp.get("type") == "RuntimeDefault", what
            assert context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True, what
            mounted = {
                m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] in emptydirs
            }
            assert "/tmp" in mounted, f"{what}: /tmp is not a writable emptyDir"
            if container["name"] != "migrate":
                assert mounted >= WRITABLE, f"{what}: writable {mounted}, needs {WRITABLE}"


def test_each_process_of_the_fleet_waits_for_the_schema_before_it_starts() -> None:
    deployments = of_kind("Deployment")
    assert set(deployments) >= FLEET
    for name in FLEET:
        pod = deployments[name]["spec"]["template"]["spec"]
        (main,) = pod["containers"]
        waits = [
            c for c in pod.get("initContainers", []) if c["command"][:3] == ["fleet", "db", "wait"]
        ]
        assert len(waits) == 1, f"{name}: no init container runs `fleet db wait`"
        (wait,) = waits
        assert wait["image"] == main["image"]  # the release's migration scripts
        assert wait["envFrom"] == main["envFrom"]  # its DATABASE_URL


def test_the_migration_job_is_named_per_release_and_a_release_applies_twice_unchanged(
    tmp_path: Path,
) -> None:
    def job_names(**release: str) -> list[str]:
        tree = tmp_path / str(len(list(tmp_path.iterdir())))
        tree.mkdir()
        return [d["metadata"]["name"] for d in render(tree, **release) if d["kind"] == "Job"]

    (first,) = job_names(tag="1.4.0")
    (second,) = job_names(tag="1.5.0")
    assert first != second and first.endswith("1.4.0") and second.endswith("1.5.0")
    assert job_names(tag="1.5.0") == [second]  # the same release: the same Job, nothing to apply
    pinned = "sha256:" + "ab" * 32
    (with_digest,) = job_names(tag="1.5.0", digest=pinned)
    assert with_digest == second  # a pinned digest keeps the release's name (and a valid one)
    assert len(with_digest) <= 63  # the Job's name is its pods' `job-name` label


def test_each_worker_scales_on_the_fleets_backlog_through_the_schedulers_service() -> None:
    services = of_kind("Service")
    auths = of_kind("TriggerAuthentication")
    workers = {p.name: p for p in plan.workers()}
    scaled = of_kind("ScaledObject")
    assert set(scaled) == set(workers)
    for name, obj in scaled.items():
        (trigger,) = obj["spec"]["triggers"]
        # A list-length trigger (`redis`) reads a key that ignores BROKER_NAMESPACE and keeps
        # growing while the queue is paused: KEDA would scale a paused worker to its maximum.
        assert trigger["type"] == "metrics-api", name
        meta = trigger["metadata"]
        url = urlsplit(meta["url"])
        host, namespace, *_ = (url.hostname or "").split(".")
        service = services[host]
        assert namespace == service["metadata"]["namespace"] == obj["metadata"]["namespace"]
        assert (url.port or 80) in {p["port"] for p in service["spec"]["ports"]}
        scheduler = of_kind("Deployment")["scheduler"]
        assert service["spec"]["selector"].items() <= (
            scheduler["spec"]["template"]["metadata"]["labels"].items()
        )
        queue = name.removeprefix("worker-")
        assert url.path == f"/queues/{queue}/backlog"
        assert meta["valueLocation"] == "backlog" and int(meta["targetValue"]) >= 1
        assert meta["authMode"] == "bearer"
        auth = auths[trigger["authenticationRef"]["name"]]
        assert {r["parameter"]: r["key"] for r in auth["spec"]["secretTargetRef"]} == {
            "token": "METRICS_TOKEN"
        }


def test_no_rendered_image_is_untagged_or_latest() -> None:
    for where, pod in pod_specs():
        for container in containers(pod):
            image = container["image"]
            name, _, tag = image.split("@", 1)[0].rpartition(":")
            assert name and "/" not in tag and tag != "latest", f"{where}: image {image}"
