"""The HTML report renders in headless Chromium with its plots visible and every section present.

The store is a real SQLite file filled by the real audit, search and persistence code
(outcomes from the simulated unlock oracle, standing in for sandbox + policy); the page
is rendered by Debian's ``chromium`` and checked through a screenshot.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from mindforge.reports import SECTION_IDS, gather_report_data, render_report
from mindforge.store import make_engine, session_scope
from tests.unit.reports.report_store import fill_store

CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent: apt-get install -y chromium")
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    filled = fill_store(f"sqlite:///{tmp_path / 'mindforge.db'}")
    engine = make_engine(filled.db_url)
    with session_scope(engine) as session:
        data = gather_report_data(session, filled.lineage_name)
    engine.dispose()
    page = tmp_path / "report.html"
    page.write_text(render_report(data, "html"), encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    for section in SECTION_IDS:
        assert f'<section id="{section}">' in text, section
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) >= 5 and all(len(b64) > 5000 for b64 in images)  # curve, bars, audit, per contract, held-out
    assert "http://" not in text and "https://" not in text  # self-contained: nothing to fetch

    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,4000",
            page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 50_000
    pixels = mpimg.imread(shot)
    assert pixels.shape[0] == 4000 and pixels.shape[1] == 1280
    # non-trivial: plots and tables drew many distinct colours, not a blank page
    assert pixels[..., :3].std() > 0.05
    coloured = (abs(pixels[..., 0] - pixels[..., 2]) > 0.2).sum()  # plot lines and bars are not grey
    assert coloured > 2000
