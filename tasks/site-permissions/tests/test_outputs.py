"""Checks for site-permissions: owners and modes under /app/site, links and their targets untouched.

TREE pins every entry of the original site: (kind, sha256 prefix of a file's bytes or a
link's target).
"""

import grp
import hashlib
import os
import pwd
import stat
from pathlib import Path

SITE = Path("/app/site")
TREE = {
    ".well-known": ("dir", ""),
    ".well-known/security.txt": ("file", "e36bc5d9c35e26c8"),
    "About Us.html": ("file", "cca5025824bf3c29"),
    "assets": ("dir", ""),
    "assets/css": ("dir", ""),
    "assets/css/main.css": ("file", "6d6068180a5c710c"),
    "assets/fonts": ("link", "/opt/shared/fonts"),
    "bin": ("dir", ""),
    "bin/old uploads.sh": ("file", "e0ea7aa480457de3"),
    "bin/rebuild.sh": ("file", "3e60e35baeaeb3b0"),
    "docs": ("dir", ""),
    "docs/-notes.txt": ("file", "92c5ada569623b99"),
    "docs/guide.md": ("file", "5880567c67ab5a9d"),
    "docs/home.html": ("link", "../index.html"),
    "docs/team-notes.txt": ("link", "/opt/shared/notes.txt"),
    "index.html": ("file", "b5099f092335ab78"),
    "private": ("dir", ""),
    "private/db.conf": ("file", "6b2058d2d6507763"),
    "private/keys": ("dir", ""),
    "private/keys/site.key": ("file", "ff58a1db29a68454"),
    "uploads": ("dir", ""),
    "uploads/2024": ("dir", ""),
    "uploads/2024/cat.jpg": ("file", "35ab1c7e0f7ce109"),
    "uploads/2024/scan 01.pdf": ("file", "6afd9c1cbf495f92"),
}
# /opt/shared is outside the site: it must keep owner deploy:deploy and these modes.
SHARED = {"/opt/shared": 0o750, "/opt/shared/fonts": 0o750, "/opt/shared/notes.txt": 0o640,
          "/opt/shared/fonts/sans.ttf": 0o640}


def expected_mode(rel: str, is_dir: bool) -> int:
    top = rel.split("/", 1)[0] if rel != "." else ""
    if is_dir:
        return {"private": 0o700, "uploads": 0o2775}.get(top, 0o755)
    return {"bin": 0o755, "private": 0o600, "uploads": 0o664}.get(top, 0o644)


def entries():
    found = {}
    for dirpath, dirnames, filenames in os.walk(SITE):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            found[str(path.relative_to(SITE))] = path
    return found


def test_tree_unchanged():
    found = entries()
    assert sorted(found) == sorted(TREE)
    for rel, path in found.items():
        kind, digest = TREE[rel]
        if kind == "link":
            assert path.is_symlink() and os.readlink(path) == digest, rel
        elif kind == "dir":
            assert path.is_dir() and not path.is_symlink(), rel
        else:
            assert path.is_file() and not path.is_symlink(), rel
            assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] == digest, rel


def test_owner_and_modes():
    www_uid = pwd.getpwnam("www").pw_uid
    www_gid = grp.getgrnam("www").gr_gid
    items = {".": SITE, **entries()}
    for rel, path in items.items():
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            continue
        assert (st.st_uid, st.st_gid) == (www_uid, www_gid), rel
        want = expected_mode(rel, stat.S_ISDIR(st.st_mode))
        assert stat.S_IMODE(st.st_mode) == want, f"{rel}: {oct(stat.S_IMODE(st.st_mode))} != {oct(want)}"


def test_link_targets_outside_untouched():
    uid = pwd.getpwnam("deploy").pw_uid
    gid = grp.getgrnam("deploy").gr_gid
    for path, mode in SHARED.items():
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid) == (uid, gid), path
        assert stat.S_IMODE(st.st_mode) == mode, path
    assert Path("/opt/shared/notes.txt").read_text() == "shared team notes\n"
