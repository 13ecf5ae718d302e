# The service as an image (used by docker-compose.yml). Editable install: the Alembic
# migrations live beside the package, in /app/migrations.
FROM python:3.11-slim
WORKDIR /app
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PYTHONUNBUFFERED=1
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
RUN pip install --no-cache-dir -e .
ENV AUTOPROVISION_HOST=0.0.0.0
EXPOSE 8000
CMD ["autoprovision", "serve"]
