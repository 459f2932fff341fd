#!/usr/bin/env bash
# Reference solution: find -type d / -type f never selects symlinks, and chown -h / -R
# act on links themselves, so nothing outside the site is touched.
set -euo pipefail
cd /app/site
chown -R --no-dereference www:www /app/site
find /app/site -type d -exec chmod 00755 -- {} +
find /app/site -type f -exec chmod 0644 -- {} +
find /app/site/bin -type f -exec chmod 00755 -- {} +
find /app/site/private -type d -exec chmod 00700 -- {} +
find /app/site/private -type f -exec chmod 0600 -- {} +
find /app/site/uploads -type d -exec chmod 2775 -- {} +
find /app/site/uploads -type f -exec chmod 0664 -- {} +
