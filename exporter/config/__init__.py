"""Configuration: YAML file for many sites, environment variables for one."""

from exporter.config.errors import ConfigError
from exporter.config.loader import load_default, load_environment, load_file
from exporter.config.model import AUTO_PREFIX, ExporterConfig, SiteConfig, TLSConfig

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
