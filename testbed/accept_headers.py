"""The Accept headers Prometheus sends when it scrapes, for the tests and the benchmark."""

from __future__ import annotations

# What Prometheus 2.x sends: it prefers OpenMetrics.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)

# What Prometheus 2.42 sends with --enable-feature=native-histograms (captured from it):
# the protobuf format first.
NATIVE_ACCEPT = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
    "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
    "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,"
    "*/*;q=0.1"
)
