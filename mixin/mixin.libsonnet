// The Action Scheduler monitoring mixin: prometheusAlerts, prometheusRules and
// grafanaDashboards, tuned by _config (config.libsonnet lists every key). The other files
// are generated from rules/ and dashboards/ by `python -m mixin`; see README.md here.
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'rules.libsonnet') +
(import 'dashboards.libsonnet')
