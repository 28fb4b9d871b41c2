# secondary-scheduler: a Kubernetes secondary scheduler in Python.
# BASE_IMAGE (required): an image with python3.11 and its venv module, pinned: by digest when it
# comes from a registry (python:3.11-slim-bookworm@sha256:...), or the base hack/image/build.sh
# makes from the Debian package versions in hack/image/bookworm.lock (`make image-test`; no
# registry needed). There is no default: a tag would float.
ARG BASE_IMAGE

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A venv: Debian's python3 is externally managed (PEP 668), and one folder is easy to copy.
RUN python3 -m venv /opt/secondary-scheduler
WORKDIR /src
# The dependencies from the lock (exact versions, hashes checked; it also pins the build backend),
# then the project alone, built with that backend.
COPY requirements/runtime.lock ./requirements/
RUN /opt/secondary-scheduler/bin/pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY plugins ./plugins
# Slimmer: the kubernetes client's asyncio copy (kubernetes.aio, ~70 MB) is never imported (the
# scheduler talks to the API through aiohttp itself), and pip/setuptools are not needed at run time.
RUN /opt/secondary-scheduler/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
 && rm -rf /opt/secondary-scheduler/lib/python3*/site-packages/kubernetes/aio \
 && /opt/secondary-scheduler/bin/pip uninstall -y -q pip setuptools

FROM ${BASE_IMAGE}
COPY --from=build /opt/secondary-scheduler /opt/secondary-scheduler
# Bytecode is compiled at install time; nothing is written at run time, so the root filesystem can be
# read-only (the chart mounts an emptyDir at /tmp for the self-signed serving certificate).
ENV PATH=/opt/secondary-scheduler/bin:/usr/local/bin:/usr/bin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["secondary-scheduler", "run"]
CMD ["--scheduler-name", "secondary-scheduler"]
