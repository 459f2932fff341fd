# The MindForge worker image: every Ray node of `mindforge cluster up`, the KubeRay pods of
# deploy/k8s/ and the Temporal worker Deployments run it.
#
# Built from the local base image (deploy/build_base_image.sh: Debian bookworm, its python3 -
# CPython 3.11 - and the host's CA certificates), with no registry: `mindforge cluster image`
# (mindforge/devstack/worker_image.py) assembles the build context, it is not the checkout:
#   requirements.txt  every package, pinned to the version the building venv has (Ray included,
#                     which deploy/constraints.txt pins), so a Ray Client driver on the host and
#                     every node run the same Ray and unpickle the same pydantic
#   wheels/           those packages' wheels (pip download on the host, through its pip
#                     configuration); the install below is offline
#   src/              the code and the data the nodes read: pyproject.toml, README.md,
#                     mindforge/, workers/, workflows/, hcp_contracts/, tasks/, deploy/image_map.toml
# The image is tagged mindforge/worker:<content hash> (this file, the base image, the
# requirements and the sources) and mindforge/worker:latest, and rebuilt only when the hash
# changes; the dependency layers come from Docker's cache when only the code changed.
ARG BASE=mindforge/base:bookworm
FROM ${BASE}
RUN python3 -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
COPY wheels/ /tmp/wheels/
RUN /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels -r /tmp/requirements.txt \
 && rm -rf /tmp/wheels
COPY src/ /opt/mindforge/
# editable, so the package's root is /opt/mindforge (the bundled tasks and image map beside it);
# setuptools, the build backend, is among the wheels the install above put into the venv
RUN /opt/venv/bin/pip install --no-cache-dir --no-index --no-deps --no-build-isolation -e /opt/mindforge \
 && /opt/venv/bin/python -c "import mindforge, ray, workers.ray_trials" \
 && echo 'export PATH=/opt/venv/bin:$PATH' > /etc/profile.d/mindforge-venv.sh
# (a login shell - bash -l, as KubeRay's ENABLE_LOGIN_SHELL starts Ray - resets PATH: profile.d puts the venv back)
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    RAY_USAGE_STATS_ENABLED=0
WORKDIR /opt/mindforge
ENTRYPOINT []
