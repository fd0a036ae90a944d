"""Service level objectives for Action Scheduler queues: one source (objectives.yml), four
forms generated from it (Prometheus rules, Sloth, Pyrra, OpenSLO)."""
