#!/bin/bash
# SPDX-License-Identifier: MIT
# Crash and restart (kvfs(7)): 20 rounds of
#   - 8 writer and 8 reader threads (crash_client run) running vLLM's store
#     and load sequences over overlapping keys, blocks of 512 KiB and
#     2 MiB, renames replacing each other, an evictor's unlinks of older
#     keys; the writers log every store and unlink to a manifest, one
#     O_APPEND write(2) per line, "intent" before and "done" after;
#   - kill -9 of the daemon 0.5-3 s after the workload started, a lazy
#     unmount, the clients stopped (they see ENOTCONN: expected);
#   - a remount of the same DATADIR (kvfs -f -o tmp_max_age=30), and then:
#       * no "*.tmp" is left once the janitor's start-up sweep ran (every
#         temp file there predates the remount; polled for 10 s);
#       * every visible block reads back whole and byte-exact, as a version
#         the manifest allows for that name; no name whose unlink returned
#         is back; nothing the manifest does not know is visible; the
#         daemon logged no "dropped" block;
#       * a name whose rename returned (and that no unlink touched since)
#         may be lost: with write-behind, close(2) returns once the bytes
#         are queued in the daemon's memory, and a kill -9 loses what was
#         queued. A lost name is absent (a visible one that is empty or
#         short fails the check above), it is one of this round's keys
#         (a name seen after an earlier restart is never lost later), and
#         the sizes of the names lost in one round add up to at most the
#         daemon's dirty_limit (DIRTY_LIMIT, passed with -o);
#       * the data files' physical use (du --block-size=1 DATADIR/data) is
#         at most BOUND = live * 1.1 + 64 MiB, live being the sum of the
#         visible blocks' sizes. The 10% covers a 4 KiB record header per
#         512 KiB block (0.8%); the 64 MiB the 4 KiB name record of every
#         rename so far (about 16 MiB here), torn tails (one record per
#         lane, at most 2 MiB each) and the dead space of records freed in
#         data files that are not removed yet (measured; see the per-round
#         line).
# At the end, the checker itself must catch a wrong block, a missing name,
# a stray name and a stray temp file, and the loss bound must catch more
# than dirty_limit lost and a lost name of an earlier round; then a clean
# unmount (exit 0, no sanitizer report). Each round's line "lost at the
# kill" and the closing "names lost per round" report what was lost.
#
# Environment: as lib.sh, plus CRASH_CLIENT (tests/mount/crash_client) and
# KVFS_CRASH_SEED (the random seed: kill delays, keys, temp suffixes;
# default: the time). Every round prints one line on stderr.
. "$(dirname "$0")/lib.sh"

CC=${CRASH_CLIENT:?CRASH_CLIENT is not set}
ROUNDS=20
NKEYS=4096 # keys per round: more than 8 writers store before the kill
TMP_MAX_AGE=30
SLACK=$((64 * 1024 * 1024))
DIRTY_LIMIT=$((128 * 1024 * 1024)) # -o dirty_limit: bounds what a kill loses
TOP=llama_5f2d1c9e_r0 # crash_client's <base>_r0
SEED=${KVFS_CRASH_SEED:-$(date +%s)}
RANDOM=$SEED
CPID=

# The client is stopped before the mounts go (t_cleanup does those).
crash_exit() {
	local rc=$?
	if [ -n "$CPID" ]; then
		kill -KILL "$CPID" 2>/dev/null
		wait "$CPID" 2>/dev/null
	fi
	(exit "$rc")
	t_cleanup
}

# crash_kill MNT: kill -9 of MNT's daemon, reaped and forgotten by lib.sh.
crash_kill() {
	local mnt=$1 pid=${T_PID[$1]} rc
	t_alive "$pid" || {
		t_show "${T_LOG[$mnt]}" 80
		t_fail "the daemon (pid $pid) died before the kill -9"
	}
	kill -KILL "$pid"
	# (bash would print "Killed" for its job)
	{ wait "$pid"; } 2>/dev/null
	rc=$?
	[ "$rc" -eq 137 ] || t_fail "daemon $pid exited $rc, not by SIGKILL"
	unset "T_PID[$mnt]"
	t_scan_log "${T_LOG[$mnt]}"
}

# crash_stop_client OUT ERR: SIGTERM, then SIGKILL after 10 s; reaps it.
crash_stop_client() {
	local out=$1 err=$2 rc
	kill -TERM "$CPID" 2>/dev/null
	for _ in $(seq 100); do
		t_alive "$CPID" || break
		sleep 0.1
	done
	t_alive "$CPID" && {
		t_log "client $CPID still running 10 s after SIGTERM: SIGKILL"
		kill -KILL "$CPID"
	}
	{ wait "$CPID"; } 2>/dev/null
	rc=$?
	CPID=
	if grep -q '^FAIL' "$err"; then
		t_show "$err" 40
		t_fail "round $r: the clients failed while the mount was up"
	fi
	case $rc in
	0 | 137) ;;
	*)
		t_show "$err" 40
		t_fail "round $r: crash_client run exited $rc"
		;;
	esac
	[ "$rc" -eq 0 ] || echo "run: round $r: (killed: no summary)" >"$out"
}

# crash_recovery LOG: what a daemon's start-up after the crash did.
crash_recovery() {
	awk '
	# The number right after the first match of re in the line.
	function num(re, l) {
		l = $0
		sub(".*" re, "", l)
		return l + 0
	}
	/[0-9]+\.kvd: reclaimed [0-9]+ bytes/ {
		files++
		bytes += num("reclaimed ")
		never += num("bytes [(]")
		torn += /torn tail/
	}
	/released [0-9]+ files unlinked/ { orphans += num("released ") }
	/removed [0-9]+ stale temporary/ { tmps += num("removed ") }
	/removed [0-9]+ files whose bytes were still queued/ {
		queued += num("removed ")
	}
	END {
		printf "%d data files recovered (%d records never committed, " \
			"%d torn tails, %.1f MiB freed), %d orphans released, " \
			"%d temp files removed, %d queued files removed\n",
			files, never, torn, bytes / 1048576, orphans, tmps,
			queued
	}' "$1"
}

# crash_lost ROUND VERIFY_OUT: checks the names verify reports missing
# against what a kill may lose (see the top) and records them in $LOST;
# LOST_N and LOST_BYTES: what this round lost.
crash_lost() {
	local r=$1 vout=$2 n=0 bytes=0 key size round
	local re='^MISSING .*/\([0-9a-f]*\)\.bin: .*(round \([0-9]*\))$'
	while read -r key round; do
		grep -q -x "$key" "$LOST" && continue
		[ "$round" -eq "$r" ] || t_fail "round $r: $key (a key of" \
			"round $round, seen after an earlier restart) is gone"
		size=$(awk -v k="$key" '($1 == "I" || $1 == "D") && $3 == k {
			print $5; exit }' "$MAN")
		[ -n "$size" ] || t_fail "round $r: no size for lost $key"
		echo "$key" >>"$LOST"
		n=$((n + 1))
		bytes=$((bytes + size))
	done < <(sed -n "s|$re|\\1 \\2|p" "$vout")
	[ "$bytes" -le "$DIRTY_LIMIT" ] || {
		t_show "$vout" 40
		t_fail "round $r: $n names ($bytes bytes) lost, more than" \
			"dirty_limit ($DIRTY_LIMIT bytes)"
	}
	LOST_N=$n
	LOST_BYTES=$bytes
}

# Seconds (float) since the epoch.
now() {
	date +%s.%N
}

t_init
trap crash_exit EXIT
[ "$T_MODE" = mount ] || t_finish
T_DATA=$(t_plain_dir data)
T_MNT=$(t_plain_dir mnt)
MAN=$T_TMP/manifest
LIVE=$T_TMP/live
LOST=$T_TMP/lost # keys lost at a kill, one a line
: >"$MAN"
: >"$LIVE"
: >"$LOST"
t_log "seed $SEED (KVFS_CRASH_SEED=$SEED repeats the random choices," \
	"not the timing)"
t_mount "$T_DATA" "$T_MNT" -o tmp_max_age=$TMP_MAX_AGE,dirty_limit=$DIRTY_LIMIT
start=$(now)
lost_rounds=

for r in $(seq 1 $ROUNDS); do
	delay_ms=$((500 + RANDOM % 2501))
	"$CC" run "$T_MNT" "$MAN" "$r" $NKEYS "$LIVE" "$((SEED * 1000003))" \
		>"$T_TMP/run.$r.out" 2>"$T_TMP/run.$r.err" &
	CPID=$!
	sleep "$((delay_ms / 1000)).$(printf %03d $((delay_ms % 1000)))"
	t_alive "$CPID" || {
		t_show "$T_TMP/run.$r.err" 40
		t_fail "round $r: the client ended before the kill"
	}
	crash_kill "$T_MNT"
	fusermount3 -u -z "$T_MNT" || t_fail "round $r: fusermount3 -u -z"
	crash_stop_client "$T_TMP/run.$r.out" "$T_TMP/run.$r.err"
	if [ -n "$(tail -c 1 "$MAN")" ]; then
		# A client killed inside write(2): drop the torn line.
		t_log "round $r: the manifest ends in a torn line: dropped"
		truncate -s $(($(wc -c <"$MAN") - $(tail -n 1 "$MAN" | wc -c))) \
			"$MAN"
	fi

	t_mount "$T_DATA" "$T_MNT" \
		-o tmp_max_age=$TMP_MAX_AGE,dirty_limit=$DIRTY_LIMIT
	log=${T_LOG[$T_MNT]}
	# Every temp file is from before this mount: the sweep removes all.
	tmps=
	for _ in $(seq 100); do
		tmps=$(find "$T_MNT" -path "$T_MNT/.kvfs" -prune -o \
			-name '*.tmp' -print)
		[ -z "$tmps" ] && break
		sleep 0.1
	done
	[ -z "$tmps" ] || {
		t_show "$log" 40
		t_fail "round $r: temp files left 10 s after the remount:" \
			"$(head -n 5 <<<"$tmps")"
	}
	"$CC" verify "$T_MNT" "$MAN" "$LIVE.new" >"$T_TMP/verify.$r.out" 2>&1
	vrc=$?
	# Missing names alone are checked by crash_lost; anything else fails.
	[ "$vrc" -eq 0 ] || { [ "$vrc" -eq 1 ] &&
		grep -q '^verify: .* 0 bad; 0 phantom; 0 tmp;' \
			"$T_TMP/verify.$r.out"; } || {
		t_show "$T_TMP/verify.$r.out" 60
		t_show "$log" 60
		t_fail "round $r: the remounted DATADIR differs from the" \
			"manifest (kill after $delay_ms ms)"
	}
	crash_lost "$r" "$T_TMP/verify.$r.out"
	lost_rounds="$lost_rounds $LOST_N"
	if grep -n 'dropped' "$log" >&2; then
		t_fail "round $r: blocks were dropped after a kill -9"
	fi
	mv "$LIVE.new" "$LIVE"

	live=$(awk '{ s += $3 } END { print s + 0 }' "$LIVE")
	nlive=$(wc -l <"$LIVE")
	du=$(du -s --block-size=1 "$T_DATA/data" | cut -f1)
	bound=$((live * 11 / 10 + SLACK))
	over=$((du - live))
	t_log "round $r: kill after $delay_ms ms;" \
		"$(sed -n 's/^run: round [0-9]*: //p' "$T_TMP/run.$r.out")"
	t_log "round $r: start-up: $(crash_recovery "$log")"
	t_log "round $r: $(sed -n 's/^verify: //p' "$T_TMP/verify.$r.out")"
	t_log "round $r: lost at the kill: $LOST_N names," \
		"$((LOST_BYTES >> 10)) KiB (bound: dirty_limit" \
		"$((DIRTY_LIMIT >> 20)) MiB)"
	t_log "round $r: live $((live >> 20)) MiB in $nlive blocks, data" \
		"files $((du >> 20)) MiB: overhead $((over >> 20)) MiB" \
		"($(awk -v o="$over" -v l="$live" \
			'BEGIN { printf "%.1f", l ? 100 * o / l : 0 }')%" \
		"of live; bound $((bound >> 20)) MiB); index" \
		"$(du -cm "$T_DATA"/index.db* | tail -n 1 | cut -f1) MiB" \
		"(not bounded here)"
	[ "$du" -le "$bound" ] || {
		ls -ls "$T_DATA/data" >&2
		t_fail "round $r: data files take $du bytes > bound $bound" \
			"(live $live)"
	}
done
t_log "names lost per round:$lost_rounds"
t_log "$ROUNDS rounds in $(awk -v a="$start" -v b="$(now)" \
	'BEGIN { printf "%.0f", b - a }') s"

# The checker must be able to fail: a block of a version the manifest does
# not allow, a "done" name that is not there, a name and a temp file that
# nobody stored.
read -r _ key size < <(head -n 1 "$LIVE")
[ -n "${key:-}" ] || t_fail "no block is visible after $ROUNDS rounds"
out=$("$CC" overwrite "$T_MNT" "$key" "$size" 4242424242 99) ||
	t_fail "overwrite $key: $out"
cp "$MAN" "$MAN.bad"
printf 'I 99 0000000000000001 1 524288\nD 99 0000000000000001 1 524288\n' \
	>>"$MAN.bad"
echo stray >"$T_MNT/$TOP/stray.bin"
echo stray >"$T_MNT/$TOP/stray.bin_7.tmp"
"$CC" verify "$T_MNT" "$MAN.bad" "$LIVE.bad" >"$T_TMP/verify.bad.out" 2>&1 &&
	t_fail "verify passed a tree with a wrong block and stray files"
# (The names lost at the kills are missing too: one more than those.)
nmiss=$(($(wc -l <"$LOST") + 1))
{ grep -q ", $nmiss missing; 1 bad; 1 phantom; 1 tmp;" \
	"$T_TMP/verify.bad.out" &&
	grep -q "^MISSING $TOP/000/00_g0/0000000000000001.bin: .*(round 99)$" \
		"$T_TMP/verify.bad.out"; } || {
	t_show "$T_TMP/verify.bad.out"
	t_fail "verify did not report exactly the four planted faults"
}
t_log "self-check: verify reports the planted wrong block, missing name," \
	"stray block and stray temp file"
rm -f "$T_MNT/$TOP/stray.bin" "$T_MNT/$TOP/stray.bin_7.tmp"

# The loss bound must be able to fail too: 2 MiB names lost in a round of
# their own, as many as dirty_limit holds (passes), one more (fails), and
# a key of an earlier round (fails).
lost_check() { # NAMES OF_ROUND ROUND: crash_lost on that many fake losses
	(
		MAN=$T_TMP/man.lost LOST=$T_TMP/lost.self
		: >"$MAN"
		: >"$LOST"
		for i in $(seq 1 "$1"); do
			hex=$(printf 'feed%012x' "$i")
			echo "D $2 $hex 1 2097152" >>"$MAN"
			echo "MISSING $TOP/fee/d0_g0/$hex.bin: a rename of it" \
				"returned (round $2)"
		done >"$T_TMP/verify.lost"
		crash_lost "$3" "$T_TMP/verify.lost"
	) 2>/dev/null
}
lost_check $((DIRTY_LIMIT >> 21)) 99 99 ||
	t_fail "crash_lost refused losses within dirty_limit"
lost_check $(((DIRTY_LIMIT >> 21) + 1)) 99 99 &&
	t_fail "crash_lost passed losses over dirty_limit"
lost_check 1 98 99 && t_fail "crash_lost passed a loss from an earlier round"
t_log "self-check: the loss bound passes dirty_limit's worth of lost" \
	"names and fails one more, and a lost name of an earlier round"
t_finish
