#!/usr/bin/env bash
# soak.sh -- run flame_profd against the demo node for a long time and
# sample its RSS, to show memory stays flat.
#
#   bench/soak.sh [MINUTES] [FLAME_PROFD] [extra flame_profd flags]   (default 60)
#
# Prints one line per 10 s: elapsed seconds, RSS kB; then first/last/min/max
# RSS, min/max from the 10th minute on (after the buffers have grown to
# their working size) and the peak (VmHWM). Stops the daemon, the node and
# epmd at the end, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=${1:-60}
daemon=${2:-build/daemon/flame_profd}
shift $(($# < 2 ? $# : 2))
work=$(mktemp -d /tmp/flame_profd-soak.XXXXXX)
unset ERL_EPMD_PORT
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; scripts/demo-node stop "$work" >/dev/null 2>&1 || true' EXIT
node=$(scripts/demo-node start "$work" --idle 10000 --busy 1)
export ERL_EPMD_PORT=$(cat "$work/epmd.port")
"$daemon" --node "$node" --cookie-file "$work/cookie" --top 100 --rate 10 \
	--every 5s --rotate 1m --keep-files 5 --out "$work/out" -q "$@" &
pid=$!
end=$((SECONDS + minutes * 60))
start=$SECONDS
while [ $SECONDS -lt $end ] && kill -0 "$pid" 2>/dev/null; do
	rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
	echo "$((SECONDS - start)) $rss"
	sleep 10
done | tee "$work/rss.log"
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
kill -TERM "$pid"; wait "$pid" || true
pid=
awk -v hwm="$hwm" '
	NR == 1 { first = $2 }
	{ last = $2; if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2 }
	$1 >= 600 { if (smin == "" || $2 < smin) smin = $2; if ($2 > smax) smax = $2 }
	END {
		printf "rss_kb first=%d last=%d min=%d max=%d samples=%d\n", first, last, min, max, NR
		if (smin != "") printf "rss_kb from 600 s: min=%d max=%d\n", smin, smax
		printf "vmhwm_kb=%d\n", hwm
	}' "$work/rss.log"
