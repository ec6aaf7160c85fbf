#!/bin/bash
# SPDX-License-Identifier: MIT
# Read-ahead on a lookup hit (-o prefetch=SIZE, kvfs(8)), on real mounts.
# A stored block is made cold (kvfsctl sync, sync, drop_caches), so that
# the next stat(2) or access(2) of it is a LOOKUP of a node the kernel
# does not hold; that LOOKUP reads and checks the whole record in the
# background, and the block's next READ is answered from those bytes.
#   a. hits: four 2 MiB blocks and a 4 KiB one looked up are read ahead (an
#      empty file and a one-record file of 64 MiB + 4 KiB are not), and
#      kvfs_readahead_bytes counts whole 1 MiB segments (2 MiB each, 1 MiB
#      for 4 KiB); the reads that follow (cmp, one with O_DIRECT) are
#      byte-exact, read no data file (kvfs_store_reads_total stays) and
#      each take one read-ahead (kvfs_readahead_used_total);
#   b. never stale: after a read-ahead, the block (1) rewritten in place
#      (O_TRUNC), (2) replaced by a temp file renamed over it, (3) unlinked
#      and stored again under its name: every read (O_DIRECT, buffered with
#      the page cache dropped, before and after kvfsctl sync, and cold
#      again with a new read-ahead) gives the new bytes, and the three old
#      read-aheads count as wasted;
#   h. the engine's pattern, 32 blocks each looked up and loaded at once:
#      the loads are byte-exact, and the read-aheads started are the ones
#      used, wasted and still held (none failed);
#   d. a flipped payload byte: the read-ahead alone (no READ) quarantines
#      the block (kvfs_quarantined_total +1, logged), access(2) then gives
#      ENOENT, and the data file still holds the record;
#   c. a data file cut inside the block's payload: the read-ahead alone
#      drops it (kvfs_dropped_total +1, logged, a failed read-ahead
#      counted), access(2) then gives ENOENT;
#   e. the budget: with -o prefetch=8M, 40 blocks of 2 MiB looked up at
#      once: kvfs_readahead_bytes and kvfs_readahead_peak_bytes never pass
#      8 MiB, read-aheads are wasted, every block reads back byte-exact;
#      then six looked up one by one keep the last four (least recently
#      used evicted first): those read no data file, the first two do;
#   i. lookups that no load follows: with -o prefetch=4M, 120 blocks of
#      4 KiB looked up one by one and none read start at most 4 + 64
#      read-aheads (64 going unused is what it takes to stop), the rest
#      are counted skipped; a load then earns a read-ahead back, and the
#      next lookup is read ahead again;
#   k. lookups that an unlink follows (an engine evicting by path) spend
#      the same credit: 100 blocks each looked up and unlinked at once
#      start at most 4 + 64 read-aheads, the rest are counted skipped;
#   j. (fault injection) a read-ahead failing with ENOMEM (the injected
#      read-ahead error) is counted failed and costs the block
#      nothing: no quarantine or drop, access(2) still OK, its load
#      byte-exact once the fault is gone; failing with EIO, the read-ahead
#      alone quarantines it;
#   f. -o prefetch=0: lookups start no read-ahead, reads are byte-exact;
#   g. the option: 256M by default, K/M/G suffixes, a bad value refused.
# Every metrics snapshot checks kvfs_readahead_bytes and
# kvfs_readahead_peak_bytes against kvfs_readahead_budget_bytes. Cases c
# and d find the block's record with the torn suite's lister
# (TORN_RECORDS) and damage it as tests/torn/torn.sh does; d runs first so
# that c's cut cannot take d's record with it.
#
# Needs root (drop_caches, the data files), /dev/fuse and fusermount3; exit
# 77 otherwise. Environment: as lib.sh, plus LOOKUP_PROBE, KVFSCTL and
# TORN_RECORDS.
# shellcheck disable=SC2034 # read by lib.sh
T_NEEDS="LOOKUP_PROBE KVFSCTL TORN_RECORDS"
# shellcheck source=tests/mount/lib.sh
. "$(dirname "$0")/lib.sh"

LP=$LOOKUP_PROBE
KiB=1024
MiB=$((1024 * 1024))
BLK=$((2 * MiB))
POLL=100 # snapshots 0.1 s apart: 10 s
MNT=
DATA=
SRC=
DIRECT=1 # 0: dd iflag=direct does not work on the mount
CASE=

# The metrics every snapshot must have.
METRICS="readahead_started_total readahead_used_total readahead_wasted_total
readahead_failed_total readahead_skipped_total readahead_read_bytes_total
readahead_bytes
readahead_peak_bytes readahead_pending readahead_budget_bytes
store_reads_total dropped_total quarantined_total quarantined nodes"

# stats: one snapshot of $MNT/.kvfs/stats into ST (ST[dropped_total] is
# kvfs_dropped_total), one cat of the file each (an ASan build can abort on
# a control-file read: tests/torn/lib.sh, stats). Checks the budget.
declare -A ST=()
stats() {
	local k v
	ST=()
	timeout -k 5 30 cat "$MNT/.kvfs/stats" >"$T_TMP/stats" \
		2>"$T_TMP/stats.err" ||
		t_fail "$CASE: cannot read $MNT/.kvfs/stats:" \
			"$(cat "$T_TMP/stats.err")"
	while read -r k v; do
		case $k in
		kvfs_*) ST[${k#kvfs_}]=$v ;;
		esac
	done <"$T_TMP/stats"
	for k in $METRICS; do
		[[ ${ST[$k]:-} =~ ^[0-9]+$ ]] ||
			t_fail "$CASE: kvfs_$k is '${ST[$k]:-}' in" \
				"$MNT/.kvfs/stats (want a whole number)"
	done
	if [ "${ST[readahead_bytes]}" -gt "${ST[readahead_budget_bytes]}" ] ||
		[ "${ST[readahead_peak_bytes]}" -gt \
			"${ST[readahead_budget_bytes]}" ]; then
		t_error "$CASE: read-ahead memory over the budget:" \
			"kvfs_readahead_bytes ${ST[readahead_bytes]}," \
			"kvfs_readahead_peak_bytes" \
			"${ST[readahead_peak_bytes]}," \
			"kvfs_readahead_budget_bytes" \
			"${ST[readahead_budget_bytes]}"
	fi
}

# poll EXPR: snapshots until the arithmetic EXPR over ST holds (e.g.
# 'ST[dropped_total] > d0'), at most 10 s; 1 when it never did.
poll() {
	local i
	for ((i = 0; i < POLL; i++)); do
		stats
		(($1)) && return 0
		sleep 0.1
	done
	return 1
}

# settle STARTED: waits until kvfs_readahead_started_total is at least
# STARTED and no read-ahead is queued or being read (ST: the last
# snapshot).
settle() {
	poll "ST[readahead_started_total] >= $1 &&
		ST[readahead_pending] == 0" ||
		t_fail "$CASE: read-aheads did not finish within 10 s:" \
			"kvfs_readahead_started_total" \
			"${ST[readahead_started_total]} (want >= $1)," \
			"kvfs_readahead_pending ${ST[readahead_pending]}"
}

# expect WHAT... GOT OP WANT: the numbers must compare (OP: -eq, -ge, ...);
# WHAT, the words before them, names the value.
expect() {
	local got=${*: -3:1} op=${*: -2:1} want=${*: -1}
	test "$got" "$op" "$want" ||
		t_error "$CASE: ${*:1:$#-3} is $got, want $op $want"
}

# mount_fresh NAME [daemon args]: a new DATADIR and mount (DATA, MNT).
mount_fresh() {
	local name=$1
	shift
	DATA=$(t_plain_dir "data-$name")
	MNT=$(t_plain_dir "mnt-$name")
	t_mount "$DATA" "$MNT" "$@"
}

# cold: every store saved, then the kernel's dentries, inodes and pages
# dropped; the next stat or access of a block is a LOOKUP of a node the
# kernel does not hold. A LOOKUP before the daemon has the FORGET of the
# node's last kernel reference starts no read-ahead, so this waits until
# kvfs_nodes has stopped falling.
cold() {
	local i prev=-1 steady=0
	timeout -k 5 60 "$KVFSCTL" sync "$MNT" >"$T_TMP/sync.out" 2>&1 ||
		t_fail "$CASE: kvfsctl sync $MNT: $(cat "$T_TMP/sync.out")"
	sync
	echo 3 >/proc/sys/vm/drop_caches || t_fail "cannot drop the caches"
	for ((i = 0; i < POLL && steady < 3; i++)); do
		sleep 0.1
		stats
		if [ "${ST[nodes]}" -eq "$prev" ]; then
			steady=$((steady + 1))
		else
			steady=0
		fi
		prev=${ST[nodes]}
	done
}

# drop_pages: the kernel's cached pages only (dentries and inodes stay, so
# a read goes to the daemon without a LOOKUP).
drop_pages() {
	sync
	echo 1 >/proc/sys/vm/drop_caches || t_fail "cannot drop the page cache"
}

# block NAME SIZE: random bytes in $SRC/NAME, the copy reads compare with.
block() {
	head -c "$2" /dev/urandom >"$SRC/$1" || t_fail "writing $SRC/$1"
}

# put SRC DST: open(DST, O_WRONLY|O_CREAT|O_TRUNC), SRC's bytes, close.
put() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout -k 5 60 bash -c 'cat "$1" >"$2"' put "$1" "$2" ||
		t_fail "$CASE: writing $2 failed"
}

# acc PATH: access(PATH, F_OK) by lookup_probe; "OK", "ENOENT", ... in ACC.
acc() {
	ACC=$(timeout -k 5 60 "$LP" access "$1") ||
		t_fail "$CASE: lookup_probe access $1 could not run"
	ACC=${ACC#access: }
}

# acc_want PATH WANT: access(2) of PATH must give WANT.
acc_want() {
	acc "$1"
	[ "$ACC" = "$2" ] || t_error "$CASE: access $1: $ACC, want $2"
}

# same WHAT WANT GOT: the files must hold the same bytes.
same() {
	cmp "$2" "$3" >"$T_TMP/cmp.out" 2>&1 ||
		t_error "$CASE: $1: $3 differs from $2" \
			"($(head -1 "$T_TMP/cmp.out"))"
}

# rd_buf WHAT PATH WANT: a buffered read of PATH (cmp) must give WANT.
rd_buf() {
	timeout -k 5 60 cat "$2" >"$T_TMP/got" 2>"$T_TMP/rd.err" ||
		t_error "$CASE: $1: reading $2: $(cat "$T_TMP/rd.err")"
	same "$1" "$3" "$T_TMP/got"
}

# rd_direct WHAT PATH WANT: an O_DIRECT read of PATH (1 MiB requests) must
# give WANT; a buffered one where the mount has no O_DIRECT.
rd_direct() {
	if [ "$DIRECT" = 0 ]; then
		rd_buf "$@"
		return
	fi
	timeout -k 5 60 dd if="$2" of="$T_TMP/got" bs=1M iflag=direct \
		status=none 2>"$T_TMP/rd.err" ||
		t_error "$CASE: $1: O_DIRECT read of $2: $(cat "$T_TMP/rd.err")"
	same "$1 (O_DIRECT)" "$3" "$T_TMP/got"
}

# log_has REGEX: a line of the mount's log past line $L0 matches.
log_has() {
	tail -n +$((L0 + 1)) "${T_LOG[$MNT]}" | grep -E -q -- "$1"
}

# record REL: the one whole data record of $MNT$REL (size $BLK) by the torn
# suite's lister, into R (R[file] R[off] R[hdr_len] R[len]); R[path] is its
# data file.
declare -A R=()
record() {
	local w words
	echo "path=$MNT$1 size=$BLK seed=0" >"$T_TMP/rec.man"
	timeout -k 5 60 "$TORN_RECORDS" -c -m "$T_TMP/rec.man" -p "$MNT" \
		"$DATA" >"$T_TMP/rec.out" 2>"$T_TMP/rec.err" || {
		t_show "$T_TMP/rec.err" 20
		t_fail "$CASE: no single whole record for $1 in $DATA"
	}
	R=()
	read -r -a words <"$T_TMP/rec.out"
	for w in "${words[@]}"; do
		R[${w%%=*}]=${w#*=}
	done
	R[path]=$(printf '%s/data/%06u.kvd' "$DATA" "${R[file]}")
	t_log "$CASE: $1: record at $(basename "${R[path]}"):${R[off]}," \
		"header ${R[hdr_len]}, payload ${R[len]} bytes"
}

# bg_wait PID SECS: waits up to SECS for PID; its exit status, or 124 when
# it is still running.
bg_wait() {
	local i=0
	while t_alive "$1"; do
		i=$((i + 1))
		[ "$i" -gt $(($2 * 10)) ] && return 124
		sleep 0.1
	done
	wait "$1"
}

# flip FILE OFF: inverts the byte at OFF of FILE in place.
flip() {
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	[ -n "$b" ] || t_fail "$CASE: no byte $2 in $1"
	# shellcheck disable=SC2059 # the format is the byte's octal escape
	printf "\\$(printf %03o $((b ^ 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none ||
		t_fail "$CASE: cannot write byte $2 of $1"
	[ "$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')" -eq $((b ^ 255)) ] ||
		t_fail "$CASE: byte $2 of $1 did not change"
}

# --- a: hits served from the cache, byte-exact --------------------------------

case_a() {
	local d=$MNT/a/ns_r0 i n=4 s0 r0 rb0 b0 r1 u1 f0
	CASE=a
	mkdir -p "$d" || t_fail "a: mkdir $d"
	for i in $(seq $n); do
		block "a$i" $BLK
		put "$SRC/a$i" "$d/k$i.bin"
	done
	block a-small $((4 * KiB))
	put "$SRC/a-small" "$d/small.bin"
	: >"$d/empty.bin" || t_fail "a: cannot create $d/empty.bin"
	# One record (record_max=128M) but past 64 MiB: not read ahead.
	block a-big $((64 * MiB + 4 * KiB))
	put "$SRC/a-big" "$d/big.bin"
	cold
	stats
	s0=${ST[readahead_started_total]}
	r0=${ST[store_reads_total]}
	rb0=${ST[readahead_read_bytes_total]}
	b0=${ST[readahead_bytes]}
	f0=${ST[readahead_failed_total]}
	for i in $(seq $n); do
		acc_want "$d/k$i.bin" OK
	done
	acc_want "$d/small.bin" OK
	acc_want "$d/empty.bin" OK
	acc_want "$d/big.bin" OK
	settle $((s0 + n + 1))
	# One each for the blocks; none for the empty file and the one of
	# 64 MiB + 4 KiB.
	expect "kvfs_readahead_started_total after $((n + 1)) blocks, an" \
		"empty file and one over 64 MiB were looked up" \
		"${ST[readahead_started_total]}" -eq $((s0 + n + 1))
	expect "kvfs_readahead_bytes with $n blocks of 2 MiB and one of 4 KiB" \
		"read ahead" "${ST[readahead_bytes]}" -eq \
		$((b0 + n * BLK + MiB))
	expect "kvfs_readahead_peak_bytes" "${ST[readahead_peak_bytes]}" -ge \
		"${ST[readahead_bytes]}"
	expect "kvfs_store_reads_total after $((n + 1)) read-aheads" \
		"${ST[store_reads_total]}" -ge $((r0 + n + 1))
	expect "kvfs_readahead_read_bytes_total" \
		"${ST[readahead_read_bytes_total]}" -ge \
		$((rb0 + n * BLK + 4 * KiB))
	expect "kvfs_readahead_failed_total" "${ST[readahead_failed_total]}" \
		-eq "$f0"
	r1=${ST[store_reads_total]}
	u1=${ST[readahead_used_total]}
	# Each block read once (a second open would read the store again:
	# the node drops its bytes at the last release).
	for i in $(seq $((n - 1))); do
		rd_buf "hit k$i.bin" "$d/k$i.bin" "$SRC/a$i"
	done
	rd_direct "hit k$n.bin" "$d/k$n.bin" "$SRC/a$n"
	rd_buf "hit small.bin" "$d/small.bin" "$SRC/a-small"
	stats
	expect "kvfs_store_reads_total after reading blocks read ahead" \
		"${ST[store_reads_total]}" -eq "$r1"
	expect "kvfs_readahead_used_total after reading $((n + 1)) blocks" \
		"${ST[readahead_used_total]}" -eq $((u1 + n + 1))
	t_log "a: $((n + 1)) read-aheads, $((ST[readahead_used_total] - u1))" \
		"used, $((ST[store_reads_total] - r1)) data-file reads by the" \
		"loads"
}

# --- b: never stale -----------------------------------------------------------

case_b() {
	local d=$MNT/b i s0 w0 r1 u1
	CASE=b
	mkdir -p "$d" || t_fail "b: mkdir $d"
	for i in 1 2 3; do
		block "b$i.old" $BLK
		block "b$i.new" $BLK
		put "$SRC/b$i.old" "$d/k$i.bin"
	done
	cold
	stats
	s0=${ST[readahead_started_total]}
	for i in 1 2 3; do
		acc_want "$d/k$i.bin" OK
	done
	settle $((s0 + 3))
	w0=${ST[readahead_wasted_total]}

	# (1) in place: O_TRUNC, the new bytes, close.
	put "$SRC/b1.new" "$d/k1.bin"
	# (2) the engine's way: a temp file in the directory, renamed over.
	put "$SRC/b2.new" "$d/k2.bin_4242.tmp"
	timeout -k 5 60 mv "$d/k2.bin_4242.tmp" "$d/k2.bin" ||
		t_fail "b: rename over $d/k2.bin failed"
	# (3) unlinked, then a new block under the name.
	timeout -k 5 60 rm "$d/k3.bin" || t_fail "b: unlink $d/k3.bin failed"
	put "$SRC/b3.new" "$d/k3.bin"
	local what=("rewritten in place" "replaced by rename"
		"unlinked and stored again")
	# The new bytes queued for saving, then saved.
	for i in 1 2 3; do
		rd_direct "k$i.bin ${what[i - 1]}" "$d/k$i.bin" "$SRC/b$i.new"
	done
	drop_pages
	for i in 1 2 3; do
		rd_buf "k$i.bin ${what[i - 1]}" "$d/k$i.bin" "$SRC/b$i.new"
	done
	timeout -k 5 60 "$KVFSCTL" sync "$MNT" >"$T_TMP/sync.out" 2>&1 ||
		t_fail "b: kvfsctl sync $MNT: $(cat "$T_TMP/sync.out")"
	for i in 1 2 3; do
		rd_direct "k$i.bin ${what[i - 1]}, saved" "$d/k$i.bin" \
			"$SRC/b$i.new"
	done
	drop_pages
	for i in 1 2 3; do
		rd_buf "k$i.bin ${what[i - 1]}, saved" "$d/k$i.bin" \
			"$SRC/b$i.new"
	done
	# Cold again: new read-aheads, of the new records.
	cold
	stats
	s0=${ST[readahead_started_total]}
	for i in 1 2 3; do
		acc_want "$d/k$i.bin" OK
	done
	settle $((s0 + 3))
	r1=${ST[store_reads_total]}
	u1=${ST[readahead_used_total]}
	for i in 1 2 3; do
		rd_buf "k$i.bin ${what[i - 1]}, read ahead again" \
			"$d/k$i.bin" "$SRC/b$i.new"
	done
	stats
	expect "kvfs_readahead_used_total after reading the 3 new blocks" \
		"${ST[readahead_used_total]}" -eq $((u1 + 3))
	expect "kvfs_store_reads_total after reading the 3 new blocks" \
		"${ST[store_reads_total]}" -eq "$r1"
	# The three first read-aheads were never read: wasted, at the latest
	# when their records went (after the kernel forgot the inodes).
	poll "ST[readahead_wasted_total] >= w0 + 3" ||
		t_error "b: kvfs_readahead_wasted_total grew by" \
			"$((ST[readahead_wasted_total] - w0)) after 3" \
			"read-aheads of blocks then rewritten, replaced and" \
			"unlinked, want 3"
	t_log "b: rewritten, replaced, unlinked and read back; wasted" \
		"+$((ST[readahead_wasted_total] - w0))"
}

# --- h: lookups loaded at once ------------------------------------------------

# The engine's pattern: each block looked up and loaded right away, 32 at
# once, so that READs meet read-aheads queued, being read and done. Every
# load is byte-exact, and every read-ahead is accounted for: used, wasted,
# failed or still held.
case_h() {
	local d=$MNT/h i n=32 s0 u0 w0 f0 b0 rb0 pids=() held
	CASE=h
	mkdir -p "$d" || t_fail "h: mkdir $d"
	for i in $(seq $n); do
		block "h$i" $BLK
		put "$SRC/h$i" "$d/k$i.bin"
	done
	cold
	stats
	s0=${ST[readahead_started_total]}
	u0=${ST[readahead_used_total]}
	w0=${ST[readahead_wasted_total]}
	f0=${ST[readahead_failed_total]}
	b0=${ST[readahead_bytes]}
	rb0=${ST[readahead_read_bytes_total]}
	for i in $(seq $n); do
		(
			"$LP" access "$d/k$i.bin" >"$T_TMP/h$i.acc" &&
				cat "$d/k$i.bin" >"$T_TMP/h$i.got"
		) 2>"$T_TMP/h$i.err" &
		pids+=($!)
	done
	for i in $(seq $n); do
		bg_wait "${pids[i - 1]}" 60 && continue
		# Still running (124): a load hung in the mount.
		t_alive "${pids[i - 1]}" && t_reap "${pids[i - 1]}"
		t_error "h: k$i.bin: lookup and load failed or hung:" \
			"$(cat "$T_TMP/h$i.acc" "$T_TMP/h$i.err")"
	done
	for i in $(seq $n); do
		same "k$i.bin loaded right after its lookup" "$SRC/h$i" \
			"$T_TMP/h$i.got"
	done
	poll "ST[readahead_pending] == 0" ||
		t_fail "h: read-aheads still pending 10 s after the loads" \
			"(${ST[readahead_pending]})"
	held=$(((ST[readahead_bytes] - b0) / BLK))
	expect "kvfs_readahead_failed_total" "${ST[readahead_failed_total]}" \
		-eq "$f0"
	expect "read-aheads started ($((ST[readahead_started_total] - s0)))" \
		"less those used ($((ST[readahead_used_total] - u0))), wasted" \
		"($((ST[readahead_wasted_total] - w0))) and still held" \
		"($held)" \
		$((ST[readahead_started_total] - s0 - \
		(ST[readahead_used_total] - u0) - \
		(ST[readahead_wasted_total] - w0) - held)) -eq 0
	t_log "h: $n lookups loaded at once: started" \
		"+$((ST[readahead_started_total] - s0)), used" \
		"+$((ST[readahead_used_total] - u0)), wasted" \
		"+$((ST[readahead_wasted_total] - w0)), held $held, read" \
		"$(((ST[readahead_read_bytes_total] - rb0) / BLK)) blocks"
}

# victim C: a 2 MiB block stored as /C/victim.bin, made cold, its record
# found (R, as record()).
victim() {
	mkdir -p "$MNT/$1" || t_fail "$1: mkdir"
	block "$1" $BLK
	put "$SRC/$1" "$MNT/$1/victim.bin"
	cold
	record "/$1/victim.bin"
}

# first_access REL COUNTER WHAT: the counters before (q0, d0, f0, L0), then
# one access(2) of REL, whose read-ahead alone must raise kvfs_COUNTER
# (WHAT: why it must) and make the next access(2) ENOENT.
first_access() {
	local rel=$1 counter=$2
	stats
	q0=${ST[quarantined_total]}
	d0=${ST[dropped_total]}
	f0=${ST[readahead_failed_total]}
	L0=$(wc -l <"${T_LOG[$MNT]}")
	local c0=${ST[$counter]}
	acc "$MNT$rel"
	t_log "$CASE: first access of $rel: $ACC"
	if poll "ST[$counter] > c0 && ST[readahead_pending] == 0"; then
		acc_want "$MNT$rel" ENOENT
	else
		t_error "$CASE: kvfs_$counter still ${ST[$counter]} 10 s" \
			"after the lookup of $3" \
			"(pending ${ST[readahead_pending]}," \
			"started ${ST[readahead_started_total]}," \
			"failed ${ST[readahead_failed_total]})"
	fi
}

# --- d: a flipped payload byte ------------------------------------------------

case_d() {
	local rel=/d/victim.bin q0 d0 f0 at
	CASE=d
	victim d
	at=$((R[off] + R[hdr_len] + R[len] / 2 + 777))
	flip "${R[path]}" "$at"
	t_log "d: inverted payload byte $((at - R[off] - R[hdr_len])) of $rel"
	first_access "$rel" quarantined_total \
		"a block whose payload has a flipped byte"
	expect "kvfs_quarantined_total" "${ST[quarantined_total]}" -eq \
		$((q0 + 1))
	expect "kvfs_dropped_total after a CRC mismatch" \
		"${ST[dropped_total]}" -eq "$d0"
	log_has "quarantined $rel \\(inode" ||
		t_error "d: no 'quarantined $rel' line in ${T_LOG[$MNT]}"
	t_log "d: quarantined +$((ST[quarantined_total] - q0)), failed" \
		"read-aheads +$((ST[readahead_failed_total] - f0))"
	# The data is kept: the record is still there, failing its CRC.
	timeout -k 5 60 "$TORN_RECORDS" -c "$DATA" >"$T_TMP/recs.d" \
		2>"$T_TMP/recs.d.err" || t_error "d: torn_records failed"
	grep -q " state=crc path=$rel\$" "$T_TMP/recs.d" ||
		t_error "d: the quarantined block's record is not in" \
			"${R[path]} any more (want state=crc)"
}

# --- c: a data file cut inside the payload ------------------------------------

case_c() {
	local rel=/c/victim.bin q0 d0 f0 cut
	CASE=c
	victim c
	cut=$((R[off] + R[hdr_len] + R[len] / 2 + 1234))
	t_log "c: truncating $(basename "${R[path]}") to $cut bytes (was" \
		"$(stat -c %s "${R[path]}")), inside the payload of $rel"
	truncate -s "$cut" "${R[path]}" || t_fail "c: truncate failed"
	first_access "$rel" dropped_total \
		"a block whose data file ends inside its record"
	expect "kvfs_dropped_total" "${ST[dropped_total]}" -eq $((d0 + 1))
	expect "kvfs_quarantined_total after a provably short record" \
		"${ST[quarantined_total]}" -eq "$q0"
	expect "kvfs_readahead_failed_total" \
		"${ST[readahead_failed_total]}" -ge $((f0 + 1))
	log_has "dropped $rel \\(inode" ||
		t_error "c: no 'dropped $rel' line in ${T_LOG[$MNT]}"
	t_log "c: dropped +$((ST[dropped_total] - d0)), failed read-aheads" \
		"+$((ST[readahead_failed_total] - f0))"
}

# --- j: a read-ahead that fails for want of memory (fault injection) ----------

# The injected read-ahead error (user.kvfs.fault.ra_error, on any inode)
# is set, then the block is made cold and looked up.
case_j() {
	local rel=/j/victim.bin q0 d0 f0
	CASE=j
	victim j
	expect_ok "$LP" setxattr "$MNT" user.kvfs.fault.ra_error 12
	stats
	q0=${ST[quarantined_total]}
	d0=${ST[dropped_total]}
	f0=${ST[readahead_failed_total]}
	acc_want "$MNT$rel" OK
	poll "ST[readahead_failed_total] > f0 && ST[readahead_pending] == 0" ||
		t_error "j: kvfs_readahead_failed_total still" \
			"${ST[readahead_failed_total]} 10 s after the lookup"
	# ENOMEM says nothing about the block: it stays a hit.
	expect "kvfs_quarantined_total after ENOMEM" \
		"${ST[quarantined_total]}" -eq "$q0"
	expect "kvfs_dropped_total after ENOMEM" "${ST[dropped_total]}" -eq \
		"$d0"
	acc_want "$MNT$rel" OK
	expect_ok "$LP" setxattr "$MNT" user.kvfs.fault.ra_error 0
	rd_direct "j: a block whose read-ahead failed with ENOMEM" \
		"$MNT$rel" "$SRC/j"
	t_log "j: failed read-aheads +$((ST[readahead_failed_total] - f0))" \
		"after ENOMEM"
	# An I/O error is a failed read: the block is quarantined.
	expect_ok "$LP" setxattr "$MNT" user.kvfs.fault.ra_error 5
	cold
	first_access "$rel" quarantined_total \
		"a block whose read-ahead failed with EIO"
	expect "kvfs_quarantined_total after EIO" "${ST[quarantined_total]}" \
		-eq $((q0 + 1))
	expect_ok "$LP" setxattr "$MNT" user.kvfs.fault.ra_error 0
}

# expect_ok CMD...: a lookup_probe call that must print "...: OK".
expect_ok() {
	local out
	out=$(timeout -k 5 60 "$@" 2>&1)
	[ "${out##*: }" = OK ] || t_error "$CASE: $*: $out"
}

# --- e: the budget ------------------------------------------------------------

case_e() {
	local d=$MNT/e budget=$((8 * MiB)) n=40 i s0 w0 r0 u0 held
	CASE=e
	mkdir -p "$d" || t_fail "e: mkdir $d"
	for i in $(seq $n); do
		block "e$i" $BLK
		put "$SRC/e$i" "$d/k$i.bin"
	done
	cold
	stats
	expect "kvfs_readahead_budget_bytes with -o prefetch=8M" \
		"${ST[readahead_budget_bytes]}" -eq $budget
	s0=${ST[readahead_started_total]}
	w0=${ST[readahead_wasted_total]}
	for i in $(seq $n); do
		acc_want "$d/k$i.bin" OK
		# A snapshot (the budget check) every fourth lookup.
		[ $((i % 4)) -eq 0 ] && stats
	done
	poll "ST[readahead_pending] == 0" ||
		t_fail "e: read-aheads still pending 10 s after the lookups" \
			"(${ST[readahead_pending]})"
	expect "kvfs_readahead_peak_bytes" "${ST[readahead_peak_bytes]}" -le \
		$budget
	expect "kvfs_readahead_bytes" "${ST[readahead_bytes]}" -le $budget
	expect "kvfs_readahead_wasted_total after $n lookups of 2 MiB" \
		"blocks with an 8 MiB budget" "${ST[readahead_wasted_total]}" \
		-gt "$w0"
	expect "kvfs_readahead_started_total" \
		"${ST[readahead_started_total]}" -gt "$s0"
	t_log "e: $n lookups: started +$((ST[readahead_started_total] - s0))," \
		"wasted +$((ST[readahead_wasted_total] - w0)), peak" \
		"${ST[readahead_peak_bytes]}, held ${ST[readahead_bytes]}"
	u0=${ST[readahead_used_total]}
	for i in $(seq $n); do
		rd_buf "k$i.bin" "$d/k$i.bin" "$SRC/e$i"
	done
	stats
	t_log "e: all $n read back; $((ST[readahead_used_total] - u0)) from" \
		"read-aheads"

	# Least recently used first: six cold lookups one at a time, each
	# read-ahead finished before the next; the budget holds four.
	cold
	poll "ST[readahead_bytes] == 0" ||
		t_error "e: kvfs_readahead_bytes is ${ST[readahead_bytes]}" \
			"with every read-ahead read or evicted, want 0"
	for i in 1 2 3 4 5 6; do
		stats
		s0=${ST[readahead_started_total]}
		acc_want "$d/k$i.bin" OK
		settle $((s0 + 1))
	done
	held=$((ST[readahead_bytes] / BLK))
	expect "kvfs_readahead_bytes after 6 read-aheads of 2 MiB one after" \
		"another with an 8 MiB budget" "${ST[readahead_bytes]}" -eq \
		$budget
	r0=${ST[store_reads_total]}
	u0=${ST[readahead_used_total]}
	for i in 6 5 4 3; do
		rd_buf "k$i.bin (among the 4 most recent)" "$d/k$i.bin" \
			"$SRC/e$i"
	done
	stats
	expect "kvfs_readahead_used_total after reading the 4 most recently" \
		"read ahead" "${ST[readahead_used_total]}" -eq $((u0 + 4))
	expect "kvfs_store_reads_total after reading the 4 most recently" \
		"read ahead" "${ST[store_reads_total]}" -eq "$r0"
	for i in 2 1; do
		rd_buf "k$i.bin (evicted)" "$d/k$i.bin" "$SRC/e$i"
	done
	stats
	expect "kvfs_readahead_used_total after reading the 2 evicted" \
		"${ST[readahead_used_total]}" -eq $((u0 + 4))
	expect "kvfs_store_reads_total after reading the 2 evicted" \
		"${ST[store_reads_total]}" -ge $((r0 + 2))
	t_log "e: 6 lookups in turn: $held held, the 4 most recent read" \
		"without the data files"
}

# --- f: prefetch=0 ------------------------------------------------------------

case_f() {
	local d=$MNT/f i r0
	CASE=f
	mkdir -p "$d" || t_fail "f: mkdir $d"
	for i in 1 2 3; do
		block "f$i" $BLK
		put "$SRC/f$i" "$d/k$i.bin"
	done
	cold
	for i in 1 2 3; do
		acc_want "$d/k$i.bin" OK
	done
	sleep 1
	stats
	expect "kvfs_readahead_budget_bytes with -o prefetch=0" \
		"${ST[readahead_budget_bytes]}" -eq 0
	expect "kvfs_readahead_started_total with -o prefetch=0" \
		"${ST[readahead_started_total]}" -eq 0
	expect "kvfs_readahead_pending with -o prefetch=0" \
		"${ST[readahead_pending]}" -eq 0
	expect "kvfs_readahead_bytes with -o prefetch=0" \
		"${ST[readahead_bytes]}" -eq 0
	r0=${ST[store_reads_total]}
	rd_buf "k1.bin" "$d/k1.bin" "$SRC/f1"
	rd_buf "k2.bin" "$d/k2.bin" "$SRC/f2"
	rd_direct "k3.bin" "$d/k3.bin" "$SRC/f3"
	stats
	expect "kvfs_store_reads_total after 3 loads without read-ahead" \
		"${ST[store_reads_total]}" -ge $((r0 + 3))
	expect "kvfs_readahead_used_total with -o prefetch=0" \
		"${ST[readahead_used_total]}" -eq 0
}

# --- g: the option ------------------------------------------------------------

# ra_spent KIND N STEP: blocks $MNT/$CASE/k1..kN.bin made cold, STEP PATH
# on each (a lookup no load follows) must start at most 4 + 64
# read-aheads (64 going unused is what it takes to stop) and count the
# rest skipped.
ra_spent() {
	local kind=$1 n=$2 step=$3 d=$MNT/$CASE i s0 k0
	cold
	stats
	s0=${ST[readahead_started_total]}
	k0=${ST[readahead_skipped_total]}
	for i in $(seq "$n"); do
		"$step" "$d/k$i.bin"
	done
	poll "ST[readahead_pending] == 0" ||
		t_fail "$CASE: read-aheads still pending 10 s after the $kind"
	expect "read-aheads started by $n $kind" \
		$((ST[readahead_started_total] - s0)) -le $((4 + 64))
	expect "lookups skipped" $((ST[readahead_skipped_total] - k0)) -gt 0
	t_log "$CASE: $n $kind: started" \
		"+$((ST[readahead_started_total] - s0)), skipped" \
		"+$((ST[readahead_skipped_total] - k0))"
}

acc_ok() {
	acc_want "$1" OK
}

rm_one() {
	timeout -k 5 60 rm "$1" || t_fail "$CASE: rm $1"
}

# k: lookups that an unlink follows (an engine evicting by path): with the
# default budget (nothing is evicted for room), 100 blocks of 4 KiB each
# unlinked right after its lookup spend the credit as lookups alone do (i).
case_k() {
	local d=$MNT/k n=100 i
	CASE=k
	mkdir -p "$d" || t_fail "k: mkdir $d"
	for i in $(seq $n); do
		block "k$i" $((4 * KiB))
		put "$SRC/k$i" "$d/k$i.bin"
	done
	ra_spent "lookups then unlinks" $n rm_one
}

case_i() {
	local d=$MNT/i n=120 i s0
	CASE=i
	mkdir -p "$d" || t_fail "i: mkdir $d"
	for i in $(seq $((n + 2))); do
		block "i$i" $((4 * KiB))
		put "$SRC/i$i" "$d/k$i.bin"
	done
	ra_spent "lookups and no load" $n acc_ok
	# A load of a block with no read-ahead: loads are back.
	rd_buf "k$n.bin" "$d/k$n.bin" "$SRC/i$n"
	stats
	s0=${ST[readahead_started_total]}
	acc_want "$d/k$((n + 1)).bin" OK
	settle $((s0 + 1))
	rd_buf "k$((n + 1)).bin" "$d/k$((n + 1)).bin" "$SRC/i$((n + 1))"
}

# budget_is WANT OPTS...: mounted with OPTS, the budget reads WANT.
budget_is() {
	local want=$1
	shift
	mount_fresh g "$@"
	stats
	expect "kvfs_readahead_budget_bytes with $*" \
		"${ST[readahead_budget_bytes]}" -eq "$want"
	t_umount "$MNT"
}

case_g() {
	local rc=0 out
	CASE=g
	budget_is 1572864 -o prefetch=1536K
	budget_is 1073741824 -o prefetch=1G
	DATA=$(t_plain_dir data-g)
	MNT=$(t_plain_dir mnt-g)
	out=$(timeout 20 "$KVFS" -f -o prefetch=lots "$DATA" "$MNT" 2>&1) ||
		rc=$?
	if [ "$rc" -ne 2 ] || ! grep -q prefetch <<<"$out"; then
		t_error "g: -o prefetch=lots: exit $rc, want 2 with a message" \
			"naming prefetch ($out)"
	fi
	mountpoint -q "$MNT" && t_fail "g: -o prefetch=lots left a mount"
	return 0
}

# ------------------------------------------------------------------------------

t_init
[ "$T_MODE" = mount ] || t_finish
[ "$(id -u)" -eq 0 ] || t_skip "needs root (drop_caches, the data files)"
[ -w /proc/sys/vm/drop_caches ] || t_skip "cannot write drop_caches"
help=$("$KVFS" --help 2>&1 || true)
[[ $help == *prefetch=* ]] ||
	t_fail "this kvfs has no -o prefetch (kvfs --help)"
SRC=$(t_plain_dir src)

mount_fresh ab -o record_max=128M
CASE=setup
stats
expect "kvfs_readahead_budget_bytes by default" \
	"${ST[readahead_budget_bytes]}" -eq $((256 * MiB))
printf 'probe' >"$MNT/probe" || t_fail "cannot write $MNT/probe"
if ! dd if="$MNT/probe" of=/dev/null bs=1M iflag=direct status=none \
	2>"$T_TMP/direct.err"; then
	DIRECT=0
	t_log "no O_DIRECT reads on the mount ($(cat "$T_TMP/direct.err")):" \
		"buffered reads instead"
fi
case_a
case_b
case_h
t_umount "$MNT"

mount_fresh dc
case_d
case_c
[ "${KVFS_FAULT_INJECTION:-0}" = 1 ] && case_j
t_umount "$MNT"

mount_fresh e -o prefetch=8M
case_e
t_umount "$MNT"

mount_fresh i -o prefetch=4M
case_i
t_umount "$MNT"

mount_fresh k
case_k
t_umount "$MNT"

mount_fresh f -o prefetch=0
case_f
t_umount "$MNT"

case_g
t_finish
