#!/bin/bash
# SPDX-License-Identifier: MIT
# Write-behind and its memory budget (kvfs(8), issue 12), on real mounts:
#   a. the budget held by a file that is still open: with -o dirty_limit=64M
#      one process writes 64 MiB to A and keeps it open; a 4 KiB write to B
#      then fails with EDQUOT instead of hanging, stat and reads of A and B
#      answer meanwhile, the daemon logs a line naming dirty_limit, and once
#      A is closed the write to B works and both read back byte-exact;
#   b. fallocate(2): posix_fallocate of 2 GiB on a new file reserves the
#      space (an extent file) and leaves no memory charged
#      (kvfs_dirty_bytes back to 0); mode 0 extends with zeros,
#      FALLOC_FL_KEEP_SIZE returns 0 and changes nothing, and PUNCH_HOLE
#      zeros a range, exactly as on a plain directory;
#   c. (fault injection) the write-behind queue held full by the
#      user.kvfs.fault.wb_delay_ms hook: closed files read back byte-exact
#      from memory and stat shows their size; renaming one and unlinking
#      another work (the unlink cancels its append); fsync of a queued file
#      waits until it is committed; kvfsctl sync empties the queue; after a
#      remount every remaining file is byte-exact under its final name and
#      the unlinked one is gone;
#   d. (fault injection) a writer waiting for budget behind a full queue,
#      on a mount with one worker thread (-o threads=1): while it waits,
#      stat, a read of a queued file from memory, mkdir, an empty file made
#      and a listing are answered (the WRITE waits on a thread of kvfs's
#      own, not in the worker); killed with SIGKILL, it is gone within
#      10 s and the mount still answers;
#   e. (fault injection) background saves that fail
#      (user.kvfs.fault.wb_error): close(2) succeeded, so a new file whose
#      save failed is removed (logged), never left empty under its name; a
#      file saved before keeps its saved bytes, also after a remount;
#      fsync(2) of a file whose save failed reports EIO;
#   f. (fault injection) a stored file rewritten, its new bytes queued,
#      is evicted (kvfsctl evict): the name goes at once and the queued
#      save is dropped (counted as cancelled), also after a remount;
#   g. a write-only open sends no GETXATTR before its writes, a read-write
#      one does, and a reader opened during a lone O_TRUNC rewrite caches
#      no page;
#   h. (fault injection) small files closed while a writer's write is
#      held by the delay hook are appended together, fewer writes than
#      records (kvfs_wb_writes_total), each under the name it was renamed
#      to before its save; such a write that fails fails each of its saves
#      (new files removed, one log line each; a saved file keeps its
#      bytes); after a remount and after an index rebuilt from the data
#      files each is byte-exact under its name.
# Every client call runs in the background with a bound: a call still
# running after it is a hang, which fails the test (the daemons' threads go
# to $T_TMP/daemon.threads).
#
# Environment: as lib.sh, plus WB_CLIENT (tests/mount/wb_client), KVFSCTL
# and KVFS_FAULT_INJECTION (1: cases c to f run; otherwise they are
# skipped with a log line).
# shellcheck disable=SC2034 # read by lib.sh
T_NEEDS="WB_CLIENT KVFSCTL"
. "$(dirname "$0")/lib.sh"

WB=$WB_CLIENT
MiB=$((1024 * 1024))
NOCACHE=entry_timeout=0,attr_timeout=0,negative_timeout=0
QFILES=8         # case c: files queued, twice the daemon's 4 appenders
QDELAY_MS=15000  # case c: each append sleeps this long first
WDELAY_MS=30000  # case d: the same, while a writer waits
BG=
BG_PIDS=()
OUT=

# Clients still running at the end (hung in the filesystem) go once the
# daemons are gone, which ends their requests.
wb_reap() {
	t_reap "${BG_PIDS[@]}"
}

# bg OUT CMD...: CMD in the background, stdout and stderr to OUT; pid in BG.
bg() {
	local out=$1
	shift
	"$@" >"$out" 2>&1 &
	BG=$!
	BG_PIDS+=("$BG")
}

# bg_wait PID SECS: waits up to SECS for PID; returns its exit status, or
# 124 when it is still running.
bg_wait() {
	local pid=$1 limit=$2 i=0
	while t_alive "$pid"; do
		i=$((i + 1))
		[ "$i" -gt $((limit * 10)) ] && return 124
		sleep 0.1
	done
	# (bash would print "Killed" for a job ended by SIGKILL)
	{ wait "$pid"; } 2>/dev/null
}

# bounded SECS OUT CMD...: CMD with a bound; a hang fails the test.
bounded() {
	local limit=$1 out=$2 rc
	shift 2
	bg "$out" "$@"
	bg_wait "$BG" "$limit"
	rc=$?
	if [ "$rc" -eq 124 ]; then
		t_show "$out" 20
		t_dump_daemons
		t_fail "hang: '$*' still running after $limit s"
	fi
	return "$rc"
}

# wb SECS ARGS...: the client, bounded; its output in OUT.
wb() {
	local limit=$1 rc
	shift
	bounded "$limit" "$T_TMP/wb.out" "$WB" "$@"
	rc=$?
	OUT=$(cat "$T_TMP/wb.out")
	[ "$rc" -le 1 ] || t_fail "wb_client $*: exit $rc: $OUT"
}

# expect SECS WANT ARGS...: the client's output must be WANT.
expect() {
	local limit=$1 want=$2
	shift 2
	wb "$limit" "$@"
	[ "$OUT" = "$want" ] || t_fail "wb_client $*: '$OUT' (want '$want')"
}

# size PATH: st_size by stat(2), bounded; in OUT.
size() {
	bounded 10 "$T_TMP/stat.out" stat -c %s "$1" ||
		t_fail "stat $1: $(cat "$T_TMP/stat.out")"
	OUT=$(cat "$T_TMP/stat.out")
}

# kv_stat MNT NAME: a metric of MNT's daemon (empty when it has none).
kv_stat() {
	awk -v k="kvfs_$2" '$1 == k { print $2 }' "$1/.kvfs/stats"
}

# kv_need MNT NAME: the metric, which must exist; in OUT.
kv_need() {
	OUT=$(kv_stat "$1" "$2")
	[ -n "$OUT" ] || t_fail "the daemon exports no kvfs_$2"
}

# kc_sync CASE [SECS]: kvfsctl sync of $MNT, bounded (60 s); a failure
# fails CASE.
kc_sync() {
	bounded "${2:-60}" "$T_TMP/sync.out" "$KVFSCTL" sync "$MNT" ||
		t_fail "$1: kvfsctl sync: $(cat "$T_TMP/sync.out")"
}

# nlines FILE REGEX: how many lines of FILE match.
nlines() {
	grep -c -E "$2" "$1"
}

# fresh TAG OPTS: a new data directory mounted with OPTS; sets DATA, MNT.
fresh() {
	DATA=$(t_plain_dir "data-$1")
	MNT=$(t_plain_dir "mnt-$1")
	t_mount "$DATA" "$MNT" -o "$2"
}

# ---- a: the budget held by an open file ----
case_open_budget() {
	local a b hpid bpid log nlog
	t_log "a: 64 MiB held open under dirty_limit=64M, then 4 KiB to" \
		"another file"
	fresh a "dirty_limit=64M,$NOCACHE"
	log=${T_LOG[$MNT]}
	a=$MNT/a.bin
	b=$MNT/b.bin
	bg "$T_TMP/hold.out" "$WB" hold "$a" $((64 * MiB)) 1
	hpid=$BG
	for _ in $(seq 1200); do
		grep -q '^hold: ' "$T_TMP/hold.out" && break
		t_alive "$hpid" || break
		sleep 0.1
	done
	[ "$(cat "$T_TMP/hold.out")" = "hold: wrote $((64 * MiB))" ] || {
		t_show "$T_TMP/hold.out"
		t_fail "a: writing 64 MiB to A did not finish in 120 s"
	}
	kv_need "$MNT" dirty_bytes
	t_log "a: A holds 64 MiB, open; kvfs_dirty_bytes $OUT"
	nlog=$(nlines "$log" dirty_limit)
	bg "$T_TMP/b.out" "$WB" write "$b" 4096 2
	bpid=$BG
	# Give the write time to reach the daemon (and, on a daemon with the
	# bug, to wait there holding B), then stat and read both files.
	sleep 1
	size "$b"
	bounded 10 "$T_TMP/catb.out" cat "$b" || t_fail "a: cat B failed"
	size "$a"
	[ "$OUT" -eq $((64 * MiB)) ] || t_fail "a: stat A shows $OUT bytes"
	expect 60 "check: match" check "$a" $((64 * MiB)) 1
	bg_wait "$bpid" 50
	case $? in
	0) ;;
	124)
		t_dump_daemons
		t_fail "a: the 4 KiB write to B still waits after 50 s" \
			"(the budget is held by an open file: it must fail)"
		;;
	*) t_fail "a: wb_client write exited with an error" ;;
	esac
	[ "$(cat "$T_TMP/b.out")" = "write: write EDQUOT" ] ||
		t_fail "a: write to B: '$(cat "$T_TMP/b.out")' (want EDQUOT)"
	[ "$(nlines "$log" dirty_limit)" -gt "$nlog" ] || {
		t_show "$log" 20
		t_fail "a: the daemon logged no line naming dirty_limit"
	}
	t_log "a: write to B: EDQUOT; log: $(grep dirty_limit "$log" |
		tail -n 1)"
	size "$b"
	[ "$OUT" -eq 0 ] || t_fail "a: B has $OUT bytes after the failed write"
	refused=$(kv_stat "$MNT" dirty_refused_total)
	[ "${refused:-0}" -ge 1 ] || t_fail "a: kvfs_dirty_refused_total" \
		"is '${refused}' after the refusal"
	# A closed: its bytes drain on their own, and B can be written.
	kill -USR1 "$hpid"
	bg_wait "$hpid" 120 || t_fail "a: closing A did not finish in 120 s"
	grep -q '^hold: close OK$' "$T_TMP/hold.out" ||
		t_fail "a: close A: $(cat "$T_TMP/hold.out")"
	expect 90 "write: OK" write "$b" 4096 2
	expect 30 "check: match" check "$b" 4096 2
	expect 60 "check: match" check "$a" $((64 * MiB)) 1
	t_log "a: after A's close B was written; both read back byte-exact"
	t_umount "$MNT"
}

# ---- b: fallocate ----
# falloc_seq DIR TRANSCRIPT: the calls compared with a plain directory.
falloc_seq() {
	local d=$1 tr=$2 f
	{
		wb 30 write "$d/f1" 1000 3
		echo "$OUT"
		wb 30 falloc "$d/f1" 0 0 $MiB
		echo "grow f1 to 1 MiB: $OUT"
		wb 30 falloc "$d/f1" 0 100 100
		echo "inside f1: $OUT"
		wb 30 falloc "$d/f1" 0 $((2 * MiB)) 4096
		echo "past f1's end: $OUT"
		wb 30 falloc "$d/f2" keep 0 $MiB
		echo "keep_size on a new f2: $OUT"
		wb 30 falloc "$d/f1" keep 0 $((4 * MiB))
		echo "keep_size on f1: $OUT"
		wb 30 falloc "$d/f3" 0 0 $MiB
		echo "new f3: $OUT"
		wb 30 falloc "$d/f1" punch 4096 8192
		echo "punch in f1: $OUT"
		for f in f1 f2 f3; do
			bounded 30 "$T_TMP/sum.out" sha256sum "$d/$f" ||
				t_fail "sha256sum $d/$f"
			size "$d/$f"
			echo "$f: size $OUT sha256 $(cut -c1-64 "$T_TMP/sum.out")"
		done
	} >"$tr"
}

case_fallocate() {
	local ref
	t_log "b: fallocate"
	fresh b "$NOCACHE"
	# posix_fallocate past record_max: an extent file with the space
	# reserved on disk (glibc would write zeros were fallocate missing),
	# and nothing charged to the dirty budget.
	wb 60 falloc "$MNT/big" posix 0 $((2048 * MiB))
	[ "$OUT" = "falloc: OK size $((2048 * MiB)) close OK" ] ||
		t_fail "b: posix_fallocate of 2 GiB: '$OUT' (want OK)"
	for _ in $(seq 100); do
		[ "$(kv_stat "$MNT" dirty_bytes)" = 0 ] && break
		sleep 0.1
	done
	kv_need "$MNT" dirty_bytes
	[ "$OUT" -eq 0 ] ||
		t_fail "b: kvfs_dirty_bytes $OUT after the refused fallocate"
	[ "$(stat -c %b "$MNT/big")" -ge $((4 * 1024 * 1024)) ] ||
		t_fail "b: big takes $(stat -c %b "$MNT/big") blocks, not 2 GiB"
	t_log "b: posix_fallocate of 2 GiB: reserved, nothing charged"
	ref=$(t_plain_dir ref-b)
	falloc_seq "$ref" "$T_TMP/falloc.ref"
	falloc_seq "$MNT" "$T_TMP/falloc.kvfs"
	t_expect_none "$T_TMP/falloc.ref" 'E[A-Z]+' "b: fallocate calls"
	t_compare fallocate "$T_TMP/falloc.ref" "$T_TMP/falloc.kvfs"
	t_umount "$MNT"
}

# ---- c: the queue held full ----
# File i of case c: its size (odd sizes, none a multiple of a page).
qsize() {
	echo $((MiB / 2 + $1 * 40961))
}

# qstats MNT: the write-behind counters in Q_APPENDS, Q_COMMITS, Q_CANCELLED
# and Q_FILES.
qstats() {
	kv_need "$1" wb_appends_total
	Q_APPENDS=$OUT
	kv_need "$1" wb_commits_total
	Q_COMMITS=$OUT
	kv_need "$1" wb_cancelled_total
	Q_CANCELLED=$OUT
	kv_need "$1" wb_queued_files
	Q_FILES=$OUT
}

case_queue() {
	local d i a0 c0 x0 n
	t_log "c: the queue held full: reads, stat, rename, unlink, fsync," \
		"kvfsctl sync, remount"
	fresh c "dirty_limit=256M,$NOCACHE"
	d=$MNT/q
	mkdir "$d" || t_fail "c: mkdir"
	# Each append first sleeps QDELAY_MS: the steps up to the fsync run
	# while every file is still queued (checked below).
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms \
		$QDELAY_MS
	qstats "$MNT"
	a0=$Q_APPENDS
	c0=$Q_COMMITS
	x0=$Q_CANCELLED
	for i in $(seq 1 $QFILES); do
		expect 30 "write: OK" write "$d/f$i" "$(qsize "$i")" $((100 + i))
	done
	qstats "$MNT"
	[ "$Q_FILES" -eq $QFILES ] ||
		t_fail "c: kvfs_wb_queued_files $Q_FILES after $QFILES closes"
	for i in $(seq 1 $QFILES); do
		size "$d/f$i"
		[ "$OUT" -eq "$(qsize "$i")" ] ||
			t_fail "c: stat f$i: $OUT bytes (want $(qsize "$i"))"
		expect 30 "check: match" check "$d/f$i" "$(qsize "$i")" \
			$((100 + i))
	done
	# f8, the last queued, is unlinked; f7 renamed.
	mv "$d/f7" "$d/r7" || t_fail "c: rename f7"
	rm "$d/f8" || t_fail "c: unlink f8"
	expect 30 "check: match" check "$d/r7" "$(qsize 7)" 107
	expect 10 "check: open ENOENT" check "$d/f7" 1 0
	expect 10 "check: open ENOENT" check "$d/f8" 1 0
	qstats "$MNT"
	[ "$Q_APPENDS" -eq "$a0" ] || t_fail "c: $((Q_APPENDS - a0))" \
		"appends done before the fsync: the steps above took longer" \
		"than the ${QDELAY_MS} ms delay, so they did not all see" \
		"queued files"
	t_log "c: $QFILES files queued ($Q_FILES outstanding): each read" \
		"back byte-exact from memory with its size; f7 renamed, f8" \
		"unlinked"
	# fsync waits until f6's save is appended and committed.
	expect 120 "fsync: OK" fsync "$d/f6"
	qstats "$MNT"
	{ [ "$Q_APPENDS" -gt "$a0" ] && [ "$Q_COMMITS" -gt "$c0" ]; } ||
		t_fail "c: fsync of a queued file returned with" \
			"$((Q_APPENDS - a0)) appends, $((Q_COMMITS - c0))" \
			"commits since the writes"
	t_log "c: fsync of f6 returned after $((Q_APPENDS - a0)) appends," \
		"$((Q_COMMITS - c0)) commits ($Q_FILES files still queued)"
	kc_sync c 120
	qstats "$MNT"
	[ "$Q_FILES" -eq 0 ] ||
		t_fail "c: kvfs_wb_queued_files $Q_FILES after kvfsctl sync"
	[ "$Q_APPENDS" -eq $((a0 + QFILES - 1)) ] ||
		t_fail "c: $((Q_APPENDS - a0)) appends for $((QFILES - 1))" \
			"files (the unlinked one must not be appended)"
	[ "$Q_CANCELLED" -ge $((x0 + 1)) ] ||
		t_fail "c: kvfs_wb_cancelled_total did not count f8's unlink"
	t_log "c: after kvfsctl sync: queue empty, $((Q_APPENDS - a0))" \
		"appends in $((Q_COMMITS - c0)) commits," \
		"$((Q_CANCELLED - x0)) cancelled"
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms 0
	t_umount "$MNT"
	t_mount "$DATA" "$MNT" -o "$NOCACHE"
	for i in $(seq 1 $QFILES); do
		case $i in
		7) expect 30 "check: match" check "$d/r7" "$(qsize 7)" 107 ;;
		8) ;;
		*)
			expect 30 "check: match" check "$d/f$i" \
				"$(qsize "$i")" $((100 + i))
			;;
		esac
	done
	n=$(find "$d" -mindepth 1 | wc -l)
	[ "$n" -eq $((QFILES - 1)) ] || {
		find "$d" >&2
		t_fail "c: $n names after the remount (want $((QFILES - 1)))"
	}
	t_log "c: after a remount every file is byte-exact under its final" \
		"name; the unlinked one is gone"
	t_umount "$MNT"
}

# ---- d: a waiting writer killed ----
case_kill_waiter() {
	local i wpid waits limit
	t_log "d: a writer waiting for budget behind a full queue, killed"
	fresh d "dirty_limit=16M,threads=1,$NOCACHE"
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms \
		$WDELAY_MS
	# 12 MiB queued (the appends sleep), then 8 MiB more does not fit.
	for i in 1 2 3; do
		expect 60 "write: OK" write "$MNT/q$i.bin" $((4 * MiB)) "$i"
	done
	kv_need "$MNT" wb_queued_files
	[ "$OUT" -ge 1 ] || t_fail "d: nothing queued with the delay hook set"
	bg "$T_TMP/w.out" "$WB" write "$MNT/w.bin" $((8 * MiB)) 9
	wpid=$BG
	# Its first 4 MiB fill the budget; the next WRITE waits for room.
	for _ in $(seq 600); do
		[ "$(kv_stat "$MNT" dirty_bytes)" -ge $((16 * MiB)) ] && break
		t_alive "$wpid" || break
		sleep 0.1
	done
	sleep 1
	t_alive "$wpid" || t_fail "d: the writer did not wait for budget:" \
		"$(cat "$T_TMP/w.out")"
	kv_need "$MNT" dirty_bytes
	[ "$OUT" -ge $((16 * MiB)) ] ||
		t_fail "d: the writer has not filled the budget in 60 s ($OUT)"
	# The one worker serves the rest meanwhile (10 s each; the queue's
	# appends sleep 30 s, so none of this waits for the writer).
	size "$MNT/q1.bin"
	[ "$OUT" -eq $((4 * MiB)) ] || t_fail "d: q1 has $OUT bytes"
	expect 10 "check: match" check "$MNT/q2.bin" $((4 * MiB)) 2
	bounded 10 "$T_TMP/ns.out" mkdir "$MNT/dir" ||
		t_fail "d: mkdir: $(cat "$T_TMP/ns.out")"
	bounded 10 "$T_TMP/ns.out" touch "$MNT/dir/empty" ||
		t_fail "d: touch: $(cat "$T_TMP/ns.out")"
	bounded 10 "$T_TMP/ns.out" ls "$MNT/dir" ||
		t_fail "d: ls: $(cat "$T_TMP/ns.out")"
	[ "$(cat "$T_TMP/ns.out")" = empty ] ||
		t_fail "d: ls lists '$(cat "$T_TMP/ns.out")' (want 'empty')"
	t_alive "$wpid" || t_fail "d: the writer stopped waiting:" \
		"$(cat "$T_TMP/w.out")"
	kv_need "$MNT" dirty_waits_total
	waits=$OUT
	t_log "d: answered stat, a read, mkdir, a create and ls meanwhile;" \
		"the writer waits (wchan $(cat "/proc/$wpid/wchan" \
		2>/dev/null)); SIGKILL"
	# Over io_uring kvfs asks for no INTERRUPT (kvfs(8) io_uring): the
	# wait ends on its own, when the queue drains or at its 60 s bound.
	limit=10
	grep -q 'serving FUSE over io_uring' "${T_LOG[$MNT]}" && limit=75
	kill -KILL "$wpid"
	bg_wait "$wpid" $limit
	[ $? -eq 124 ] && {
		t_dump_daemons
		t_fail "d: the killed writer is still there $limit s after SIGKILL"
	}
	# The wait it was in ended (and is counted once it ends).
	kv_need "$MNT" dirty_waits_total
	[ "$OUT" -gt "$waits" ] || t_fail "d: kvfs_dirty_waits_total did not" \
		"count the interrupted wait ($waits -> $OUT)"
	# The mount still answers, and the queued files read from memory.
	size "$MNT/q1.bin"
	[ "$OUT" -eq $((4 * MiB)) ] || t_fail "d: q1 has $OUT bytes"
	expect 30 "check: match" check "$MNT/q2.bin" $((4 * MiB)) 2
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms 0
	kc_sync d 120
	for i in 1 2 3; do
		expect 30 "check: match" check "$MNT/q$i.bin" $((4 * MiB)) "$i"
	done
	t_log "d: the killed writer was gone within $limit s; the mount answers"
	t_umount "$MNT"
}

# ---- e: background saves that fail ----
case_save_error() {
	local log nlog f0
	t_log "e: background saves fail (user.kvfs.fault.wb_error=EIO)"
	fresh e "$NOCACHE"
	log=${T_LOG[$MNT]}
	expect 30 "write: OK" write "$MNT/old.bin" $((MiB + 5)) 1
	kc_sync e
	kv_need "$MNT" wb_failed_total
	f0=$OUT
	nlog=$(nlines "$log" "could not be saved")
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_error 5
	# close(2) succeeds: the bytes are queued; the append then fails.
	expect 30 "write: OK" write "$MNT/new.bin" $((2 * MiB)) 2
	expect 30 "write: OK" write "$MNT/old.bin" $((3 * MiB)) 3
	# fsync of a file still queued (its append delayed) waits for the
	# save and reports that it failed.
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms \
		1500
	expect 30 "write: OK" write "$MNT/sync.bin" 4096 4
	expect 30 "fsync: EIO" fsync "$MNT/sync.bin"
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms 0
	kc_sync e
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_error 0
	kv_need "$MNT" wb_failed_total
	[ "$OUT" -ge $((f0 + 3)) ] ||
		t_fail "e: kvfs_wb_failed_total $f0 -> $OUT (want 3 more)"
	# A new file never saved is gone, never shown empty or short.
	expect 10 "check: open ENOENT" check "$MNT/new.bin" $((2 * MiB)) 2
	expect 10 "check: open ENOENT" check "$MNT/sync.bin" 4096 4
	[ "$(nlines "$log" "new.bin removed: its bytes could not be saved")" \
		-eq 1 ] || {
		t_show "$log" 20
		t_fail "e: no log line for new.bin"
	}
	[ "$(nlines "$log" "could not be saved")" -ge $((nlog + 2)) ] ||
		t_fail "e: the removals were not logged"
	# A file saved before keeps its saved bytes.
	expect 30 "check: match" check "$MNT/old.bin" $((MiB + 5)) 1
	t_umount "$MNT"
	t_mount "$DATA" "$MNT" -o "$NOCACHE"
	expect 30 "check: match" check "$MNT/old.bin" $((MiB + 5)) 1
	expect 10 "check: open ENOENT" check "$MNT/new.bin" $((2 * MiB)) 2
	# And saving works again.
	expect 30 "write: OK" write "$MNT/new.bin" $((2 * MiB)) 2
	kc_sync e
	expect 30 "check: match" check "$MNT/new.bin" $((2 * MiB)) 2
	t_log "e: failed saves: new files gone, old.bin kept, fsync EIO"
	t_umount "$MNT"
}

# ---- f: eviction of a file whose new bytes are queued ----
case_evict_queued() {
	local c0 f0
	t_log "f: a stored file rewritten (queued) and then evicted"
	fresh f "$NOCACHE"
	expect 30 "write: OK" write "$MNT/old.bin" $((MiB + 5)) 1
	kc_sync f
	kv_need "$MNT" wb_cancelled_total
	c0=$OUT
	kv_need "$MNT" wb_failed_total
	f0=$OUT
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms \
		3000
	expect 30 "write: OK" write "$MNT/old.bin" $((2 * MiB)) 2
	kv_need "$MNT" wb_queued_files
	[ "$OUT" -eq 1 ] || t_fail "f: $OUT files queued, want 1"
	# The queued save does not keep the file from eviction ...
	# (exit 1: use stays above 0, the index takes space.)
	bounded 60 "$T_TMP/evict.out" "$KVFSCTL" evict --to 0 "$MNT"
	[ $? -le 1 ] || t_fail "f: kvfsctl evict: $(cat "$T_TMP/evict.out")"
	grep -q '^evicted 1 blocks' "$T_TMP/evict.out" || {
		t_show "$T_TMP/evict.out"
		t_fail "f: the evict did not take old.bin"
	}
	expect 10 "check: open ENOENT" check "$MNT/old.bin" $((2 * MiB)) 2
	# ... and the eviction drops the save: nothing comes back.
	kc_sync f
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms 0
	kv_need "$MNT" wb_cancelled_total
	[ "$OUT" -eq $((c0 + 1)) ] ||
		t_fail "f: kvfs_wb_cancelled_total $c0 -> $OUT (want +1)"
	kv_need "$MNT" wb_failed_total
	[ "$OUT" -eq "$f0" ] || t_fail "f: kvfs_wb_failed_total $f0 -> $OUT"
	t_umount "$MNT"
	t_mount "$DATA" "$MNT" -o "$NOCACHE"
	expect 10 "check: open ENOENT" check "$MNT/old.bin" $((2 * MiB)) 2
	t_log "f: evicted while queued: gone, its save dropped"
	t_umount "$MNT"
}

# g: a write-only open is served with direct_io: the kernel sends no
# GETXATTR (security.capability) before its writes, as it does before each
# write of a read-write one (which shows the count can move). A write-only
# O_TRUNC open gets direct_io only when no other handle has the file open,
# and then opens during it get direct_io too and cache no pages (cachestat
# of a reader's descriptor); with a reader open it stays buffered, one
# GETXATTR a write (fileio.c, fs_open_direct_locked: the rewrite race).
case_wronly_direct() {
	local g0 n
	t_mount "$DATA" "$MNT"
	kv_need "$MNT" getxattr_requests_total
	g0=$OUT
	dd if=/dev/zero of="$MNT/wo.bin" bs=4k count=5 conv=notrunc \
		status=none ||
		t_fail "g: dd to a write-only open"
	kv_need "$MNT" getxattr_requests_total
	[ "$OUT" -eq "$g0" ] ||
		t_fail "g: $((OUT - g0)) GETXATTRs for a write-only open (want 0)"
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for _ in range(5):
    os.write(fd, b"x" * 4096)
os.close(fd)' "$MNT/rw.bin" || t_fail "g: writes to a read-write open"
	kv_need "$MNT" getxattr_requests_total
	n=$((OUT - g0))
	((n > 0)) || t_fail "g: no GETXATTR for a read-write open's writes"
	g0=$OUT
	dd if=/dev/zero of="$MNT/wo.bin" bs=4k count=5 status=none ||
		t_fail "g: dd to a write-only O_TRUNC open"
	kv_need "$MNT" getxattr_requests_total
	# The truncation itself may add one.
	((OUT - g0 <= 1)) ||
		t_fail "g: $((OUT - g0)) GETXATTRs for 5 writes of a lone" \
			"write-only O_TRUNC open (want direct_io)"
	g0=$OUT
	exec 7<"$MNT/wo.bin"
	dd if=/dev/zero of="$MNT/wo.bin" bs=4k count=5 status=none ||
		t_fail "g: dd to a write-only O_TRUNC open beside a reader"
	exec 7<&-
	kv_need "$MNT" getxattr_requests_total
	((OUT - g0 >= 5)) ||
		t_fail "g: $((OUT - g0)) GETXATTRs for 5 writes of a" \
			"write-only O_TRUNC open beside a reader (want one a" \
			"write: buffered)"
	n=$(python3 - "$MNT/wo.bin" <<'PY'
import ctypes, os, sys

libc = ctypes.CDLL(None, use_errno=True)

def cached(fd):
    """Pages of fd's file in the page cache (cachestat(2)), or None."""
    rng = (ctypes.c_uint64 * 2)(0, 0)
    st = (ctypes.c_uint64 * 5)()
    if libc.syscall(451, fd, rng, st, 0) < 0:
        return None
    return st[0]

p, blk = sys.argv[1], b"n" * 65536
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
os.write(w, blk)
r = os.open(p, os.O_RDONLY)
if os.pread(r, 65536, 0) != blk:
    sys.exit("a reader during the rewrite did not read the new block")
during = cached(r)
os.close(r)
os.close(w)
if during is None:
    print("cachestat(2) missing: the page cache was not checked")
    sys.exit(0)
r = os.open(p, os.O_RDONLY)
if os.pread(r, 65536, 0) != blk:
    sys.exit("a reader after the rewrite did not read the new block")
after = cached(r)
os.close(r)
print(f"pages cached: {during} by a reader during a rewrite, {after} after")
if during != 0 or after == 0:
    sys.exit(1)
PY
) || t_fail "g: $n (want none during, some after)"
	t_log "g: write-only opens: no GETXATTR, O_TRUNC beside a reader:" \
		"$((OUT - g0)) for 5 writes; $n"
	t_umount "$MNT"
}

# ---- h: small saves share a write ----
SFILES=20 # case h: small files closed behind one delayed write
case_small_batch() {
	local d i a0 w0 f0 log nlog appends writes
	t_log "h: $SFILES small files closed while a write is held"
	fresh h "$NOCACHE"
	d=$MNT/s
	mkdir "$d" || t_fail "h: mkdir"
	# The first file's write sleeps 3 s; the others queue behind it and
	# wake no writer (kvfs(7), write-behind writers).
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms 3000
	qstats "$MNT"
	a0=$Q_APPENDS
	kv_need "$MNT" wb_writes_total
	w0=$OUT
	for i in $(seq 1 $SFILES); do
		expect 30 "write: OK" write "$d/s$i.tmp" $((4096 + i * 100)) \
			$((200 + i))
		mv "$d/s$i.tmp" "$d/s$i" || t_fail "h: rename s$i.tmp"
	done
	kc_sync h 120
	qstats "$MNT"
	kv_need "$MNT" wb_writes_total
	appends=$((Q_APPENDS - a0))
	writes=$((OUT - w0))
	[ "$appends" -eq $SFILES ] ||
		t_fail "h: $appends records appended for $SFILES files"
	[ "$writes" -lt "$appends" ] ||
		t_fail "h: $writes writes for $appends records: no two small" \
			"saves shared a write"
	t_log "h: $appends records in $writes writes"
	# A write of several that fails fails each of them: new files lose
	# their names (one log line each), a saved one keeps its bytes.
	log=${T_LOG[$MNT]}
	nlog=$(nlines "$log" "removed: its bytes could not be saved")
	kv_need "$MNT" wb_failed_total
	f0=$OUT
	kv_need "$MNT" wb_writes_total
	w0=$OUT
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_error 5
	expect 30 "write: OK" write "$d/s1" 4096 999
	for i in 1 2 3 4 5; do
		expect 30 "write: OK" write "$d/bad$i" 4096 $((300 + i))
	done
	kc_sync h 120
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_error 0
	kv_need "$MNT" wb_failed_total
	[ "$OUT" -eq $((f0 + 6)) ] ||
		t_fail "h: kvfs_wb_failed_total $f0 -> $OUT (want 6 more)"
	kv_need "$MNT" wb_writes_total
	[ "$OUT" -eq "$w0" ] ||
		t_fail "h: $((OUT - w0)) failed writes counted as writes"
	for i in 1 2 3 4 5; do
		expect 10 "check: open ENOENT" check "$d/bad$i" 4096 $((300 + i))
	done
	expect 30 "check: match" check "$d/s1" $((4096 + 100)) 201
	[ "$(nlines "$log" "removed: its bytes could not be saved")" -eq \
		$((nlog + 5)) ] || {
		t_show "$log" 20
		t_fail "h: not one log line per new file whose save failed"
	}
	t_log "h: 6 saves failed (5 queued behind a held one, written" \
		"together): the 5 new files gone (logged), s1 kept its bytes"
	expect 10 "setxattr: OK" setxattr "$MNT" user.kvfs.fault.wb_delay_ms 0
	t_umount "$MNT"
	t_mount "$DATA" "$MNT" -o "$NOCACHE"
	for i in $(seq 1 $SFILES); do
		expect 30 "check: match" check "$d/s$i" $((4096 + i * 100)) \
			$((200 + i))
	done
	t_umount "$MNT"
	# The names the records carry: an index rebuilt from the data files
	# alone finds each file under its final name, none under a temporary
	# one.
	rm -f "$DATA"/index.db*
	"$KVFSCTL" fsck --rebuild-index "$DATA" >"$T_TMP/h.rebuild" 2>&1 ||
		t_fail "h: fsck --rebuild-index: $(cat "$T_TMP/h.rebuild")"
	t_mount "$DATA" "$MNT" -o "$NOCACHE"
	for i in $(seq 1 $SFILES); do
		expect 30 "check: match" check "$d/s$i" $((4096 + i * 100)) \
			$((200 + i))
	done
	[ -z "$(find "$d" -name '*.tmp')" ] ||
		t_fail "h: a rebuilt index lists temporary names:" \
			"$(find "$d" -name '*.tmp')"
	t_log "h: after a remount and a rebuilt index each file is" \
		"byte-exact under its final name"
	t_umount "$MNT"
}

t_init
T_CLEANUP_HOOKS+=(wb_reap)
[ "$T_MODE" = mount ] || t_finish
case_open_budget
case_fallocate
case_wronly_direct
if [ "${KVFS_FAULT_INJECTION:-0}" = 1 ]; then
	case_queue
	case_kill_waiter
	case_save_error
	case_evict_queued
	case_small_batch
else
	t_log "c, d, e, f, h: skipped (the daemon has no fault injection:" \
		"KVFS_FAULT_INJECTION=${KVFS_FAULT_INJECTION:-unset})"
fi
t_finish
