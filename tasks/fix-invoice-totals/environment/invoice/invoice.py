#!/usr/bin/env python3
"""Per-customer invoice totals. See README.md for the specification."""

import csv
import json
import os
import sys


def load_rates():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "rates.json")) as fh:
        return {k: float(v) for k, v in json.load(fh).items()}


def main(path):
    rates = load_rates()
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))

    customers = {}
    for row in rows[1:]:
        name = row["customer"]
        qty = int(row["quantity"])
        price = float(row["unit_price"])
        entry = customers.setdefault(name, {"region": row["region"], "subtotal": 0.0})
        entry["subtotal"] += qty * price

    grand = [0.0, 0.0, 0.0]
    for name in sorted(customers):
        entry = customers[name]
        rate = rates[entry["region"]]
        subtotal = entry["subtotal"]
        tax = round(subtotal * rate, 2)
        total = subtotal + tax
        grand[0] += subtotal
        grand[1] += tax
        grand[2] += total
        print(f"{name}\t{subtotal:.2f}\t{tax:.2f}\t{total:.2f}")
    print(f"TOTAL\t{grand[0]:.2f}\t{grand[1]:.2f}\t{grand[2]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
