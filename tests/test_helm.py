"""The Helm chart, rendered by the real Helm engine and validated against the schemas of
Kubernetes 1.36 and of the prometheus-operator and KEDA CRDs; scanned by checkov."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from actionscheduler_exporter.config import chart_schema, load_file
from actionscheduler_exporter.config.loader import SITE_KEYS
from actionscheduler_exporter.flags import build_parser
from dashboards.queries import keda_query
from tests.support.helm_chart import (
    ALL_ON,
    CHART,
    MINIMAL,
    ROOT,
    SITES,
    crd_schema,
    find,
    merged,
    notes,
    render,
    validate,
)

MONITOR_OPTIONS: dict[str, Any] = {
    "labels": {"release": "kube-prometheus-stack"},
    "interval": "30s",
    "scrapeTimeout": "10s",
    "namespace": "monitoring",
    "honorLabels": False,
    "scheme": "https",
    "tlsConfig": {
        "ca": {"secret": {"name": "exporter-tls", "key": "ca.crt"}},
        "serverName": "shop-actionscheduler-exporter.shop.svc",
    },
    "basicAuth": {
        "username": {"name": "exporter-auth", "key": "username"},
        "password": {"name": "exporter-auth", "key": "password"},
    },
    "relabelings": [{"action": "replace", "targetLabel": "store", "replacement": "shop"}],
    "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": "process_.*"}],
}

COMMUNITY_KEYS_39: dict[str, Any] = {
    "commonLabels": {"team": "checkout", "cost-center": "42"},
    "revisionHistoryLimit": 3,
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "exporter"}},
        }
    ],
    "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
    "initContainers": [{"name": "wait-for-db", "image": "busybox:1.36", "command": ["true"]}],
    "extraContainers": [{"name": "db-proxy", "image": "registry.example/db-proxy:1.2"}],
    "extraEnvFrom": [{"secretRef": {"name": "exporter-env"}}],
    "livenessProbe": {"periodSeconds": 30, "failureThreshold": 5, "initialDelaySeconds": 2},
    "readinessProbe": {"enabled": False},
    "serviceAccount.automountServiceAccountToken": True,
    "service.labels": {"scrape-job": "queue-shop"},
    "serviceMonitor.jobLabel": "scrape-job",
    "podDisruptionBudget": {
        "enabled": True,
        "minAvailable": "50%",
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    },
}

VARIANTS = {
    "minimal": MINIMAL,
    "all-on": ALL_ON,
    "podmonitor": merged(ALL_ON, **{"serviceMonitor.enabled": False, "podMonitor.enabled": True}),
    "cronjob-worker": merged(ALL_ON, **{"worker.kind": "CronJob", "keda.enabled": False}),
    "slo-rules": merged(ALL_ON, **{"slo.enabled": True}),
    "slo-pyrra": merged(ALL_ON, **{"slo.enabled": True, "slo.format": "pyrra"}),
    "mysql-trigger": merged(
        ALL_ON,
        **{
            "keda.trigger": "mysql",
            "keda.mysql": {
                "host": "mariadb.shop",
                "username": "keda",
                "dbName": "wordpress",
                "passwordSecret": {"name": "keda-db", "key": "password"},
            },
        },
    ),
    "basic-auth": merged(ALL_ON, **{"keda.prometheus.authentication.mode": "basic"}),
    # Issue 16: a database that enforces TLS (the seed's RDS MariaDB 11.8.3+).
    "mysql-connection-string": merged(
        ALL_ON,
        **{
            "keda.trigger": "mysql",
            "keda.mysql.connectionStringSecret": {"name": "keda-db-dsn", "key": "dsn"},
        },
    ),
    "tls-configmap": merged(ALL_ON, **{"databaseTLS": {"caConfigMap": "db-ca"}}),
    # Issue 16: the keys the ecosystem's charts have, for an exporter scraped with TLS and
    # basic auth by a Prometheus in another namespace, and KEDA's fallback behavior.
    "servicemonitor-options": merged(
        ALL_ON,
        **{
            "serviceMonitor": {**MONITOR_OPTIONS, "enabled": True, "targetLabels": ["team"]},
            "keda.fallback.behavior": "currentReplicasIfHigher",
            "worker.extraArgs": ["--exclude-groups=reports"],
            "global": {"imageRegistry": "registry.example"},
        },
    ),
    # Issue 16: the exporter's own TLS and basic auth, scraped with https.
    "web-config": merged(
        ALL_ON,
        **{
            "webConfig": {"existingSecret": "exporter-web", "tls": True},
            "serviceMonitor": {**MONITOR_OPTIONS, "enabled": True},
        },
    ),
    # Issue 19: hundreds of sites split among three exporter pods.
    "sharded": merged(ALL_ON, **{"sharding": {"enabled": True, "shards": 3}}),
    # Issue 39, item 4: the keys prometheus-community chart users expect.
    "community-keys-39": merged(ALL_ON, **COMMUNITY_KEYS_39),
    "community-keys-39-sharded": merged(
        ALL_ON, **COMMUNITY_KEYS_39, **{"sharding": {"enabled": True, "shards": 3}}
    ),
    "podmonitor-options": merged(
        ALL_ON,
        **{
            "serviceMonitor.enabled": False,
            "podMonitor": {**MONITOR_OPTIONS, "enabled": True, "podTargetLabels": ["team"]},
        },
    ),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_lint_is_clean(variant: str) -> None:
    report = helm.lint(str(CHART), VARIANTS[variant], strict=True)
    problems = [
        m for m in report["messages"] if m["severity"] >= 2 and m["error"] != "icon is recommended"
    ]
    assert not problems and not report["errors"], report


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rendered_object_is_valid(variant: str) -> None:
    objects = render(VARIANTS[variant])
    assert objects
    for obj in objects:
        validate(obj)
        # Everything in the release's namespace, but a monitor put where its Prometheus looks.
        monitor = obj["kind"] in ("ServiceMonitor", "PodMonitor")
        expected = VARIANTS[variant].get(obj["kind"][0].lower() + obj["kind"][1:], {})
        namespace = (expected.get("namespace") if monitor else None) or "shop"
        assert obj["metadata"]["namespace"] == namespace, obj["metadata"]["name"]


def test_the_crd_check_catches_a_misspelt_field() -> None:
    scaled = find(render(ALL_ON), "ScaledObject")
    scaled["spec"]["maxReplicas"] = 3
    with pytest.raises(Exception, match="maxReplicas"):
        validate(scaled)
    assert (
        crd_schema("keda.sh/v1alpha1", "ScaledObject")["properties"]["spec"]["additionalProperties"]
        is False
    )


def test_all_on_renders_every_part() -> None:
    kinds = sorted(o["kind"] for o in render(ALL_ON))
    assert kinds == sorted(
        [
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",
            "ConfigMap",  # config, 3 dashboards, loop
            "Deployment",
            "Deployment",
            "Service",
            "ServiceAccount",
            "ServiceMonitor",
            "PrometheusRule",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "ScaledObject",
            "TriggerAuthentication",
            "Pod",  # helm test: the metrics
            "Pod",  # helm test: the worker image runs the queue
            "Role",
            "RoleBinding",
        ]
    )


def test_values_schema_rejects_wrong_types_and_unknown_keys() -> None:
    chart = helm.Chart.load(CHART)
    chart.validate_schema(ALL_ON)
    for bad, problem in [
        (merged(MINIMAL, servicemonitor={"enabled": True}), "servicemonitor"),
        (merged(MINIMAL, replicaCount="two"), "replicaCount"),
        (merged(MINIMAL, **{"keda.trigger": "both"}), "trigger"),
        (merged(MINIMAL, **{"worker.batchSize": 0}), "batchSize"),
        (merged(MINIMAL, **{"keda.prometheus.threshold": "fifty"}), "threshold"),
        (merged(MINIMAL, config={"sites": [{"name": "x", "dsn": "mysql://u:pw@h/d"}]}), "dsn"),
        # Issue 26, item 5: the schema of a site is the exporter's own keys: a typo fails.
        (
            merged(MINIMAL, config={"sites": [{"name": "x", "query_timout": "5s"}]}),
            "query_timout",
        ),
        (merged(MINIMAL, config={"defaults": {"top_hook": 5}, "sites": SITES[:1]}), "top_hook"),
        (merged(MINIMAL, **{"config.connectionsPerServer": 0}), "connectionsPerServer"),
        (merged(MINIMAL, **{"config.connectionsPerServer": 65}), "connectionsPerServer"),
        (merged(MINIMAL, **{"config.connectionsPerServer": "two"}), "connectionsPerServer"),
        (merged(MINIMAL, **{"config.processes": 0}), "processes"),
        (merged(MINIMAL, **{"config.processes": 9}), "processes"),
    ]:
        with pytest.raises(helm.HelmValuesError, match=problem):
            chart.validate_schema(bad)


def test_templates_fail_with_a_clear_message() -> None:
    for values, message in [
        # Issue 26, item 5: the schema's `not` said only "'not' failed".
        (
            merged(MINIMAL, config={"sites": [{"name": "x", "password": "secret"}]}),
            r"config.sites\[0\].password: passwords never go into values",
        ),
        ({"config": {"sites": []}}, "config.sites is empty"),
        (merged(ALL_ON, **{"podMonitor.enabled": True}), "choose one"),
        (merged(ALL_ON, **{"keda.prometheus.serverAddress": ""}), "serverAddress is empty"),
        (
            merged(ALL_ON, **{"keda.minReplicaCount": 5, "keda.maxReplicaCount": 2}),
            "minReplicaCount is above",
        ),
        (merged(ALL_ON, **{"worker.image.repository": ""}), "worker.image.repository"),
        # issue 16: a worker without a tag ran :latest; a site that is not configured left
        # KEDA on its fallback for good
        (merged(ALL_ON, **{"worker.image.tag": ""}), "worker.image.tag is empty"),
        (
            merged(ALL_ON, **{"keda.maxReplicaCount": 3}),
            r"concurrentBatches \(3\) must be at least keda.maxReplicaCount \+ 1 \(4\)",
        ),
        (merged(ALL_ON, **{"keda.site": "wordpress"}), r'keda.site is "wordpress", which is not'),
        (merged(ALL_ON, **{"worker.site": "blog"}), r'worker.site is "blog", which is not'),
        (
            merged(ALL_ON, replicaCount=2, **{"sharding.enabled": True}),
            "leave replicaCount at 1",
        ),
        (merged(ALL_ON, **{"webConfig.tls": True}), "webConfig.existingSecret is empty"),
        (
            merged(ALL_ON, webConfig={"existingSecret": "web", "tls": True}),
            "serviceMonitor.scheme must be https",
        ),
    ]:
        with pytest.raises(helm.HelmError, match=message):
            render(values)


def test_the_chart_copies_of_rules_and_dashboards_are_the_repository_files() -> None:
    rules = ROOT / "rules" / "actionscheduler.rules.yml"
    assert (CHART / "files" / "rules" / rules.name).read_bytes() == rules.read_bytes()
    shipped = sorted(p.name for p in (CHART / "files" / "dashboards").glob("*.json"))
    assert shipped == sorted(p.name for p in (ROOT / "dashboards").glob("*.json"))
    for name in shipped:
        assert (CHART / "files" / "dashboards" / name).read_bytes() == (
            ROOT / "dashboards" / name
        ).read_bytes(), "run make chart-files"


def test_prometheus_rule_and_dashboards_carry_the_files() -> None:
    objects = render(ALL_ON)
    rule = find(objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    source = yaml.safe_load((ROOT / "rules" / "actionscheduler.rules.yml").read_text())
    assert rule["spec"]["groups"] == source["groups"]
    for name in ("overview", "hooks"):
        config_map = find(objects, "ConfigMap", f"-{name}")
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        file = f"actionscheduler-{name}.json"
        assert config_map["data"][file] == (ROOT / "dashboards" / file).read_text().rstrip("\n")


def test_exporter_config_is_valid_and_keeps_passwords_out(tmp_path: Path) -> None:
    objects = render(ALL_ON)
    config_map = find(objects, "ConfigMap", "exporter")
    text = config_map["data"]["exporter.yml"]
    passwords = tmp_path / "passwords"
    passwords.mkdir()
    for site in ("shop", "network"):
        (passwords / site).write_text(f"pw-{site}\n")
    path = tmp_path / "exporter.yml"
    path.write_text(text.replace("/etc/actionscheduler-exporter/passwords", str(passwords)))
    config = load_file(str(path))  # the exporter's own validation
    shop, network = config.sites
    assert shop.password == "pw-shop" and network.discovers_prefixes
    # The worker's limit and the exporter's come from one value.
    assert shop.concurrent_batches_limit == ALL_ON["worker"].get("concurrentBatches", 3)
    assert [workers.deployment for workers in shop.workers] == [
        "shop-actionscheduler-exporter-worker"
    ]
    assert shop.alerts.oldest_due_warning == 600
    # The chart's workers run the shop's queue: web-request runs there raise an alert.
    assert shop.runs_dedicated_workers and not network.runs_dedicated_workers
    worker = find(objects, "Deployment", "-worker")
    container = worker["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AS_CONCURRENT_BATCHES"] == str(shop.concurrent_batches_limit)
    # Secrets are mounted, never rendered.
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            assert "pw-" not in yaml.safe_dump(obj) and "password:" not in yaml.safe_dump(obj)


def test_exporter_pod_is_locked_down() -> None:
    # No API token unless the Kubernetes source is on (it is with the chart's worker).
    without_source = find(
        render(merged(ALL_ON, **{"kubernetesSource.enabled": False})), "Deployment", "exporter"
    )["spec"]["template"]["spec"]
    assert without_source["automountServiceAccountToken"] is False
    assert not [o for o in render(MINIMAL) if o["kind"] in {"Role", "RoleBinding"}]
    assert (
        find(render(MINIMAL), "Deployment", "exporter")["spec"]["template"]["spec"][
            "automountServiceAccountToken"
        ]
        is False
    )
    pod = find(render(ALL_ON), "Deployment", "exporter")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_exporter_serves_its_web_config_and_its_probes_follow() -> None:
    pod = find(render(VARIANTS["web-config"]), "Deployment", "exporter")["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert "--web.config.file=/etc/actionscheduler-exporter/web/web-config.yml" in container["args"]
    assert {"name": "web", "mountPath": "/etc/actionscheduler-exporter/web", "readOnly": True} in (
        container["volumeMounts"]
    )
    assert {"name": "web", "secret": {"secretName": "exporter-web", "defaultMode": 0o440}} in pod[
        "spec"
    ]["volumes"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    plain = find(render(ALL_ON), "Deployment", "exporter")["spec"]["template"]["spec"]
    assert plain["containers"][0]["livenessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert not [a for a in plain["containers"][0]["args"] if a.startswith("--web.config")]


def test_a_sharded_exporter_is_a_statefulset_whose_pods_take_their_shard_from_their_name() -> None:
    objects = render(VARIANTS["sharded"])
    assert not [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and "exporter" in o["metadata"]["name"]
        and "worker" not in o["metadata"]["name"]
    ]
    stateful = find(objects, "StatefulSet", "exporter")
    spec = stateful["spec"]
    assert spec["replicas"] == 3 and spec["podManagementPolicy"] == "Parallel"
    service = find(objects, "Service", "exporter")
    # Its pods' DNS names come from the headless Service (test_a_sharded_exporter_has_...).
    assert spec["serviceName"] == service["metadata"]["name"] + "-headless"
    pod = spec["template"]
    # The Service (and so the ServiceMonitor) reaches every shard.
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    container = pod["spec"]["containers"][0]
    assert "--total-shards=3" in container["args"] and "--shard=from-pod-name" in container["args"]
    assert container["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]
    unsharded = find(render(ALL_ON), "Deployment", "exporter")["spec"]["template"]["spec"]
    assert not [a for a in unsharded["containers"][0]["args"] if "shard" in a]


def test_connections_per_server_reaches_every_shards_config(tmp_path: Path) -> None:
    """Two shards with two connections each send a server no more than one exporter with
    the default four (the chart's README, "Hundreds of sites: sharding")."""
    values = merged(VARIANTS["sharded"], **{"config.connectionsPerServer": 2})
    text = find(render(values), "ConfigMap", "exporter")["data"]["exporter.yml"]
    assert yaml.safe_load(text)["connections_per_server"] == 2
    path = tmp_path / "exporter.yml"
    path.write_text(text.replace("/etc/actionscheduler-exporter/passwords", str(tmp_path)))
    for site in ("shop", "network"):
        (tmp_path / site).write_text("pw\n")
    assert load_file(str(path)).connections_per_server == 2  # the exporter's own validation
    # Unset, the exporter's default stands.
    unset = find(render(VARIANTS["sharded"]), "ConfigMap", "exporter")["data"]["exporter.yml"]
    assert "connections_per_server" not in yaml.safe_load(unset)


def test_processes_reach_the_exporters_config(tmp_path: Path) -> None:
    values = merged(MINIMAL, **{"config.processes": 2})
    text = find(render(values), "ConfigMap", "exporter")["data"]["exporter.yml"]
    assert yaml.safe_load(text)["processes"] == 2
    path = tmp_path / "exporter.yml"
    path.write_text(text.replace("/etc/actionscheduler-exporter/passwords", str(tmp_path)))
    for site in yaml.safe_load(text)["sites"]:
        (tmp_path / site["name"]).write_text("pw\n")
    assert load_file(str(path)).processes == 2  # the exporter's own validation
    unset = find(render(MINIMAL), "ConfigMap", "exporter")["data"]["exporter.yml"]
    assert "processes" not in yaml.safe_load(unset)


def test_worker_deployment_finishes_its_batch_on_rollouts() -> None:
    values = merged(ALL_ON, **{"worker.batchSize": 20, "worker.longestActionSeconds": 30})
    worker = find(render(values), "Deployment", "-worker")
    spec = worker["spec"]
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert "replicas" not in spec  # KEDA owns it
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 20 * 30 + 30
    probe = pod["containers"][0]["livenessProbe"]["exec"]["command"][-1]
    assert "-mmin -12" in probe  # a whole batch (10 minutes) and some


def test_cronjob_worker_for_small_stores() -> None:
    values = VARIANTS["cronjob-worker"]
    objects = render(values)
    cron = find(objects, "CronJob")
    assert cron["spec"]["schedule"] == "* * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["AS_MAX_BATCHES"] == "5"
    assert not [o for o in objects if o["kind"] == "ScaledObject"]


def test_keda_prometheus_trigger() -> None:
    objects = render(ALL_ON)
    scaled = find(objects, "ScaledObject")
    assert [o["kind"] for o in objects].count("ScaledObject") == 1
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    # The dashboard's autoscaling panel shows this very query.
    assert trigger["metadata"]["query"] == keda_query(
        "shop", 'namespace="shop",service="shop-actionscheduler-exporter"'
    )
    assert trigger["metadata"]["threshold"] == "50"
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    assert (
        trigger["authenticationRef"]["name"]
        == find(objects, "TriggerAuthentication")["metadata"]["name"]
    )
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"] == {
        "stabilizationWindowSeconds": 300,
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
    }
    assert scaled["spec"]["fallback"] == {
        "failureThreshold": 3,
        "replicas": 1,
        "behavior": "static",
    }


def test_keda_mysql_trigger_is_the_alternative() -> None:
    objects = render(VARIANTS["mysql-trigger"])
    (trigger,) = find(objects, "ScaledObject")["spec"]["triggers"]
    assert trigger["type"] == "mysql"
    assert "scheduled_date_gmt <= UTC_TIMESTAMP()" in trigger["metadata"]["query"]
    assert "wp_actionscheduler_actions" in trigger["metadata"]["query"]
    auth = find(objects, "TriggerAuthentication")
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "password", "name": "keda-db", "key": "password"}
    ]


def test_notes_and_helm_test_hook() -> None:
    text = notes(ALL_ON)
    assert "shop-actionscheduler-exporter" in text and "port-forward" in text
    assert "ScaledObject" in text and "mu-plugins" in text
    hook = find(render(ALL_ON), "Pod", "test-metrics")
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert "/metrics" in hook["spec"]["containers"][0]["command"][-1]


def checkov() -> str:
    binary = ROOT / ".tools" / "checkov" / "bin" / "checkov"
    found = str(binary) if binary.exists() else shutil.which("checkov")
    if found is None:
        pytest.fail("checkov is not installed: `make test` installs it in .tools/checkov")
    return found


def test_checkov_finds_nothing_in_the_manifests_and_the_dockerfile(tmp_path: Path) -> None:
    files = []
    for variant in ("all-on", "cronjob-worker", "mysql-trigger"):
        path = tmp_path / f"{variant}.yaml"
        path.write_text(yaml.safe_dump_all(render(VARIANTS[variant])))
        files += ["-f", str(path)]
    scan = subprocess.run(
        [
            checkov(),
            *files,
            "-f",
            str(ROOT / "Dockerfile"),
            "--config-file",
            str(ROOT / ".checkov.yaml"),
            "--compact",
            "--quiet",
            "--skip-download",  # no network here, and none needed
            "--output",
            "cli",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert scan.returncode == 0, scan.stdout[-4000:] + scan.stderr[-2000:]
    assert "Passed checks" in scan.stdout


def test_every_skipped_checkov_check_is_justified() -> None:
    config = (ROOT / ".checkov.yaml").read_text()
    skipped = yaml.safe_load(config)["skip-check"]
    for check in skipped:
        comment = config.split(f"- {check}")[0].rsplit("skip-check:", 1)[-1]
        assert f"# {check}" in comment, check
    for template in (CHART / "templates").rglob("*"):
        if template.is_file():
            for line in template.read_text().splitlines():
                if "checkov.io/skip" in line:
                    assert "=" in line and len(line.split("=", 1)[1]) > 20, line


def test_values_yaml_documents_every_key() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    free_form_below: int | None = None  # inside resources: or labels:, keys are data
    for index, line in enumerate(lines):
        stripped = line.strip()
        if (
            not stripped
            or stripped.startswith("#")
            or stripped.startswith("-")
            or ":" not in stripped
        ):
            continue
        indent = len(line) - len(line.lstrip())
        if free_form_below is not None and indent > free_form_below:
            continue
        free_form_below = None
        above = lines[index - 1].strip()
        assert above.startswith("#"), f"values.yaml line {index + 1} has no comment: {line}"
        if stripped.split(":")[0] in FREE_FORM:
            free_form_below = indent


# Values whose keys are data (Kubernetes fields, labels), documented as a whole.
# objectives: the document of slo/objectives.yml, documented there and checked by the template.
FREE_FORM = {"resources", "labels", "podSecurityContext", "securityContext", "objectives"}


def _values_keys(node: Any, prefix: str = "") -> set[str]:
    keys = set()
    if isinstance(node, dict):
        for key, value in node.items():
            keys.add(prefix + key)
            if isinstance(value, dict) and value and key not in FREE_FORM:
                keys |= _values_keys(value, prefix + key + ".")
    return keys


def test_chart_readme_lists_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    missing = [key for key in sorted(_values_keys(values)) if f"`{key}`" not in readme]
    assert not missing


def test_monitor_options_reach_the_rendered_monitors() -> None:
    """Issue 16: relabelings, honorLabels, namespace, target labels, scheme, TLS and basic
    auth, as the ecosystem's charts offer them; validated against the operator's CRDs by
    test_every_rendered_object_is_valid."""
    service = render(VARIANTS["servicemonitor-options"])
    monitor = find(service, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["shop"]}
    assert monitor["spec"]["targetLabels"] == ["team"]
    (endpoint,) = monitor["spec"]["endpoints"]
    for key in ("honorLabels", "scheme", "tlsConfig", "basicAuth", "relabelings",
                "metricRelabelings"):  # fmt: skip
        assert endpoint[key] == MONITOR_OPTIONS[key], key
    pods = find(render(VARIANTS["podmonitor-options"]), "PodMonitor")
    assert pods["spec"]["podTargetLabels"] == ["team"]
    assert pods["spec"]["podMetricsEndpoints"][0]["scheme"] == "https"
    scaled = find(service, "ScaledObject")
    assert scaled["spec"]["fallback"]["behavior"] == "currentReplicasIfHigher"
    worker = find(service, "Deployment", "worker")["spec"]["template"]["spec"]
    assert worker["containers"][0]["args"] == ["--exclude-groups=reports"]


def test_the_chart_installs_as_a_subchart() -> None:
    """Issue 16: a parent chart passes `global` to every subchart."""
    helm.Chart.load(CHART).validate_schema(merged(ALL_ON, **{"global": {"storageClass": "x"}}))


def test_worker_rollouts_drains_and_cloud_identities() -> None:
    """Issue 16: a PodDisruptionBudget, a service account of the store's own (IRSA), HOME
    for WP-CLI on a read-only root filesystem, and a bounded revision history."""
    objects = render(
        merged(
            ALL_ON,
            **{
                "worker.serviceAccountName": "shop-worker-irsa",
                "worker.podDisruptionBudget.enabled": True,
            },
        )
    )
    worker = find(objects, "Deployment", "worker")
    pod = worker["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "shop-worker-irsa"
    assert pod["automountServiceAccountToken"] is True
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["HOME"] == "/tmp"  # noqa: S108 - the pod's own emptyDir
    assert worker["spec"]["revisionHistoryLimit"] == 3
    budget = find(objects, "PodDisruptionBudget", "worker")
    assert budget["spec"]["selector"] == worker["spec"]["selector"]
    default = find(render(ALL_ON), "Deployment", "worker")["spec"]["template"]["spec"]
    assert default["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in default


def test_keda_mysql_trigger_with_a_tls_connection_string() -> None:
    objects = render(VARIANTS["mysql-connection-string"])
    (trigger,) = find(objects, "ScaledObject")["spec"]["triggers"]
    assert trigger["type"] == "mysql"
    assert not {"host", "port", "username", "dbName"} & set(trigger["metadata"])
    (reference,) = find(objects, "TriggerAuthentication")["spec"]["secretTargetRef"]
    assert reference == {"parameter": "connectionString", "name": "keda-db-dsn", "key": "dsn"}


def test_helm_test_checks_that_the_worker_image_can_run_the_queue() -> None:
    """Issue 16: the worker image must carry WP-CLI, the site's code and the must-use
    plugin; `helm test` runs `wp action-scheduler status` in it and checks that web
    requests cannot run batches (the first check of a dedicated-worker setup)."""
    objects = render(ALL_ON)
    pod = find(objects, "Pod", "worker-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    worker = find(objects, "Deployment", "worker")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == worker["image"]
    assert container["envFrom"] == worker["envFrom"]
    script = container["command"][-1]
    assert "wp action-scheduler status" in script
    assert "action_scheduler_allow_async_request_runner" in script
    assert not [
        o for o in render(MINIMAL) if o["kind"] == "Pod" and "worker" in o["metadata"]["name"]
    ]


def test_the_keda_query_selects_the_podmonitor_targets_job() -> None:
    """The Prometheus Operator names a PodMonitor target's job <monitor namespace>/<name>."""
    objects = render(VARIANTS["podmonitor-options"])
    (trigger,) = find(objects, "ScaledObject")["spec"]["triggers"]
    monitor = find(objects, "PodMonitor")["metadata"]
    assert trigger["metadata"]["query"] == keda_query(
        "shop", f'namespace="shop",job="{monitor["namespace"]}/{monitor["name"]}"'
    )


def test_the_packaged_chart_renders_and_validates_like_the_source(tmp_path: Path) -> None:
    """Issue 26, item 3: users install the chart the release workflow pushes (`helm install
    oci://...`): the package `helm package` makes must render what the source renders."""
    archive = Path(helm.package(CHART, destination=tmp_path))
    assert archive.name == f"actionscheduler-exporter-{CHART_VERSION}.tgz"
    packaged = helm.Chart.load(archive).render(ALL_ON, name="shop", namespace="shop")
    source = helm.Chart.load(CHART).render(ALL_ON, name="shop", namespace="shop")
    assert packaged == source
    for path, text in sorted(packaged.items()):
        if path.endswith("NOTES.txt"):
            continue
        for obj in yaml.safe_load_all(text):
            if obj:
                validate(obj)


CHART_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]


def test_the_site_schema_is_the_exporters_own_keys() -> None:
    """One source: values.schema.json's site keys are generated from the exporter's
    (`python -m actionscheduler_exporter.config.chart_schema`, run by `make chart-files`)."""
    committed = json.loads((CHART / "values.schema.json").read_text())
    assert chart_schema.updated(copy.deepcopy(committed)) == committed
    sites = committed["properties"]["config"]["properties"]["sites"]["items"]
    assert set(sites["properties"]) == SITE_KEYS


COMMUNITY_KEYS: dict[str, Any] = {
    "serviceAccount.create": True,
    "serviceAccount.name": "queue-exporter",
    "serviceAccount.annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"},
    "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 10001, "fsGroup": 10001},
    "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
    "extraArgs": ["--log.format=json"],
    "env": [{"name": "TZ", "value": "UTC"}],
    "priorityClassName": "monitoring",
    "extraVolumes": [{"name": "client-cert", "secret": {"secretName": "db-client"}}],
    "extraVolumeMounts": [{"name": "client-cert", "mountPath": "/etc/db-client"}],
    "serviceMonitor.additionalLabels": {"team": "shop"},
    "prometheusRule.additionalLabels": {"team": "shop"},
    "prometheusRule.disabledAlerts": ["ActionSchedulerFatalErrors"],
    "prometheusRule.alertOverrides": {
        "ActionSchedulerSiteDown": {"for": "10m", "labels": {"severity": "warning"}}
    },
    "dashboards.namespace": "grafana",
    "worker.podAnnotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
    "worker.nodeSelector": {"pool": "workers"},
    "worker.tolerations": [{"key": "workers", "operator": "Exists", "effect": "NoSchedule"}],
    "worker.affinity": {"podAntiAffinity": {}},
}


def test_the_keys_of_prometheus_community_charts_reach_the_objects() -> None:
    """Issue 26, item 5: serviceAccount, podSecurityContext, securityContext, extraArgs,
    env, priorityClassName, extra volumes, additionalLabels, the worker's scheduling keys,
    dashboards' namespace, and alerts turned off or re-tuned by name, without forking."""
    values = merged(ALL_ON, **COMMUNITY_KEYS)
    helm.Chart.load(CHART).validate_schema(values)
    objects = render(values)
    for obj in objects:
        validate(obj)
    account = find(objects, "ServiceAccount")
    assert account["metadata"]["name"] == "queue-exporter"
    assert account["metadata"]["annotations"] == COMMUNITY_KEYS["serviceAccount.annotations"]
    binding = find(objects, "RoleBinding")
    assert binding["subjects"][0]["name"] == "queue-exporter"
    exporter = find(objects, "Deployment", "exporter")["spec"]["template"]["spec"]
    assert exporter["serviceAccountName"] == "queue-exporter"
    # Helm merges maps with the defaults: the user's keys win, the rest stay strong.
    assert COMMUNITY_KEYS["podSecurityContext"].items() <= exporter["securityContext"].items()
    assert exporter["priorityClassName"] == "monitoring"
    (container,) = exporter["containers"]
    assert COMMUNITY_KEYS["securityContext"].items() <= container["securityContext"].items()
    assert container["args"][-1] == "--log.format=json"
    assert {"name": "TZ", "value": "UTC"} in container["env"]
    assert {"name": "client-cert", "mountPath": "/etc/db-client"} in container["volumeMounts"]
    assert "client-cert" in [volume["name"] for volume in exporter["volumes"]]
    assert find(objects, "ServiceMonitor")["metadata"]["labels"]["team"] == "shop"
    rule = find(objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["team"] == "shop"
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert "ActionSchedulerFatalErrors" not in alerts
    assert alerts["ActionSchedulerSiteDown"]["for"] == "10m"
    assert alerts["ActionSchedulerSiteDown"]["labels"]["severity"] == "warning"
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] == "ConfigMap"
            and "grafana_dashboard" in o["metadata"].get("labels", {})} == {"grafana"}  # fmt: skip
    worker = find(objects, "Deployment", "worker")
    pod = worker["spec"]["template"]
    assert pod["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"]
    assert pod["spec"]["nodeSelector"] == {"pool": "workers"}
    assert pod["spec"]["tolerations"] == COMMUNITY_KEYS["worker.tolerations"]
    # No annotation of a tool of ours on the users' objects (the helm test pods may).
    for obj in objects:
        annotations = obj["metadata"].get("annotations") or {}
        if "helm.sh/hook" in annotations:
            continue
        assert not [key for key in annotations if key.startswith("checkov.io/")], obj["kind"]


def test_defaults_stay_strong_and_unknown_alert_names_fail() -> None:
    exporter = find(render(ALL_ON), "Deployment", "exporter")["spec"]["template"]["spec"]
    assert exporter["securityContext"]["runAsNonRoot"] is True
    assert exporter["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert exporter["automountServiceAccountToken"] is True  # the Kubernetes source is on
    for values, message in [
        (merged(ALL_ON, **{"prometheusRule.disabledAlerts": ["SiteDown"]}), '"SiteDown" is not'),
        (merged(ALL_ON, **{"serviceAccount.create": False}), "name the existing account"),
    ]:
        with pytest.raises(helm.HelmError, match=message):
            render(values)


def test_the_keys_prometheus_community_users_expect_reach_the_objects() -> None:
    """Issue 39, item 4: topologySpreadConstraints, commonLabels, revisionHistoryLimit,
    extraEnvFrom, probe overrides, serviceAccount.automountServiceAccountToken,
    service.labels, podDisruptionBudget settings, serviceMonitor.jobLabel, extraContainers,
    initContainers and dnsConfig were refused by the schema. Each renders, reaches its
    object, and validates (test_every_rendered_object_is_valid runs these variants too)."""
    values = VARIANTS["community-keys-39"]
    helm.Chart.load(CHART).validate_schema(values)
    objects = render(values)
    for obj in objects:
        validate(obj)
        labels = obj["metadata"]["labels"]
        assert COMMUNITY_KEYS_39["commonLabels"].items() <= labels.items(), obj["kind"]
    deployment = find(objects, "Deployment", "exporter")
    assert deployment["spec"]["revisionHistoryLimit"] == 3
    pod = deployment["spec"]["template"]
    assert COMMUNITY_KEYS_39["commonLabels"].items() <= pod["metadata"]["labels"].items()
    spec = pod["spec"]
    assert spec["topologySpreadConstraints"] == COMMUNITY_KEYS_39["topologySpreadConstraints"]
    assert spec["dnsConfig"] == COMMUNITY_KEYS_39["dnsConfig"]
    assert spec["initContainers"] == COMMUNITY_KEYS_39["initContainers"]
    assert [c["name"] for c in spec["containers"]] == ["exporter", "db-proxy"]
    assert spec["automountServiceAccountToken"] is True
    exporter = spec["containers"][0]
    assert exporter["envFrom"] == COMMUNITY_KEYS_39["extraEnvFrom"]
    assert exporter["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
        "periodSeconds": 30,
        "timeoutSeconds": 5,
        "failureThreshold": 5,
        "initialDelaySeconds": 2,
    }
    assert "readinessProbe" not in exporter
    assert find(objects, "ServiceAccount")["automountServiceAccountToken"] is True
    service = find(objects, "Service")
    assert service["metadata"]["labels"]["scrape-job"] == "queue-shop"
    monitor = find(objects, "ServiceMonitor")
    assert monitor["spec"]["jobLabel"] == "scrape-job"
    budget = find(objects, "PodDisruptionBudget", "exporter")["spec"]
    assert budget["minAvailable"] == "50%" and "maxUnavailable" not in budget
    assert budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    # The defaults: the probes as before, no token without the Kubernetes source.
    default = find(render(MINIMAL), "Deployment")["spec"]["template"]["spec"]
    assert default["automountServiceAccountToken"] is False
    assert default["containers"][0]["readinessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }
    assert find(render(MINIMAL), "Deployment")["spec"]["revisionHistoryLimit"] == 10
    assert find(render(ALL_ON), "PodDisruptionBudget", "exporter")["spec"]["maxUnavailable"] == 1


def test_the_new_keys_stay_strict() -> None:
    chart = helm.Chart.load(CHART)
    for bad, problem in [
        (merged(MINIMAL, commonLabels={"app.kubernetes.io/name": "x"}), "app.kubernetes.io/name"),
        (merged(MINIMAL, livenessProbe={"httpGet": {"path": "/"}}), "httpGet"),
        (merged(MINIMAL, readinessProbe={"periodSeconds": 0}), "periodSeconds"),
        (merged(MINIMAL, dnsConfig={"nameserver": ["1.1.1.1"]}), "nameserver"),
        (
            merged(MINIMAL, **{"podDisruptionBudget.unhealthyPodEvictionPolicy": "Never"}),
            "unhealthyPodEviction",
        ),
        (merged(MINIMAL, revisionHistoryLimit=-1), "revisionHistoryLimit"),
        (merged(MINIMAL, extraContainers=[{"image": "x"}]), "name"),
        (
            merged(MINIMAL, **{"serviceAccount.automountServiceAccountToken": "yes"}),
            "automountServiceAccountToken",
        ),
    ]:
        with pytest.raises(helm.HelmValuesError, match=problem):
            chart.validate_schema(bad)
    with pytest.raises(helm.HelmError, match="automountServiceAccountToken is false, but"):
        render(merged(ALL_ON, **{"serviceAccount.automountServiceAccountToken": False}))
    # Without the Kubernetes source, false is what the chart does anyway.
    quiet = render(merged(MINIMAL, **{"serviceAccount.automountServiceAccountToken": False}))
    assert find(quiet, "ServiceAccount")["automountServiceAccountToken"] is False


def test_a_sharded_exporter_has_a_headless_service_and_is_scraped_once() -> None:
    """Issue 39, item 4: the StatefulSet named the ClusterIP Service as its serviceName, so
    its pods had no DNS names; the headless Service gives them
    <pod>.<fullname>-headless.<namespace>.svc, and the ServiceMonitor does not select it."""
    objects = render(VARIANTS["community-keys-39-sharded"])
    statefulset = find(objects, "StatefulSet")
    headless = find(objects, "Service", "-headless")
    assert statefulset["spec"]["serviceName"] == headless["metadata"]["name"]
    assert statefulset["spec"]["revisionHistoryLimit"] == 3
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert headless["spec"]["selector"].items() <= pod_labels.items()
    [port] = headless["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    selector = find(objects, "ServiceMonitor")["spec"]["selector"]["matchLabels"]
    services = [o for o in objects if o["kind"] == "Service"]
    scraped = [o for o in services if selector.items() <= o["metadata"]["labels"].items()]
    assert [o["metadata"]["name"] for o in scraped] == ["shop-actionscheduler-exporter"]
    # One Service only when not sharded.
    assert [o["kind"] for o in render(ALL_ON)].count("Service") == 1


def test_the_chart_passes_log_level_as_the_exporter_spells_it() -> None:
    """Issue 39, item 4: the chart passed the legacy --log-level; the exporter's own parser
    reads what the chart passes."""
    for values in (ALL_ON, VARIANTS["sharded"], merged(MINIMAL, config={
            "logLevel": "debug", "sites": SITES[:1]})):  # fmt: skip
        workload = next(o for o in render(values) if o["kind"] in ("Deployment", "StatefulSet"))
        args = workload["spec"]["template"]["spec"]["containers"][0]["args"]
        assert not [arg for arg in args if arg.startswith("--log-level")]
        parsed = build_parser().parse_args(args)
        assert parsed.log_level == values["config"].get("logLevel", "info")
        assert f"--log.level={parsed.log_level}" in args
