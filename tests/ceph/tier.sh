# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# Shared by the ceph suite's mount tests (shared.sh, sweep.sh, osd3.sh;
# sourced, not run): kvfs daemons with the shared tier on one throw-away
# cluster. NAME must be set, and T_NEEDS to the helper programs the test
# runs (tests/mount/lib.sh checks them).
#
# lib.sh (this directory) skips the test without Ceph and gives T, the
# cluster's scratch directory; tests/mount/lib.sh mounts and unmounts the
# daemons (a daemon must exit 0 after fusermount3 -u, with no sanitizer
# report), and its cleanup trap unmounts whatever is still mounted, then
# stops the cluster and removes T (tier_cleanup), even after a failure.
#
# Every call into a mount or to the cluster is bounded (timeout): a call
# still running after its bound is a hang, which fails the test.
#
# Environment: CEPH_TEST_CLUSTER (scripts/ceph-test-cluster), KVFS,
# KVFSCTL and the helpers named in T_NEEDS (tests/mount), as the mount
# tests get them.

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mount/lib.sh"
T_NAME=$NAME

CL=$T/c             # the cluster's directory
CONF=$CL/ceph.conf  # its ceph.conf (the same path after a restart)
POOL=kv
PORT=               # its monitor port, kept for a restart
OUT=                # output of the last bounded call
RADOS_TIMEOUT=2     # the daemons' rados_timeout
declare -A MNT=()   # daemon name (A, B) -> mountpoint
declare -A DATA=()  # daemon name -> data directory
declare -A PID=()   # daemon name -> pid

HOLD=               # pid of port_hold's listener

tier_cleanup() {
	[ -z "$HOLD" ] || kill "$HOLD" 2>/dev/null
	"$CTC" stop "$CL"
	[ -n "${KVFS_TEST_KEEP:-}" ] || rm -rf "$T"
}

T_CLEANUP_HOOKS+=(tier_cleanup)
t_init
[ "$T_MODE" = mount ] || fail "KVFS is not set: the ceph mount tests" \
	"need the daemon"
[ -x "${KVFSCTL:-}" ] || fail "KVFSCTL is not set to an executable"

# cl_start [ARGS...]: a new cluster in CL (scripts/ceph-test-cluster start
# ARGS); sets PORT.
cl_start() {
	local line
	line=$(timeout 180 "$CTC" start "$CL" "$@" 2>"$T/start.err") || {
		cat "$T/start.err" >&2
		fail "cluster start $*"
	}
	PORT=$(tr ' ' '\n' <<<"$line" | sed -n 's/^mon=.*://p')
	if [ -z "$PORT" ] || [ ! -f "$CONF" ]; then
		fail "cluster start printed '$line'"
	fi
	log "cluster: $line ($(cat "$T/start.err"))"
}

# port_hold: listens on the monitor's ports (PORT, PORT + 1) without ever
# answering, until cl_restart. While the cluster is stopped, another test
# on this machine would otherwise start its own cluster there (the first
# free port from 16789), and the daemons would reconnect to it: a pool
# where none of their names are. Pid in HOLD.
port_hold() {
	python3 -c '
import socket, sys, time
held = []
for p in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(p)))
    s.listen(64)
    held.append(s)
print("held", flush=True)
time.sleep(3600)
' "$PORT" $((PORT + 1)) >"$T/hold.out" 2>&1 &
	HOLD=$!
	for _ in $(seq 50); do
		grep -q held "$T/hold.out" && return 0
		kill -0 "$HOLD" 2>/dev/null || break
		sleep 0.1
	done
	fail "ports $PORT and $((PORT + 1)) could not be held:" \
		"$(cat "$T/hold.out")"
}

# cl_stop: every daemon of the cluster ended, its ports held (port_hold).
cl_stop() {
	"$CTC" stop "$CL" || fail "cluster stop"
	port_hold
	log "cluster stopped (its ports held by a listener that never answers)"
}

# cl_restart [ARGS...]: a new cluster (new fsid, no objects) in the same
# directory, on the same monitor port, with the same ceph.conf path.
# (ceph-test-cluster start refuses a directory holding a stopped
# cluster's files, so they go first.)
cl_restart() {
	local port=$PORT
	"$CTC" stop "$CL" || fail "cluster stop"
	if [ -n "$HOLD" ]; then
		kill "$HOLD" && { wait "$HOLD"; } 2>/dev/null
		HOLD=
	fi
	rm -rf "$CL"
	cl_start --port "$port" "$@"
}

# cl_epoch: prints the cluster's OSD map epoch.
cl_epoch() {
	timeout -k 5 30 ceph -c "$CONF" osd dump 2>/dev/null |
		sed -n 's/^epoch \([0-9][0-9]*\)$/\1/p'
}

# cl_epoch_past E: OSD map changes (noout set and unset) until the epoch is
# past E, the way a long-lived cluster's is.
cl_epoch_past() {
	local e i
	for i in $(seq 100); do
		e=$(cl_epoch)
		[ -n "$e" ] || fail "no OSD map epoch from the cluster"
		[ "$e" -gt "$1" ] && return 0
		timeout -k 5 30 ceph -c "$CONF" osd set noout >/dev/null 2>&1 &&
			timeout -k 5 30 ceph -c "$CONF" osd unset noout \
				>/dev/null 2>&1 || fail "ceph osd set/unset noout"
	done
	fail "the OSD map epoch stays at $e (wanted past $1)"
}

# r ARGS...: the rados tool on the pool, bounded; its output in OUT.
r() {
	OUT=$(timeout -k 5 60 rados -c "$CONF" -p "$POOL" "$@" 2>&1)
}

# obj PATH: the object name of a mount-relative block PATH ("/d/f.bin").
obj() {
	echo "b:$1"
}

# tier_opts [EXTRA]: the -o value of a daemon on this cluster's pool.
tier_opts() {
	local o=rados_pool=$POOL,ceph_conf=$CONF,rados_timeout=$RADOS_TIMEOUT
	echo "$o,rados_entry_timeout=1,rados_negative_timeout=1,rados_retry=1${1:+,$1}"
}

# tier_mount NAME [EXTRA]: daemon NAME on a new data directory with the
# shared tier on (tier_opts EXTRA); waits until it reports the cluster
# reachable.
tier_mount() {
	local n=$1 i
	DATA[$n]=$(t_plain_dir "data-$n")
	MNT[$n]=$(t_plain_dir "mnt-$n")
	t_mount "${DATA[$n]}" "${MNT[$n]}" -o "$(tier_opts "${2:-}")"
	PID[$n]=${T_PID[${MNT[$n]}]}
	for ((i = 0; i < 150; i++)); do
		[ "$(metric "$n" rados_reachable)" = 1 ] && break
		sleep 0.1
	done
	[ "$(metric "$n" rados_reachable)" = 1 ] || {
		t_show "${T_LOG[${MNT[$n]}]}" 30
		fail "$n: kvfs_rados_reachable is not 1 15 s after the mount"
	}
	log "$n: mounted on ${MNT[$n]}, cluster reachable"
}

# tier_kill NAME: SIGKILL to daemon NAME, its mount lazily unmounted; the
# cleanup forgets it.
tier_kill() {
	local n=$1 m=${MNT[$1]}
	kill -KILL "${PID[$n]}" || fail "kill -9 of $n's daemon"
	{ wait "${PID[$n]}"; } 2>/dev/null
	fusermount3 -u -z "$m" || fail "fusermount3 -u -z $m"
	unset "T_PID[$m]"
	log "$n: daemon ${PID[$n]} killed (-9), $m unmounted"
}

# bnd SECS CMD...: CMD bounded to SECS; stdout and stderr in OUT, its exit
# status returned. A timeout fails the test.
bnd() {
	local secs=$1 rc
	shift
	OUT=$(timeout -k 5 "$secs" "$@" 2>&1)
	rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		t_dump_daemons
		fail "hang: '$*' still running after $secs s ($OUT)"
	fi
	return "$rc"
}

# expect WANT CMD...: CMD's output (bounded to 30 s) must be WANT.
expect() {
	local want=$1
	shift
	bnd 30 "$@" || fail "$*: exit $? ($OUT)"
	[ "$OUT" = "$want" ] || fail "$*: '$OUT' (want '$want')"
}

# metric NAME KEY: kvfs_KEY of daemon NAME (empty when it has none).
metric() {
	timeout -k 5 10 cat "${MNT[$1]}/.kvfs/stats" |
		awk -v k="kvfs_$2" '$1 == k { print $2 }'
}

# need NAME KEY: the metric, which must exist; printed.
need() {
	local v
	v=$(metric "$1" "$2")
	[ -n "$v" ] || fail "$1: the daemon exports no kvfs_$2"
	echo "$v"
}

# wait_metric NAME KEY WANT SECS: polls until kvfs_KEY of NAME is WANT;
# prints how long it took, fails after SECS.
wait_metric() {
	local n=$1 k=$2 want=$3 secs=$4 t0=$SECONDS
	while [ "$(metric "$n" "$k")" != "$want" ]; do
		[ $((SECONDS - t0)) -lt "$secs" ] || {
			t_show "${T_LOG[${MNT[$n]}]}" 30
			fail "$n: kvfs_$k is '$(metric "$n" "$k")', not $want," \
				"after $secs s"
		}
		sleep 0.2
	done
	echo $((SECONDS - t0))
}

# kc_sync NAME [SECS]: kvfsctl sync of NAME's mount (the put queue drained
# too), bounded to SECS (60).
kc_sync() {
	bnd "${2:-60}" "$KVFSCTL" sync "${MNT[$1]}" ||
		fail "$1: kvfsctl sync: $OUT"
}

# mkdirs DIR...: mkdir -p, bounded.
mkdirs() {
	bnd 30 mkdir -p "$@" || fail "mkdir -p $*: $OUT"
}

# drop_caches: the kernel's page cache (and dentries) emptied, so a read
# reaches the daemon.
drop_caches() {
	bnd 30 sync || fail "sync: $OUT"
	echo 3 >/proc/sys/vm/drop_caches || fail "drop_caches (needs root)"
}

# daemon_log NAME: the file daemon NAME's stderr goes to.
daemon_log() {
	echo "${T_LOG[${MNT[$1]}]}"
}
