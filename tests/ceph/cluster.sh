#!/bin/bash
# SPDX-License-Identifier: MIT
# The throw-away Ceph RADOS cluster that the shared tier's tests and
# benchmarks run on (scripts/ceph-test-cluster, issue 13):
#   1. one OSD: an object of 2 MiB put with the rados tool reads back
#      byte-exact, stat gives its size, and once removed stat fails;
#   2. a second cluster asked for the first one's monitor port is refused
#      (it would silently join the first) and starts nothing;
#   3. three OSDs: the pool has size 3, and with one OSD killed the object
#      is still served byte-exact;
#   4. stop ends every daemon it started (by pid), and status says so.
# Exits 77 (skip) when Ceph is not installed (scripts/setup-deps --ceph).
#
# Environment: CEPH_TEST_CLUSTER (scripts/ceph-test-cluster).
NAME=ceph_cluster
. "$(dirname "$0")/lib.sh"

cleanup() {
	local c
	for c in "$T"/c*; do
		[ -d "$c" ] && "$CTC" stop "$c"
	done
	rm -rf "$T"
}
trap cleanup EXIT

# field LINE KEY: KEY's value in the start line "conf=... pool=... ...".
field() {
	tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"
}
# r CONF POOL ARGS...: the rados tool, bounded.
r() {
	local conf=$1 pool=$2
	shift 2
	timeout 60 rados -c "$conf" -p "$pool" "$@"
}

head -c 2097152 /dev/urandom >"$T/obj" || fail "urandom"

# 1. One OSD.
line=$(timeout 120 "$CTC" start "$T/c1" 2>"$T/start1.err") || {
	cat "$T/start1.err" >&2
	fail "start of a one-OSD cluster"
}
conf=$(field "$line" conf)
pool=$(field "$line" pool)
mon=$(field "$line" mon)
[ -f "$conf" ] && [ -n "$pool" ] && [ -n "$mon" ] ||
	fail "start printed '$line'"
log "up: $line ($(cat "$T/start1.err"))"
r "$conf" "$pool" put blk "$T/obj" || fail "put"
r "$conf" "$pool" get blk "$T/back" || fail "get"
cmp -s "$T/obj" "$T/back" || fail "the object read back differs"
r "$conf" "$pool" stat blk | grep -q 'size 2097152$' || fail "stat size"
r "$conf" "$pool" rm blk || fail "rm"
r "$conf" "$pool" stat blk 2>/dev/null && fail "stat after rm succeeded"
log "1 OSD: put, get (byte-exact), stat, rm"

# 2. The same monitor port again: refused, nothing started.
port=${mon##*:}
if timeout 60 "$CTC" start "$T/c2" --port "$port" 2>"$T/start2.err"; then
	fail "a second cluster on port $port was started"
fi
grep -q "in use" "$T/start2.err" || {
	cat "$T/start2.err" >&2
	fail "no 'in use' message for port $port"
}
[ ! -e "$T/c2/pids" ] || fail "the refused start left daemons"
log "port $port in use: refused ($(cat "$T/start2.err"))"

# 3. Three OSDs, size 3, one killed.
line=$(timeout 180 "$CTC" start "$T/c3" --osds 3 2>"$T/start3.err") || {
	cat "$T/start3.err" >&2
	fail "start of a three-OSD cluster"
}
conf3=$(field "$line" conf)
[ "$(timeout 30 ceph -c "$conf3" osd pool get kv size)" = "size: 3" ] ||
	fail "the pool of a three-OSD cluster does not have size 3"
r "$conf3" kv put blk "$T/obj" || fail "put (3 OSDs)"
"$CTC" kill-osd "$T/c3" 1 || fail "kill-osd"
r "$conf3" kv get blk "$T/back3" || fail "get with osd.1 killed"
cmp -s "$T/obj" "$T/back3" || fail "read back differs with osd.1 killed"
log "3 OSDs, size 3: served byte-exact with osd.1 killed"

# 4. stop ends every daemon it started.
pids=$(awk '{ print $2 }' "$T/c1/pids")
"$CTC" status "$T/c1" | grep -q ' running$' || fail "status: none running"
"$CTC" stop "$T/c1" || fail "stop"
for p in $pids; do
	[ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null || echo gone)" \
		!= Z ] || continue
	kill -0 "$p" 2>/dev/null && fail "daemon $p still runs after stop"
done
"$CTC" status "$T/c1" 2>/dev/null && fail "status after stop succeeded"
log "stop: every daemon gone"
log "PASS"
