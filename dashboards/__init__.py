"""Grafana dashboards, generated from this package into JSON files beside it."""
