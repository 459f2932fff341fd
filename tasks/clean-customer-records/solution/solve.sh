#!/usr/bin/env bash
# Reference solution: a Python cleaner (regex dates, Decimal money, email-keyed dedup).
set -euo pipefail
python3 - <<'PY'
import csv
import re
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

NAMES = ["january", "february", "march", "april", "may", "june", "july", "august", "september",
         "october", "november", "december"]
MONTHS = {n: i for i, n in enumerate(NAMES, start=1)}
MONTHS.update({n[:3]: i for i, n in enumerate(NAMES, start=1)})


def to_date(text):
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text)
    if m:
        y, mo, d = map(int, m.groups())
    elif m := re.fullmatch(r"(\d{2})/(\d{2})/(\d{4})", text):
        mo, d, y = map(int, m.groups())
    elif m := re.fullmatch(r"(\d{2})\.(\d{2})\.(\d{4})", text):
        d, mo, y = map(int, m.groups())
    elif (m := re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", text)) and m.group(1).lower() in MONTHS:
        mo, d, y = MONTHS[m.group(1).lower()], int(m.group(2)), int(m.group(3))
    else:
        return ""
    try:
        return date(y, mo, d).isoformat()
    except ValueError:
        return ""


def to_money(text):
    t = re.sub(r"[$, ]", "", text)
    if t in ("", "-") or t.lower() == "n/a":
        return Decimal("0.00")
    neg = t.startswith("(") and t.endswith(")")
    v = Decimal(t[1:-1] if neg else t)
    return (-v if neg else v).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def to_phone(text):
    d = re.sub(r"\D", "", text)
    return "+1" + d if len(d) == 10 else "+" + d if len(d) == 11 and d[0] == "1" else ""


def email_ok(e):
    if re.search(r"\s", e) or e.count("@") != 1:
        return False
    local, domain = e.split("@")
    return bool(local) and "." in domain[1:-1]


with open("/app/data/country_aliases.csv", newline="") as fh:
    pairs = list(csv.reader(fh))[1:]
countries = {a.strip().lower(): c.strip().upper() for a, c in pairs}
countries.update({c.strip().lower(): c.strip().upper() for _a, c in pairs})

keep, total = {}, {}
with open("/app/data/customers_raw.csv", newline="") as fh:
    reader = csv.reader(fh)
    header = next(reader)
    for raw in reader:
        rid, name, email, phone, signup, country, value = (f.strip() for f in raw)
        email = email.lower()
        if not email_ok(email):
            continue
        rec = [int(rid), re.sub(r"\s+", " ", name), email, to_phone(phone), to_date(signup),
               countries.get(country.lower(), ""), to_money(value)]
        total[email] = total.get(email, Decimal("0.00")) + rec[6]
        if email not in keep or (rec[4], rec[0]) > (keep[email][4], keep[email][0]):
            keep[email] = rec

with open("/app/data/customers_clean.csv", "w", newline="", encoding="utf-8") as fh:
    w = csv.writer(fh)
    w.writerow(header)
    for email, rec in sorted(keep.items(), key=lambda kv: kv[1][0]):
        w.writerow([rec[0], rec[1], rec[2], rec[3], rec[4], rec[5], f"{total[email]:.2f}"])
PY
