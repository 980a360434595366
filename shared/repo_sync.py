"""`fleet repo sync`: the repository's own files that follow the registrations, written from them.

A domain is a folder and an entry point; the repository around it has files that list every
process or job and that tests compare with the registrations. This writes them, so adding a
domain (docs/domains.md) is: its folder, its entry point, `fleet repo sync`.

- `compose/docker-compose.yml`: one service per row of the launcher's plan (command, health
  port, health check); a missing row's service is added, an existing one's command and ports
  follow the plan (a row added before it shifts its health port), anything else in it is kept.
- `compose/k8s/base/`: one Deployment per row (`<name>.yaml`, listed in `kustomization.yaml`),
  one KEDA ScaledObject per worker on its queue, under the same rules.
- `tests/contracts/schemas/`: one JSON Schema per job and version, and `index.json`.
- `README.md`: the configuration tables (`shared.config_doc`).

The plan is taken at its defaults (the environment of the caller does not shift a port).
`--check` writes nothing and lists what differs (exit 1), for CI.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .config import Settings
from .launcher.plan import ProcessSpec, fleet_plan, rows

COMPOSE = Path("compose/docker-compose.yml")
K8S = Path("compose/k8s/base")
SCHEMAS = Path("tests/contracts/schemas")
README = Path("README.md")


@dataclass(frozen=True)
class Change:
    path: Path
    text: str | None  # None: delete


def default_plan() -> list[ProcessSpec]:
    return fleet_plan(Settings.model_construct())


def _argv(spec: ProcessSpec) -> str:
    """The command as the image runs it: programs by name, the interpreter as `python`."""
    program = Path(spec.argv[0]).name
    program = "python" if re.fullmatch(r"python3?(\.\d+)?", program) else program
    return json.dumps([program, *spec.argv[1:]])


def _worker_queue(name: str) -> str:
    return name.removeprefix("worker-")


def _workers() -> set[str]:
    return {p.name for p in rows() if p.kind == "worker"}


# -- compose ---------------------------------------------------------------------------------

_COMPOSE_SERVICE = """  {name}:
    <<: *fleet-process
    command: {argv}
    environment:
      <<: *fleet-env
{env}    healthcheck:
      test: ["CMD", "python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/health/ready', timeout=2)"]
      interval: 10s
      timeout: 5s
      retries: 3
      start_period: 20s

"""


def _service_block(text: str, name: str) -> re.Match[str] | None:
    return re.search(rf"^  {re.escape(name)}:\n(?:(?:    .*|[ \t]*)\n)*", text, re.M)


def _env_lines(spec: ProcessSpec) -> str:
    return "".join(f"      {k}: {json.dumps(v)}\n" for k, v in spec.env.items())


def compose_text(text: str, plan: list[ProcessSpec]) -> str:
    for spec in plan:
        block = _service_block(text, spec.name)
        if block is None:
            new = _COMPOSE_SERVICE.format(
                name=spec.name, argv=_argv(spec), env=_env_lines(spec), port=spec.health_port
            )
            # At the end of `services:`, before the next top-level key (`volumes:`).
            services = text.index("\nservices:\n") + len("\nservices:\n")
            top = re.compile(r"^\S", re.M).search(text, services)
            at = len(text) if top is None else top.start()
            text = text[:at] + new + text[at:]
            continue
        body = block.group(0)
        body = re.sub(
            r"^    command: .*$", f"    command: {_argv(spec)}", body, count=1, flags=re.M
        )
        for key, value in spec.env.items():
            body = re.sub(
                rf"^      {re.escape(key)}: .*$",
                f"      {key}: {json.dumps(value)}",
                body,
                flags=re.M,
            )
        body = re.sub(
            r"127\.0\.0\.1:\d+/health/ready", f"127.0.0.1:{spec.health_port}/health/ready", body
        )
        text = text[: block.start()] + body + text[block.end() :]
    return text


# -- Kubernetes ------------------------------------------------------------------------------

_DEPLOYMENT = """# {name}: a process of the fleet (`make run-{name}`).{scaled}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app.kubernetes.io/name: {name}
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {name}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {name}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "{port}"
        prometheus.io/path: /metrics
    spec:
      # SIGTERM: in-flight jobs get SHUTDOWN_GRACE_MS to finish, then the rest is handed back.
      terminationGracePeriodSeconds: {grace}
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
      containers:
        - name: {name}
          image: jobfleet:latest
          command: {argv}
          envFrom:
            - configMapRef:
                name: jobfleet-config
            - secretRef:
                name: jobfleet-secrets
          env:
{env}          ports:
            - name: health
              containerPort: {port}
          livenessProbe:
            httpGet: {{path: /health/live, port: health}}
            initialDelaySeconds: 10
            periodSeconds: 10
            failureThreshold: 3
          readinessProbe:
            httpGet: {{path: /health/ready, port: health}}
            periodSeconds: 5
            failureThreshold: 2
          resources:
            requests: {{cpu: 100m, memory: 256Mi}}
            limits: {{memory: 512Mi}}
"""

_SCALED_OBJECT = """---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
spec:
  scaleTargetRef:
    name: {name}
  minReplicaCount: 1
  maxReplicaCount: 4
  pollingInterval: 10
  # A worker drains its prefetch and in-flight jobs on SIGTERM; don't flap.
  cooldownPeriod: 120
  triggers:
    - type: redis
      metadata:
        addressFromEnv: REDIS_ADDRESS
        listName: "dramatiq:{queue}.laned"
        listLength: "10"
        databaseIndex: "0"
      authenticationRef:
        name: jobfleet-redis
"""


def _k8s_env(spec: ProcessSpec) -> str:
    return "".join(
        f"            - name: {k}\n              value: {json.dumps(v)}\n"
        for k, v in spec.env.items()
    )


def deployment_text(text: str | None, spec: ProcessSpec, grace_s: int) -> str:
    if text is None:
        scaled = (
            f" Scaled by KEDA on the `{_worker_queue(spec.name)}` queue's length\n"
            "# (keda-scaledobjects.yaml), so `replicas` here is only the starting count."
            if spec.name in _workers()
            else ""
        )
        return _DEPLOYMENT.format(
            name=spec.name,
            scaled=scaled,
            port=spec.health_port,
            grace=grace_s,
            argv=_argv(spec),
            env=_k8s_env(spec),
        )
    text = re.sub(
        r"^(\s+)command: \[.*\]$", rf"\g<1>command: {_argv(spec)}", text, count=1, flags=re.M
    )
    text = re.sub(r'prometheus\.io/port: "\d+"', f'prometheus.io/port: "{spec.health_port}"', text)
    text = re.sub(r"containerPort: \d+", f"containerPort: {spec.health_port}", text)
    for key, value in spec.env.items():
        text = re.sub(
            rf"(- name: {re.escape(key)}\n\s+value: )\S+", rf"\g<1>{json.dumps(value)}", text
        )
    return text


def kustomization_text(text: str, plan: list[ProcessSpec]) -> str:
    listed = re.findall(r"^  - (\S+\.yaml)$", text, re.M)
    for spec in plan:
        entry = f"{spec.name}.yaml"
        if entry in listed:
            continue
        rows_listed = [f"{s.name}.yaml" for s in plan if f"{s.name}.yaml" in listed]
        after = f"  - {rows_listed[-1]}\n" if rows_listed else "resources:\n"
        text = text.replace(after, f"{after}  - {entry}\n", 1)
        listed.append(entry)
    return text


def scaled_objects_text(text: str, plan: list[ProcessSpec]) -> str:
    named = set(re.findall(r"^kind: ScaledObject\nmetadata:\n  name: (\S+)$", text, re.M))
    for spec in plan:
        if spec.name in _workers() and spec.name not in named:
            text = (
                text.rstrip("\n")
                + "\n"
                + _SCALED_OBJECT.format(name=spec.name, queue=_worker_queue(spec.name))
            )
    return text


# -- the whole repository --------------------------------------------------------------------


def changes(root: Path) -> list[Change]:
    """Every file whose content differs from what the registrations make of it."""
    from . import config_doc
    from .cli.schemas import INDEX, documents, dumps
    from .jobs import catalog

    plan = default_plan()
    grace_s = Settings.model_construct().shutdown_grace_ms // 1000 + 10
    wanted: dict[Path, Callable[[str | None], str]] = {
        COMPOSE: lambda t: compose_text(t or "", plan),
        K8S / "kustomization.yaml": lambda t: kustomization_text(t or "", plan),
        K8S / "keda-scaledobjects.yaml": lambda t: scaled_objects_text(t or "", plan),
        README: lambda t: config_doc.rewrite(t or ""),
    }
    for spec in plan:
        wanted[K8S / f"{spec.name}.yaml"] = partial(deployment_text, spec=spec, grace_s=grace_s)
    found: list[Change] = []
    for relative, make in wanted.items():
        path = root / relative
        if not path.parent.is_dir():
            continue  # a checkout without that part (an installed package): nothing to follow
        current = path.read_text() if path.exists() else None
        text = make(current)
        if text != current:
            found.append(Change(relative, text))
    schemas = root / SCHEMAS
    if schemas.is_dir():
        # A new job or version gets its snapshot, and the index follows; a shipped version's
        # snapshot is never rewritten: its test tells a compatible change from a breaking one.
        for name, document in documents(catalog.ALL).items():
            relative = SCHEMAS / name
            path = root / relative
            current = path.read_text() if path.exists() else None
            if dumps(document) != current and (current is None or name == INDEX):
                found.append(Change(relative, dumps(document)))
    return found


def apply(root: Path, found: list[Change]) -> None:
    for change in found:
        path = root / change.path
        if change.text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(change.text)
