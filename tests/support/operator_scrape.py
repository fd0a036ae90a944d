"""The scrape configuration the Prometheus Operator generates for a ServiceMonitor or a
PodMonitor, for a real Prometheus in the tests.

The target is the test's exporter on loopback; the labels Kubernetes service discovery
would attach to it (`__meta_kubernetes_*`) are given as static labels, and the relabeling
follows the operator's rules for a ServiceMonitor endpoint (its promcfg generator): keep
the Service's selected labels and the endpoint's port, then `namespace`, `service`, `pod`,
`container`, the Service's `targetLabels`, `job` from the Service's name and `endpoint`
from the port name, then the endpoint's own relabelings; `honor_labels` and the metric
relabelings from the endpoint.
"""

from __future__ import annotations

import re
from typing import Any

_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_RELABEL_KEYS = {
    "sourceLabels": "source_labels",
    "targetLabel": "target_label",
    "separator": "separator",
    "regex": "regex",
    "replacement": "replacement",
    "action": "action",
    "modulus": "modulus",
}


def service_monitor_scrape_configs(
    monitor: dict[str, Any], service: dict[str, Any], address: str, pod: str, container: str
) -> list[dict[str, Any]]:
    """One scrape config per endpoint of the rendered ServiceMonitor, for a pod of the
    rendered Service that listens at `address`."""
    namespace = service["metadata"]["namespace"]
    service_name = service["metadata"]["name"]
    service_labels = service["metadata"].get("labels", {})
    meta = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_service_name": service_name,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_endpoint_address_target_kind": "Pod",
        "__meta_kubernetes_endpoint_address_target_name": pod,
        **{f"__meta_kubernetes_service_label_{_sanitize(k)}": v for k, v in service_labels.items()},
        **{f"__meta_kubernetes_service_labelpresent_{_sanitize(k)}": "true"
           for k in service_labels},
    }  # fmt: skip
    configs = []
    spec = monitor["spec"]
    for index, endpoint in enumerate(spec["endpoints"]):
        port = endpoint["port"]
        relabelings: list[dict[str, Any]] = [
            {
                "action": "keep",
                "source_labels": [
                    f"__meta_kubernetes_service_label_{_sanitize(key)}",
                    f"__meta_kubernetes_service_labelpresent_{_sanitize(key)}",
                ],
                "regex": f"({value});true",
            }
            for key, value in sorted(spec["selector"]["matchLabels"].items())
        ]
        relabelings += [
            {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"],
             "regex": port},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"],
             "target_label": "container"},
            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
             "regex": "(Failed|Succeeded)"},
        ]  # fmt: skip
        relabelings += [
            {"source_labels": [f"__meta_kubernetes_service_label_{_sanitize(label)}"],
             "target_label": _sanitize(label), "regex": "(.+)", "replacement": "${1}"}
            for label in spec.get("targetLabels", [])
        ]  # fmt: skip
        relabelings += [
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job",
             "replacement": "${1}"},
            {"target_label": "endpoint", "replacement": port},
        ]  # fmt: skip
        relabelings += [_relabel(r) for r in endpoint.get("relabelings", [])]
        configs.append({
            "job_name": f"serviceMonitor/{monitor['metadata']['namespace']}/"
                        f"{monitor['metadata']['name']}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "metrics_path": endpoint.get("path", "/metrics"),
            "scheme": endpoint.get("scheme", "http"),
            "static_configs": [{
                "targets": [address],
                "labels": {**meta, "__meta_kubernetes_endpoint_port_name": port},
            }],
            "relabel_configs": relabelings,
            "metric_relabel_configs": [_relabel(r) for r in endpoint.get("metricRelabelings", [])],
        })  # fmt: skip
    return configs


def _relabel(config: dict[str, Any]) -> dict[str, Any]:
    translated = {_RELABEL_KEYS[key]: value for key, value in config.items()}
    if "action" in translated:
        translated["action"] = str(translated["action"]).lower()
    return translated


def _sanitize(name: str) -> str:
    return _INVALID.sub("_", name)


def pod_monitor_scrape_configs(
    monitor: dict[str, Any], pod_template: dict[str, Any], namespace: str, address: str, pod: str
) -> list[dict[str, Any]]:
    """One scrape config per endpoint of the rendered PodMonitor, for a pod of the rendered
    Deployment's template (in `namespace`) that listens at `address`. The operator's rules
    for a PodMonitor: the running filter, the pod's selected labels and the port, then
    `namespace`, `container`, `pod`, the `podTargetLabels`, `job` as
    `<monitor namespace>/<monitor name>` and `endpoint` from the port name, then the
    endpoint's own relabelings."""
    pod_labels = pod_template["metadata"].get("labels", {})
    container = pod_template["spec"]["containers"][0]["name"]
    meta = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_pod_phase": "Running",
        **{f"__meta_kubernetes_pod_label_{_sanitize(k)}": v for k, v in pod_labels.items()},
        **{f"__meta_kubernetes_pod_labelpresent_{_sanitize(k)}": "true" for k in pod_labels},
    }
    metadata, spec = monitor["metadata"], monitor["spec"]
    configs = []
    for index, endpoint in enumerate(spec["podMetricsEndpoints"]):
        port = endpoint["port"]
        relabelings: list[dict[str, Any]] = [
            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
             "regex": "(Failed|Succeeded)"},
            *(
                {"action": "keep",
                 "source_labels": [f"__meta_kubernetes_pod_label_{_sanitize(key)}",
                                   f"__meta_kubernetes_pod_labelpresent_{_sanitize(key)}"],
                 "regex": f"({value});true"}
                for key, value in sorted(spec["selector"]["matchLabels"].items())
            ),
            {"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
             "regex": port},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"],
             "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            *(
                {"source_labels": [f"__meta_kubernetes_pod_label_{_sanitize(label)}"],
                 "target_label": _sanitize(label), "regex": "(.+)", "replacement": "${1}"}
                for label in spec.get("podTargetLabels", [])
            ),
            {"target_label": "job",
             "replacement": f"{metadata['namespace']}/{metadata['name']}"},
            {"target_label": "endpoint", "replacement": port},
            *(_relabel(r) for r in endpoint.get("relabelings", [])),
        ]  # fmt: skip
        configs.append({
            "job_name": f"podMonitor/{metadata['namespace']}/{metadata['name']}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "metrics_path": endpoint.get("path", "/metrics"),
            "scheme": endpoint.get("scheme", "http"),
            "static_configs": [{
                "targets": [address],
                "labels": {**meta, "__meta_kubernetes_pod_container_port_name": port},
            }],
            "relabel_configs": relabelings,
            "metric_relabel_configs": [_relabel(r) for r in endpoint.get("metricRelabelings", [])],
        })  # fmt: skip
    return configs
