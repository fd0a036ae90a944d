# syntax=docker/dockerfile:1
# The exporter's image: a virtualenv built in a throw-away stage, copied onto a slim Python.

# Both stages use the same base: pinned by tag here; a release build passes a digest
# (BASE_IMAGE=python:3.11.11-slim-bookworm@sha256:...), a test build a local image.
ARG BASE_IMAGE=python:3.11.11-slim-bookworm
# checkov:skip=CKV_DOCKER_7: the base is the build argument above, a pinned tag (or a digest), never latest
FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY actionscheduler_exporter ./actionscheduler_exporter
# Every dependency at the version CI tested (constraints.txt), not whatever resolves today.
# A build behind a TLS-inspecting proxy passes its CA bundle as the secret pip_ca: it is
# mounted for this step only, never stored in a layer.
RUN --mount=type=secret,id=pip_ca,required=false \
    if [ -f /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi \
    && python -m venv /opt/exporter \
    && /opt/exporter/bin/pip install --no-compile -c constraints.txt . \
    && find /opt/exporter -name '__pycache__' -prune -exec rm -rf {} +

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
# The commit and the build's time (RFC 3339), passed by the build:
#   --build-arg REVISION="$(git rev-parse HEAD)" --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="actionscheduler-exporter" \
      org.opencontainers.image.description="Prometheus exporter for Action Scheduler queues (WooCommerce, WordPress)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="The actionscheduler-exporter authors" \
      org.opencontainers.image.url="https://github.com/actionscheduler-exporter/actionscheduler-exporter" \
      org.opencontainers.image.documentation="https://github.com/actionscheduler-exporter/actionscheduler-exporter/blob/main/README.md" \
      org.opencontainers.image.source="https://github.com/actionscheduler-exporter/actionscheduler-exporter"
COPY --from=build /opt/exporter /opt/exporter
# No bytecode written at run time: the root filesystem may be read-only.
# The listen address, read by the server and by the healthcheck (which cannot see the
# server's command line): change the port here, not with --listen-address.
# The configuration: this file when one is mounted there, else the environment
# (AS_EXPORTER_DSN and the rest: `docker run -e AS_EXPORTER_DSN=...` needs no file).
ENV PATH=/opt/exporter/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AS_EXPORTER_LISTEN_ADDRESS=:9966 \
    AS_EXPORTER_CONFIG=/etc/actionscheduler-exporter/exporter.yml
# A numeric user, so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
EXPOSE 9966
# The exporter answers the scrapes in flight on SIGTERM (10 s at most), then stops.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD ["actionscheduler-exporter", "healthcheck"]
ENTRYPOINT ["actionscheduler-exporter"]
CMD ["serve"]
