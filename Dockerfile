# secondary-scheduler: a Kubernetes secondary scheduler in Python.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY plugins ./plugins
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# Run as an unprivileged user; the scheduler needs no filesystem writes.
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["secondary-scheduler", "run"]
CMD ["--scheduler-name", "secondary-scheduler"]
