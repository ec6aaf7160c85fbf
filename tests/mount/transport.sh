#!/bin/bash
# SPDX-License-Identifier: MIT
# The FUSE transport (kvfs(8) -o io_uring). On /dev/fuse, WRITE bytes
# that fill a buffer segment are swapped in, not copied (case_write_swap;
# all copied over io_uring), and SIGTERM stops the daemon. Every build
# refuses a bad
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

# swap_cmp MNT WHAT: case_write_swap's files read back as it wrote them.
swap_cmp() {
	local f
	for f in a.bin c.bin d.bin; do
		cmp "$T_TMP/$f" "$1/$f" || t_fail "write swap: $f $2"
	done
}

# Bytes of WRITEs land in file buffers without a copy on /dev/fuse (rx.h):
# a whole segment's worth (a 2 MiB O_DIRECT store, a 1 MiB segment
# rewritten, a small new file) is swapped in, a 4 KiB rewrite at the start
# of a longer file is copied (the rest of its segment stays); over
# io_uring (KVFS_OPTS) everything is copied. Every file reads back byte for
# byte, also after a remount; then SIGTERM stops the daemon (its workers
# wake out of their reads) within 10 s, exit status 0, mount gone.
case_write_swap() {
	local uring=0 pid rc data mnt
	case " ${KVFS_OPTS:-} " in *io_uring*) uring=1 ;; esac
	data=$(t_plain_dir data-swap)
	mnt=$(t_plain_dir mnt-swap)
	t_mount "$data" "$mnt"
	python3 - "$mnt" "$uring" "$T_TMP" <<'PY' || t_fail "write swap: see above"
import mmap, os, sys

mnt, uring, tmp = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
MiB = 1 << 20

def stats():
    out = {}
    with open(os.path.join(mnt, ".kvfs/stats")) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k.startswith("kvfs_write_"):
                out[k[len("kvfs_write_"):]] = int(v)
    return out

def buf(n, seed):
    m = mmap.mmap(-1, n)
    m.write(bytes((i * 7 + seed + (i >> 12)) & 0xFF for i in range(n)))
    return m

def put(name, data, off, flags):
    fd = os.open(os.path.join(mnt, name), os.O_WRONLY | flags, 0o644)
    assert os.pwrite(fd, data, off) == len(data)
    os.close(fd)

def step(what, fn, swapped, copied):
    s0 = stats()
    fn()
    s1 = stats()
    if uring:
        copied, swapped = copied + swapped, 0
    got = (s1["swapped_bytes_total"] - s0["swapped_bytes_total"],
           s1["copied_bytes_total"] - s0["copied_bytes_total"])
    print(f"{what}: swapped {got[0]}, copied {got[1]}")
    if got != (swapped, copied):
        sys.exit(f"{what}: want swapped {swapped}, copied {copied}")

D = os.O_DIRECT
a, b, c, c2 = buf(2 * MiB, 1), buf(4096, 2), buf(3 * MiB, 3), buf(MiB, 4)
step("2 MiB O_DIRECT store", lambda: put("a.bin", a, 0, os.O_CREAT | D),
     2 * MiB, 0)
step("4 KiB at 0 of it", lambda: put("a.bin", b, 0, D), 0, 4096)
step("3 MiB O_DIRECT store", lambda: put("c.bin", c, 0, os.O_CREAT | D),
     3 * MiB, 0)
step("its second MiB", lambda: put("c.bin", c2, MiB, D), MiB, 0)
step("100 bytes, new file", lambda: put("d.bin", b"x" * 100, 0, os.O_CREAT),
     100, 0)
want = {"a.bin": bytes(b) + bytes(a)[4096:],
        "c.bin": bytes(c)[:MiB] + bytes(c2) + bytes(c)[2 * MiB:],
        "d.bin": b"x" * 100}
for name, data in want.items():
    with open(os.path.join(tmp, name), "wb") as f:
        f.write(data)
PY
	swap_cmp "$mnt" "differs"
	t_umount "$mnt"
	t_mount "$data" "$mnt"
	swap_cmp "$mnt" "differs after a remount"
	pid=${T_PID[$mnt]}
	kill -TERM "$pid"
	for _ in $(seq 100); do
		t_alive "$pid" || break
		sleep 0.1
	done
	t_alive "$pid" && t_fail "daemon $pid still running 10 s after SIGTERM"
	rc=0
	wait "$pid" || rc=$?
	unset "T_PID[$mnt]"
	[ "$rc" -eq 0 ] || t_fail "daemon exited with $rc after SIGTERM"
	mountpoint -q "$mnt" 2>/dev/null && t_fail "$mnt mounted after SIGTERM"
	t_scan_log "${T_LOG[$mnt]}"
	t_log "write swap: bytes exact, also remounted; SIGTERM: exit 0"
}

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
case_write_swap

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
