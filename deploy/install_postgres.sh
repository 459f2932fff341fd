#!/usr/bin/env bash
# A PostgreSQL server for the test suite: installs Debian's `postgresql` package when its
# server binaries are missing, creates (once) and starts a cluster of its own,
# "mindforge-test", on 127.0.0.1, with a role and a database for the tests, and prints the
# SQLAlchemy URL of that database on stdout, the only thing it prints there:
#
#   export MINDFORGE_TEST_POSTGRES_URL="$(bash deploy/install_postgres.sh)"
#
# deploy/test.sh does that; the store's tests and one e2e lineage then run on Postgres as well
# as SQLite, each test in a database of its own that the role creates and drops
# (tests/postgres.py). Idempotent: a second run starts nothing new and prints the same URL.
# Needs root (apt-get, pg_ctlcluster); no systemd needed (pg_ctlcluster starts the server
# itself as the cluster's owner, `postgres`).
#
# The cluster is for tests only, so it runs with fsync, synchronous_commit and
# full_page_writes off (a crash may lose it; it holds nothing worth keeping). Debian's own
# "main" cluster, if any, is left alone; this one takes the first free port from 5432 on
# creation (pg_createcluster) and keeps it.
#
# Environment: MINDFORGE_TEST_POSTGRES_CLUSTER (default mindforge-test),
# MINDFORGE_TEST_POSTGRES_DB (default mindforge_test).
set -euo pipefail
cluster="${MINDFORGE_TEST_POSTGRES_CLUSTER:-mindforge-test}"
database="${MINDFORGE_TEST_POSTGRES_DB:-mindforge_test}"
role=mindforge
log() { echo "install_postgres: $*" >&2; }
start=$SECONDS

if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null || ! command -v pg_createcluster >/dev/null; then
  log "installing Debian's postgresql"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
version="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n1)"  # the newest installed
conf="/etc/postgresql/$version/$cluster"

# the role's password: made once, kept beside the cluster's configuration, root-only
secret="$conf/mindforge-test.password"
mkdir -p "$conf"
if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { found = 1 } END { exit !found }'; then
  log "creating cluster $version/$cluster"
  pg_createcluster "$version" "$cluster" >&2
  # Debian's postgresql.conf reads conf.d/ last
  cat >"$conf/conf.d/mindforge-test.conf" <<'CONF'
listen_addresses = '127.0.0.1'
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
fi
if [[ ! -s "$secret" ]]; then
  (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$secret")
fi
password="$(cat "$secret")"
port="$(pg_conftool -s "$version" "$cluster" show port)"

if ! pg_ctlcluster "$version" "$cluster" status >/dev/null 2>&1; then
  log "starting cluster $version/$cluster on 127.0.0.1:$port"
  pg_ctlcluster "$version" "$cluster" start >&2
fi

# role and database: created when absent, the password (re)set every run
psql_admin() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d postgres "$@"; }
psql_admin -v role="$role" -v password="$password" >&2 <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB', :'role')
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
ALTER ROLE :"role" WITH LOGIN CREATEDB PASSWORD :'password';
-- DROP DATABASE ... WITH (FORCE) of a test's database must also end an autovacuum worker in it
GRANT pg_signal_backend TO :"role";
SQL
psql_admin -v role="$role" -v db="$database" >&2 <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
  WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL

log "ready: $version/$cluster on 127.0.0.1:$port, database $database ($((SECONDS - start)) s)"
echo "postgresql+psycopg://$role:$password@127.0.0.1:$port/$database"
