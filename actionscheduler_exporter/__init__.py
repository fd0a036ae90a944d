"""Prometheus exporter for Action Scheduler queues (WooCommerce and WordPress plugins)."""

__version__ = "0.1.0"
