"""A pytest plugin for tests/unit/test_markers.py: after collection, print each test's markers as JSON lines."""

from __future__ import annotations

import json

PREFIX = "MARKERS "


def pytest_collection_finish(session) -> None:
    for item in session.items:
        markers = sorted({m.name for m in item.iter_markers()} - {"parametrize", "usefixtures", "filterwarnings"})
        print(PREFIX + json.dumps({"id": item.nodeid, "markers": markers}))
