"""A real MariaDB with Action Scheduler's tables, and a writer that changes them the way
Action Scheduler does. Used by the tests, the demo and the benchmarks; never shipped."""
