#!/bin/bash
# SPDX-License-Identifier: MIT
# Capacity and eviction (kvfs(7)): with -o capacity=64M, store 256 MiB of
# 2 MiB blocks with the engine's sequence while re-reading a hot set. Used
# space (du on DATADIR and statfs) stays under the high watermark, the hot
# set is never evicted, evicted names miss at once and every present name
# loads byte-exact, a block held open stays readable, and with every block
# held open the next store fails with ENOSPC while the stored blocks stay
# readable.
. "$(dirname "$0")/lib.sh"

LP=${LOOKUP_PROBE:?LOOKUP_PROBE is not set}
BLK=$((2 * 1024 * 1024))
CAP=$((64 * 1024 * 1024))
HIGH=$((CAP / 100 * 95))

t_init
[ "$T_MODE" = mount ] || t_finish
T_DATA=$(t_plain_dir data)
T_MNT=$(t_plain_dir mnt)
t_mount "$T_DATA" "$T_MNT" -o capacity=64M
D=$T_MNT/ns_r0/abc/de_g0
mkdir -p "$D"

kv_stat() {
	awk -v k="kvfs_$1" '$1 == k { print $2 }' "$T_MNT/.kvfs/stats"
}
check_use() {
	local du used
	du=$(du -s --block-size=1 "$T_DATA" | cut -f1)
	used=$(stat -f -c '%b %f %S' "$T_MNT" | awk '{ print ($1 - $2) * $3 }')
	[ "$du" -le "$HIGH" ] || t_fail "$1: du of DATADIR is $du > $HIGH"
	[ "$used" -le "$HIGH" ] || t_fail "$1: statfs use is $used > $HIGH"
}

# The block held open for the whole run.
[ "$("$LP" store "$D/held.bin" $BLK 999)" = "store: stored" ] ||
	t_fail "store held.bin"
exec 9<"$D/held.bin"

for i in $(seq 1 128); do
	out=$("$LP" store "$D/k$i.bin" $BLK "$i")
	[ "$out" = "store: stored" ] || t_fail "store k$i: $out"
	# The hot set: blocks 1-4, loaded after every fourth store (8 MiB
	# stored in between, a fraction of the capacity).
	for h in 1 2 3 4; do
		[ "$h" -le "$i" ] && [ $((i % 4)) -eq 0 ] || continue
		out=$("$LP" load "$D/k$h.bin" $BLK "$h")
		[ "$out" = "load: match" ] || t_fail "hot block k$h after k$i: $out"
	done
	[ $((i % 16)) -eq 0 ] && check_use "after $i stores"
done
sleep 1
check_use "at the end"

evicted=$(kv_stat evicted_total)
[ "${evicted:-0}" -gt 0 ] || t_fail "nothing was evicted"
present=0
for i in $(seq 1 128); do
	a=$("$LP" access "$D/k$i.bin")
	l=$("$LP" load "$D/k$i.bin" $BLK "$i")
	case "$a/$l" in
	"access: OK/load: match") present=$((present + 1)) ;;
	"access: ENOENT/load: open ENOENT") ;;
	*) t_fail "k$i: $a but $l" ;;
	esac
done
t_log "evicted $evicted blocks; $present of 128 present, all byte-exact"
[ "$present" -ge 4 ] || t_fail "fewer blocks present than the hot set"

# The held block was not evicted and still reads through its descriptor.
[ "$(head -c 8 <&9 | wc -c)" -eq 8 ] || t_fail "held block unreadable"
exec 9<&-
[ "$("$LP" load "$D/held.bin" $BLK 999)" = "load: match" ] ||
	t_fail "held block lost"

# Every block held open (and each new one once stored): stores go on
# until no room can be made, then fail with ENOSPC, and every held block
# stays readable.
mapfile -t all < <(find "$D" -name '*.bin' | sort)
out=$("$LP" holdstore "$D" $BLK 8 "${all[@]}")
nstored=$(grep -c "^store: stored$" <<<"$out")
grep -q "^store: close ENOSPC$" <<<"$out" ||
	t_fail "stores with everything open never failed: $out"
grep -q "^held: $((${#all[@]} + nstored)) readable, 0 not$" <<<"$out" ||
	t_fail "held blocks after ENOSPC: $out"
t_log "with ${#all[@]} blocks open: $nstored more stored, then ENOSPC"
[ "$(kv_stat capacity_enospc_total)" -ge 1 ] || t_fail "ENOSPC not counted"
check_use "after ENOSPC"
t_finish
