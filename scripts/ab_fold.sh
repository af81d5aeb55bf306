#!/usr/bin/env bash
# Caliber example: FlagGems' MXFP4 fold-scale switch (AXIS=FOLDSCALE, FLAGGEMS_MXFP4_FOLDSCALE).
#
#   scripts/ab_fold.sh [BACKEND] [OP] [extra make variables...]
#   scripts/ab_fold.sh cuda mm ROUNDS=5 NOISE_FROM=runs/ab/none-mm/<ts>
#
# The axis must be live before a table means anything: if both sides compiled the same code
# and the compiler never names the switch, the campaign prints AXIS_NOT_LIVE and exits 6.
set -euo pipefail
cd "$(dirname "$0")/.."
exec make ab BACKEND="${1:-cuda}" OP="${2:-mm}" AXIS=FOLDSCALE "${@:3}"
