"""The monitoring mixin (jsonnet), generated from rules/ and dashboards/."""
