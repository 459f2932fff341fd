"""A lineage through a Temporal endpoint that takes only TLS, a client certificate and an API key.

The Temporal dev server speaks plaintext gRPC, so nginx (Debian's ``nginx-light``,
``deploy/install_test_tools.sh``) stands in front of it as production's TLS terminator
would: it serves a certificate of a CA made here (openssl), requires a client
certificate signed by the same CA (mutual TLS) and an ``Authorization: Bearer`` key, and
passes gRPC on to the dev server. The worker and the client connect through
:func:`workflows.client.connect_settings` from settings alone; a plain connection, one
without the client certificate and one without the key are refused. SCRIPTED POLICY
behind the real HTTP API; Temporal, nginx, Ray, Docker and SQLite are real.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindforge.errors import InfraError
from mindforge.payloads import ORCHESTRATION_QUEUE, LineageInput
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.settings import Settings
from tests.conftest import free_port
from tests.e2e.cluster_lineage import stored
from tests.faults.lineage_faults import CONTRACT, TASKS, fault_spec, slow_finish_script

pytestmark = [pytest.mark.temporal, pytest.mark.ray, pytest.mark.docker, pytest.mark.slow]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
API_KEY = f"mf-temporal-{secrets.token_hex(8)}"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder: Path) -> None:
    """A CA, a server certificate for ``localhost``/127.0.0.1 and a client certificate, all EC P-256, for a day."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=mf-test-ca",
             cwd=folder)
    for name, ext in (
        ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ):
        (folder / f"{name}.ext").write_text(ext + "basicConstraints=CA:FALSE\n")
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN=mf-test-{name}",
                 cwd=folder)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext", cwd=folder)


NGINX_CONF = """\
daemon off;
master_process off;
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{}}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  map $http_authorization $key_ok {{ "Bearer {key}" 1; default 0; }}
  server {{
    listen 127.0.0.1:{port} ssl http2;
    ssl_certificate {d}/server.crt;
    ssl_certificate_key {d}/server.key;
    ssl_client_certificate {d}/ca.crt;
    ssl_verify_client on;
    location / {{
      if ($key_ok = 0) {{ return 401; }}
      grpc_pass grpc://{upstream};
      grpc_read_timeout 300s;
      grpc_send_timeout 300s;
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def tls_endpoint(temporal_env, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """nginx on a free port, TLS and mTLS and the API key required, in front of the session's dev server."""
    _env, upstream, _loop = temporal_env
    folder = tmp_path_factory.mktemp("temporal-tls")
    make_certificates(folder)
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(d=folder, port=port, upstream=upstream, key=API_KEY))
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(folder)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not _answers(port):
            assert proc.poll() is None, f"nginx exited: {proc.stderr.read().decode() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "nginx did not listen within 20 s"
            time.sleep(0.1)
        yield f"127.0.0.1:{port}", folder
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _settings(base: Settings, address: str, folder: Path, **over) -> Settings:
    values = {
        "temporal_address": address, "temporal_tls_ca_file": folder / "ca.crt",
        "temporal_tls_cert_file": folder / "client.crt", "temporal_tls_key_file": folder / "client.key",
        "temporal_tls_server_name": "localhost", "temporal_api_key": API_KEY, **over,
    }
    return Settings(**{**base.model_dump(exclude_none=True), **values})


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("plaintext", "where the server wants TLS"),  # gRPC without TLS to a TLS port: the hint says why
        ("no client certificate", "400 Bad Request"),  # nginx: "No required SSL certificate was sent"
        ("no API key", "401 Unauthorized"),
        ("another API key", "401 Unauthorized"),
        ("no CA", "UnknownIssuer"),  # the system's CAs do not know the server's certificate
    ],
)
def test_the_endpoint_refuses_what_production_would(settings, tls_endpoint, case, why) -> None:
    """Each part left out or wrong is refused, with the reason in the error; all given, it connects."""
    from workflows.client import connect, connect_settings, tls_config

    address, folder = tls_endpoint
    full = _settings(settings, address, folder)
    attempt = {
        "plaintext": lambda: connect(address, "default"),
        "no client certificate": lambda: connect_settings(
            _settings(settings, address, folder, temporal_tls_cert_file=None, temporal_tls_key_file=None)
        ),
        "no API key": lambda: connect(address, "default", tls=tls_config(full)),
        "another API key": lambda: connect(address, "default", tls=tls_config(full), api_key="mf-not-the-key"),
        "no CA": lambda: connect_settings(_settings(settings, address, folder, temporal_tls_ca_file=None)),
    }[case]
    with pytest.raises(InfraError, match=why):
        asyncio.run(attempt())
    asyncio.run(connect_settings(full))  # everything given: connected


def test_a_lineage_runs_through_the_tls_only_endpoint(temporal_env, ray_cluster, settings, tls_endpoint) -> None:
    """Worker and client both on the TLS endpoint; the lineage completes with every trial stored once."""
    from mindforge.cli.temporal_client import connect as cli_connect
    from mindforge.hcp import load_contract
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers
    from workflows.client import connect_settings
    from workflows.options import search_attributes

    _env, _upstream, loop = temporal_env
    address, folder = tls_endpoint
    worker_settings = _settings(settings, address, folder)
    name = "over-tls"
    script = slow_finish_script(load_contract(CONTRACT).model.id, delay_sec=0.0)

    async def run(policy_url: str) -> None:
        client = await connect_settings(worker_settings)
        spec = fault_spec(name, policy_url, attempts=1)
        acts = LineageActivities(worker_settings.db_url)
        w_orch, w_sand = build_workers(client, acts, ["orchestration", "sandbox"], 5, settings=worker_settings)
        async with w_orch, w_sand:
            handle = await client.start_workflow(
                "LineageWorkflow", LineageInput(lineage_id=name, spec=spec), id=f"lineage-{name}",
                task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(name),
            )
            await asyncio.wait_for(handle.result(), 300)
        # the CLI's connection (mindforge/cli/temporal_client.py) goes the same way
        described = await (await cli_connect(worker_settings)).get_workflow_handle(f"lineage-{name}").describe()
        assert described.status is not None and described.status.name == "COMPLETED"

    with start_scripted_policy(script) as policy:
        loop.run_until_complete(run(policy.base_url))
    records, status = stored(worker_settings.db_url, name)
    assert status == "completed"
    assert sorted(r.task_id for r in records) == sorted(TASKS) and len({r.trial_id for r in records}) == len(TASKS)
