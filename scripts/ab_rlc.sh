#!/usr/bin/env bash
# Caliber example: FlagTree's RemoveLayoutConversions switch (AXIS=RLC_ENHANCE), off against on.
#
#   scripts/ab_rlc.sh [BACKEND] [OP] [extra make variables...]
#   scripts/ab_rlc.sh musa mm ROUNDS=5 DEVICES=0
#
# The backend spells the switch (FLAGTREE_MUSA_RLC_ENHANCE on musa, FLAGTREE_RLC_ENHANCE on
# cuda). A table means something only once the axis is live: the campaign fingerprints both
# sides' compiled artifacts and, when they are equal and the installed compiler never names the
# switch, prints AXIS_NOT_LIVE and exits 6 instead of reporting "no difference". Run an A/A
# campaign first (AXIS=none) and pass it as NOISE_FROM= to state the noise floor.
set -euo pipefail
cd "$(dirname "$0")/.."
exec make ab BACKEND="${1:-musa}" OP="${2:-mm}" AXIS=RLC_ENHANCE "${@:3}"
