"""``mindforge dev up`` and a Temporal dev server whose SQLite file is gone (a real ``temporal`` binary).

The server this data dir started keeps answering after its database file is deleted
(the open handle), but every history in it would be lost at its next stop. ``dev up``
must not accept it: it restarts the server on a new file.
"""

from __future__ import annotations

import pytest

from mindforge.devstack.services import TemporalComponent, _pid_alive
from tests.conftest import temporal_settings

pytestmark = pytest.mark.temporal



def test_dev_up_restarts_a_server_whose_sqlite_file_is_gone(tmp_path) -> None:
    settings = temporal_settings(tmp_path)
    comp = TemporalComponent(settings)
    said: list[str] = []
    pid_file = tmp_path / "temporal" / "server.pid"
    try:
        assert comp.up(said.append).up
        first = _pid_alive(pid_file)
        assert first and comp.db_file.is_file() and comp.lost_db() is None
        comp.db_file.unlink()
        st = comp.status()
        assert st.up and "is gone" in st.detail  # still answering: status says what is wrong
        assert comp.lost_db() == first
        again = comp.up(said.append)
        second = _pid_alive(pid_file)
        assert again.up and second and second != first
        assert comp.db_file.is_file() and comp.lost_db() is None
        assert any("SQLite file" in m and "restarting" in m for m in said), said
        assert comp.up(said.append).up and _pid_alive(pid_file) == second  # a healthy server is kept
    finally:
        comp.down(said.append)
