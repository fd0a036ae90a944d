"""Configuration: YAML file for many sites, environment variables for one."""

from actionscheduler_exporter.config.environment import load_default, load_environment
from actionscheduler_exporter.config.errors import ConfigError
from actionscheduler_exporter.config.loader import load_file
from actionscheduler_exporter.config.model import AUTO_PREFIX, ExporterConfig, SiteConfig, TLSConfig

__all__ = [
    "AUTO_PREFIX",
    "ConfigError",
    "ExporterConfig",
    "SiteConfig",
    "TLSConfig",
    "load_default",
    "load_environment",
    "load_file",
]
