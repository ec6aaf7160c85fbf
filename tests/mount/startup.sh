#!/bin/bash
# SPDX-License-Identifier: MIT
# Start-up errors are clear, happen before anything is mounted, and change
# nothing: a missing or unwritable DATADIR, a DATADIR that is a file, a
# missing MOUNTPOINT, a DATADIR already served by another kvfs, an index
# that is not a kvfs database, one from a newer format version, and bad
# options. Each case must exit 2 with its message on stderr and leave no
# mount behind.
. "$(dirname "$0")/lib.sh"

t_init
[ "$T_MODE" = mount ] || t_finish

# expect_fail WHAT REGEX ARGS...: kvfs -f ARGS must exit 2 at once, print a
# line matching REGEX, and mount nothing.
expect_fail() {
	local what=$1 re=$2 rc=0 out target
	shift 2
	target=${*: -1}
	out=$(timeout 20 "$KVFS" -f "$@" 2>&1) || rc=$?
	[ "$rc" -eq 2 ] || t_fail "$what: exit status $rc, want 2 ($out)"
	grep -E -q "$re" <<<"$out" || t_fail "$what: message '$out' !~ /$re/"
	[ $# -gt 0 ] && mountpoint -q "$target" 2>/dev/null &&
		t_fail "$what: left a mount on $target"
	t_log "$what: exit 2: $out"
}

DATA=$(t_plain_dir data)
MNT=$(t_plain_dir mnt)
FILE=$T_TMP/not-a-dir
: >"$FILE"

expect_fail "missing DATADIR" "data directory .*No such file" \
	"$T_TMP/nowhere" "$MNT"
expect_fail "DATADIR is a file" "not a directory" "$FILE" "$MNT"
expect_fail "missing MOUNTPOINT" "mount point.*No such file" \
	"$DATA" "$T_TMP/nowhere"
expect_fail "no arguments" "usage:"
expect_fail "bad option value" "bad max_file_size" \
	-o max_file_size=lots "$DATA" "$MNT"
expect_fail "bad loglevel" "bad loglevel" -o loglevel=loud "$DATA" "$MNT"
expect_fail "bad index_mmap" "bad index_mmap" -o index_mmap=lots "$DATA" "$MNT"
expect_fail "two atime modes" "one of noatime, relatime and atime" \
	-o noatime,atime "$DATA" "$MNT"
expect_fail "a Ceph option without the tier" "need rados_pool" \
	-o ceph_conf=/etc/ceph/ceph.conf "$DATA" "$MNT"
# Checked before any connection: no cluster is needed for these.
expect_fail "a lease not longer than the sweep interval" \
	"rados_lease > rados_sweep_interval|without librados" \
	-o rados_pool=kv,rados_lease=5,rados_sweep_interval=5 "$DATA" "$MNT"
expect_fail "a bad pool budget" "bad rados_capacity|without librados" \
	-o rados_pool=kv,rados_capacity=lots "$DATA" "$MNT"

# Unwritable: a read-only bind mount of the data directory (root ignores
# permission bits, not a read-only mount).
RO=$(t_plain_dir ro)
if mount --bind "$DATA" "$RO" 2>/dev/null &&
	mount -o remount,bind,ro "$RO" 2>/dev/null; then
	expect_fail "read-only DATADIR" "not writable" "$RO" "$MNT"
	umount "$RO"
else
	umount "$RO" 2>/dev/null
	t_log "read-only DATADIR: cannot make a read-only bind mount here; skipped"
fi

# A second daemon on a DATADIR that is already served.
t_mount "$DATA" "$MNT"
MNT2=$(t_plain_dir mnt2)
expect_fail "DATADIR already served" \
	"already served by another kvfs \\(pid ${T_PID[$MNT]}\\)" "$DATA" "$MNT2"
echo hello >"$MNT/file" || t_fail "the first mount stopped working"
t_umount "$MNT"

# Not a kvfs database: the bytes must be left as they were.
BAD=$(t_plain_dir bad)
head -c 8192 /dev/urandom >"$BAD/index.db"
sum=$(md5sum <"$BAD/index.db")
expect_fail "garbage index.db" "not a kvfs database" "$BAD" "$MNT"
[ "$(md5sum <"$BAD/index.db")" = "$sum" ] || t_fail "garbage index.db changed"

# An SQLite database of another application.
OTHER=$(t_plain_dir other)
sqlite3 "$OTHER/index.db" 'CREATE TABLE t(x); INSERT INTO t VALUES (1);' ||
	t_fail "sqlite3 cannot create a database"
expect_fail "another application's database" "not a kvfs database" \
	"$OTHER" "$MNT"

# A kvfs index from a newer format version.
NEWER=$(t_plain_dir newer)
t_mount "$NEWER" "$MNT"
t_umount "$MNT"
sqlite3 "$NEWER/index.db" 'PRAGMA user_version = 99;' ||
	t_fail "cannot bump user_version"
expect_fail "newer format" "newer than this kvfs" "$NEWER" "$MNT"

# After all that, a good DATADIR still mounts and keeps its data.
t_mount "$DATA" "$MNT"
[ "$(cat "$MNT/file")" = hello ] || t_fail "data lost across the failed starts"

# A SIGBUS (what a disk error in the mapped index gives) ends kvfs with a
# line that says so; nothing saved is lost.
pid=${T_PID[$MNT]}
kill -BUS "$pid"
{ wait "$pid"; } 2>/dev/null
unset "T_PID[$MNT]"
grep -q "fatal: SIGBUS: a mapped page of index.db" "${T_LOG[$MNT]}" ||
	t_fail "no log line for the SIGBUS"
fusermount3 -u -z "$MNT" || t_fail "fusermount3 -u -z after the SIGBUS"

# The index read with pread(2) instead of through a mapping.
t_mount "$DATA" "$MNT" -o index_mmap=0
[ "$(cat "$MNT/file")" = hello ] || t_fail "data lost across the SIGBUS"
t_finish
