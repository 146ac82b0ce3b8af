"""deploy/k8s cannot be applied here (no cluster): render it offline, as kustomize would list
it, and check its structure against compose.yaml, the CLI, the settings and the API's routes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from typer.main import get_command

from verifier_service.cli import app as cli_app
from verifier_service.settings import Settings

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
COMPOSE = yaml.safe_load((REPO / "compose.yaml").read_text())
KUSTOMIZATION = yaml.safe_load((K8S / "kustomization.yaml").read_text())

API_VERSIONS = {
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
}
WORKLOADS = ("Deployment", "StatefulSet", "Job")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")


def _render() -> list[dict[str, Any]]:
    """Every object of the resources kustomization.yaml lists, in its order."""
    objects = []
    for resource in KUSTOMIZATION["resources"]:
        for doc in yaml.safe_load_all((K8S / resource).read_text()):
            if doc is not None:
                objects.append(doc)
    return objects


OBJECTS = _render()
BY_KIND: dict[str, dict[str, dict[str, Any]]] = {}
for _obj in OBJECTS:
    BY_KIND.setdefault(_obj["kind"], {})[_obj["metadata"]["name"]] = _obj
COMPOSE_APPS = {n: s for n, s in COMPOSE["services"].items() if s.get("build") == "."}


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def _containers() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{obj['kind']}/{obj['metadata']['name']}", container)
        for obj in OBJECTS
        if obj["kind"] in WORKLOADS
        for container in _pod_spec(obj)["containers"]
    ]


def _app_containers() -> list[tuple[str, dict[str, Any]]]:
    return [(n, c) for n, c in _containers() if c["image"].startswith("verifier-service:")]


def _setting_exists(env_name: str) -> bool:
    model: Any = Settings
    for part in env_name.removeprefix("VERIFIER_").lower().split("__"):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return False
        field = model.model_fields.get(part)
        if field is None:
            return False
        model = field.annotation
    return True


def _env(container: dict[str, Any]) -> dict[str, str]:
    """What the container's environment holds: its envFrom sources, then its own env."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        kind, ref = (
            ("ConfigMap", "configMapRef") if "configMapRef" in source else ("Secret", "secretRef")
        )
        obj = BY_KIND[kind][source[ref]["name"]]
        env.update(obj.get("data") or obj.get("stringData") or {})
    for var in container.get("env", []):
        env[var["name"]] = var.get("value", "<from>")
    return env


def test_the_kustomization_lists_every_manifest_and_sets_no_namespace() -> None:
    assert KUSTOMIZATION["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert KUSTOMIZATION["kind"] == "Kustomization"
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(KUSTOMIZATION["resources"]) == on_disk
    assert "namespace" not in KUSTOMIZATION
    for obj in OBJECTS:
        assert "namespace" not in obj["metadata"], obj["metadata"]


def test_kinds_api_versions_and_names() -> None:
    seen = set()
    for obj in OBJECTS:
        kind, name = obj["kind"], obj["metadata"]["name"]
        assert API_VERSIONS.get(kind) == obj["apiVersion"], f"{kind}/{name}: {obj['apiVersion']}"
        assert DNS_LABEL.match(name), f"{kind}/{name} is not a DNS label"
        assert (kind, name) not in seen, f"{kind}/{name} twice"
        seen.add((kind, name))


#: compose's own monitoring for a single host; on Kubernetes the cluster's Prometheus scrapes the
#: service (docs/scaling.md, "Kubernetes notes").
MONITORING = frozenset({"prometheus", "flower"})


def test_every_compose_service_has_its_workload() -> None:
    for name in COMPOSE["services"].keys() - MONITORING:
        kinds = [kind for kind in WORKLOADS if name in BY_KIND.get(kind, {})]
        assert kinds, f"compose service {name} has no Deployment, StatefulSet or Job"
    assert "migrate" in BY_KIND["Job"]
    for name in ("postgres", "redis", "api"):
        assert name in BY_KIND["Service"], f"no Service {name}: the URLs name it"


@pytest.mark.parametrize("name", sorted(n for n in COMPOSE_APPS if n.startswith("worker-")))
def test_worker_families_match_compose(name: str) -> None:
    compose_args = COMPOSE_APPS[name]["command"]
    container = _pod_spec(BY_KIND["Deployment"][name])["containers"][0]
    args = container["args"]
    assert args[0] == "worker"
    for option in ("--queues", "--concurrency"):
        assert args[args.index(option) + 1] == compose_args[compose_args.index(option) + 1], option
    # The environment compose gives this family only (DFT timeout, sandbox pool) is here too.
    env = _env(container)
    own = (COMPOSE_APPS[name].get("environment") or {}).items() - COMPOSE["x-service-env"].items()
    for key, value in own:
        assert env.get(key) == value, f"{name}: {key}"
    # Node names differ between pods: presence and recovery tell workers apart by them.
    node = args[args.index("--name") + 1]
    assert "$(POD_NAME)" in node
    assert any(
        v["name"] == "POD_NAME" and v["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        for v in container["env"]
    )


def test_containers_run_real_commands_with_real_options() -> None:
    commands = get_command(cli_app).commands  # type: ignore[attr-defined]
    for where, container in _app_containers():
        command, *rest = container["args"]
        assert command in commands, f"{where} runs unknown command {command!r}"
        known = {opt for p in commands[command].params for opt in p.opts}
        options = {o for o in rest if o.startswith("--")}
        assert options <= known, f"{where}: unknown options {options - known}"


def test_env_var_names_are_real_settings() -> None:
    names = set(BY_KIND["ConfigMap"]["verifier-settings"]["data"])
    names |= set(BY_KIND["Secret"]["verifier-secrets"]["stringData"])
    for _, container in _app_containers():
        names |= {v["name"] for v in container.get("env", [])}
    for name in names:
        if name.startswith("VERIFIER_"):
            assert _setting_exists(name), f"{name} is not a setting"
        else:
            assert name in ("OMP_NUM_THREADS", "POD_NAME"), f"unexpected variable {name}"


def test_settings_agree_with_compose_and_validate() -> None:
    shared = COMPOSE["x-service-env"]
    config = BY_KIND["ConfigMap"]["verifier-settings"]["data"]
    for key in (
        "VERIFIER_WORKER__TASK_TIME_LIMIT_S",
        "VERIFIER_WORKER__VISIBILITY_TIMEOUT_S",
        "VERIFIER_METRICS__WORKER_PORT",
        "VERIFIER_METRICS__WORKER_HOST",
    ):
        assert config[key] == shared[key], key
    for where, container in _app_containers():
        env = {k: v for k, v in _env(container).items() if k.startswith("VERIFIER_")}
        # The settings each container gets load (e.g. the visibility timeout exceeds the
        # task time limit); values a pod fills in at run time stand in as they are.
        settings = Settings.model_validate(_nest({k: v for k, v in env.items() if v != "<from>"}))
        assert settings.database.url, f"{where}: the embedded SQLite default"
        assert settings.broker.url, f"{where}: the embedded Redis default"
        assert settings.api.host == "0.0.0.0", f"{where}: an API bound to loopback"
    # The longest tier (DFT) must finish inside the task time limit.
    hifi = _env(_pod_spec(BY_KIND["Deployment"]["worker-hifi"])["containers"][0])
    assert float(hifi["VERIFIER_CHEM__DFT_TIMEOUT_S"]) < float(
        config["VERIFIER_WORKER__TASK_TIME_LIMIT_S"]
    )


def _nest(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in env.items():
        *parents, leaf = key.removeprefix("VERIFIER_").lower().split("__")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def test_env_sources_and_secret_refs_exist() -> None:
    for where, container in _containers():
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                assert source["configMapRef"]["name"] in BY_KIND["ConfigMap"], where
            else:
                assert source["secretRef"]["name"] in BY_KIND["Secret"], where
        for var in container.get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                secret = BY_KIND["Secret"][ref["name"]]
                assert ref["key"] in secret["stringData"], f"{where}: {ref}"


def test_every_container_has_resources() -> None:
    for where, container in _containers():
        resources = container["resources"]
        for bound in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                value = str(resources[bound][resource])
                assert QUANTITY.match(value), f"{where}: {bound}.{resource}={value}"


def test_probes_point_at_real_routes() -> None:
    from verifier_service.app import create_app

    routes = set(create_app().openapi()["paths"])
    api = _pod_spec(BY_KIND["Deployment"]["api"])["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        get = api[probe]["httpGet"]
        assert get["path"] in routes, f"{probe} on {get['path']}, not a route"
        assert get["port"] in ports or get["port"] in ports.values()
    assert ports["http"] == int(api["args"][api["args"].index("--port") + 1])


def test_services_select_pods_and_ports() -> None:
    for name, service in BY_KIND["Service"].items():
        selector = service["spec"]["selector"]
        targets = [
            obj
            for kind in ("Deployment", "StatefulSet")
            for obj in BY_KIND.get(kind, {}).values()
            if selector.items() <= obj["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(targets) == 1, f"Service {name} selects {len(targets)} workloads"
        named = {
            p["name"]: p["containerPort"]
            for c in _pod_spec(targets[0])["containers"]
            for p in c.get("ports", [])
        }
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in named or port["targetPort"] in named.values(), name
    for kind in ("Deployment", "StatefulSet"):
        for name, obj in BY_KIND.get(kind, {}).items():
            labels = obj["spec"]["template"]["metadata"]["labels"]
            assert obj["spec"]["selector"]["matchLabels"].items() <= labels.items(), name


def test_redis_persists_and_the_sandbox_reaches_docker() -> None:
    redis = _pod_spec(BY_KIND["StatefulSet"]["redis"])["containers"][0]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    sandbox = _pod_spec(BY_KIND["Deployment"]["worker-sandbox"])
    mounts = {m["mountPath"] for m in sandbox["containers"][0]["volumeMounts"]}
    assert "/var/run/docker.sock" in mounts


def test_every_worker_pod_is_scraped_on_its_metrics_port() -> None:
    port = BY_KIND["ConfigMap"]["verifier-settings"]["data"]["VERIFIER_METRICS__WORKER_PORT"]
    workers = [d for name, d in BY_KIND["Deployment"].items() if name.startswith("worker-")]
    assert workers
    for deployment in workers:
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        name = deployment["metadata"]["name"]
        assert annotations.get("prometheus.io/scrape") == "true", name
        assert annotations.get("prometheus.io/port") == port, name
        assert annotations.get("prometheus.io/path") == "/metrics", name
