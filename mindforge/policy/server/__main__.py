"""``python -m mindforge.policy.server``: the embedded policy server (:func:`mindforge.policy.server.server.main`)."""

from __future__ import annotations

from mindforge.policy.server.server import main

raise SystemExit(main())
