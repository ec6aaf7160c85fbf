#!/bin/bash
# SPDX-License-Identifier: MIT
# kill -9 of the daemon while its write-behind queue is full (kvfs(8),
# issue 12):
#   1. NW writers store blocks of four sizes with the engine's sequence
#      (O_DIRECT temp, one write, close, rename; contents derived from the
#      name), an empty file is created and fsync'd, then `kvfsctl sync`:
#      all of these are durable;
#   2. the user.kvfs.fault.wb_delay_ms hook makes every background append
#      sleep DELAY_MS first; the writers store a first batch, then one more
#      file is written and fsync'd (fsync waits until its save is committed,
#      so most of the first batch lands too), then the writers store a
#      second, larger batch that stays queued. Once every writer has ended
#      (nothing is stored after this point), kvfs_wb_queued_files and
#      kvfs_wb_queued_bytes are read and the daemon is killed with SIGKILL;
#   3. a remount of the same DATADIR, and then:
#       * the daemon logged "removed N files whose bytes were still queued
#         at the crash";
#       * no "*.tmp" is visible once the start-up sweep ran (polled 10 s);
#       * every block of step 1 is there, byte-exact, and so is the empty
#         file, and the file fsync'd in step 2;
#       * every other block of step 2 is absent or whole and byte-exact
#         under its name (never empty or short); the absent ones number at
#         most the queued files and their sizes add up to at most the
#         queued bytes, and at least one is absent (the queue really held
#         blocks that were only in memory);
#       * nothing else is visible in the block directories;
#       * the mount stores and loads new blocks, and unmounts cleanly.
# Every step prints one line on stderr (what was queued, what was lost).
# Skipped (77) without fault injection.
#
# Environment: as lib.sh, plus WB_CLIENT (tests/mount/wb_client), KVFSCTL
# and KVFS_FAULT_INJECTION.
# shellcheck disable=SC2034 # read by lib.sh
T_NEEDS="WB_CLIENT KVFSCTL"
. "$(dirname "$0")/lib.sh"

WB=$WB_CLIENT
KiB=1024
NW=4          # writers, one block size each
SIZES=(262144 524288 1048576 2097152)
COMMITTED=8   # blocks per writer in step 1
BATCH1=8      # blocks per writer in step 2, before the fsync
BATCH2=16     # blocks per writer in step 2, after it (40 MiB in all)
DELAY_MS=1000 # each background append sleeps this long first
FSIZE=1048699 # the file fsync'd in step 2
OPTS=tmp_max_age=30,dirty_limit=256M
WPIDS=()

cwb_reap() {
	t_reap "${WPIDS[@]}"
}

kv_stat() {
	awk -v k="kvfs_$1" '$1 == k { print $2 }' "$T_MNT/.kvfs/stats"
}

# writers DIR FIRST COUNT TAG: NW writers at once, writer w storing blocks
# FIRST + w * 1000 .. + COUNT - 1 of size SIZES[w]; each must end with
# every store done (300 s bound).
writers() {
	local dir=$1 first=$2 count=$3 tag=$4 w
	WPIDS=()
	for w in $(seq 0 $((NW - 1))); do
		"$WB" store "$dir" $((first + w * 1000)) "$count" "${SIZES[$w]}" \
			>"$T_TMP/$tag.$w.out" 2>&1 &
		WPIDS+=($!)
	done
	for w in $(seq 0 $((NW - 1))); do
		for _ in $(seq 3000); do
			t_alive "${WPIDS[$w]}" || break
			sleep 0.1
		done
		t_alive "${WPIDS[$w]}" && {
			t_dump_daemons
			t_fail "$tag: writer $w still running after 300 s"
		}
		wait "${WPIDS[$w]}" || {
			t_show "$T_TMP/$tag.$w.out" 20
			t_fail "$tag: writer $w failed"
		}
		[ "$(grep -c '^stored ' "$T_TMP/$tag.$w.out")" -eq "$count" ] ||
			t_fail "$tag: writer $w stored fewer than $count blocks"
	done
	WPIDS=()
}

# verify DIR FIRST COUNT TAG: every writer's names under DIR; the client's
# summaries to $T_TMP/TAG.verify; sets PRESENT, ABSENT, ABSENT_BYTES.
verify() {
	local dir=$1 first=$2 count=$3 tag=$4 w out p a
	local re='^verify: \([0-9]*\) present, \([0-9]*\) absent, 0 bad$'
	PRESENT=0
	ABSENT=0
	ABSENT_BYTES=0
	: >"$T_TMP/$tag.verify"
	for w in $(seq 0 $((NW - 1))); do
		out=$T_TMP/$tag.verify.$w
		"$WB" verify "$dir" $((first + w * 1000)) "$count" \
			"${SIZES[$w]}" >"$out" 2>&1 || {
			t_show "$out" 40
			t_fail "$tag: blocks of writer $w are damaged"
		}
		read -r p a < <(sed -n "s/$re/\\1 \\2/p" "$out")
		[ -n "$p" ] ||
			t_fail "$tag: no summary from verify: $(tail -n 1 "$out")"
		cat "$out" >>"$T_TMP/$tag.verify"
		PRESENT=$((PRESENT + p))
		ABSENT=$((ABSENT + a))
		ABSENT_BYTES=$((ABSENT_BYTES + a * ${SIZES[$w]}))
	done
}

t_init
T_CLEANUP_HOOKS+=(cwb_reap)
[ "$T_MODE" = mount ] || t_finish
[ "${KVFS_FAULT_INJECTION:-0}" = 1 ] ||
	t_skip "the daemon has no fault injection (build with" \
		"-Dfault_injection=true, set KVFS_FAULT_INJECTION=1)"
T_DATA=$(t_plain_dir data)
T_MNT=$(t_plain_dir mnt)
t_mount "$T_DATA" "$T_MNT" -o "$OPTS"
mkdir "$T_MNT/c" "$T_MNT/q" || t_fail "mkdir"

# 1. Committed blocks, and an empty file.
writers "$T_MNT/c" 0 $COMMITTED committed
: >"$T_MNT/c/empty" || t_fail "create c/empty"
"$WB" fsync "$T_MNT/c/empty" >"$T_TMP/fsync.out" 2>&1
[ "$(cat "$T_TMP/fsync.out")" = "fsync: OK" ] ||
	t_fail "fsync of c/empty: $(cat "$T_TMP/fsync.out")"
"$KVFSCTL" sync "$T_MNT" >"$T_TMP/sync.out" 2>&1 ||
	t_fail "kvfsctl sync: $(cat "$T_TMP/sync.out")"
[ "$(kv_stat wb_queued_files)" = 0 ] ||
	t_fail "kvfs_wb_queued_files is '$(kv_stat wb_queued_files)' after sync"
t_log "1: $((NW * COMMITTED)) blocks and an empty file stored and synced"

# 2. The queue held full, then the kill.
"$WB" setxattr "$T_MNT" user.kvfs.fault.wb_delay_ms $DELAY_MS \
	>"$T_TMP/setx.out" 2>&1
[ "$(cat "$T_TMP/setx.out")" = "setxattr: OK" ] ||
	t_fail "setting the delay hook: $(cat "$T_TMP/setx.out")"
appends0=$(kv_stat wb_appends_total)
writers "$T_MNT/q" 0 $BATCH1 batch1
"$WB" write "$T_MNT/q/fsynced.bin" $FSIZE 77 >"$T_TMP/w.out" 2>&1
[ "$(cat "$T_TMP/w.out")" = "write: OK" ] ||
	t_fail "write q/fsynced.bin: $(cat "$T_TMP/w.out")"
# Bounded: the queue ahead of it drains in about BATCH1 * DELAY_MS.
timeout 300 "$WB" fsync "$T_MNT/q/fsynced.bin" >"$T_TMP/fsync.out" 2>&1
[ "$(cat "$T_TMP/fsync.out")" = "fsync: OK" ] ||
	t_fail "fsync of q/fsynced.bin: $(cat "$T_TMP/fsync.out")"
appends1=$(kv_stat wb_appends_total)
writers "$T_MNT/q" 100 $BATCH2 batch2
# Their names into the index before the kill (a directory's fsync commits
# it and waits for no bytes), so that the restart has queued files to
# remove: left to the janitor's 200 ms commit, they were there only when
# its tick fell between the last create and the kill.
"$WB" fsync "$T_MNT/q" >"$T_TMP/fsyncdir.out" 2>&1
[ "$(cat "$T_TMP/fsyncdir.out")" = "fsync: OK" ] ||
	t_fail "fsync of directory q: $(cat "$T_TMP/fsyncdir.out")"
qfiles=$(kv_stat wb_queued_files)
qbytes=$(kv_stat wb_queued_bytes)
appends=$(kv_stat wb_appends_total)
{ [ -n "$qfiles" ] && [ -n "$qbytes" ]; } ||
	t_fail "no kvfs_wb_queued_* metrics"
[ "$qfiles" -ge 1 ] || t_fail "the queue was empty before the kill" \
	"(the delay hook held nothing)"
pid=${T_PID[$T_MNT]}
kill -KILL "$pid"
{ wait "$pid"; } 2>/dev/null
rc=$?
[ "$rc" -eq 137 ] || t_fail "daemon $pid exited $rc, not by SIGKILL"
unset "T_PID[$T_MNT]"
t_scan_log "${T_LOG[$T_MNT]}"
fusermount3 -u -z "$T_MNT" || t_fail "fusermount3 -u -z"
t_log "2: $((NW * BATCH1)) blocks, a file fsync'd after them" \
	"($((appends1 - appends0)) appends when the fsync returned), then" \
	"$((NW * BATCH2)) more blocks, with ${DELAY_MS} ms per append" \
	"($((appends - appends0)) appends in all); killed with $qfiles files" \
	"($((qbytes / KiB)) KiB) queued"

# 3. Restart.
t_mount "$T_DATA" "$T_MNT" -o "$OPTS"
log=${T_LOG[$T_MNT]}
re='.*removed \([0-9]*\) files whose bytes were still queued at the crash.*'
removed=$(sed -n "s/$re/\\1/p" "$log" | head -n 1)
[ -n "$removed" ] || {
	t_show "$log" 40
	t_fail "the daemon did not log the removal of queued files"
}
tmps=
for _ in $(seq 100); do
	tmps=$(find "$T_MNT" -path "$T_MNT/.kvfs" -prune -o -name '*.tmp' -print)
	[ -z "$tmps" ] && break
	sleep 0.1
done
[ -z "$tmps" ] || t_fail "temp files left 10 s after the remount:" \
	"$(head -n 5 <<<"$tmps")"
verify "$T_MNT/c" 0 $COMMITTED committed
[ "$ABSENT" -eq 0 ] || {
	grep '^absent' "$T_TMP/committed.verify" >&2
	t_fail "$ABSENT synced blocks are gone"
}
verify "$T_MNT/q" 0 $BATCH1 batch1
present=$PRESENT absent=$ABSENT absent_bytes=$ABSENT_BYTES
verify "$T_MNT/q" 100 $BATCH2 batch2
t_log "3: start-up removed $removed files; blocks byte-exact / absent:" \
	"first batch $present / $absent, second batch $PRESENT / $ABSENT"
PRESENT=$((PRESENT + present))
ABSENT=$((ABSENT + absent))
ABSENT_BYTES=$((ABSENT_BYTES + absent_bytes))
t_log "3: lost $ABSENT blocks ($((ABSENT_BYTES / KiB)) KiB); queued at" \
	"the kill: $qfiles files ($((qbytes / KiB)) KiB)"
[ "$ABSENT" -le "$qfiles" ] ||
	t_fail "$ABSENT blocks lost, more than the $qfiles queued at the kill"
[ "$ABSENT_BYTES" -le "$qbytes" ] || t_fail "$ABSENT_BYTES bytes lost," \
	"more than the $qbytes queued at the kill"
[ "$ABSENT" -ge 1 ] || t_fail "no block was lost although $qfiles files" \
	"were queued behind a ${DELAY_MS} ms delay: were they on disk?"
"$WB" check "$T_MNT/q/fsynced.bin" $FSIZE 77 >"$T_TMP/check.out" 2>&1 ||
	t_fail "q/fsynced.bin, fsync'd before the kill:" \
		"$(cat "$T_TMP/check.out")"
[ -f "$T_MNT/c/empty" ] || {
	grep -F 'lost at the crash (still queued): empty ' "$log" >&2
	t_fail "c/empty, created, fsync'd and synced before the kill, is gone"
}
[ "$(stat -c %s "$T_MNT/c/empty")" -eq 0 ] || t_fail "c/empty is not empty"
# Nothing but the stored names.
n=$(find "$T_MNT/c" "$T_MNT/q" -mindepth 1 | wc -l)
[ "$n" -eq $((NW * COMMITTED + PRESENT + 2)) ] || {
	find "$T_MNT/c" "$T_MNT/q" -mindepth 1 | sort >&2
	t_fail "$n entries in the block directories, want" \
		"$((NW * COMMITTED + PRESENT + 2))"
}

# The mount works: new blocks stored, synced, loaded.
writers "$T_MNT/q" 500 4 after
"$KVFSCTL" sync "$T_MNT" >"$T_TMP/sync.out" 2>&1 ||
	t_fail "kvfsctl sync: $(cat "$T_TMP/sync.out")"
verify "$T_MNT/q" 500 4 after
[ "$ABSENT" -eq 0 ] || t_fail "blocks stored after the restart are absent"
t_finish
