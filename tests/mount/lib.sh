# SPDX-License-Identifier: MIT
# Shared helpers for the kvfs mount tests (sourced, not run).
#
# Every test runs the same workload twice: against a plain directory on the
# local disk (the reference: ext4 here) and against a real kvfs mount, and
# compares the two transcripts. The daemon is started in the foreground (-f),
# the mount is polled for, and at the end "fusermount3 -u" must unmount it
# and the daemon must exit 0 with no sanitizer report on stderr.
#
# The torn suite (tests/torn) uses the same helpers for its mounts, steps
# and cleanup; it names the helper programs it needs in T_NEEDS and checks
# that keep going after a failure with t_error.
#
# Environment:
#   KVFS            the daemon; when unset the "mount" is a second plain
#                   directory (reference-only run, used while the daemon is
#                   being written); such a run ends with exit 77 (skip)
#   VLLM_IO, ERRNO_BATTERY, TREE_DUMP   the helper programs (T_NEEDS)
#   KVFS_TEST_TMP   where scratch dirs go (default /var/tmp: must be a disk
#                   filesystem with O_DIRECT and user xattrs, not tmpfs)
#   KVFS_OPTS       extra daemon arguments, e.g. "-o loglevel=debug"
#   KVFS_STEP_LIMIT seconds after which one helper run counts as hung (300);
#                   the daemons' threads are then dumped to
#                   $T_TMP/daemon.threads
#   KVFS_KEEP       keep the scratch dir of a failed test for inspection
#
# Exit codes: 0 pass, 77 skip, anything else fail.

set -u -o pipefail

T_NAME=$(basename "$0" .sh)
T_TMP=
T_MODE=
T_NMOUNTS=0
T_DONE=0
T_KEEP_GOING=0 # 1: a differing transcript is reported, the test goes on
T_NFAILED=0    # failed checks that did not stop the test (t_error)
T_NEEDS=${T_NEEDS:-VLLM_IO ERRNO_BATTERY TREE_DUMP} # helpers t_init checks
T_CLEANUP_HOOKS=() # commands t_cleanup runs once the daemons are gone
declare -A T_PID=()  # mountpoint -> daemon pid
declare -A T_LOG=()  # mountpoint -> daemon stderr file

t_log() {
	echo "[$T_NAME] $*" >&2
}

t_fail() {
	echo "[$T_NAME] FAIL: $*" >&2
	exit 1
}

t_skip() {
	echo "[$T_NAME] SKIP: $*" >&2
	exit 77
}

# t_error MSG: a failed check after which the test goes on; t_finish then
# fails the test.
t_error() {
	echo "[$T_NAME] FAILED: $* (continuing)" >&2
	T_NFAILED=$((T_NFAILED + 1))
}

# Prints a file to stderr, indented, at most $2 lines (default 200).
t_show() {
	local f=$1 n=${2:-200}
	[ -f "$f" ] || return 0
	echo "----- $f (last $n lines) -----" >&2
	tail -n "$n" "$f" | sed 's/^/  | /' >&2
}

# Sanitizer reports in a daemon log fail the test.
t_scan_log() {
	local log=$1
	if grep -E -q 'ERROR: (Address|Leak|Memory|Thread|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer|runtime error:|==[0-9]+==ERROR' "$log"; then
		t_show "$log" 400
		t_fail "sanitizer report in daemon stderr ($log)"
	fi
}

# t_dump_daemons: where every thread of every daemon is, for a hang
# report, into $T_TMP/daemon.threads.
t_dump_daemons() {
	local pid t
	[ -n "$T_TMP" ] && [ -d "$T_TMP" ] || return 0
	for pid in "${T_PID[@]}"; do
		for t in /proc/"$pid"/task/*; do
			echo "== $pid $t $(cat "$t/comm" 2>/dev/null)" \
				"wchan=$(cat "$t/wchan" 2>/dev/null)"
			cat "$t/stack" 2>/dev/null
		done
		if command -v gdb >/dev/null; then
			timeout 60 gdb -batch -p "$pid" \
				-ex 'thread apply all bt' 2>&1
		fi
	done >"$T_TMP/daemon.threads" 2>&1
	t_log "daemon threads in $T_TMP/daemon.threads"
}

# Succeeds while pid is a live (not zombie) process.
# t_reap PID...: kills and reaps clients (for instance ones left hanging in
# the filesystem, at cleanup once the daemons are gone).
t_reap() {
	local p
	for p in "$@"; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
}

t_alive() {
	local pid=$1 state
	kill -0 "$pid" 2>/dev/null || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

t_cleanup() {
	local rc=$? mnt pid hook
	trap - EXIT
	for mnt in "${!T_PID[@]}"; do
		pid=${T_PID[$mnt]}
		t_log "cleanup: lazy unmount of $mnt, killing daemon $pid"
		fusermount3 -u -z "$mnt" 2>/dev/null
		if t_alive "$pid"; then
			kill -TERM "$pid" 2>/dev/null
			for _ in $(seq 50); do
				t_alive "$pid" || break
				sleep 0.1
			done
			t_alive "$pid" && kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
		[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && t_show "${T_LOG[$mnt]}" 100
	done
	for hook in "${T_CLEANUP_HOOKS[@]}"; do
		"$hook"
	done
	if [ -n "$T_TMP" ] && [ -d "$T_TMP" ]; then
		if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "${KVFS_KEEP:-}" ]; then
			t_log "keeping $T_TMP (KVFS_KEEP set)"
		else
			# Never cross into a mount that failed to go away.
			rm -rf --one-file-system "$T_TMP"
		fi
	fi
	if [ "$rc" -eq 0 ] && [ "$T_DONE" -ne 1 ]; then
		echo "[$T_NAME] FAIL: script ended before t_finish" >&2
		rc=1
	fi
	exit "$rc"
}

# Sets up scratch space and decides the mode. Call first.
t_init() {
	local base=${KVFS_TEST_TMP:-/var/tmp} prog
	trap t_cleanup EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	for prog in $T_NEEDS; do
		if [ -z "${!prog:-}" ] || [ ! -x "${!prog}" ]; then
			t_fail "$prog is not set to an executable"
		fi
	done
	T_TMP=$(mktemp -d "$base/kvfs-$T_NAME.XXXXXX") ||
		t_fail "mktemp in $base"
	case $(stat -f -c %T "$T_TMP") in
	tmpfs | ramfs | overlayfs)
		t_log "warning: $base is $(stat -f -c %T "$T_TMP"); the" \
			"reference should be a disk filesystem (KVFS_TEST_TMP)"
		;;
	esac
	if [ -z "${KVFS:-}" ]; then
		T_MODE=ref
		t_log "KVFS unset: reference-only run (plain dir vs plain dir)"
		return 0
	fi
	[ -x "$KVFS" ] || t_fail "KVFS=$KVFS is not executable"
	[ -c /dev/fuse ] || t_skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || t_skip "no fusermount3"
	command -v mountpoint >/dev/null || t_skip "no mountpoint(1)"
	T_MODE=mount
}

# Fresh plain directory under the scratch space; prints its path.
t_plain_dir() {
	local d
	d=$(mktemp -d "$T_TMP/$1.XXXXXX") || t_fail "mktemp $1"
	chmod 0755 "$d"
	echo "$d"
}

# t_mount DATADIR MNT [daemon args...]: starts kvfs -f and waits for MNT.
# In reference-only mode MNT just stays a plain directory.
t_mount() {
	local data=$1 mnt=$2 log pid rc
	shift 2
	[ "$T_MODE" = mount ] || return 0
	T_NMOUNTS=$((T_NMOUNTS + 1))
	log="$T_TMP/kvfs.$T_NMOUNTS.log"
	# shellcheck disable=SC2086
	"$KVFS" -f ${KVFS_OPTS:-} "$@" "$data" "$mnt" >"$log" 2>&1 &
	pid=$!
	T_PID[$mnt]=$pid
	T_LOG[$mnt]=$log
	for _ in $(seq 300); do
		if mountpoint -q "$mnt" 2>/dev/null; then
			t_log "mounted $mnt (daemon $pid, log $log)"
			return 0
		fi
		if ! t_alive "$pid"; then
			wait "$pid"
			rc=$?
			unset "T_PID[$mnt]"
			t_show "$log"
			t_fail "daemon exited with $rc before $mnt was mounted"
		fi
		sleep 0.1
	done
	t_show "$log"
	t_fail "$mnt not mounted 30 s after starting the daemon"
}

# t_umount MNT: fusermount3 -u, then the daemon must exit 0 and its stderr
# must hold no sanitizer report.
t_umount() {
	local mnt=$1 pid log rc
	[ "$T_MODE" = mount ] || return 0
	pid=${T_PID[$mnt]}
	log=${T_LOG[$mnt]}
	fusermount3 -u "$mnt" || t_fail "fusermount3 -u $mnt failed"
	# Bounded: a daemon that does not exit after the unmount is a failure.
	for _ in $(seq 600); do
		t_alive "$pid" || break
		sleep 0.1
	done
	t_alive "$pid" && t_fail "daemon $pid still running 60 s after unmount"
	wait "$pid"
	rc=$?
	unset "T_PID[$mnt]"
	mountpoint -q "$mnt" 2>/dev/null && t_fail "$mnt still mounted"
	t_scan_log "$log"
	[ "$rc" -eq 0 ] || {
		t_show "$log"
		t_fail "daemon exited with $rc after fusermount3 -u (want 0)"
	}
	t_log "unmounted $mnt, daemon exited 0"
}

# Daemon option sets the tests run under: the defaults (long kernel caches,
# so most lookups never reach the daemon) and no kernel caching at all
# (every access/stat/open goes through kvfs's lookup manager).
# shellcheck disable=SC2034 # used by the test scripts
T_OPTSETS=("" "-o entry_timeout=0,attr_timeout=0,negative_timeout=0")
T_OPTS=

# The kvfs side of a test: sets T_DATA and T_MNT, mounted with the daemon
# options in T_OPTS (word-split), or, in a reference-only run, a plain
# directory.
t_target() {
	T_DATA=$(t_plain_dir data)
	T_MNT=$(t_plain_dir mnt)
	# shellcheck disable=SC2086
	t_mount "$T_DATA" "$T_MNT" $T_OPTS
	[ "$T_MODE" = mount ] && t_log "kvfs options: ${T_OPTS:-(defaults)}"
	return 0
}

# t_compare WHAT A B [SKIP [NAME_A NAME_B]]: the two transcripts must be
# identical (after dropping the first SKIP lines of each, default 0). A is
# by default the plain directory's, B the mount's.
t_compare() {
	local what=$1 ref=$2 got=$3 skip=${4:-0}
	local na=${5:-plain dir} nb=${6:-kvfs}
	tail -n +$((skip + 1)) "$ref" >"$T_TMP/$what.ref"
	tail -n +$((skip + 1)) "$got" >"$T_TMP/$what.got"
	if ! diff -u --label "$na ($what)" --label "$nb ($what)" \
		"$T_TMP/$what.ref" "$T_TMP/$what.got" >"$T_TMP/$what.diff"; then
		echo "----- $what: transcripts differ (- $na, + $nb) -----" >&2
		cat "$T_TMP/$what.diff" >&2
		[ "$T_KEEP_GOING" = 1 ] || t_fail "$what: $nb differs from $na"
		t_error "$what: $nb differs from $na"
		return 0
	fi
	[ -s "$T_TMP/$what.ref" ] || t_fail "$what: empty transcript"
	t_log "$what: identical ($(wc -l <"$T_TMP/$what.ref") lines)"
}

# t_expect_none FILE REGEX WHAT: no line of FILE may match REGEX (guards
# against a transcript that is equal on both sides but wrong on both).
t_expect_none() {
	local f=$1 re=$2 what=$3
	if grep -E -n "$re" "$f" >&2; then
		t_fail "$what: the reference itself reports the failures above"
	fi
}

# t_run OUT ERR cmd...: runs a helper with stdout (the transcript) in OUT
# and stderr in ERR; it must exit 0. Runs in the background so that a hung
# filesystem cannot block the cleanup trap: after KVFS_STEP_LIMIT seconds
# (default 300) the step is declared hung; the cleanup then aborts the mount,
# which frees the stuck process.
t_run() {
	local out=$1 err=$2 rc pid limit=${KVFS_STEP_LIMIT:-300} i=0
	shift 2
	"$@" >"$out" 2>"$err" &
	pid=$!
	while t_alive "$pid"; do
		i=$((i + 1))
		if [ "$i" -gt $((limit * 5)) ]; then
			t_show "$err" 50
			t_dump_daemons
			t_fail "$* hung (still running after $limit s)"
		fi
		sleep 0.2
	done
	wait "$pid"
	rc=$?
	t_daemons_alive "$*"
	if [ "$rc" -ne 0 ]; then
		t_show "$err" 50
		t_show "$out" 50
		t_fail "$* exited with $rc"
	fi
	return 0
}

# t_daemons_alive WHAT: every daemon we mounted must still be running.
t_daemons_alive() {
	local mnt
	for mnt in "${!T_PID[@]}"; do
		t_alive "${T_PID[$mnt]}" && continue
		t_show "${T_LOG[$mnt]}" 60
		t_fail "the kvfs daemon (pid ${T_PID[$mnt]}) died while running: $1"
	done
}

# Ends a test: unmounts whatever is still mounted, then passes (or, in a
# reference-only run, skips).
t_finish() {
	local mnt
	for mnt in "${!T_PID[@]}"; do
		t_umount "$mnt"
	done
	[ "$T_NFAILED" -eq 0 ] ||
		t_fail "$T_NFAILED check(s) failed (see FAILED above)"
	T_DONE=1
	if [ "$T_MODE" = ref ]; then
		t_log "reference-only run passed its self-checks"
		exit 77
	fi
	t_log "PASS"
	exit 0
}
