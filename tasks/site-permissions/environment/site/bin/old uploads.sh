#!/bin/sh
find /app/site/uploads -mtime +30 -type f -print
