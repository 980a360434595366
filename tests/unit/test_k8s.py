"""compose/k8s/ runs each process exactly as the launcher's plan does, and every manifest is valid.

The built-in kinds are validated against the Kubernetes schemas the `kubernetes-validate` package
ships; the KEDA kinds against tests/contracts/k8s/keda.json. Each Deployment must carry the command
and environment of its plan row (what `make run-worker-*` executes), probes on that row's health
port, and a termination grace longer than SHUTDOWN_GRACE_MS; each worker has a ScaledObject on the
Redis list that really holds its queue (checked against a real send:
tests/integration/test_k8s_scaling.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from shared.config import Settings
from shared.jobs import catalog
from shared.launcher import plan
from shared.launcher.plan import extra_spec, find_extra, lookup
from tests.unit.test_compose import normalised, plan_settings  # noqa: F401  (fixture)

NAMES = plan.names()
WORKERS = [(p.name, p.module) for p in plan.workers()]
PRODUCT_API = "product-api"
CONSOLE = plan.CONSOLE.name


def product_api_spec(env: dict[str, str]) -> plan.ProcessSpec:
    spec = extra_spec(find_extra(PRODUCT_API), env)
    assert spec is not None
    return spec


def console_spec(env: dict[str, str]) -> plan.ProcessSpec:
    spec = extra_spec(plan.CONSOLE, env)
    assert spec is not None
    return spec


ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "compose" / "k8s"
KUBERNETES = "1.30.0"
KEDA = json.loads((ROOT / "tests" / "contracts" / "k8s" / "keda.json").read_text())


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def kustomization(folder: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return loaded


def base_objects() -> list[dict[str, Any]]:
    return [
        doc
        for name in kustomization(K8S / "base")["resources"]
        for doc in documents(K8S / "base" / name)
    ]


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in base_objects() if doc["kind"] == kind}


def test_every_manifest_of_the_base_is_listed_in_its_kustomization() -> None:
    listed = set(kustomization(K8S / "base")["resources"])
    assert listed == {p.name for p in (K8S / "base").glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize(
    "path",
    sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml"),
    ids=lambda p: str(p.relative_to(K8S)),
)
def test_each_object_is_valid_against_its_schema(path: Path) -> None:
    for doc in documents(path):
        if doc["apiVersion"].startswith("keda.sh/"):
            jsonschema.validate(doc, KEDA[doc["kind"]])
        elif path.parent.name == "example" and path.name != "namespace.yaml":
            continue  # a strategic-merge patch: partial by design, checked below
        else:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_overlay_patches_and_generates_what_the_base_has() -> None:
    overlay = kustomization(K8S / "overlays" / "example")
    assert "../../base" in overlay["resources"]
    deployments = by_kind("Deployment")
    for patch in overlay["patches"]:
        (target,) = documents(K8S / "overlays" / "example" / patch["path"])
        base = deployments[target["metadata"]["name"]]
        patched = {c["name"] for c in target["spec"]["template"]["spec"]["containers"]}
        assert patched <= {c["name"] for c in base["spec"]["template"]["spec"]["containers"]}
    (secret,) = overlay["secretGenerator"]
    assert secret["name"] == "jobfleet-secrets"
    example = (K8S / "overlays" / "example" / "secrets.env.example").read_text()
    keys = {
        line.split("=", 1)[0] for line in example.splitlines() if line and not line.startswith("#")
    }
    assert {"DATABASE_URL", "REDIS_URL", "REDIS_PASSWORD"} <= keys
    (config,) = overlay["configMapGenerator"]
    assert config["name"] in by_kind("ConfigMap") and config["behavior"] == "merge"


def test_every_process_of_the_plan_is_a_deployment_and_nothing_else_is() -> None:
    # ... and the example product API, a producer beside the fleet (not a row of NAMES).
    assert sorted(by_kind("Deployment")) == sorted((*NAMES, PRODUCT_API, CONSOLE))


def test_the_product_api_runs_as_the_launcher_starts_it_and_its_service_reaches_it() -> None:
    spec = product_api_spec({"PRODUCT_API_PORT": "8180"})
    if spec is None:
        pytest.skip("the example product API's dependencies are not installed (the api extra)")
    deployment = by_kind("Deployment")[PRODUCT_API]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert normalised(container["command"]) == normalised(spec.argv)
    env = {e["name"]: e["value"] for e in container["env"]}
    # Probes and the Service come from outside the pod: uvicorn must not bind loopback only.
    assert env == {"PRODUCT_API_HOST": "0.0.0.0", "PRODUCT_API_PORT": str(spec.health_port)}
    assert container["ports"] == [{"name": "http", "containerPort": spec.health_port}]
    refs = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
    assert refs == {"jobfleet-config", "jobfleet-secrets"}  # PRODUCT_API_KEYS from the Secret
    probes = {
        container["livenessProbe"]["httpGet"]["path"],
        container["readinessProbe"]["httpGet"]["path"],
    }
    assert probes == {"/health/live", "/health/ready"}
    assert {container[p]["httpGet"]["port"] for p in ("livenessProbe", "readinessProbe")} == {
        "http"
    }
    from examples.product_api.app import create_app

    assert probes <= set(create_app().openapi()["paths"])  # the app serves the probed paths
    assert {"requests", "limits"} <= set(container["resources"])

    service = by_kind("Service")[PRODUCT_API]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "http"


def test_the_console_runs_as_the_launcher_starts_it_behind_a_token_from_the_secret() -> None:
    spec = console_spec({"CONSOLE_PORT": "8190"})
    if spec is None:
        pytest.skip("the console's dependencies are not installed (the api extra)")
    deployment = by_kind("Deployment")[CONSOLE]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert normalised(container["command"]) == normalised(spec.argv)
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"CONSOLE_HOST": "0.0.0.0", "CONSOLE_PORT": str(spec.health_port)}
    assert container["ports"] == [{"name": "http", "containerPort": spec.health_port}]
    refs = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
    assert refs == {"jobfleet-config", "jobfleet-secrets"}
    example = (K8S / "overlays" / "example" / "secrets.env.example").read_text()
    assert "CONSOLE_TOKEN=" in example  # off loopback the console refuses to start without it
    probes = {container[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")}
    from shared.console.app import create_app

    served = {getattr(route, "path", None) for route in create_app().routes}
    assert probes == {"/health/live", "/health/ready"} and probes <= served
    service = by_kind("Service")[CONSOLE]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


@pytest.mark.parametrize("name", NAMES)
def test_each_deployment_runs_its_plan_row(name: str, plan_settings: Settings) -> None:  # noqa: F811
    row = lookup(plan_settings, name)
    pod = by_kind("Deployment")[name]["spec"]["template"]["spec"]
    (container,) = pod["containers"]

    assert normalised(container["command"]) == normalised(row.argv)
    assert {e["name"]: e["value"] for e in container["env"]} == dict(row.env)
    assert container["ports"] == [{"name": "health", "containerPort": row.health_port}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": "health"}
    refs = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
    assert refs == {"jobfleet-config", "jobfleet-secrets"}
    grace_s = plan_settings.shutdown_grace_ms / 1000
    assert grace_s < pod["terminationGracePeriodSeconds"] <= grace_s + 15
    assert {"requests", "limits"} <= set(container["resources"])


def test_the_configmap_and_the_plan_agree_on_the_shutdown_grace(plan_settings: Settings) -> None:  # noqa: F811
    config = by_kind("ConfigMap")["jobfleet-config"]["data"]
    assert int(config["SHUTDOWN_GRACE_MS"]) == plan_settings.shutdown_grace_ms
    assert config["HEALTH_HOST"] == "0.0.0.0"  # probes come from the kubelet, not loopback


def test_the_scheduler_runs_two_replicas_and_the_migration_is_a_job() -> None:
    assert by_kind("Deployment")["scheduler"]["spec"]["replicas"] == 2
    (migrate,) = by_kind("Job").values()
    assert migrate["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "fleet",
        "db",
        "upgrade",
    ]


def queue_of(process: str) -> str:
    return process.removeprefix("worker-")


def test_each_worker_scales_on_its_own_queue() -> None:
    scaled = by_kind("ScaledObject")
    assert sorted(scaled) == sorted(name for name, _ in WORKERS)
    assert {queue_of(name) for name, _ in WORKERS} == set(catalog.QUEUES)
    for name, obj in scaled.items():
        assert obj["spec"]["scaleTargetRef"]["name"] == name
        assert obj["spec"]["minReplicaCount"] >= 1
        (trigger,) = obj["spec"]["triggers"]
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == f"dramatiq:{queue_of(name)}.laned"
        assert trigger["authenticationRef"]["name"] in by_kind("TriggerAuthentication")
