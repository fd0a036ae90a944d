"""What the exporter emits: the catalog of metric families and the sample model."""
