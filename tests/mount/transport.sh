#!/bin/bash
# SPDX-License-Identifier: MIT
# The FUSE transport (kvfs(8) -o io_uring). Every build refuses a bad
# io_uring_q_depth (0, garbage, too large, without io_uring) with exit 2 and
# one line. A build against libfuse 3.14 refuses -o io_uring the same way.
# A build against libfuse >= 3.18: with the kernel's enable_uring off it
# refuses (that check runs only when the knob is already off: the test
# never turns it off, other mounts may use it); with it on (the test turns
# it on as root, as scripts/test-all does, and puts it back after) kvfs
# runs one ring thread per CPU (fuse-ring-N), the requests of vLLM's
# store/load sequence reach those threads (their context switches grow),
# and the sequence's transcript and tree equal the plain directory's.
. "$(dirname "$0")/lib.sh"

t_init
[ "$T_MODE" = mount ] || t_finish

KNOB=/sys/module/fuse/parameters/enable_uring

# expect_fail WHAT REGEX ARGS...: kvfs -f ARGS must exit 2 at once with one
# line matching REGEX on stderr, and mount nothing.
expect_fail() {
	local what=$1 re=$2 rc=0 out
	shift 2
	out=$(timeout 20 "$KVFS" -f "$@" "$DATA" "$MNT" 2>&1) || rc=$?
	[ "$rc" -eq 2 ] || t_fail "$what: exit status $rc, want 2 ($out)"
	grep -E -q "$re" <<<"$out" || t_fail "$what: message '$out' !~ /$re/"
	[ "$(wc -l <<<"$out")" -eq 1 ] ||
		t_fail "$what: more than one line: $out"
	mountpoint -q "$MNT" 2>/dev/null && t_fail "$what: left a mount on $MNT"
	t_log "$what: exit 2: $out"
}

# ring_switches PID: the context switches of PID's ring threads, summed;
# fails when it has none.
ring_switches() {
	local task n=0 sum=0 v
	for task in /proc/"$1"/task/*; do
		case $(cat "$task/comm" 2>/dev/null) in
		fuse-ring-*)
			n=$((n + 1))
			v=$(awk '/^voluntary_ctxt_switches:/ { print $2 }' \
				"$task/status")
			sum=$((sum + v))
			;;
		esac
	done
	[ "$n" -gt 0 ] || return 1
	echo "$n $sum"
}

DATA=$(t_plain_dir data)
MNT=$(t_plain_dir mnt)
lib=$("$KVFS" -V | awk '/^FUSE library/ { print $3 }')
[ -n "$lib" ] || t_fail "kvfs -V names no FUSE library"
t_log "kvfs is built against libfuse $lib"

for depth in 0 lots 8x -1 99999; do
	expect_fail "io_uring_q_depth=$depth" "bad io_uring_q_depth '$depth'" \
		-o "io_uring,io_uring_q_depth=$depth"
done
expect_fail "io_uring_q_depth without io_uring" \
	"io_uring_q_depth needs io_uring" -o io_uring_q_depth=8

if [ "$(printf '%s\n' "$lib" 3.18 | sort -V | head -n 1)" != 3.18 ]; then
	expect_fail "io_uring on libfuse $lib" \
		"^kvfs: io_uring: this kvfs was built against libfuse $lib" \
		-o io_uring
	t_finish
fi

if [ ! -e "$KNOB" ]; then
	expect_fail "io_uring on a kernel without it" \
		"^kvfs: io_uring: the kernel has no FUSE over io_uring" -o io_uring
	t_skip "the kernel has no FUSE over io_uring ($KNOB missing)"
fi
old=$(cat "$KNOB")
if [ "$old" != Y ]; then
	expect_fail "io_uring with enable_uring off" \
		"^kvfs: io_uring: FUSE over io_uring is off in the kernel" \
		-o io_uring
	echo 1 >"$KNOB" 2>/dev/null ||
		t_skip "enable_uring is off and cannot be turned on (not root)"
	# Put the knob back however the test ends (after the unmounts).
	knob_off() { echo 0 >"$KNOB"; }
	T_CLEANUP_HOOKS+=(knob_off)
	t_log "turned $KNOB on for this test"
fi

ncpu=$(getconf _NPROCESSORS_CONF)
REF=$(t_plain_dir ref)
t_mount "$DATA" "$MNT" -o io_uring,io_uring_q_depth=4
pid=${T_PID[$MNT]}
# The line comes when the rings start, which may be just after the mount
# appears (a CI run once looked first): wait for it, 10 s at most.
for _ in $(seq 100); do
	grep -q 'serving FUSE over io_uring' "${T_LOG[$MNT]}" && break
	sleep 0.1
done
grep -q 'serving FUSE over io_uring' "${T_LOG[$MNT]}" ||
	t_fail "no 'serving FUSE over io_uring' line in the daemon's log"
read -r nring before < <(ring_switches "$pid") ||
	t_fail "-o io_uring: no fuse-ring-N thread in daemon $pid"
[ "$nring" -eq "$ncpu" ] ||
	t_fail "$nring ring threads, want one per CPU ($ncpu)"
t_log "$nring ring threads"

t_run "$T_TMP/ref.txt" "$T_TMP/ref.err" "$VLLM_IO" seq "$REF"
t_expect_none "$T_TMP/ref.txt" 'CORRUPT|whole but|changed' "reference run"
[ "$(grep -c ': read=[0-9]* match$' "$T_TMP/ref.txt")" -ge 36 ] ||
	t_fail "the reference run did not load and match every block"
t_run "$T_TMP/kvfs.txt" "$T_TMP/kvfs.err" "$VLLM_IO" seq "$MNT"
t_compare "vllm-seq-io_uring" "$T_TMP/ref.txt" "$T_TMP/kvfs.txt"
t_run "$T_TMP/ref.tree" "$T_TMP/ref.tree.err" "$TREE_DUMP" -C "$REF"
t_run "$T_TMP/kvfs.tree" "$T_TMP/kvfs.tree.err" "$TREE_DUMP" -C -i .kvfs \
	"$MNT"
t_compare "vllm-seq-io_uring-tree" "$T_TMP/ref.tree" "$T_TMP/kvfs.tree" 1

read -r nring after < <(ring_switches "$pid") ||
	t_fail "the ring threads are gone after the sequence"
# Each request a ring thread serves ends its wait for the next one.
[ $((after - before)) -ge 100 ] ||
	t_fail "ring threads switched $((after - before)) times during the sequence: its requests did not go through the rings"
t_log "ring threads: $((after - before)) context switches during the sequence"
t_finish
