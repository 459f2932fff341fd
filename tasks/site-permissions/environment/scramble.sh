#!/usr/bin/env bash
# Build-time only: users, shared files outside the site, links into them, wrong permissions.
set -euo pipefail
groupadd --system www && useradd --system --gid www --home-dir /app/site --shell /usr/sbin/nologin www
groupadd --system deploy && useradd --system --gid deploy --shell /bin/bash deploy
mkdir -p /opt/shared/fonts
printf 'shared team notes\n' > /opt/shared/notes.txt
printf 'font data\n' > /opt/shared/fonts/sans.ttf
chown -R deploy:deploy /opt/shared
chmod 750 /opt/shared /opt/shared/fonts
chmod 640 /opt/shared/notes.txt /opt/shared/fonts/sans.ttf
cd /app/site
ln -s /opt/shared/notes.txt docs/team-notes.txt
ln -s /opt/shared/fonts assets/fonts
ln -s ../index.html docs/home.html
chown -R root:root /app/site
chmod -R 777 /app/site
chmod 600 index.html
chmod 000 "About Us.html"
chmod 644 bin/rebuild.sh
chmod 755 private/db.conf
chmod 711 uploads
chmod 2777 docs private/keys
chown -h deploy:deploy docs/-notes.txt
