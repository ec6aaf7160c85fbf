#!/bin/bash
# SPDX-License-Identifier: MIT
# FUSE passthrough of extent files (kvfs(7) "Passthrough", kvfs(8)
# -o nopassthrough). The same steps run on a plain directory, on kvfs
# (record_max=4M, so a 16 MiB file is an extent file) and on kvfs with
# -o nopassthrough, and what they print must match: reopened extent files
# read and written at offsets (O_DIRECT and buffered, growing, by two
# handles at once), stat(2) of the sizes the kernel's writes left while
# the handles are open, ftruncate, fallocate, a MAP_SHARED write, and a
# file held open by the writer that made it while a second handle opens
# it (the kernel refuses to mix the two kinds of handle: that open must
# not fail). On kvfs the stats must show passthrough opens, and none with
# -o nopassthrough. Then on kvfs alone: the sizes and bytes survive a
# remount; a kill -9 after fsync(2) keeps every byte and the size synced;
# an extent file of the older shape (its header first, index format 4)
# is upgraded, reads back through kvfs and is never passed through;
# (fault injection) a kernel that refuses the backing file: one log line,
# and the file's I/O goes through kvfs, bytes intact.
. "$(dirname "$0")/lib.sh"

T_NEEDS=KVFSCTL
t_init

MB=$((1 << 20))
SRC=$(t_plain_dir src)
head -c $((16 * MB)) /dev/urandom >"$SRC/piece" || t_fail "urandom"

# The steps on DIR (python3), printed for comparison.
steps() {
	python3 - "$1" "$SRC/piece" <<'PY'
import hashlib, mmap, os, sys

d, src = sys.argv[1], open(sys.argv[2], "rb").read()
MB = 1 << 20


def md5(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def say(what, path):
    print(what, os.stat(path).st_size, md5(path))


pool = os.path.join(d, "pool")
with open(pool, "wb") as f:
    f.write(src)
say("made", pool)
# Reopened: O_DIRECT writes inside and past the end, seen by stat(2)
# while the handle is open.
buf = mmap.mmap(-1, MB)
fd = os.open(pool, os.O_RDWR | os.O_DIRECT)
buf[:] = src[:MB][::-1]
os.pwrite(fd, buf, 3 * MB)
os.pwrite(fd, buf, 20 * MB)
print("open size", os.fstat(fd).st_size, os.stat(pool).st_size)
# A second handle, buffered, reads what the first wrote and writes too.
fd2 = os.open(pool, os.O_RDWR)
print("second reads", os.pread(fd2, 8, 3 * MB) == src[:MB][::-1][:8])
os.pwrite(fd2, b"tail", 21 * MB)
print("both open size", os.stat(pool).st_size)
os.fsync(fd)
os.close(fd2)
os.close(fd)
say("closed", pool)
# ftruncate and fallocate through a reopened handle.
fd = os.open(pool, os.O_RDWR)
os.ftruncate(fd, 18 * MB)
print("truncated", os.fstat(fd).st_size, os.stat(pool).st_size)
os.posix_fallocate(fd, 0, 24 * MB)
print("allocated", os.stat(pool).st_size)
# A shared mapping's writes reach the file.
m = mmap.mmap(fd, 24 * MB)
m[5 * MB:5 * MB + 6] = b"mapped"
m.flush()
m.close()
os.close(fd)
say("mapped", pool)
with open(pool, "rb") as f:
    f.seek(5 * MB)
    print("mapped bytes", f.read(6))
# A file still open by the writer that made it (not passed through):
# another open beside it must work, and both handles see one file.
held = os.path.join(d, "held")
fd = os.open(held, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, src[:8 * MB], 0)
fd2 = os.open(held, os.O_RDWR)
os.pwrite(fd2, b"second", 9 * MB)
print("held", os.fstat(fd).st_size, os.pread(fd, 6, 9 * MB))
os.close(fd2)
os.close(fd)
say("held closed", held)
PY
}

steps "$(t_plain_dir plain)" >"$T_TMP/plain.out" 2>&1 || {
	cat "$T_TMP/plain.out" >&2
	t_fail "the steps failed on the plain directory"
}

# pt_opens MNT: kvfs_passthrough_opens_total.
pt_opens() {
	sed -n 's/^kvfs_passthrough_opens_total //p' "$1/.kvfs/stats"
}

for opts in "-o record_max=4M" "-o record_max=4M,nopassthrough"; do
	T_OPTS=$opts
	t_target
	steps "$T_MNT" >"$T_TMP/kvfs.out" 2>&1
	t_compare "steps ($opts)" "$T_TMP/plain.out" "$T_TMP/kvfs.out"
	n=$(pt_opens "$T_MNT")
	case $opts in
	*nopassthrough*) [ "$n" = 0 ] || t_fail "$n passthrough opens with" \
		"-o nopassthrough" ;;
	*) [ "${n:-0}" -ge 3 ] || t_fail "only ${n:-none} passthrough opens" ;;
	esac
	t_log "$opts: $n passthrough opens"
	[ "$T_MODE" = mount ] || break
	# What close saved survives a remount.
	sums=$( (cd "$T_MNT" && stat -c '%n %s' pool held && md5sum pool held))
	t_umount "$T_MNT"
	t_mount "$T_DATA" "$T_MNT" $T_OPTS
	[ "$(cd "$T_MNT" && stat -c '%n %s' pool held && md5sum pool held)" = \
		"$sums" ] || t_fail "sizes or bytes changed across a remount"
	t_umount "$T_MNT"
done

# A kill -9 after fsync(2) of writes the kernel passed through, the
# writer's file still open (no close saved anything): the size and the
# bytes synced are there after the restart.
t_mount "$T_DATA" "$T_MNT" -o record_max=4M
python3 - "$T_MNT/pool" >"$T_TMP/kill.out" 2>/dev/null <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b"synced", 30 << 20)
os.fsync(fd)
print(os.fstat(fd).st_size, flush=True)
time.sleep(60)
PY
writer=$!
for _ in $(seq 100); do
	[ -s "$T_TMP/kill.out" ] && break
	sleep 0.1
done
[ -s "$T_TMP/kill.out" ] || t_fail "the writer did not fsync"
n=$(pt_opens "$T_MNT")
[ "${n:-0}" -ge 1 ] || t_fail "the killed writer was not passed through"
kill -9 "${T_PID[$T_MNT]}"
wait "${T_PID[$T_MNT]}" 2>/dev/null
unset "T_PID[$T_MNT]"
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
fusermount3 -u "$T_MNT" 2>/dev/null || umount -l "$T_MNT"
t_mount "$T_DATA" "$T_MNT" -o record_max=4M
[ "$(stat -c %s "$T_MNT/pool")" = "$(cat "$T_TMP/kill.out")" ] ||
	t_fail "size after kill -9: $(stat -c %s "$T_MNT/pool")," \
		"want $(cat "$T_TMP/kill.out")"
[ "$(dd if="$T_MNT/pool" bs=1 skip=$((30 * MB)) count=6 status=none)" = \
	synced ] || t_fail "the synced bytes after kill -9"
t_log "kill -9 after fsync: size and bytes kept"
ino=$(stat -c %i "$T_MNT/pool")
sum=$(md5sum <"$T_MNT/pool")
t_umount "$T_MNT"

# The older shape: the header (the .kvh's bytes) first in the .kvx, no
# .kvh, index format 4. kvfs upgrades the index, reads and writes the
# file itself (no passthrough) and fsck finds nothing wrong.
if [ "$T_MODE" = mount ]; then
	x=$T_DATA/extents/$ino
	[ -f "$x.kvh" ] || t_fail "no header file $x.kvh"
	cat "$x.kvh" "$x.kvx" >"$x.old" && mv "$x.old" "$x.kvx" &&
		rm "$x.kvh" || t_fail "making the older shape"
	sqlite3 "$T_DATA/index.db" 'PRAGMA user_version = 4;' ||
		t_fail "user_version 4"
	t_mount "$T_DATA" "$T_MNT" -o record_max=4M
	grep -q "upgraded the index from format version 4 to 5" \
		"${T_LOG[$T_MNT]}" || t_fail "no upgrade log line"
	[ "$(dd if="$T_MNT/pool" bs=1 skip=$((30 * MB)) count=6 \
		status=none)" = synced ] || t_fail "older shape: bytes"
	[ "$(md5sum <"$T_MNT/pool")" = "$sum" ] ||
		t_fail "older shape: the bytes differ from before"
	[ "$(pt_opens "$T_MNT")" = 0 ] ||
		t_fail "an older-shape extent file was passed through"
	printf 'more' | dd of="$T_MNT/pool" bs=1 seek=$((31 * MB)) \
		conv=notrunc status=none || t_fail "older shape: write"
	[ "$(stat -c %s "$T_MNT/pool")" = $((31 * MB + 4)) ] ||
		t_fail "older shape: size after a write"
	t_umount "$T_MNT"
	[ -f "$x.kvh" ] && t_fail "an older-shape extent file got a .kvh"
	"$KVFSCTL" fsck "$T_DATA" >"$T_TMP/fsck.out" 2>&1 || {
		cat "$T_TMP/fsck.out" >&2
		t_fail "fsck of an older-shape extent file"
	}
	t_log "older-shape extent file: upgraded, read and written by kvfs"
fi

if [ "$T_MODE" = mount ] && [ "${KVFS_FAULT_INJECTION:-0}" = 1 ]; then
	t_mount "$T_DATA" "$T_MNT" -o record_max=4M
	sum=$(md5sum <"$T_MNT/held")
	n=$(pt_opens "$T_MNT")
	python3 -c 'import os; os.setxattr(os.sys.argv[1],
		"user.kvfs.fault.backing_error", b"1")' "$T_MNT" ||
		t_fail "setxattr backing_error"
	[ "$(md5sum <"$T_MNT/held")" = "$sum" ] || t_fail "refused: bytes"
	printf 'late' | dd of="$T_MNT/held" bs=1 seek=$((10 * MB)) \
		conv=notrunc status=none || t_fail "refused: write"
	[ "$(stat -c %s "$T_MNT/held")" = $((10 * MB + 4)) ] ||
		t_fail "refused: size after a write"
	[ "$(pt_opens "$T_MNT")" = "$n" ] ||
		t_fail "refused, yet passed through"
	grep -q "the kernel refused a backing file (Operation not permitted)" \
		"${T_LOG[$T_MNT]}" || t_fail "no log line for the refusal"
	t_umount "$T_MNT"
	t_log "backing file refused: logged, I/O through kvfs"
fi
t_finish
