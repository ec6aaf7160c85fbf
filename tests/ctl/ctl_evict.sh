#!/bin/bash
# SPDX-License-Identifier: MIT
# kvfsctl evict against a live mount:
#  - N blocks stored with the engine's sequence (temp name, O_DIRECT write,
#    rename), one after the other, so the least recently used is the first;
#  - evict --to a size: the daemon's answer says use ended at or below it;
#    exactly the oldest blocks it counted are gone (access and stat say
#    ENOENT), every other block reads back byte-exact; the eviction counter
#    moved by as many; the daemon logged the bulk eviction in one line;
#  - evict --to 0 with one block held open: every other block goes, the
#    open one stays and reads back through its descriptor and by name;
#    exit 1 (the target cannot be reached); after a remount the data files
#    hold little more than that block;
#  - bad arguments: exit 2, a "kvfsctl evict: ..." message, nothing on
#    stdout, nothing evicted.
. "$(dirname "$0")/lib.sh"
KC_FAILS_CMD=" evict: "
BLK=$((1024 * 1024))
N=12

# evicted_total: the daemon's eviction counter.
evicted_total() {
	awk '$1 == "kvfs_evicted_total" { print $2; found = 1 }
		END { if (!found) exit 1 }' "$MNT/.kvfs/stats" ||
		t_fail "no kvfs_evicted_total in $MNT/.kvfs/stats"
}

kc_init
T_DATA=$(t_plain_dir data)
T_MNT=$(t_plain_dir mnt)
# Far above what the test stores: only kvfsctl evicts.
t_mount "$T_DATA" "$T_MNT" -o capacity=1G
MNT=$(realpath "$T_MNT")
DATA=$(realpath "$T_DATA")
LEAF="$MNT/model_r0/abc/de_g0"
mkdir -p "$LEAF" || t_fail "mkdir in $MNT"
for k in $(seq 1 $N); do
	expect "$LP" store "$LEAF/k$k.bin" $BLK $k = "store: stored"
done
t_log "stored $N blocks of $BLK bytes"

kc_run 0 "evict --help" "$KC" evict --help
has "evict --help" "^usage: kvfsctl evict "
has "evict --help" "^Exit status"

# Bad arguments: nothing is evicted.
PLAIN=$(t_plain_dir plain)
e0=$(evicted_total)
kc_fails "missing --to SIZE" "$KC" evict "$MNT"
kc_fails "bad SIZE '12Q'" "$KC" evict --to 12Q "$MNT"
kc_fails "bad SIZE '-5'" "$KC" evict --to -5 "$MNT"
kc_fails "bad SIZE '101%': too large" "$KC" evict --to 101% "$MNT"
kc_fails "bad SIZE '99999999999T': too large" \
	"$KC" evict --to 99999999999T "$MNT"
kc_fails "option '--to' needs a value" "$KC" evict "$MNT" --to
kc_fails "unknown option '--bogus'" "$KC" evict --bogus --to 1M "$MNT"
kc_fails "missing MOUNTPOINT\|DATADIR" "$KC" evict --to 1M
kc_fails "too many arguments" "$KC" evict --to 1M "$MNT" "$MNT"
kc_fails "neither a kvfs mount point nor" "$KC" evict --to 1M "$PLAIN"
kc_fails "No such file or directory" "$KC" evict --to 1M "$T_TMP/none"
[ "$(evicted_total)" -eq "$e0" ] || t_fail "a refused evict evicted blocks"
for k in $(seq 1 $N); do
	expect "$LP" access "$LEAF/k$k.bin" = "access: OK"
done

# Evict down to about half of what is used: the oldest blocks go.
kc_run 0 status "$KC" status --json "$MNT"
used=$(json_num "$T_TMP/out" used_bytes)
[ -n "$used" ] && [ "$used" -gt $((N * BLK)) ] ||
	t_fail "status: used_bytes '$used' is not above $((N * BLK))"
target=$((used - N * BLK / 2))
kc_run 0 evict "$KC" evict --json --to "$target" "$MNT"
cp "$T_TMP/out" "$T_TMP/evict.json"
has evict '^\{"ok": true, '
has evict '"reached": true'
[ "$(json_num "$T_TMP/evict.json" target)" -eq "$target" ] ||
	t_fail "evict: the daemon's target is not $target"
after=$(json_num "$T_TMP/evict.json" used_after)
[ "$after" -le "$target" ] || t_fail "evict: use $after is above $target"
E=$(json_num "$T_TMP/evict.json" evicted)
[ "$E" -ge $((N / 2 - 1)) ] && [ "$E" -lt $N ] ||
	t_fail "evict: $E blocks evicted, want about $((N / 2)) of $N"
[ "$(json_num "$T_TMP/evict.json" evicted_bytes)" -eq $((E * BLK)) ] ||
	t_fail "evict: evicted_bytes is not $E blocks"
[ "$(evicted_total)" -eq $((e0 + E)) ] ||
	t_fail "kvfs_evicted_total moved by $(($(evicted_total) - e0)), want $E"
for k in $(seq 1 $N); do
	if [ "$k" -le "$E" ]; then
		expect "$LP" access "$LEAF/k$k.bin" = "access: ENOENT"
		stat "$LEAF/k$k.bin" >/dev/null 2>"$T_TMP/stat.err" &&
			t_fail "stat of evicted k$k.bin succeeded"
		grep -q "No such file or directory" "$T_TMP/stat.err" ||
			t_fail "stat of evicted k$k.bin: $(cat "$T_TMP/stat.err")"
	else
		expect "$LP" load "$LEAF/k$k.bin" $BLK $k = "load: match"
	fi
done
grep -E -q "evicted $E blocks \($((E * BLK)) bytes\) for uid [0-9]+ pid [0-9]+ \(kvfsctl evict\): use [0-9]+ -> $after bytes, target $target\$" \
	"${T_LOG[$T_MNT]}" || {
	t_show "${T_LOG[$T_MNT]}"
	t_fail "the daemon did not log the eviction"
}
t_log "evict --to $target: the $E oldest blocks gone, the rest byte-exact"

# Text output, by data directory, when use is already there.
kc_run 0 evict-noop "$KC" evict --to 100% "$DATA"
has evict-noop "^evicted 0 blocks \(0 B\) from $MNT\$"
has evict-noop "^use +.* -> .* \(target .*, capacity 1.00 GiB\)\$"

# Everything, with the newest block held open: it alone survives.
H="$LEAF/k$N.bin"
REF=$(t_plain_dir ref)
expect "$LP" store "$REF/k$N.bin" $BLK $N = "store: stored"
exec 7<"$H" || t_fail "cannot open $H"
kc_run 1 evict-all "$KC" evict --to 0 "$MNT"
has evict-all "^evicted $((N - E - 1)) blocks \($((N - E - 1)).00 MiB\) from $MNT\$"
has evict-all "^target not reached: the blocks left are open"
for k in $(seq 1 $((N - 1))); do
	expect "$LP" access "$LEAF/k$k.bin" = "access: ENOENT"
done
expect "$LP" access "$H" = "access: OK"
cmp - "$REF/k$N.bin" <&7 || t_fail "the open block differs through its fd"
exec 7<&-
expect "$LP" load "$H" $BLK $N = "load: match"
[ "$(evicted_total)" -eq $((e0 + N - 1)) ] ||
	t_fail "kvfs_evicted_total is not $((e0 + N - 1))"
t_log "evict --to 0: all but the open block gone, it reads back"

# The space is really free once nothing holds the evicted inodes (at the
# latest, the next mount frees their records).
t_umount "$T_MNT"
t_mount "$T_DATA" "$T_MNT" -o capacity=1G
kc_run 0 status-after "$KC" status --json "$MNT"
has status-after '"blocks": 1, '
phys=$(json_num "$T_TMP/out" physical_bytes)
[ "$phys" -lt $((2 * BLK)) ] ||
	t_fail "data files still take $phys bytes after evicting all but 1 block"
expect "$LP" load "$H" $BLK $N = "load: match"
t_log "after a remount the data files take $phys bytes"
t_finish
