"""Database access: read-only sessions and Action Scheduler table names."""
