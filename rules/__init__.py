"""The shipped Prometheus rules and the tool that scopes them to one release."""
