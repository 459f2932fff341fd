#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
printf '#!/bin/bash\necho "Hello, $1!"\n' > /app/greet.sh
chmod +x /app/greet.sh
