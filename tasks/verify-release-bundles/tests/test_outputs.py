"""Checks for verify-release-bundles: accepted bundles extracted exactly, the rest rejected, no escapes."""

import hashlib
import os
import stat
from pathlib import Path

INCOMING = Path("/app/incoming")
RELEASES = Path("/app/releases")
INCOMING_SHA256 = {
    "NOTES.txt": "36fc63045821d309ecd94d9f7a3d19fc0c37a7a60809eac706dd1ec8b96a7e9b",
    "SHA256SUMS": "74a70d1bf2141f810ebb2d07f948503294be97d6615cb8105f21f38c62f9db17",
    "app-1.0.tar.gz": "32229bfc9d5a43c73fea6463591e4c27b670f7e4e321aa5deb80c62886994e03",
    "app-1.1.tar.gz": "c0705ff38d8bcef71392601e392c1e97c2b39c9ec327b47bd716813ad87c773b",
    "app-1.2.tar.gz": "ad25ef0069f5e11503f713c6de7560a1ac8127baec5766f4eab2b8b200438e8d",
    "docs-1.9.tar.gz": "358ec1690ccfb8cdf16295e158f16b54e8f9fbd694bfbde3667cc19b27be2689",
    "docs-2.0.tar.gz": "52e71f2fab3d22f8cf4f780108040485f7f0321bbea9923186655a7f16bfffbc",
    "tools-0.9.tar.gz": "e601f5969d7cd1506d1f8bced6b907707e4aaaf03366f59a8add7ce1a175cb1e",
    "tools-1.0.tar.gz": "901facf56575791bc30eff8a62718c2dfcc341c44af6d13df31ffb9a257dd0c0",
    "tools-1.1.tar.gz": "fdd42b01c3c03006544ae8299e8e475eb7200d86c98af4923c2a437da8698c00",
}
# Accepted bundles: relative path -> file content (str) or None for a directory; "+x" marks executables.
ACCEPTED = {
    "app-1.0": {
        "bin": None,
        "bin/app": "#!/bin/sh\necho app 1.0\n+x",
        "README": "app 1.0\n",
        "lib": None,
        "lib/util.py": "VERSION = '1.0'\n",
    },
    "app-1.1": {
        "README": "app 1.1\n",
        "bin": None,
        "bin/app": "#!/bin/sh\necho app 1.1\n+x",
        "lib": None,
        "lib/util.py": "VERSION = '1.1'\n",
        "share": None,
        "share/empty": None,
        "share/doc": None,
        "share/doc/CHANGES with space.txt": "- faster\n",
    },
    "docs-1.9": {
        "index.html": "<h1>docs 1.9</h1>\n",
        "guide": None,
        "guide/install.md": "# Install\n",
        "guide/..hidden-dots.md": "not a parent ref\n",
    },
}
REJECTED = ["app-1.2.tar.gz", "docs-2.0.tar.gz", "tools-0.9.tar.gz", "tools-1.0.tar.gz", "tools-1.1.tar.gz"]


def test_incoming_unchanged():
    names = sorted(p.name for p in INCOMING.iterdir())
    assert names == sorted(INCOMING_SHA256)
    for name, digest in INCOMING_SHA256.items():
        assert hashlib.sha256((INCOMING / name).read_bytes()).hexdigest() == digest, name


def test_releases_has_only_expected_entries():
    assert sorted(p.name for p in RELEASES.iterdir()) == sorted([*ACCEPTED, "REJECTED"])


def test_rejected_list():
    lines = [ln.strip() for ln in (RELEASES / "REJECTED").read_text().splitlines() if ln.strip()]
    assert lines == REJECTED


def test_accepted_contents():
    for bundle, entries in ACCEPTED.items():
        root = RELEASES / bundle
        found = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                found[str(path.relative_to(root))] = path
        assert sorted(found) == sorted(entries), bundle
        for rel, want in entries.items():
            path = found[rel]
            assert not path.is_symlink(), rel
            if want is None:
                assert path.is_dir(), rel
                continue
            executable = want.endswith("+x")
            content = want[:-2] if executable else want
            assert path.is_file() and path.read_text() == content, (bundle, rel)
            mode = stat.S_IMODE(path.stat().st_mode)
            assert bool(mode & stat.S_IXUSR) == executable, (bundle, rel, oct(mode))


def test_nothing_escaped():
    for path in ("/tmp/pwned", "/pwned", "/app/pwned", "/app/evil.txt", "/tmp/evil", "/app/tmp/pwned"):
        assert not os.path.lexists(path), path
