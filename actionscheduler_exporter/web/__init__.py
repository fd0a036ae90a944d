"""HTTP endpoints."""
