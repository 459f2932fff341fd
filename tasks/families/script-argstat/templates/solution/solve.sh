#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tee /app/argstat.sh > /dev/null <<'SH'
#!/usr/bin/env bash
%%{body}
SH
chmod u+x,go+rx /app/argstat.sh
