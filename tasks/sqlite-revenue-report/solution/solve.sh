#!/usr/bin/env bash
# Reference solution: strftime() converts offsets to UTC; LEFT JOIN keeps paid orders
# without items; COUNT(DISTINCT) avoids counting an order once per item.
set -euo pipefail
sqlite3 /app/shop.db <<'SQL'
DROP VIEW IF EXISTS monthly_revenue;
CREATE VIEW monthly_revenue AS
SELECT strftime('%Y-%m', o.ordered_at) AS month,
       COUNT(DISTINCT o.id) AS orders,
       COALESCE(SUM(i.quantity * i.unit_price_cents), 0) AS revenue_cents
FROM orders AS o
LEFT JOIN order_items AS i ON i.order_id = o.id
WHERE o.status = 'paid'
GROUP BY month;
SQL
sqlite3 -csv -header /app/shop.db > /app/top_customers.csv <<'SQL'
SELECT c.id AS customer_id, c.name AS name, COALESCE(c.country, '') AS country,
       SUM(i.quantity * i.unit_price_cents) AS revenue_cents
FROM customers AS c
JOIN orders AS o ON o.customer_id = c.id AND o.status = 'paid'
JOIN order_items AS i ON i.order_id = o.id
GROUP BY c.id
ORDER BY revenue_cents DESC, c.id ASC
LIMIT 5;
SQL
