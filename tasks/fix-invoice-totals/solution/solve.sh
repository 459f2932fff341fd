#!/usr/bin/env bash
# Reference solution: rewrite invoice.py with Decimal arithmetic and the README's rules.
set -euo pipefail
cat > /app/invoice/invoice.py <<'PY'
#!/usr/bin/env python3
"""Per-customer invoice totals. See README.md for the specification."""

import csv
import json
import os
import re
import sys
from decimal import ROUND_HALF_UP, Decimal

AMOUNT = re.compile(r"^\d+(\.\d{1,2})?$")
QUANTITY = re.compile(r"^\d+$")
CENT = Decimal("0.01")


class InvoiceError(Exception):
    pass


def load_rates():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "rates.json")) as fh:
        return {k: Decimal(v) for k, v in json.load(fh).items()}


def parse(path, rates):
    customers = {}
    with open(path, newline="") as fh:
        lines = fh.read().splitlines()
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        fields = next(csv.reader([line]))
        if len(fields) != 5:
            raise InvoiceError(f"line {lineno}: expected 5 fields, got {len(fields)}")
        name, _sku, qty, price, region = fields
        if not QUANTITY.match(qty):
            raise InvoiceError(f"line {lineno}: malformed quantity {qty!r}")
        if not AMOUNT.match(price):
            raise InvoiceError(f"line {lineno}: malformed unit price {price!r}")
        if region not in rates:
            raise InvoiceError(f"line {lineno}: unknown region {region!r}")
        entry = customers.setdefault(name, [region, Decimal(0)])
        if entry[0] != region:
            raise InvoiceError(f"line {lineno}: customer {name!r} has regions {entry[0]!r} and {region!r}")
        entry[1] += int(qty) * Decimal(price)
    return customers


def main(path):
    rates = load_rates()
    try:
        customers = parse(path, rates)
    except InvoiceError as exc:
        print(f"invoice: {exc}", file=sys.stderr)
        return 2
    out = []
    grand = [Decimal(0)] * 3
    for name in sorted(customers, key=str.lower):
        region, subtotal = customers[name]
        tax = (subtotal * rates[region]).quantize(CENT, rounding=ROUND_HALF_UP)
        row = [subtotal, tax, subtotal + tax]
        grand = [g + v for g, v in zip(grand, row)]
        out.append("\t".join([name] + [f"{v:.2f}" for v in row]))
    out.append("\t".join(["TOTAL"] + [f"{v:.2f}" for v in grand]))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
PY
