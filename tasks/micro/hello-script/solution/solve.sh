#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
printf '#!/bin/bash\necho "Hello from a script"\n' > /app/hello.sh
chmod +x /app/hello.sh
