# The service image: API, workers and CLI. Build: docker build -t verifier-service .
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY verifier_service ./verifier_service
COPY tiers ./tiers
COPY workers ./workers
COPY migrations ./migrations
COPY policies ./policies
RUN pip install --no-cache-dir '.[server,postgres,quantum,ml,text]' \
    && useradd --create-home --uid 1000 verifier
USER verifier
EXPOSE 8000
ENTRYPOINT ["verifier-service"]
CMD ["api", "--host", "0.0.0.0"]
