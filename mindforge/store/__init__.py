"""The store: SQLModel tables and repository functions over SQLite (default) or Postgres.

Usage::

    from mindforge.store import init_db, session_scope, lineages

    engine = init_db(settings.db_url)          # migrates to the latest schema
    with session_scope(engine) as session:     # commits on exit
        lineage = lineages.create_lineage(session=session, lineage_in=LineageCreate(name="a"))

Repository modules: :mod:`~mindforge.store.lineages` (lineages, generations),
:mod:`~mindforge.store.registry` (contracts, adapter revisions),
:mod:`~mindforge.store.pool` (tasks, pools), :mod:`~mindforge.store.trials` (trials,
audits), :mod:`~mindforge.store.search` (search jobs, candidates),
:mod:`~mindforge.store.experience` (experience entries, snapshots, rejections).
"""

from mindforge.hcp.folder_registry import ContractImmutableError
from mindforge.store.engine import (
    alembic_config,
    init_db,
    make_engine,
    session_scope,
    upgrade_db,
)
from mindforge.store.errors import (
    AdapterImmutableError,
    AlreadyExistsError,
    ContractIdentityError,
    ContractNotRegisteredError,
    NotFoundError,
    StoreError,
)
from mindforge.store.models import (
    AdapterRevision,
    AdapterRevisionCreate,
    Audit,
    AuditOwner,
    Contract,
    Generation,
    Lineage,
    LineageCreate,
    PoolMembership,
    PoolSplit,
    RunStatus,
    SearchCandidate,
    SearchJob,
    StoredTask,
    TaskSource,
    Trial,
)

__all__ = [
    "AdapterImmutableError",
    "AdapterRevision",
    "AdapterRevisionCreate",
    "AlreadyExistsError",
    "Audit",
    "AuditOwner",
    "Contract",
    "ContractIdentityError",
    "ContractImmutableError",
    "ContractNotRegisteredError",
    "Generation",
    "Lineage",
    "LineageCreate",
    "NotFoundError",
    "PoolMembership",
    "PoolSplit",
    "RunStatus",
    "SearchCandidate",
    "SearchJob",
    "StoreError",
    "StoredTask",
    "TaskSource",
    "Trial",
    "alembic_config",
    "init_db",
    "make_engine",
    "session_scope",
    "upgrade_db",
]
