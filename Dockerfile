# syntax=docker/dockerfile:1
# The scaler's image: `scaler serve` as a non-root user, gRPC on 9090, /metrics on 8080.
#   docker build --build-arg VERSION=0.1.0 -t llm-gpu-scaler:0.1.0 .
# Stage 1 builds a virtual environment with the scaler and its runtime dependencies;
# stage 2 copies only that environment onto a fresh slim Python.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# grpcio-tools (build stage only): generates the gRPC modules from protos/, pinned to the
# version the dev extra pins, so the image does not depend on the committed generated code
# (.dockerignore leaves it out of the build context).
RUN python -m venv /opt/tools \
 && /opt/tools/bin/pip install "grpcio-tools==1.85.1"
# The runtime dependencies first, in their own layer, pinned by constraints.txt (regenerate
# with ./dev constraints): a change to the scaler's source rebuilds only the layers below.
# No numpy, matplotlib or tqdm: they are the replay's extra, not the server's.
COPY constraints.txt ./
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install -r constraints.txt
COPY pyproject.toml README.md ./
COPY protos/ protos/
COPY scripts/gen_proto.py scripts/
COPY scaler/ scaler/
RUN /opt/tools/bin/python scripts/gen_proto.py
# The scaler itself, without resolving dependencies again; then a check that it imports
# and that the server's modules load without the replay extra.
RUN /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/python -c "import scaler.proto.externalscaler_pb2_grpc, scaler.service.app" \
 && ! /opt/venv/bin/python -c "import numpy" 2>/dev/null \
 && ! /opt/venv/bin/python -c "import ruamel.yaml" 2>/dev/null

FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="llm-gpu-scaler" \
      org.opencontainers.image.description="GPU-aware KEDA external scaler for LLM inference" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
# A fixed numeric user, so Kubernetes' runAsNonRoot can verify it (manifests use 10001).
RUN groupadd --system --gid 10001 scaler \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin scaler
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
# 9090: KEDA's ExternalScaler gRPC API (and gRPC health); 8080: Prometheus /metrics.
EXPOSE 9090 8080
ENTRYPOINT ["scaler", "serve"]
