"""Rendering the Helm chart with the real Helm engine (helm-python-sdk), and validating
what it renders: built-in kinds against Kubernetes 1.36's schemas, custom resources
against the CRDs of prometheus-operator, KEDA and Pyrra (tests/crds, copied unmodified)."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "actionscheduler-exporter"
CRDS = ROOT / "tests" / "crds"
KUBERNETES_VERSION = "1.36.0"
CUSTOM_KINDS = {
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
    "ScaledObject",
    "TriggerAuthentication",
    "ServiceLevelObjective",
}

SITES = [
    {
        "name": "shop",
        "host": "mariadb.shop",
        "user": "exporter",
        "database": "wordpress",
        "table_prefix": "wp_",
    },
    {
        "name": "network",
        "host": "mariadb.net",
        "user": "exporter",
        "database": "network",
        "table_prefix": "auto",
    },
]
MINIMAL: dict[str, Any] = {"config": {"sites": SITES[:1]}}
ALL_ON: dict[str, Any] = {
    "config": {"defaults": {"alerts": {"oldest_due_warning": "10m"}}, "sites": SITES},
    "databasePasswords": {"existingSecret": "exporter-db"},
    "databaseTLS": {"caSecret": "db-ca"},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Action Scheduler"}},
    "networkPolicy": {
        "enabled": True,
        "ingressFrom": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
    },
    "podDisruptionBudget": {"enabled": True},
    "worker": {
        "enabled": True,
        "site": "shop",
        "image": {"repository": "registry.example/shop-wordpress", "tag": "2026.11.1"},
        "envFrom": [{"secretRef": {"name": "wordpress-db"}}],
    },
    "keda": {
        "enabled": True,
        "site": "shop",
        "prometheus": {
            "serverAddress": "http://prometheus.monitoring:9090",
            "authentication": {"enabled": True, "secretName": "prom-token"},
        },
    },
}


def merged(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of `base` with dotted keys changed.

    merged(ALL_ON, **{"keda.trigger": "mysql"})
    """
    values = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = values
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return values


def render(
    values: dict[str, Any], namespace: str = "shop", release: str = "shop"
) -> list[dict[str, Any]]:
    """Every object the chart renders (NOTES.txt left out)."""
    manifests = helm.Chart.load(CHART).render(values, name=release, namespace=namespace)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def notes(values: dict[str, Any]) -> str:
    manifests = helm.Chart.load(CHART).render(values, name="shop", namespace="shop")
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def find(objects: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    matches = [
        o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)
    ]
    assert len(matches) == 1, (kind, name_suffix, [o["metadata"]["name"] for o in matches])
    return matches[0]


def validate(obj: dict[str, Any]) -> None:
    if obj["kind"] in CUSTOM_KINDS:
        jsonschema.Draft7Validator(crd_schema(obj["apiVersion"], obj["kind"])).validate(obj)
    else:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    group, version = api_version.split("/")
    for path in CRDS.glob("*.crd.yaml"):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            for served in crd["spec"]["versions"]:
                if served["name"] == version:
                    return _closed(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    raise LookupError(f"no CRD for {api_version} {kind}")


def _closed(schema: dict[str, Any], under_metadata: bool = False) -> dict[str, Any]:
    """additionalProperties: false wherever the CRD lists properties (see tests/crds/SOURCES.md),
    so that a misspelt field fails; metadata stays open."""
    if isinstance(schema.get("properties"), dict):
        for name, child in schema["properties"].items():
            _closed(child, under_metadata=name == "metadata")
        if not under_metadata and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _closed(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        for child in schema.get(key, []):
            _closed(child)
    return schema
