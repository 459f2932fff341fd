"""Checks for sqlite-revenue-report: the monthly_revenue view and top_customers.csv.

Expected values are recomputed here in Python (UTC months via datetime, not SQL) from the
shop's tables, whose contents are pinned by TABLE_DIGESTS so that edits cannot move the goal.
"""

import collections
import csv
import hashlib
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

DB = Path("/app/shop.db")
TABLE_DIGESTS = {
    "customers": (60, "c10ff2cc9129ce71d3f8"),
    "products": (25, "accc794eea6bfcce0f30"),
    "orders": (602, "d769039f1587b008e536"),
    "order_items": (1418, "d0c9887860a677760e71"),
}
EXPECTED_TOP_IDS = [37, 3, 42, 7, 5]


def connect(path: Path = DB) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def utc_month(text: str) -> str:
    stamp = datetime.fromisoformat(text)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.astimezone(timezone.utc).strftime("%Y-%m")


def reference(con: sqlite3.Connection):
    paid = {oid: (cid, utc_month(ts)) for oid, cid, ts, st in con.execute("SELECT * FROM orders") if st == "paid"}
    counts, revenue, per_customer = collections.Counter(), collections.Counter(), collections.Counter()
    for cid, month in paid.values():
        counts[month] += 1
    for oid, _pid, qty, unit in con.execute("SELECT * FROM order_items"):
        if oid in paid:
            revenue[paid[oid][1]] += qty * unit
            per_customer[paid[oid][0]] += qty * unit
    months = [(m, counts[m], revenue[m]) for m in sorted(counts)]
    return months, per_customer


def test_tables_unchanged():
    con = connect()
    for table, (count, digest) in TABLE_DIGESTS.items():
        rows = sorted(con.execute(f"SELECT * FROM {table}"), key=repr)
        assert len(rows) == count, table
        assert hashlib.sha256(repr(rows).encode()).hexdigest()[:20] == digest, table


def test_monthly_revenue_is_a_view_with_right_columns():
    con = connect()
    kind = con.execute("SELECT type FROM sqlite_master WHERE name = 'monthly_revenue'").fetchone()
    assert kind == ("view",)
    cur = con.execute("SELECT * FROM monthly_revenue LIMIT 1")
    assert [d[0] for d in cur.description] == ["month", "orders", "revenue_cents"]


def test_monthly_revenue_values():
    con = connect()
    months, _ = reference(con)
    got = con.execute("SELECT month, orders, revenue_cents FROM monthly_revenue ORDER BY month").fetchall()
    assert got == months
    assert all(type(o) is int and type(r) is int for _m, o, r in got)


def test_view_follows_new_data(tmp_path):
    copy = tmp_path / "shop.db"
    shutil.copy(DB, copy)
    con = sqlite3.connect(copy)
    con.execute("INSERT INTO orders VALUES (9001, 1, '2031-02-01T03:00:00+05:00', 'paid')")
    con.execute("INSERT INTO orders VALUES (9002, 2, '2031-01-15T10:00:00Z', 'cancelled')")
    con.execute("INSERT INTO order_items VALUES (9001, 1, 3, 1000)")
    con.execute("INSERT INTO order_items VALUES (9002, 1, 1, 5000)")
    con.commit()
    months, _ = reference(con)
    got = con.execute("SELECT month, orders, revenue_cents FROM monthly_revenue ORDER BY month").fetchall()
    assert got == months
    assert ("2031-01", 1, 3000) in got


def test_top_customers_csv():
    con = connect()
    _, per_customer = reference(con)
    top = sorted(per_customer.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [cid for cid, _ in top] == EXPECTED_TOP_IDS
    info = {cid: (name, country) for cid, name, _e, country in con.execute("SELECT * FROM customers")}
    with open("/app/top_customers.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["customer_id", "name", "country", "revenue_cents"]
    body = [r for r in rows[1:] if r]
    want = [[str(cid), info[cid][0], info[cid][1] or "", str(rev)] for cid, rev in top]
    assert body == want
