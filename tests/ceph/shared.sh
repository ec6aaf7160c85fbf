#!/bin/bash
# SPDX-License-Identifier: MIT
# The shared tier (issue 13): two kvfs daemons, A and B, with their own
# data directories and mountpoints on one pool of a throw-away cluster:
#   1. A stores blocks with vLLM's exact sequence (vllm_io populate: 512
#      KiB, 2 MiB, 5 MiB and 3 MiB+123 bytes, the last not a multiple of
#      4 KiB); after kvfsctl sync A, B lists them (ls of every directory
#      on the way, as on a plain directory holding the same blocks), stats
#      them with their sizes, access() hits, and vLLM's load sequence on B
#      reads them byte-exact (and cmp with the source bytes); the lookups
#      pull nothing, each load pulls one object; kvfsctl status shows the
#      tier;
#   2. B's second load is local: with the page cache dropped,
#      kvfs_rados_pulls_total on B does not grow;
#   3. the same key stored at once on A and B, with the same bytes and with
#      different ones: after both syncs each machine reads one whole
#      version, and the object (rados get) is exactly one of them;
#   4. an unlink on A reaches RADOS, and B, which had one name as a stub
#      and one loaded, loses both after its entry timeout (access ENOENT,
#      gone from ls, kvfs_rados_remote_unlinks_total counts them);
#   5. an object truncated with the rados tool (provably short): B's load
#      fails with EIO, the name then misses and the object is gone; an
#      object with a flipped byte (kvfs.len and kvfs.crcs kept): EIO, a
#      miss, and the object kept;
#   6. the cluster stopped while both mounts serve (its monitor's ports
#      held by a listener that never answers, so that no other test's
#      cluster starts there meanwhile): A's own blocks and B's pulled ones
#      still load, absent names miss and A stores, nothing hangs (every
#      call bounded to 30 s), kvfs_rados_reachable becomes 0 with one log
#      line; a new cluster started in the same directory on the same port
#      is found again within 15 s (kvfs_rados_reachable 1, logged), and a
#      block stored on A then is seen on B. Each daemon closes its handle
#      of the lost cluster (logged) before the new one starts, and the new
#      cluster's OSD map epoch is taken past the old one's: a handle left
#      open would read the new maps as the old cluster's next ones and
#      librados would abort the daemon.
# Exits 77 (skip) when Ceph is not installed (scripts/setup-deps --ceph).
#
# Environment: CEPH_TEST_CLUSTER, KVFS, KVFSCTL, VLLM_IO, LOOKUP_PROBE.
NAME=ceph_shared
# shellcheck disable=SC2034 # read by tests/mount/lib.sh
T_NEEDS="VLLM_IO LOOKUP_PROBE"
. "$(dirname "$0")/tier.sh"

LP=$LOOKUP_PROBE
MiB=$((1024 * 1024))
REF=     # a plain directory holding what A stored (the source bytes)
BLOCKS=() # the blocks of case 1, relative to the root
EPOCH0=   # the OSD map epoch before case 6 stops the cluster

# in_both CMD ARGS... (with @ for the root): CMD on REF and on B must
# print the same (bounded).
in_both() {
	local ref got
	bnd 30 "${@//@/$REF}" || fail "${*//@/REF}: exit $? ($OUT)"
	ref=$OUT
	bnd 30 "${@//@/${MNT[B]}}" || fail "${*//@/B}: exit $? ($OUT)"
	got=$OUT
	[ "$ref" = "$got" ] || {
		diff -u <(echo "$ref") <(echo "$got") >&2
		fail "${*//@/ROOT}: B differs from the plain directory"
	}
}

# vllm_verify NAME: vLLM's load sequence over case 1's blocks on NAME must
# print what it prints on REF (every block a match).
vllm_verify() {
	bnd 30 "$VLLM_IO" verify "$REF" 1 || fail "vllm_io verify REF: $OUT"
	echo "$OUT" >"$T/verify.ref"
	bnd 30 "$VLLM_IO" verify "${MNT[$1]}" 1 ||
		fail "vllm_io verify on $1: exit $? ($OUT)"
	echo "$OUT" >"$T/verify.$1"
	diff -u "$T/verify.ref" "$T/verify.$1" >&2 ||
		fail "$1: vLLM's loads differ from the plain directory's"
	[ "$(grep -c ' match$' "$T/verify.$1")" -eq 8 ] ||
		fail "$1: not every block loaded"
}

# cmp_blocks NAME: every file of case 1 on NAME equals the source bytes.
cmp_blocks() {
	local b
	for b in "${BLOCKS[@]}"; do
		bnd 30 cmp "$REF/$b" "${MNT[$1]}/$b" ||
			fail "$1: $b differs from the source bytes: $OUT"
	done
}

case_1() {
	local b d p0 h0
	log "1: A stores with vLLM's sequence, B lists, stats, finds, loads"
	REF=$(t_plain_dir ref)
	bnd 60 "$VLLM_IO" populate "$REF" 1 || fail "populate REF: $OUT"
	echo "$OUT" >"$T/populate.ref"
	bnd 60 "$VLLM_IO" populate "${MNT[A]}" 1 || fail "populate A: $OUT"
	echo "$OUT" >"$T/populate.A"
	diff -u "$T/populate.ref" "$T/populate.A" >&2 ||
		fail "1: vLLM's stores on A differ from the plain directory's"
	[ "$(grep -c -- '-> stored$' "$T/populate.A")" -eq 8 ] ||
		fail "1: A did not store 8 blocks"
	mapfile -t BLOCKS < <(cd "$REF" && find . -type f | sed 's|^\./||' |
		sort)
	[ "${#BLOCKS[@]}" -eq 9 ] || fail "1: ${#BLOCKS[@]} files in REF"
	kc_sync A
	log "1: A: 8 blocks and config.json stored, synced" \
		"(puts $(need A rados_puts_total)," \
		"put errors $(need A rados_put_errors_total))"
	p0=$(need B rados_pulls_total) || exit 1
	h0=$(need B rados_remote_hits_total) || exit 1
	# Every directory on the way, listed before any name in it is looked
	# up: readdir alone shows what A stored.
	in_both ls -1 @
	for b in "${BLOCKS[@]}"; do
		d=$(dirname "$b")
		while [ "$d" != . ]; do
			in_both ls -1 "@/$d"
			d=$(dirname "$d")
		done
	done
	log "1: B lists every directory as the plain directory does"
	for b in "${BLOCKS[@]}"; do
		in_both stat -c %s "@/$b"
		expect "access: OK" "$LP" access "${MNT[B]}/$b"
	done
	[ "$(need B rados_pulls_total)" -eq "$p0" ] ||
		fail "1: B's lookups pulled objects (pulls $p0 ->" \
			"$(need B rados_pulls_total))"
	[ "$(need B rados_remote_hits_total)" -gt "$h0" ] ||
		fail "1: kvfs_rados_remote_hits_total on B did not grow"
	log "1: B: stat sizes as stored, access() hits, nothing pulled yet" \
		"(remote hits $h0 -> $(need B rados_remote_hits_total))"
	vllm_verify B
	[ "$(need B rados_pulls_total)" -eq $((p0 + 8)) ] ||
		fail "1: 8 loads on B made $(($(need B rados_pulls_total) - p0))" \
			"pulls"
	cmp_blocks B
	log "1: B: vLLM's loads match, cmp with the source bytes equal" \
		"(pulls $p0 -> $(need B rados_pulls_total))"
	bnd 30 "$KVFSCTL" status "${MNT[B]}" || fail "1: kvfsctl status: $OUT"
	grep '^shared tier:' <<<"$OUT" >&2 ||
		fail "1: kvfsctl status prints no 'shared tier:' line: $OUT"
}

case_2() {
	local p1
	log "2: B's second load is local"
	p1=$(need B rados_pulls_total) || exit 1
	drop_caches
	vllm_verify B
	cmp_blocks B
	[ "$(need B rados_pulls_total)" -eq "$p1" ] ||
		fail "2: second loads on B pulled again ($p1 ->" \
			"$(need B rados_pulls_total))"
	log "2: B: second loads match with no pull (pulls $p1)"
}

# Stubs on B (names only in RADOS there) truncated, renamed, removed: the
# bytes come along, and the pool follows the names.
case_2_stubs() {
	local i
	log "2: B truncates, renames and removes blocks it holds as stubs"
	mkdirs "$REF/s" "${MNT[A]}/s"
	for i in 1 2 3; do
		head -c $((300000 + i)) /dev/urandom >"$REF/s/$i.bin" ||
			fail "2: head"
		bnd 30 cp "$REF/s/$i.bin" "${MNT[A]}/s/$i.bin" || fail "2: cp: $OUT"
	done
	kc_sync A
	sleep 1.2 # B's misses in s/ (none yet) are no longer believed
	bnd 30 truncate -s 1000 "${MNT[B]}/s/1.bin" || fail "2: truncate: $OUT"
	head -c 1000 "$REF/s/1.bin" >"$T/s1.cut"
	bnd 30 cmp "$T/s1.cut" "${MNT[B]}/s/1.bin" ||
		fail "2: the truncated stub: $OUT"
	bnd 30 mv "${MNT[B]}/s/2.bin" "${MNT[B]}/s/2b.bin" || fail "2: mv: $OUT"
	bnd 30 cmp "$REF/s/2.bin" "${MNT[B]}/s/2b.bin" ||
		fail "2: the renamed stub: $OUT"
	bnd 30 rm "${MNT[B]}/s/3.bin" || fail "2: rm: $OUT"
	kc_sync B
	r stat "$(obj /s/2.bin)" && fail "2: the old name's object is left"
	r get "$(obj /s/2b.bin)" "$T/s2b" || fail "2: no object for the new name"
	cmp -s "$T/s2b" "$REF/s/2.bin" || fail "2: the new name's object differs"
	r stat "$(obj /s/3.bin)" && fail "2: the removed block's object is left"
	log "2: a stub truncated keeps its first bytes; renamed, its bytes and" \
		"object follow; removed, its object goes"
	# A stub whose block A rewrites with another length: B loads the new
	# bytes whole, not as many as the stub said.
	head -c 100000 /dev/urandom >"$REF/s/5.old" || fail "2: head"
	head -c 200000 /dev/urandom >"$REF/s/5.bin" || fail "2: head"
	bnd 30 cp "$REF/s/5.old" "${MNT[A]}/s/5.bin" || fail "2: cp: $OUT"
	kc_sync A
	sleep 1.2 # B listed s/ above: its misses there are no longer believed
	expect "access: OK" "$LP" access "${MNT[B]}/s/5.bin"
	bnd 30 cp "$REF/s/5.bin" "${MNT[A]}/s/5.bin" || fail "2: cp: $OUT"
	kc_sync A
	bnd 30 cmp "$REF/s/5.bin" "${MNT[B]}/s/5.bin" ||
		fail "2: a stub rewritten elsewhere with another length: $OUT"
	log "2: a stub rewritten elsewhere with another length loads whole"
}

# which NAME FILE: "A" or "B" after the version of c/diff.bin FILE holds.
which_version() {
	if cmp -s "$2" "$REF/c/diffA.bin"; then
		echo A
	elif cmp -s "$2" "$REF/c/diffB.bin"; then
		echo B
	else
		fail "3: $1's c/diff.bin is neither version"
	fi
}

case_3() {
	local n pids=() v job key seed out
	log "3: the same key stored at once on A and B"
	mkdirs "$REF/c" "${MNT[A]}/c" "${MNT[B]}/c"
	expect "store: stored" "$LP" store "$REF/c/same.bin" $((2 * MiB)) 31
	expect "store: stored" "$LP" store "$REF/c/diffA.bin" $((2 * MiB)) 41
	expect "store: stored" "$LP" store "$REF/c/diffB.bin" $((2 * MiB)) 42
	# All four at once: same.bin with one content, diff.bin with two.
	for job in "A same 31 s" "B same 31 s" "A diff 41 d" "B diff 42 d"; do
		read -r n key seed out <<<"$job"
		timeout -k 5 30 "$LP" store "${MNT[$n]}/c/$key.bin" \
			$((2 * MiB)) "$seed" >"$T/$out.$n" 2>&1 &
		pids+=($!)
	done
	for n in "${pids[@]}"; do
		wait "$n" || fail "3: a store exited with $? (hung?)"
	done
	for n in s.A s.B d.A d.B; do
		grep -q -x -E 'store: (stored|exists)' "$T/$n" ||
			fail "3: store $n: $(cat "$T/$n")"
	done
	log "3: same.bin: A $(cat "$T/s.A"), B $(cat "$T/s.B");" \
		"diff.bin: A $(cat "$T/d.A"), B $(cat "$T/d.B")"
	kc_sync A
	kc_sync B
	sleep 1.5 # past the entry timeout
	for n in A B; do
		expect "load: match" "$LP" load "${MNT[$n]}/c/same.bin" \
			$((2 * MiB)) 31
		timeout -k 5 30 cat "${MNT[$n]}/c/diff.bin" >"$T/diff.$n" ||
			fail "3: read $n's c/diff.bin"
		v=$(which_version "$n" "$T/diff.$n") || exit 1
		log "3: $n reads same.bin whole, diff.bin as stored by $v"
	done
	r get "$(obj /c/same.bin)" "$T/same.obj" || fail "3: rados get: $OUT"
	cmp "$T/same.obj" "$REF/c/same.bin" >&2 ||
		fail "3: the object of same.bin differs from its bytes"
	r get "$(obj /c/diff.bin)" "$T/diff.obj" || fail "3: rados get: $OUT"
	v=$(which_version object "$T/diff.obj") || exit 1
	log "3: objects: same.bin byte-exact; diff.bin is exactly $v's version"
}

case_4() {
	local u0
	log "4: an unlink on A seen by B after its entry timeout"
	mkdirs "${MNT[A]}/u"
	expect "store: stored" "$LP" store "${MNT[A]}/u/u1.bin" $MiB 71
	expect "store: stored" "$LP" store "${MNT[A]}/u/u2.bin" $MiB 72
	kc_sync A
	expect "access: OK" "$LP" access "${MNT[B]}/u/u1.bin"
	expect "load: match" "$LP" load "${MNT[B]}/u/u2.bin" $MiB 72
	u0=$(need B rados_remote_unlinks_total) || exit 1
	bnd 30 rm "${MNT[A]}/u/u1.bin" "${MNT[A]}/u/u2.bin" ||
		fail "4: rm on A: $OUT"
	kc_sync A
	r stat "$(obj /u/u1.bin)" && fail "4: the object of u1.bin is still there"
	r stat "$(obj /u/u2.bin)" && fail "4: the object of u2.bin is still there"
	sleep 2
	expect "access: ENOENT" "$LP" access "${MNT[B]}/u/u1.bin"
	expect "access: ENOENT" "$LP" access "${MNT[B]}/u/u2.bin"
	expect "" ls -1 "${MNT[B]}/u"
	[ "$(need B rados_remote_unlinks_total)" -eq $((u0 + 2)) ] ||
		fail "4: kvfs_rados_remote_unlinks_total on B: $u0 ->" \
			"$(need B rados_remote_unlinks_total) (want +2)"
	log "4: A's unlinks removed the objects; B (a stub and a loaded copy)" \
		"misses both after 2 s, ls u/ is empty"
}

# xattrs OBJ TAG: the object's kvfs.len and kvfs.crcs into $T/TAG.*.
xattrs() {
	local x
	for x in kvfs.len kvfs.crcs; do
		timeout -k 5 60 rados -c "$CONF" -p "$POOL" getxattr "$1" "$x" \
			>"$T/$2.$x" || fail "5: rados getxattr $1 $x"
	done
}

case_5_torn() {
	local s0
	mkdirs "${MNT[A]}/t"
	expect "store: stored" "$LP" store "${MNT[A]}/t/torn.bin" $((2 * MiB)) 51
	kc_sync A
	r stat "$(obj /t/torn.bin)" || fail "5: rados stat: $OUT"
	[[ $OUT == *"size $((2 * MiB))" ]] || fail "5: the object: $OUT"
	r truncate "$(obj /t/torn.bin)" 1000000 || fail "5: truncate: $OUT"
	s0=$(need B rados_short_dropped_total) || exit 1
	expect "load: open EIO" "$LP" load "${MNT[B]}/t/torn.bin" $((2 * MiB)) 51
	expect "access: ENOENT" "$LP" access "${MNT[B]}/t/torn.bin"
	r stat "$(obj /t/torn.bin)" &&
		fail "5: the short object is still there: $OUT"
	[ "$(need B rados_short_dropped_total)" -eq $((s0 + 1)) ] ||
		fail "5: kvfs_rados_short_dropped_total $s0 ->" \
			"$(need B rados_short_dropped_total)"
	log "5: a short object: B's load EIO, then a miss, the object removed"
}

# flip_byte FILE OFF: the byte at OFF inverted.
flip_byte() {
	local b
	b=$(od -A n -t u1 -j "$2" -N 1 "$1") || fail "od $1"
	printf '%b' "\\0$(printf %03o $((0xff ^ b)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none ||
		fail "dd $1"
}

case_5_flip() {
	local q0 x got
	expect "store: stored" "$LP" store "${MNT[A]}/t/flip.bin" $((2 * MiB)) 52
	kc_sync A
	r get "$(obj /t/flip.bin)" "$T/flip.orig" || fail "5: rados get: $OUT"
	xattrs "$(obj /t/flip.bin)" before
	cp "$T/flip.orig" "$T/flip" || fail "5: cp"
	flip_byte "$T/flip" 500000
	cmp -s "$T/flip" "$T/flip.orig" && fail "5: nothing flipped"
	r put "$(obj /t/flip.bin)" "$T/flip" || fail "5: rados put: $OUT"
	xattrs "$(obj /t/flip.bin)" after
	for x in kvfs.len kvfs.crcs; do
		cmp -s "$T/before.$x" "$T/after.$x" && continue
		log "5: rados put changed $x: set again"
		timeout -k 5 60 rados -c "$CONF" -p "$POOL" setxattr \
			"$(obj /t/flip.bin)" "$x" <"$T/before.$x" ||
			fail "5: rados setxattr $x"
	done
	q0=$(need B rados_quarantined_total) || exit 1
	# B listed t/ in case 5's first half: a name stored there since is
	# found once B's misses there are no longer believed (1 s).
	sleep 1.2
	bnd 30 "$LP" load "${MNT[B]}/t/flip.bin" $((2 * MiB)) 52
	got=$OUT
	case $got in
	"load: open EIO" | "load: read EIO") ;;
	*) fail "5: B's load of a corrupt object: '$got' (want EIO)" ;;
	esac
	expect "access: ENOENT" "$LP" access "${MNT[B]}/t/flip.bin"
	r stat "$(obj /t/flip.bin)" || fail "5: the corrupt object is gone"
	[ "$(need B rados_quarantined_total)" -eq $((q0 + 1)) ] ||
		fail "5: kvfs_rados_quarantined_total $q0 ->" \
			"$(need B rados_quarantined_total)"
	log "5: a flipped byte: B's load '$got', then a miss, the object kept"
}

# notices NAME WHAT: how many lines of NAME's log contain WHAT.
notices() {
	grep -c -F "$2" "$(daemon_log "$1")"
}

case_6_down() {
	local n s
	log "6: the cluster stopped while A and B serve"
	declare -gA NOTICE0=()
	for n in A B; do
		NOTICE0[$n]=$(notices "$n" "shared tier unreachable")
	done
	# A block B knows only as a stub when the cluster goes.
	mkdirs "${MNT[A]}/st"
	expect "store: stored" "$LP" store "${MNT[A]}/st/s.bin" $MiB 71
	kc_sync A
	expect "access: OK" "$LP" access "${MNT[B]}/st/s.bin"
	EPOCH0=$(cl_epoch)
	[ -n "$EPOCH0" ] || fail "6: no OSD map epoch"
	cl_stop
	sleep 1.5 # past the entry timeout: names are checked again
	vllm_verify A
	vllm_verify B
	log "6: A's own blocks and B's pulled ones load with the cluster down"
	expect "load: open EIO" "$LP" load "${MNT[B]}/st/s.bin" $MiB 71
	log "6: B's load of a block it holds only as a stub fails (EIO) at once"
	for n in A B; do
		expect "access: ENOENT" "$LP" access "${MNT[$n]}/c/absent.bin"
		expect "load: match" "$LP" load "${MNT[$n]}/c/same.bin" \
			$((2 * MiB)) 31
	done
	mkdirs "${MNT[A]}/down"
	expect "store: stored" "$LP" store "${MNT[A]}/down/d.bin" $MiB 81
	kc_sync A 30
	expect "load: match" "$LP" load "${MNT[A]}/down/d.bin" $MiB 81
	log "6: absent names miss, A stores and syncs"
	for n in A B; do
		s=$(wait_metric "$n" rados_reachable 0 20) || exit 1
		[ "$(notices "$n" "shared tier unreachable")" -eq \
			$((NOTICE0[$n] + 1)) ] || {
			t_show "$(daemon_log "$n")" 30
			fail "6: $n: not one 'shared tier unreachable' line"
		}
		log "6: $n: kvfs_rados_reachable 0 (after $s s more)," \
			"$(grep -F "shared tier unreachable" "$(daemon_log "$n")" |
				tail -n 1)"
		closed "$n"
	done
}

# closed NAME: NAME's log says, within 30 s, that it closed its handle of
# the lost cluster. One left open would take the new cluster's OSD maps
# for the old one's and librados would abort the daemon.
closed() {
	local i
	for i in $(seq 300); do
		[ "$(notices "$1" "closed the connection to the lost")" -ge 1 ] &&
			return 0
		sleep 0.1
	done
	t_show "$(daemon_log "$1")" 30
	fail "6: $1 kept its handle of the lost cluster"
}

case_6_up() {
	local n s
	log "6: a new cluster in the same directory, on the same port"
	cl_restart --osds 1
	# Its OSD map epoch past the old one's (the daemons' last): a handle
	# of the old cluster still open would abort the daemon now.
	cl_epoch_past "$EPOCH0"
	log "6: the new cluster's OSD map epoch is $(cl_epoch), the old" \
		"one's was $EPOCH0"
	for n in A B; do
		s=$(wait_metric "$n" rados_reachable 1 15) || exit 1
		[ "$(notices "$n" "shared tier reachable again")" -ge 1 ] || {
			t_show "$(daemon_log "$n")" 30
			fail "6: $n: no 'shared tier reachable again' line"
		}
		log "6: $n: kvfs_rados_reachable 1 within $s s of the start"
	done
	mkdirs "${MNT[A]}/n"
	expect "store: stored" "$LP" store "${MNT[A]}/n/new.bin" $((2 * MiB)) 91
	kc_sync A
	r stat "$(obj /n/new.bin)" || fail "6: no object for new.bin: $OUT"
	expect "access: OK" "$LP" access "${MNT[B]}/n/new.bin"
	expect "load: match" "$LP" load "${MNT[B]}/n/new.bin" $((2 * MiB)) 91
	log "6: a block stored on A after the restart loads on B"
	# Stored while the cluster was down: its put waited in the queue.
	r stat "$(obj /down/d.bin)" || fail "6: d.bin never put: $OUT"
	sleep 1.2 # B's misses in down/ (listed empty) no longer believed
	expect "load: match" "$LP" load "${MNT[B]}/down/d.bin" $MiB 81
	log "6: the block A stored during the outage was put after it"
	# The new cluster (another fsid) has none of case 1's blocks: each
	# daemon keeps its local copies, none looks removed there.
	sleep 1.5 # past the entry timeout: names are checked again
	vllm_verify A
	vllm_verify B
	log "6: A's own blocks and B's pulled ones still load"
}

cl_start
tier_mount A
tier_mount B
case_1
case_2
case_2_stubs
case_3
case_4
log "5: a torn and a corrupt object"
case_5_torn
case_5_flip
case_6_down
case_6_up
t_finish
