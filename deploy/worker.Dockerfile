# MindForge worker image (for deploy/compose.yaml and Kubernetes).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends docker.io git && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/mindforge
COPY . .
RUN pip install --no-cache-dir "torch==2.13.0" && pip install --no-cache-dir -e ".[train,postgres]"
ENTRYPOINT []
