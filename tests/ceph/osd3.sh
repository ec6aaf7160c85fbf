#!/bin/bash
# SPDX-License-Identifier: MIT
# The shared tier on a replicated pool (issue 13): a cluster of three OSDs
# (pool size 3); daemon A stores 20 blocks (10 of 2 MiB, 10 of 512 KiB)
# and syncs; one OSD is killed (SIGKILL); daemon B, which has none of them,
# then loads every block byte-exact, each one pulled from the cluster.
# The loads start at once after the kill: a pull whose primary OSD was
# the killed one waits until the cluster marks it down (~10 s here), so
# the daemons run with rados_timeout=20; each verify (10 loads) is
# bounded to 60 s.
# Exits 77 (skip) when Ceph is not installed (scripts/setup-deps --ceph).
#
# Environment: CEPH_TEST_CLUSTER, KVFS, KVFSCTL, WB_CLIENT.
NAME=ceph_osd3
# shellcheck disable=SC2034 # read by tests/mount/lib.sh
T_NEEDS="WB_CLIENT"
. "$(dirname "$0")/tier.sh"

MiB=$((1024 * 1024))
RADOS_TIMEOUT=20

cl_start --osds 3
bnd 30 ceph -c "$CONF" osd pool get "$POOL" size || fail "pool size: $OUT"
[ "$OUT" = "size: 3" ] || fail "the pool: '$OUT' (want size 3)"
tier_mount A
tier_mount B

mkdirs "${MNT[A]}/o"
bnd 60 "$WB_CLIENT" store "${MNT[A]}/o" 0 10 $((2 * MiB)) ||
	fail "A: store: $OUT"
bnd 60 "$WB_CLIENT" store "${MNT[A]}/o" 10 10 $((MiB / 2)) ||
	fail "A: store: $OUT"
kc_sync A
r ls || fail "rados ls: $OUT"
[ "$(grep -c '^b:/o/b0000[01][0-9]\.bin$' <<<"$OUT")" -eq 20 ] ||
	fail "not 20 objects after A's sync: $OUT"
log "A stored 20 blocks, synced: 20 objects"

p0=$(need B rados_pulls_total) || exit 1
"$CTC" kill-osd "$CL" 1 || fail "kill-osd 1"
log "osd.1 killed"
t0=$SECONDS
for first in 0 10; do
	size=$((first ? MiB / 2 : 2 * MiB))
	bnd 60 "$WB_CLIENT" verify "${MNT[B]}/o" $first 10 $size
	[ "$OUT" = "verify: 10 present, 0 absent, 0 bad" ] ||
		fail "B: blocks $first to $((first + 9)): $OUT"
done
[ "$(need B rados_pulls_total)" -eq $((p0 + 20)) ] ||
	fail "B made $(($(need B rados_pulls_total) - p0)) pulls for 20 loads"
bnd 30 ceph -c "$CONF" osd dump || fail "osd dump: $OUT"
log "B loaded all 20 byte-exact in $((SECONDS - t0)) s, 20 pulls;" \
	"$(grep -o '^osd\.1 [a-z]*' <<<"$OUT")"
t_finish
