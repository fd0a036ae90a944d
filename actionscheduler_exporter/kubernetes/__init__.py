"""The optional Kubernetes source: the site's worker pods, Deployment and autoscaler."""
