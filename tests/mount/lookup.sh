#!/bin/bash
# SPDX-License-Identifier: MIT
# The lookup manager and verdict cache through a real mount (kvfs(7)):
#  - 64 threads access() one absent name at once: one probe answers them;
#  - a block whose read fails (injected EIO) returns EIO, never a short
#    count; the very next access() and stat() miss although the kernel had
#    the name cached; the data stays in the store (a remount, which starts
#    with an empty verdict cache, reads it back byte-exact); storing the
#    name again heals it;
#  - lookups of several names in one directory reach the daemon at once
#    (the kernel does not queue them behind each other);
#  - a cold lookup (after a remount) gives the attributes the file had;
#  - a lookup interrupted by a signal, and a client killed while its lookup
#    is parked, leave the daemon healthy.
# The reference run (plain directory) checks the client program and the
# sequences that do not need fault injection.
. "$(dirname "$0")/lib.sh"

LP=${LOOKUP_PROBE:?LOOKUP_PROBE is not set}
BLK=$((2 * 1024 * 1024))

t_init
REF=$(t_plain_dir ref)
t_target

# kv_stat NAME: the value of counter kvfs_NAME in the mount's stats file.
kv_stat() {
	awk -v k="kvfs_$1" '$1 == k { print $2; found = 1 }
		END { if (!found) exit 1 }' "$T_MNT/.kvfs/stats" ||
		t_fail "no counter kvfs_$1 in $T_MNT/.kvfs/stats"
}

# expect CMD... = LINE: the client's output must be LINE.
expect() {
	local want=${*: -1} got
	got=$("${@:1:$#-2}") || t_fail "$* could not run"
	[ "$got" = "$want" ] || t_fail "$*: got '$got'"
}

# Both sides: stores and loads behave like the plain directory.
for d in "$REF" "$T_MNT"; do
	mkdir -p "$d/ns_r0/abc/de_g0" || t_fail "mkdir -p in $d"
	expect "$LP" storm "$d/ns_r0/abc/de_g0/absent.bin" 64 = \
		"storm: present=0 absent=64 other=0"
	expect "$LP" store "$d/ns_r0/abc/de_g0/k1.bin" $BLK 1 = "store: stored"
	expect "$LP" storm "$d/ns_r0/abc/de_g0/k1.bin" 64 = \
		"storm: present=64 absent=0 other=0"
	expect "$LP" load "$d/ns_r0/abc/de_g0/k1.bin" $BLK 1 = "load: match"
done
[ "$T_MODE" = mount ] || t_finish

# One probe for 64 simultaneous lookups of one new absent name.
LEAF="$T_MNT/ns_r0/abc/de_g0"
p0=$(kv_stat lookup_probes_total)
expect "$LP" storm "$LEAF/absent2.bin" 64 = "storm: present=0 absent=64 other=0"
p1=$(kv_stat lookup_probes_total)
[ $((p1 - p0)) -eq 1 ] || t_fail "64 lookups of one name took $((p1 - p0)) probes"
t_log "64 concurrent lookups of one absent name: 1 probe"

if [ "${KVFS_FAULT_INJECTION:-0}" != 1 ]; then
	t_log "fault injection not compiled in (-Dfault_injection=true): " \
		"skipping the failed-read and slow-probe cases"
	t_finish
fi

# A failed read turns the block into a miss at once; its data stays.
K="$LEAF/k1.bin"
expect "$LP" access "$K" = "access: OK"
stat "$K" >/dev/null || t_fail "stat $K"
du0=$(du -s --block-size=1 "$T_DATA/data" | cut -f1)
frees0=$(kv_stat store_frees_total)
expect "$LP" setxattr "$K" user.kvfs.fault.read 5 = "setxattr: OK"
expect "$LP" load "$K" $BLK 1 = "load: read EIO"
expect "$LP" access "$K" = "access: ENOENT"
stat "$K" 2>/dev/null && t_fail "stat $K still succeeds after the failed read"
[ "$(kv_stat quarantined)" -eq 1 ] || t_fail "no quarantined verdict"
[ "$(kv_stat marked_misses_total)" -ge 1 ] || t_fail "no marked miss counted"
[ "$(kv_stat kernel_invalidations_total)" -ge 1 ] ||
	t_fail "no kernel invalidation counted"
[ "$(kv_stat store_frees_total)" -eq "$frees0" ] ||
	t_fail "the quarantined block's record was freed"
du1=$(du -s --block-size=1 "$T_DATA/data" | cut -f1)
[ "$du1" -ge "$du0" ] || t_fail "data directory shrank ($du0 -> $du1)"
t_log "failed read: EIO, then access/stat miss; data kept"

# The quarantine lives in the verdict cache: after a remount the block is
# back and reads byte-exact, which proves its data was kept.
t_umount "$T_MNT"
t_mount "$T_DATA" "$T_MNT"
expect "$LP" access "$K" = "access: OK"
expect "$LP" load "$K" $BLK 1 = "load: match"

# Quarantine again, then the engine stores the name anew: healed.
expect "$LP" setxattr "$K" user.kvfs.fault.read 5 = "setxattr: OK"
expect "$LP" load "$K" $BLK 1 = "load: read EIO"
expect "$LP" access "$K" = "access: ENOENT"
expect "$LP" store "$K" $BLK 2 = "store: stored"
expect "$LP" access "$K" = "access: OK"
expect "$LP" load "$K" $BLK 2 = "load: match"
[ "$(kv_stat quarantined)" -eq 0 ] || t_fail "heal left a quarantine behind"
t_log "storing the name again healed it"

# Lookups of several names in one directory reach the daemon at once
# (FUSE_PARALLEL_DIROPS, which kvfs adds to libfuse 3.14's INIT reply):
# with every probe slowed down, the first absent name is probed alone and
# the three looked up meanwhile together. Without the flag the kernel
# sends them one at a time: four probes.
expect "$LP" setxattr "$T_MNT" user.kvfs.fault.probe_delay_ms 1000 = \
	"setxattr: OK"
p0=$(kv_stat lookup_probes_total)
k0=$(kv_stat lookup_batched_keys_total)
pids=()
for i in 1 2 3 4; do
	"$LP" access "$LEAF/par$i.bin" >"$T_TMP/par$i.out" &
	pids+=($!)
done
for i in 1 2 3 4; do
	wait "${pids[$((i - 1))]}" # exit status 1: the name is absent
	[ "$(cat "$T_TMP/par$i.out")" = "access: ENOENT" ] ||
		t_fail "access par$i.bin: $(cat "$T_TMP/par$i.out")"
done
p=$(($(kv_stat lookup_probes_total) - p0))
k=$(($(kv_stat lookup_batched_keys_total) - k0))
[ "$k" -eq 4 ] && [ "$p" -lt "$k" ] ||
	t_fail "4 concurrent lookups in one directory: $k names in $p" \
		"probes (the kernel sent them one at a time)"
t_log "4 concurrent lookups in one directory: $k names in $p probes"

# A parked lookup interrupted by a signal.
expect "$LP" setxattr "$T_MNT" user.kvfs.fault.probe_delay_ms 1500 = \
	"setxattr: OK"
out=$("$LP" interrupt "$LEAF/slow1.bin" 300) || t_fail "interrupt client"
case $out in
"interrupt: EINTR" | "interrupt: ENOENT") ;;
*) t_fail "interrupted lookup: $out" ;;
esac
t_log "interrupted lookup: $out (cancelled=$(kv_stat lookup_cancelled_total))"

# A client killed while its lookup is parked.
"$LP" access "$LEAF/slow2.bin" >/dev/null &
victim=$!
sleep 0.3
kill -KILL "$victim"
wait "$victim" 2>/dev/null
expect "$LP" setxattr "$T_MNT" user.kvfs.fault.probe_delay_ms 0 = \
	"setxattr: OK"

# The daemon is healthy: lookups, stores and loads all still work.
expect "$LP" access "$LEAF/slow2.bin" = "access: ENOENT"
expect "$LP" store "$LEAF/k3.bin" $BLK 3 = "store: stored"
expect "$LP" load "$LEAF/k3.bin" $BLK 3 = "load: match"
expect "$LP" load "$K" $BLK 2 = "load: match"

# A cold lookup's attributes: after a remount nothing is known, a worker
# probes each name itself and makes its node from what that probe read
# (no second index query); stat must give what it gave before, also with
# lookups running side by side.
A=$T_MNT/attrs
NAMES="f0 f1 f2 f3 f4 f5 f6 f7 d l h"
mkdir "$A" "$A/d"
for i in 0 1 2 3 4 5 6 7; do
	head -c $((i * 1000 + 1)) /dev/zero >"$A/f$i"
	chmod $((600 + i)) "$A/f$i"
	touch -d "2020-01-0$((i + 1)) 12:00:00" "$A/f$i"
done
chown 1234:5678 "$A/f2"
ln -s f0 "$A/l"
ln "$A/f1" "$A/h"
attrs() {
	# shellcheck disable=SC2086
	(cd "$A" && printf '%s\n' $NAMES | xargs -P 8 -n 1 \
		stat -c '%n %i %f %u %g %h %s %Y %X %Z' | sort)
}
before=$(attrs)
t_umount "$T_MNT"
t_mount "$T_DATA" "$T_MNT"
after=$(attrs)
[ "$before" = "$after" ] ||
	t_fail "attributes after a remount differ: before $before, after $after"
t_log "cold lookups give the attributes the files had"
t_finish
