# The code.sandbox image (Python and Bash) for hosts that can pull base images. Without a
# registry, build the same thing offline: `verifier-service sandbox build-image` (debootstrap +
# docker import, tagged verifier-sandbox-python:HASH, the default of sandbox.image). This one:
#   docker build -f docker/sandbox.Dockerfile -t verifier-sandbox:latest .
#   export VERIFIER_SANDBOX__IMAGE=verifier-sandbox:latest
FROM python:3.11-slim

LABEL verifier-service.sandbox-image="1"

# requests and numpy: the libraries SandboxFusion's Python image has that its tests and common RL
# datasets import (docs/languages.md lists each image's libraries).
RUN pip install --no-cache-dir "pytest>=7,<9" "requests>=2.28,<3" "numpy>=1.24,<3" \
    && groupadd --gid 1000 sandbox \
    && useradd --uid 1000 --gid 1000 --home-dir /work --shell /usr/sbin/nologin sandbox \
    && mkdir -p /work && chown 1000:1000 /work

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/work LANG=C.UTF-8
USER 1000:1000
WORKDIR /work
CMD ["sleep", "infinity"]
