#!/usr/bin/env bash
# The malformed-input audit (docs/fuzzing.md): every reader and command of the
# lsplat-engine binary on generated nonsense, counting crashes, hangs and exit 0 on
# nonsense (all must be 0). Writes the table and every problem to $1 (default
# audit-report.md) and fails when any count is not 0.
set -euo pipefail
cd "$(dirname "$0")/.."
report="$(realpath -m "${1:-audit-report.md}")"
LSPLAT_AUDIT_REPORT="$report" cargo test -p lsplat-cli --test audit -- --ignored --nocapture audit_full
echo "report: $report"
