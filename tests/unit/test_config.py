"""Configuration: the YAML file, the environment, and clear errors (exit status 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from actionscheduler_exporter.config import ConfigError, load_default, load_environment, load_file

SECRET = "s3cr3t-pa55word"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "exporter.yml"
    path.write_text(text)
    return str(path)


def test_full_site_entry(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    password_file = tmp_path / "password"
    password_file.write_text(SECRET + "\n")
    config = load_file(
        write(
            tmp_path,
            f"""
listen_address: 127.0.0.1:9100
defaults:
  query_timeout: 2s
  top_hooks: 5
  alerts: {{oldest_due_warning: 10m, drain_target: 2h}}
sites:
  - name: shop
    host: db.internal
    port: 3307
    user: exporter
    database: wordpress
    password_file: {password_file}
    table_prefix: wp_
    tls: {{ca_file: {ca}}}
    labels: {{team: checkout, env: prod}}
    concurrent_batches_limit: 4
    timeout_period: 10m
    alerts: {{oldest_due_warning: 5m, failure_ratio: 0.5}}
    workers: {{namespace: shop, deployment: shop-as-worker}}
    kubernetes: {{namespace: shop, selector: app=worker, cache: 30s}}
  - name: blog
    dsn: mysql://reader:p%40ss@db2:3306/blog?table_prefix=auto&query_timeout=500ms
""",
        )
    )
    shop, blog = config.sites
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 9100)
    assert (shop.host, shop.port, shop.user, shop.database) == (
        "db.internal",
        3307,
        "exporter",
        "wordpress",
    )
    assert shop.password == SECRET
    assert shop.tls.ca_file == str(ca) and shop.tls.verify is True
    assert shop.labels == (("env", "prod"), ("team", "checkout"))
    assert shop.concurrent_batches_limit == 4
    assert shop.timeout_period == 600
    assert shop.query_timeout == 2 and shop.top_hooks == 5
    # alerts merge key by key: the site's own, then defaults:, then built-in defaults
    assert shop.alerts.oldest_due_warning == 300 and shop.alerts.failure_ratio == 0.5
    assert shop.alerts.drain_target == 7200 and shop.alerts.oldest_due_critical == 86400
    assert blog.alerts.oldest_due_warning == 600
    assert [workers.hpa for workers in shop.workers] == ["keda-hpa-shop-as-worker"]
    assert blog.workers == ()
    assert shop.kubernetes is not None and shop.kubernetes.cache == 30
    assert shop.kubernetes.container == "worker" and blog.kubernetes is None
    assert (blog.user, blog.password, blog.host, blog.database) == ("reader", "p@ss", "db2", "blog")
    assert blog.discovers_prefixes and blog.query_timeout == 0.5
    assert SECRET not in repr(config) and "p@ss" not in repr(config)


def test_environment_gives_one_site() -> None:
    config = load_environment(
        {
            "AS_EXPORTER_DSN": "mysql://exporter:pw@db:3306/shop"
            "?table_prefix=wp_3_&concurrent_batches_limit=2",
            "AS_EXPORTER_SITE": "main-shop",
        }
    )
    (site,) = config.sites
    assert (site.name, site.table_prefix, site.concurrent_batches_limit) == (
        "main-shop",
        "wp_3_",
        2,
    )
    assert site.password == "pw"


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("sites: []", "sites", "non-empty list"),
        (
            "sites:\n  - {database: x, user: u, query_timeout: soon}",
            "sites[0].query_timeout",
            "duration",
        ),
        (
            "sites:\n  - {database: x, user: u, qeury_timeout: 5}",
            "sites[0].qeury_timeout",
            "not a known key",
        ),
        ("sites:\n  - {database: x, user: u, port: 70000}", "sites[0].port", "TCP port"),
        (
            "sites:\n  - {database: x, user: u, table_prefix: 'wp; DROP'}",
            "sites[0].table_prefix",
            "prefix",
        ),
        (
            "sites:\n  - {database: x, user: u, labels: {site: a}}",
            "sites[0].labels.site",
            "sets itself",
        ),
        (
            "sites:\n  - {database: x, user: u, labels: {'bad-name': a}}",
            "sites[0].labels.bad-name",
            "label name",
        ),
        (
            "sites:\n  - {name: a, database: x, user: u}\n  - {name: a, database: y, user: u}",
            "sites[1].name",
            "used twice",
        ),
        ("sites:\n  - {name: a, user: u}", "sites[0].database", "missing"),
        # issue 26, item 6: no silent root
        ("sites:\n  - {name: a, database: x}", "sites[0].user", "is not set"),
        ("sites:\n  - {dsn: 'postgres://x/y'}", "sites[0].dsn", "mysql://"),
        ("sites:\n  - {dsn: 'mysql://u@h/d', host: h}", "sites[0].dsn", "either dsn or host"),
        ("sites:\n  - {dsn: 'mysql://u@h/d?colour=red'}", "sites[0].dsn?colour", "DSN parameter"),
        (
            "sites:\n  - {database: x, user: u, tls: {ca_file: /nonexistent/ca.pem}}",
            "sites[0].tls.ca_file",
            "does not exist",
        ),
        (
            "sites:\n  - {database: x, user: u, concurrent_batches_limit: 0}",
            "sites[0].concurrent_batches_limit",
            "at least 1",
        ),
        (
            "sites:\n  - {database: x, user: u, alerts: {failure_ratio: 2}}",
            "sites[0].alerts.failure_ratio",
            "at most 1",
        ),
        (
            "sites:\n  - {database: x, user: u, alerts: {oldest_due: 5m}}",
            "sites[0].alerts.oldest_due",
            "not a known key",
        ),
        (
            "sites:\n  - {database: x, user: u, workers: {namespace: shop}}",
            "sites[0].workers.deployment",
            "is missing",
        ),
        (
            "sites:\n  - {database: x, user: u, kubernetes: {namespace: shop}}",
            "sites[0].kubernetes.selector",
            "is missing",
        ),
        (
            "sites:\n  - {database: x, user: u,"
            " kubernetes: {namespace: a, selector: b, cache: never}}",
            "sites[0].kubernetes.cache",
            "duration",
        ),
        (
            "sites:\n  - {database: x, user: u, heavy_interval: -5m}",
            "sites[0].heavy_interval",
            "duration",
        ),
        (
            "sites:\n  - {database: x, user: u, heavy_query_timeout: 0}",
            "sites[0].heavy_query_timeout",
            "positive duration",
        ),
        ("sites: [x", "", "not valid YAML"),
        ("- just a list", "", "mapping"),
        # issue 13, items 6 and 12: infinite, NaN and absurd values, wrong types
        (
            "sites:\n  - {database: x, user: u, query_timeout: .inf}",
            "sites[0].query_timeout",
            "positive",
        ),
        (
            "sites:\n  - {database: x, user: u, query_timeout: .nan}",
            "sites[0].query_timeout",
            "positive",
        ),
        (
            "sites:\n  - {database: x, user: u, timeout_period: .inf}",
            "sites[0].timeout_period",
            "positive",
        ),
        (
            "sites:\n  - {database: x, user: u, query_timeout: 1000000000}",
            "sites[0].query_timeout",
            "30 days",
        ),
        (
            "sites:\n  - {database: x, user: u, alerts: {failure_rate: .nan}}",
            "sites[0].alerts.failure_rate",
            "finite",
        ),
        (
            "sites:\n  - {database: x, user: u, log_rows_per_scrape: 100000000000000000000000}",
            "sites[0].log_rows_per_scrape",
            "at most",
        ),
        (
            "sites:\n  - {database: x, user: u, top_hooks: 100000000000000000000000}",
            "sites[0].top_hooks",
            "at most",
        ),
        (
            "sites:\n  - {database: x, user: u}\nlisten_address: 29001",
            "listen_address",
            "string",
        ),
        ("sites:\n  - {database: x, user: u}\nprocesses: 0", "processes", "at least 1"),
        ("sites:\n  - {database: x, user: u}\nprocesses: 9", "processes", "at most 8"),
        ("sites:\n  - {database: x, user: u}\nprocesses: two", "processes", "whole number"),
        ("sites:\n  - {database: x, user: u}\nprocesses: true", "processes", "whole number"),
        ("sites:\n  - {dsn: 'mysql://u:p@[::1/db'}", "sites[0].dsn", "not a valid URL"),
        ("sites: " + "[" * 20000, "", "not valid"),
        # issue 13, item 16: a site named like a subsite of a table_prefix: auto site
        (
            "sites:\n  - {name: net, database: x, user: u, table_prefix: auto}\n"
            "  - {name: 'net:wp_', database: y, user: u}",
            "sites[1].name",
            "clash",
        ),
        (
            "sites:\n  - {database: x, user: u}\nlisten: 1",
            "listen",
            "not a known key",
        ),
        # issue 14: the chunked walk and the replica
        (
            "sites:\n  - {database: x, user: u, heavy_chunk_rows: 5}",
            "sites[0].heavy_chunk_rows",
            "from 10",
        ),
        (
            "sites:\n  - {database: x, user: u, heavy_chunk_rows: 5000000}",
            "sites[0].heavy_chunk_rows",
            "1000000",
        ),
        # issue 15: the due split, named groups and hooks
        (
            "sites:\n  - {database: x, user: u, due_split_rows: 200000}",
            "sites[0].due_split_rows",
            "100000",
        ),
        (
            "sites:\n  - {database: x, user: u, due_split_rows: -1}",
            "sites[0].due_split_rows",
            "from 0",
        ),
        (
            "sites:\n  - {database: x, user: u, groups: [reports]}",
            "sites[0].groups",
            "mapping",
        ),
        (
            "sites:\n  - {database: x, user: u, groups: {reports: {alerts: {restarts: 2}}}}",
            "sites[0].groups.reports.alerts.restarts",
            "not a known key",
        ),
        (
            "sites:\n  - {database: x, user: u, groups: {reports: {alert: {}}}}",
            "sites[0].groups.reports.alert",
            "not a known key",
        ),
        (
            "sites:\n  - {database: x, user: u,"
            " groups: {reports: {alerts: {oldest_due_warning: soon}}}}",
            "sites[0].groups.reports.alerts.oldest_due_warning",
            "duration",
        ),
        (
            "sites:\n  - {database: x, user: u, hooks: a_hook}",
            "sites[0].hooks",
            "list of hook names",
        ),
        (
            "sites:\n  - {database: x, user: u, hooks: ['']}",
            "sites[0].hooks[0]",
            "non-empty",
        ),
        ("sites:\n  - {database: x, user: u, replica: db2}", "sites[0].replica", "mapping"),
        (
            "sites:\n  - {database: x, user: u, replica: {host: r, lag: 5}}",
            "sites[0].replica.lag",
            "not a known key",
        ),
        (
            "sites:\n  - {database: x, user: u, replica: {host: r, fallback: never}}",
            "sites[0].replica.fallback",
            "'primary' or 'none'",
        ),
        (
            "sites:\n  - {database: x, user: u, replica: {host: r, max_lag: -1}}",
            "sites[0].replica.max_lag",
            "duration",
        ),
        (
            "sites:\n  - {database: x, user: u, heavy_interval: 0, replica: {host: r}}",
            "sites[0].replica",
            "heavy_interval above 0",
        ),
        (
            "sites:\n  - {database: x, user: u, replica: {dsn: 'mysql://u@r/other'}}",
            "sites[0].replica.dsn",
            "the site's database",
        ),
        (
            "sites:\n  - {database: x, user: u, replica: {dsn: 'mysql://u@r/x', host: r}}",
            "sites[0].replica.dsn",
            "either dsn or host",
        ),
    ],
)
def test_invalid_configuration_names_the_key_and_the_problem(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_file(path)
    assert raised.value.source == path
    assert raised.value.key == key
    assert problem in raised.value.problem


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("", 300.0), ("0", 0.0), ("0s", 0.0), ("'0'", 0.0), ("90s", 90.0), ("2m", 120.0)],
)
def test_heavy_interval_defaults_to_five_minutes_and_zero_means_every_scrape(
    tmp_path: Path, written: str, seconds: float
) -> None:
    key = f", heavy_interval: {written}" if written else ""
    (site,) = load_file(write(tmp_path, f"sites:\n  - {{database: x, user: u{key}}}")).sites
    assert site.heavy_interval == seconds
    assert site.heavy_query_timeout == 60.0


def test_a_replica_takes_the_sites_database_and_by_default_its_user_and_password(
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA")
    text = (
        "sites:\n"
        "  - {database: shop, user: exporter, password: s3cret, heavy_chunk_rows: 5000,\n"
        "     replica: {host: replica.db, port: 3307, max_lag: 2m, fallback: none}}\n"
        "  - {dsn: 'mysql://a:b@primary/shop2',\n"
        "     replica: {dsn: 'mysql://c:d@replica:3310/shop2?ssl_ca=" + str(ca) + "'}}\n"
    )
    first, second = load_file(write(tmp_path, text)).sites
    assert first.heavy_chunk_rows == 5000
    replica = first.replica
    assert replica is not None
    assert (replica.host, replica.port, replica.user, replica.password) == (
        "replica.db",
        3307,
        "exporter",
        "s3cret",
    )
    assert (replica.max_lag, replica.fallback) == (120.0, "none")
    on_replica = first.on_replica()
    assert (on_replica.host, on_replica.database, on_replica.replica) == (
        "replica.db",
        "shop",
        None,
    )
    assert second.heavy_chunk_rows == 20_000 and second.replica is not None
    assert (second.replica.user, second.replica.password, second.replica.port) == ("c", "d", 3310)
    assert second.replica.tls.ca_file == str(ca) and second.replica.fallback == "primary"


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_file(str(tmp_path / "absent.yml"))


def test_missing_dsn_in_environment() -> None:
    with pytest.raises(ConfigError, match="AS_EXPORTER_DSN: is not set"):
        load_environment({})


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actionscheduler_exporter", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_cli_exits_2_and_keeps_the_password_out_of_the_message(tmp_path: Path) -> None:
    path = write(tmp_path, f"sites:\n  - dsn: mysql://u:{SECRET}@h:notaport/d\n")
    done = run_cli("--config", path, "check")
    assert done.returncode == 2
    assert f"{path}: sites[0].dsn: has a port that is not a number" in done.stderr
    assert SECRET not in done.stderr + done.stdout


def test_cli_version_and_help() -> None:
    from actionscheduler_exporter import __version__

    assert __version__ in run_cli("--version").stdout
    help_text = run_cli("--help").stdout
    assert "--listen-address" in help_text and "check" in help_text


def test_cli_rejects_a_bad_listen_address() -> None:
    done = run_cli(
        "--listen-address",
        "localhost",
        env={"AS_EXPORTER_DSN": "mysql://u@h/d", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "--web.listen-address: must look like :9966" in done.stderr


def test_a_yaml_error_names_the_place_but_never_quotes_the_line(tmp_path: Path) -> None:
    """Issue 13, item 8: the offending line may hold the password."""
    path = write(tmp_path, f'sites:\n  - dsn: mysql://u@h/d\n    password: "{SECRET}\n')
    with pytest.raises(ConfigError, match=r"not valid YAML at line \d+, column \d+") as raised:
        load_file(path)
    assert SECRET not in str(raised.value)
    done = run_cli("--config", path, "check")
    assert done.returncode == 2 and SECRET not in done.stderr + done.stdout


def test_text_that_is_not_utf8_is_named_as_such(tmp_path: Path) -> None:
    """Issue 13, item 12: not blamed on --listen-address, no traceback."""
    config = tmp_path / "exporter.yml"
    config.write_bytes(b"sites:\n  - {database: caf\xe9}\n")
    done = run_cli("--config", str(config), "check")
    assert done.returncode == 2
    assert f"{config}: is not UTF-8 text" in done.stderr
    assert "listen-address" not in done.stderr and "Traceback" not in done.stderr
    password = tmp_path / "password"
    password.write_bytes(b"\xff\xfe secret")
    good = write(tmp_path, f"sites:\n  - {{database: d, user: u, password_file: {password}}}\n")
    with pytest.raises(ConfigError, match=r"password_file: .* is not UTF-8 text"):
        load_file(good)


def test_an_oversized_configuration_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """Issue 13: a 40 MB file took 80 s and 736 MB to load."""
    path = tmp_path / "exporter.yml"
    path.write_text("sites:\n" + "  - {database: x, user: u}\n" * 400_000)
    with pytest.raises(ConfigError, match="is larger than 1048576 bytes"):
        load_file(str(path))


def test_a_device_or_a_pipe_is_read_with_a_bound_not_by_its_size() -> None:
    """Issue 25, item 5: `--config /dev/zero` ran out of memory at 1.9 GB (stat says 0)."""
    with pytest.raises(ConfigError, match="is larger than"):
        load_file("/dev/zero")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("*Zq7pSecret", "found undefined alias"),
        ("!Zq7pSecret", "could not determine a constructor for the tag"),
        ("!!int Zq7pSecret", "a value does not fit its type or tag"),
        ("2024-13-45", "a value does not fit its type or tag"),
    ],
)
def test_a_bad_password_value_is_named_by_place_never_quoted(
    tmp_path: Path, value: str, problem: str
) -> None:
    """Issue 25, item 4: the parser's messages quoted the alias or tag, or a traceback
    held the value."""
    path = write(tmp_path, f"sites:\n  - database: x\n    password: {value}\n")
    with pytest.raises(ConfigError) as raised:
        load_file(path)
    message = str(raised.value)
    assert (problem in message and "line 3" in message) or "does not fit" in message
    assert "Zq7pSecret" not in message and "13-45" not in message


def test_a_bad_listen_address_type_is_a_config_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "sites:\n  - {database: x, user: u}\nlisten_address: 29001\n",
    )
    done = run_cli("--config", path, "check")
    assert done.returncode == 2
    assert "listen_address: must be a string" in done.stderr
    assert "Traceback" not in done.stderr


def test_named_groups_hooks_and_the_due_split(tmp_path: Path) -> None:
    """Issue 15: groups with thresholds of their own (the rest from the site), named hooks,
    and the split's cap (0 turns it off)."""
    text = (
        "defaults: {alerts: {oldest_due_critical: 6h}}\n"
        "sites:\n"
        "  - database: shop\n"
        "    user: exporter\n"
        "    due_split_rows: 0\n"
        "    due_split_interval: 0s\n"
        "    hooks: [woocommerce_deliver_webhook_async]\n"
        "    groups:\n"
        "      reports: {alerts: {oldest_due_warning: 2h}}\n"
        "      woocommerce-webhooks:\n"
        "  - {database: blog, user: exporter}\n"
    )
    shop, blog = load_file(write(tmp_path, text)).sites
    assert shop.due_split_rows == 0 and blog.due_split_rows == 10_000
    assert shop.due_split_interval == 0.0 and blog.due_split_interval == 30.0
    assert shop.hooks == ("woocommerce_deliver_webhook_async",)
    assert [group.slug for group in shop.groups] == ["reports", "woocommerce-webhooks"]
    assert shop.group_thresholds() == {"reports": (7200.0, 21600.0)}
    assert blog.groups == () and blog.group_thresholds() == {}


@pytest.mark.parametrize("timeout", ["1e10", "inf", "nan", "0"])
def test_check_refuses_a_timeout_it_cannot_wait(tmp_path: Path, timeout: str) -> None:
    """Issue 25, item 5: `check --timeout 1e10` ended in an OverflowError traceback."""
    path = write(tmp_path, "sites:\n  - {database: x, user: u}\n")
    done = run_cli("--config", path, "--timeout", timeout, "check")
    assert done.returncode == 2
    assert "--timeout must be a number of seconds above 0 and at most 600" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_key_is_told_its_closest_known_one(tmp_path: Path) -> None:
    """Issue 26, item 6: a typo listed all 33 known keys instead of the one it missed."""
    path = write(tmp_path, "sites:\n  - {database: x, user: u, query_timout: 5s}\n")
    with pytest.raises(
        ConfigError, match=r"query_timout: is not a known key \(did you mean query_timeout\?\)"
    ):
        load_file(path)


def test_an_empty_password_file_is_an_error_naming_the_key(tmp_path: Path) -> None:
    """Issue 26, item 6: an empty password file logged in without a password."""
    secret = tmp_path / "password"
    secret.write_text("\n")
    path = write(tmp_path, f"sites:\n  - {{database: x, user: u, password_file: {secret}}}\n")
    with pytest.raises(ConfigError, match=r"sites\[0\].password_file: .* is empty"):
        load_file(path)


@pytest.mark.parametrize(
    "entry", ['{database: "shop\\0x", user: u}', '{dsn: "mysql://u@db/shop%00x"}']
)
def test_a_database_name_with_a_nul_is_an_error_naming_the_key(tmp_path: Path, entry: str) -> None:
    """Statements name the database (quoted); no server holds a name with a NUL."""
    path = write(tmp_path, f"sites:\n  - {entry}\n")
    with pytest.raises(ConfigError, match=r"sites\[0\].database: must not contain a NUL"):
        load_file(path)


def test_exporter_toolkit_flags(tmp_path: Path) -> None:
    """Issue 26, item 6: --web.listen-address (the old flag kept), --log.level,
    --log.format=json, and a healthcheck that says why it failed."""
    path = write(
        tmp_path,
        "sites:\n  - {database: x, user: u, host: 127.0.0.1, port: 1, query_timeout: 1s}\n",
    )
    done = run_cli("--config", path, "--log.level", "warn", "--log.format", "json", "check")
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert any(entry["level"] == "warning" and "site down" in entry["msg"] for entry in lines)
    for flag in ("--web.listen-address", "--listen-address"):
        down = run_cli(flag, "127.0.0.1:1", "healthcheck")
        assert down.returncode == 1
        assert "unhealthy: nothing healthy answers on 127.0.0.1:1" in down.stderr
    bad = run_cli("--config", path, "--web.telemetry-path", "metrics")
    assert bad.returncode == 2 and "--web.telemetry-path must be a path" in bad.stderr


def test_without_config_the_named_file_when_it_exists_else_the_environment(
    tmp_path: Path,
) -> None:
    """Issue 26, item 2: the image names a configuration file; without one mounted, the
    environment's site is served."""
    path = write(tmp_path, "sites:\n  - {name: from-file, database: x, user: u}\n")
    dsn = "mysql://reader@db:3306/shop"
    assert load_default({"AS_EXPORTER_CONFIG": path}).sites[0].name == "from-file"
    missing = str(tmp_path / "none.yml")
    from_env = load_default({"AS_EXPORTER_CONFIG": missing, "AS_EXPORTER_DSN": dsn})
    assert from_env.sites[0].database == "shop"
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_default({"AS_EXPORTER_CONFIG": missing})


def test_a_kubeconfig_with_a_yaml_error_on_its_token_line_does_not_tell_the_token(
    tmp_path: Path,
) -> None:
    """Issue 25, item 4: the parser's message quoted the line, and the source logged it
    at every refresh."""
    from actionscheduler_exporter.kubernetes.client import KubernetesError, from_kubeconfig

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\ncurrent-context: c\nusers:\n"
        "  - name: u\n    user: {token: Zq7pToken: broken}\n"
    )
    with pytest.raises(KubernetesError) as raised:
        from_kubeconfig(kubeconfig)
    assert "Zq7pToken" not in raised.value.message
    assert "line 5" in raised.value.message


@pytest.mark.parametrize(
    ("written", "dedicated"),
    [
        ("", False),
        (", workers: {namespace: shop, deployment: shop-worker}", True),
        (", workers: {namespace: shop, deployment: shop-worker}, dedicated_workers: false", False),
        (", dedicated_workers: true", True),
    ],
)
def test_dedicated_workers_default_to_whether_workers_are_declared(
    tmp_path: Path, written: str, dedicated: bool
) -> None:
    (site,) = load_file(write(tmp_path, f"sites:\n  - {{database: x, user: u{written}}}")).sites
    assert site.runs_dedicated_workers is dedicated


def test_dedicated_workers_must_be_a_boolean(tmp_path: Path) -> None:
    path = write(tmp_path, "sites:\n  - {database: x, user: u, dedicated_workers: sometimes}")
    with pytest.raises(ConfigError) as raised:
        load_file(path)
    assert raised.value.key.endswith("dedicated_workers")
