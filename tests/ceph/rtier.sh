#!/bin/bash
# SPDX-License-Identifier: MIT
# The shared tier's RADOS client (fs/kvdb/rtier.c) against a real
# throw-away cluster (scripts/ceph-test-cluster):
#   1. rtier_test check: blocks of several sizes put and read back
#      byte-exact, directory probes, removal, malformed paths;
#   2. the failure policy's inputs: an object truncated with the rados
#      tool reads as provably short (ENODATA); one with a flipped byte as
#      a CRC mismatch (EBADMSG), and its object is still there;
#   3. rtier_test dirs, use, lock: ancestor directories and listings,
#      the use shards and sweeps, the sweeper's lease on two connections;
#      the pool's quota as set with the ceph tool; a sweep of 1000 blocks
#      timed (logged);
#   4. a stopped cluster: every call of a connected client fails within
#      its 3 s timeout (once, not once per step); connecting fails with a
#      timeout within the bound given, never hangs.
# Exits 77 (skip) when Ceph is not installed (scripts/setup-deps --ceph).
#
# Environment: CEPH_TEST_CLUSTER (scripts/ceph-test-cluster), RTIER_TEST
# (tests/ceph/rtier_test).
NAME=ceph_rtier
. "$(dirname "$0")/lib.sh"
RT=${RTIER_TEST:?RTIER_TEST is not set}
# An undefined-behaviour report fails the command that printed it.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

cleanup() {
	"$CTC" stop "$T/c"
	rm -rf "$T"
}
trap cleanup EXIT

line=$(timeout 120 "$CTC" start "$T/c" 2>"$T/start.err") || {
	cat "$T/start.err" >&2
	fail "cluster start"
}
CONF=$T/c/ceph.conf
POOL=kv
log "cluster: $line"

# expect WANT ARGS...: rtier_test's output must be WANT (bounded).
expect() {
	local want=$1 got
	shift
	got=$(timeout 120 "$RT" "$CONF" "$POOL" "$@") ||
		fail "rtier_test $*: exit $? ($got)"
	[ "$got" = "$want" ] || fail "rtier_test $*: '$got' (want '$want')"
}

# 1.
expect "check: 0 failures" check
log "put/get/probe/remove: all checks passed"

# 2. Torn and corrupt objects.
expect "put: OK" put /t/torn $((2 << 20)) 7
timeout 60 rados -c "$CONF" -p "$POOL" truncate b:/t/torn 1000000 ||
	fail "rados truncate"
expect "get: ENODATA" get /t/torn $((2 << 20)) 7
expect "put: OK" put /t/flip $((1 << 20)) 8
timeout 60 rados -c "$CONF" -p "$POOL" get b:/t/flip "$T/flip" ||
	fail "rados get"
printf '\xff' | dd of="$T/flip" bs=1 seek=500000 conv=notrunc status=none
timeout 60 rados -c "$CONF" -p "$POOL" put b:/t/flip "$T/flip" ||
	fail "rados put"
expect "get: EBADMSG" get /t/flip $((1 << 20)) 8
timeout 60 rados -c "$CONF" -p "$POOL" stat b:/t/flip >/dev/null ||
	fail "the corrupt object is gone"
log "truncated object: ENODATA; flipped byte: EBADMSG, object kept"

# 3. Directories, uses, the sweeper.
expect "dirs: 0 failures" dirs
log "ancestor directories listed, rtier_list: all checks passed"
expect "use: 0 failures" use
log "usage, touch, sweep to a target: all checks passed"
got=$(timeout 120 "$RT" "$CONF" "$POOL" lock) || fail "rtier_test lock: $got"
[ "$(echo "$got" | tail -n 1)" = "lock: 0 failures" ] ||
	fail "rtier_test lock: '$got'"
log "sweeper lease: $(echo "$got" | head -n 1)"
expect "quota: 0" quota
timeout 60 ceph -c "$CONF" osd pool set-quota "$POOL" max_bytes 123456789 \
	>/dev/null 2>&1 || fail "ceph osd pool set-quota"
expect "quota: 123456789" quota
timeout 60 ceph -c "$CONF" osd pool set-quota "$POOL" max_bytes 0 \
	>/dev/null 2>&1 || fail "ceph osd pool set-quota 0"
expect "quota: 0" quota
log "quota: set with the ceph tool, read back"
got=$(timeout 300 "$RT" "$CONF" "$POOL" sweepbench 1000 65536) ||
	fail "rtier_test sweepbench: $got"
[ "$(echo "$got" | tail -n 1)" = "sweepbench: 0 failures" ] ||
	fail "rtier_test sweepbench: '$got'"
log "$(echo "$got" | head -n 1)"

# 4. The cluster stopped: a bounded failure.
timeout 200 "$RT" "$CONF" "$POOL" stalled "$T/go" >"$T/stalled" &
stalled_pid=$!
sleep 1
"$CTC" stop "$T/c"
touch "$T/go"
wait "$stalled_pid" || fail "rtier_test stalled: exit $? ($(cat "$T/stalled"))"
[ "$(wc -l <"$T/stalled")" -eq 10 ] ||
	fail "rtier_test stalled: '$(cat "$T/stalled")'"
while read -r _ fn err secs; do
	[ "$err" != OK ] || fail "$fn succeeded on a stopped cluster"
	[ "${secs%.*}" -le 5 ] || fail "$fn took $secs s with a 3 s timeout"
done <"$T/stalled"
log "stopped cluster, connected client: $(tr '\n' ' ' <"$T/stalled")"
start=$SECONDS
out=$(timeout 60 "$RT" "$CONF" "$POOL" open 3) || fail "open hung or crashed"
case $out in
"open: OK") fail "connected to a stopped cluster" ;;
"open: "*) ;;
*) fail "open printed '$out'" ;;
esac
[ $((SECONDS - start)) -le 30 ] ||
	fail "a 3 s timeout took $((SECONDS - start)) s"
log "stopped cluster: '$out' after $((SECONDS - start)) s"
log "PASS"
