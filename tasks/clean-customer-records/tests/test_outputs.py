"""Checks for clean-customer-records: customers_clean.csv against a reference cleaner.

The inputs are pinned by sha256, so the reference below sees exactly what the agent saw.
"""

import csv
import hashlib
import re
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

DATA = Path("/app/data")
PINNED = {
    "customers_raw.csv": "6bd073ea276e48c438735bb48d8688eb335fa57d51a9b7d16029f0676b914fd8",
    "country_aliases.csv": "dcca01c45ff2329ff1835b0af55387dc4658fa0649a90e0be4d1970a61370c22",
}
HEADER = ["id", "name", "email", "phone", "signup_date", "country", "lifetime_value"]

MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], start=1)}
MONTHS.update({name[:3]: num for name, num in list(MONTHS.items())})


def clean_date(text):
    for pattern, order in (
        (r"(\d{4})-(\d{2})-(\d{2})", "ymd"),
        (r"(\d{2})/(\d{2})/(\d{4})", "mdy"),
        (r"(\d{2})\.(\d{2})\.(\d{4})", "dmy"),
    ):
        m = re.fullmatch(pattern, text)
        if m:
            parts = dict(zip(order, map(int, m.groups())))
            break
    else:
        m = re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", text)
        if not m or m.group(1).lower() not in MONTHS:
            return ""
        parts = {"y": int(m.group(3)), "m": MONTHS[m.group(1).lower()], "d": int(m.group(2))}
    try:
        return date(parts["y"], parts["m"], parts["d"]).isoformat()
    except ValueError:
        return ""


def clean_money(text):
    t = text.replace("$", "").replace(",", "").replace(" ", "")
    if t == "" or t.lower() == "n/a" or t == "-":
        return Decimal("0.00")
    negative = t.startswith("(") and t.endswith(")")
    value = Decimal(t[1:-1] if negative else t)
    value = -value if negative else value
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def clean_phone(text):
    digits = re.sub(r"\D", "", text)
    if len(digits) == 10:
        return "+1" + digits
    if len(digits) == 11 and digits.startswith("1"):
        return "+" + digits
    return ""


def valid_email(email):
    if re.search(r"\s", email) or email.count("@") != 1:
        return False
    local, domain = email.split("@")
    return bool(local) and "." in domain[1:-1]


def clean(raw_rows, aliases):
    lookup = {a.lower(): c.upper() for a, c in aliases}
    lookup.update({c.lower(): c.upper() for _a, c in aliases})
    best, totals = {}, {}
    for row in raw_rows:
        row = [f.strip() for f in row]
        rid, name, email, phone, signup, country, value = row
        email = email.lower()
        if not valid_email(email):
            continue
        rec = [int(rid), re.sub(r"\s+", " ", name), email, clean_phone(phone), clean_date(signup),
               lookup.get(country.lower(), ""), clean_money(value)]
        totals[email] = totals.get(email, Decimal("0.00")) + rec[6]
        rank = (rec[4], rec[0])
        if email not in best or rank > (best[email][4], best[email][0]):
            best[email] = rec
    out = []
    for email, rec in best.items():
        out.append([str(rec[0]), rec[1], rec[2], rec[3], rec[4], rec[5], f"{totals[email]:.2f}"])
    return sorted(out, key=lambda r: int(r[0]))


def expected():
    with open(DATA / "customers_raw.csv", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    with open(DATA / "country_aliases.csv", newline="") as fh:
        aliases = list(csv.reader(fh))[1:]
    return clean(rows, aliases)


def output():
    with open(DATA / "customers_clean.csv", newline="", encoding="utf-8") as fh:
        return [r for r in csv.reader(fh) if r]


def test_inputs_unchanged():
    for name, digest in PINNED.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name


def test_header_and_count():
    rows = output()
    assert rows[0] == HEADER
    assert len(rows) - 1 == len(expected()) == 66


def test_rows():
    got = output()[1:]
    for want, have in zip(expected(), got):
        assert have == want
    assert len(got) == len(expected())
