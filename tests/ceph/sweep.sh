#!/bin/bash
# SPDX-License-Identifier: MIT
# The shared tier's sweeper (issue 13): two kvfs daemons, A and B, on one
# pool with rados_capacity=8M, rados_sweep_interval=1, rados_lease=3:
#   1. they store 30 blocks of 1 MiB in turn (A the even ones, B the odd
#      ones, each put drained by kvfsctl sync before the next store); within
#      a few seconds the blocks' objects take at most 8 MiB, at least 7
#      remain (the sweep stops at 90% of the capacity), and the ones left
#      are the most recently stored (least recently used removed first);
#   2. exactly one daemon holds the sweeper lease (kvfs_rados_sweeper 1),
#      the same one for 3 s, and it counted its sweeps; a swept block
#      misses on the other machine, a kept one loads there byte-exact;
#   3. the holder is killed (-9) and its mount lazily unmounted; the
#      survivor stores 10 more blocks at once, takes the lease within
#      lease + interval + 5 s, and brings the pool back under 8 MiB, again
#      keeping the most recently used blocks: the last 7 stored, not block
#      28, read in 2 before they were stored.
# Exits 77 (skip) when Ceph is not installed (scripts/setup-deps --ceph).
#
# Environment: CEPH_TEST_CLUSTER, KVFS, KVFSCTL, WB_CLIENT, LOOKUP_PROBE.
NAME=ceph_sweep
# shellcheck disable=SC2034 # read by tests/mount/lib.sh
T_NEEDS="WB_CLIENT LOOKUP_PROBE"
. "$(dirname "$0")/tier.sh"

MiB=$((1024 * 1024))
CAP=$((8 * MiB))
OPTS=rados_capacity=8M,rados_sweep_interval=1,rados_lease=3
USAGE=0  # bytes of the b: objects (pool_usage)
KEPT=()  # the numbers of the blocks whose objects are there (pool_usage)

# pool_usage: USAGE and KEPT from the pool's b: objects (one removed
# meanwhile by the sweeper is not counted).
pool_usage() {
	local o n objs
	USAGE=0
	KEPT=()
	r ls || fail "rados ls: $OUT"
	mapfile -t objs < <(grep '^b:' <<<"$OUT" | sort)
	for o in "${objs[@]}"; do
		r stat "$o" || continue
		USAGE=$((USAGE + ${OUT##* }))
		n=${o##*/b}
		n=${n%.bin}
		KEPT+=($((10#$n)))
	done
}

# wait_under SECS: polls until the blocks take at most CAP; prints how long.
wait_under() {
	local t0=$SECONDS
	while pool_usage && [ "$USAGE" -gt "$CAP" ]; do
		[ $((SECONDS - t0)) -lt "$1" ] || fail "the pool's blocks take" \
			"$USAGE bytes > $CAP after $1 s (kept: ${KEPT[*]})"
		sleep 0.5
	done
	echo $((SECONDS - t0))
}

# use_times: the last use the pool records for each block (its use
# shards u:0 .. u:15), one "PATH SECONDS" line each, for a failure report.
use_times() {
	local u k
	for ((u = 0; u < 16; u++)); do
		r listomapkeys "u:$u" || continue
		for k in $OUT; do
			timeout -k 5 60 rados -c "$CONF" -p "$POOL" getomapval \
				"u:$u" "$k" "$T/use" >/dev/null 2>&1 || continue
			echo "$k $(od -A n -t u8 -N 8 "$T/use" |
				awk '{ printf "%.3f", $1 / 1e9 }')"
		done
	done | sort -k 2 -n
}

# check_lru N: of blocks 0 .. N-1, the ones kept are N-k .. N-1 (the most
# recently used: stored, or read as in case 2), with k >= 7 (a sweep stops
# at 90% of 8 MiB).
check_lru() {
	local n=$1 k=${#KEPT[@]} i
	[ "$k" -ge 7 ] || fail "only $k blocks kept ($USAGE bytes): ${KEPT[*]}"
	for ((i = 0; i < k; i++)); do
		[ "${KEPT[i]}" -eq $((n - k + i)) ] && continue
		log "the pool's last uses:"
		use_times >&2
		fail "kept blocks ${KEPT[*]}: not the $k most recently" \
			"used of 0 .. $((n - 1)) (times above and in the" \
			"'stored' and 'read' lines)"
	done
	log "kept: ${KEPT[*]} ($USAGE bytes <= $CAP)"
}

# store NAME I: block I stored on NAME and its put drained.
store() {
	expect "stored ${MNT[$1]}/s/b$(printf %06d "$2").bin" \
		"$WB_CLIENT" store "${MNT[$1]}/s" "$2" 1 $MiB
	kc_sync "$1"
	log "stored $2 on $1 at $(date +%s.%N | cut -c1-14)"
}

# holder: the name of the daemon holding the lease ("" when none, "AB"
# when both claim it).
holder() {
	local n h=
	for n in "$@"; do
		[ "$(need "$n" rados_sweeper)" = 1 ] && h=$h$n
	done
	echo "$h"
}

cl_start
tier_mount A "$OPTS"
tier_mount B "$OPTS"
mkdirs "${MNT[A]}/s" "${MNT[B]}/s"

# 1.
log "1: 30 blocks of 1 MiB stored in turn on A and B"
for ((i = 0; i < 30; i++)); do
	if ((i % 2)); then store B "$i"; else store A "$i"; fi
done
s=$(wait_under 10) || exit 1
sleep 2 # the sweeper settles
pool_usage
[ "$USAGE" -le "$CAP" ] || fail "1: $USAGE bytes again after 2 s"
log "1: under 8 MiB $s s after the last store"
check_lru 30

# 2.
H=$(holder A B) || exit 1
[ "$H" = A ] || [ "$H" = B ] || fail "2: the lease holders: '$H'"
for _ in 1 2 3; do
	sleep 1
	[ "$(holder A B)" = "$H" ] ||
		fail "2: the lease moved from $H to '$(holder A B)'"
done
[ "$(need "$H" rados_swept_total)" -ge $((30 - ${#KEPT[@]})) ] ||
	fail "2: $H swept $(need "$H" rados_swept_total) objects"
log "2: $H holds the lease, swept $(need "$H" rados_swept_total) objects" \
	"($(need "$H" rados_swept_bytes_total) bytes, usage" \
	"$(need "$H" rados_usage_bytes))"
# Block 0 was A's, 28 A's too: both read from B.
expect "access: ENOENT" "$LOOKUP_PROBE" access "${MNT[B]}/s/b000000.bin"
expect "verify: 1 present, 0 absent, 0 bad" \
	"$WB_CLIENT" verify "${MNT[B]}/s" 28 1 $MiB
log "2: read 28 on B at $(date +%s.%N | cut -c1-14)"
log "2: on B, A's swept block 0 misses, A's kept block 28 loads byte-exact"

# 3.
S=$([ "$H" = A ] && echo B || echo A)
log "3: the holder $H killed; $S stores 10 more"
tier_kill "$H"
t0=$SECONDS
for ((i = 30; i < 40; i++)); do
	store "$S" "$i"
done
left=$((3 + 1 + 5 - (SECONDS - t0)))
[ "$left" -ge 1 ] || left=1
wait_metric "$S" rados_sweeper 1 "$left" >/dev/null || exit 1
log "3: $S holds the lease $((SECONDS - t0)) s after the kill"
wait_under 5 >/dev/null || exit 1
check_lru 40
log "3: $S swept $(need "$S" rados_swept_total) objects in all"
t_finish
