#!/bin/bash
# SPDX-License-Identifier: MIT
# Files of any size: extent files (kvfs(5), kvfs(8) "Large files"). The
# same steps run on a plain directory and on kvfs (small record_max, so
# that tens of MiB already make extent files), and what they print must
# match: a cp(1) round trip byte for byte (KVFS_TEST_CP_MB, default 4096
# MiB, on kvfs's defaults), sparse files and the zeros of their holes,
# fallocate(1) reservations, punched holes and zeroed ranges (the blocks
# they take, roughly), a worker's pool file (fallocate, unlinked while
# open, O_DIRECT 1 MiB writes and reads from 4 processes at once), a
# saved record growing into an extent file, a write past the largest file
# the data directory's file system holds (EFBIG on ext4). Then on kvfs
# alone: the bytes survive a remount; a kill -9 loses no saved byte and
# leaves no extent file behind; a cut backing file is dropped (EIO, then
# gone; fsck names it first); a rename survives an index rebuild; gc and
# fsck agree; a full disk (a small loop-mounted ext4) gives ENOSPC and
# loses nothing; (fault injection) a writer reads its still-queued writes
# back before close, and a queued write that fails reaches it as EIO.
. "$(dirname "$0")/lib.sh"

T_NEEDS=
t_init
command -v fallocate >/dev/null || t_skip "no fallocate(1)"

MB=$((1 << 20))
SRC=$(t_plain_dir src)
# Random bytes, built from one 64 MiB random piece (fast, never all-equal).
head -c $((64 * MB)) /dev/urandom >"$SRC/piece" || t_fail "urandom"

# make_src NAME MIB: a file of MIB MiB of distinct 64 MiB random pieces.
make_src() {
	local i
	: >"$SRC/$1"
	for ((i = 0; i < $2; i += 64)); do
		# Each piece gets its index up front: no two pieces alike.
		{
			printf '%016d' "$i"
			dd if="$SRC/piece" bs=1M iflag=skip_bytes,count_bytes \
				skip=16 count=$(((($2 - i) < 64 ? ($2 - i) : 64) * \
				MB - 16)) status=none
		} >>"$SRC/$1"
	done
}

# blocks_mib FILE: the MiB its blocks take, rounded to 16 MiB steps (the
# plain directory and kvfs may differ by a header or an extent's slack).
blocks_mib() {
	local b
	b=$(stat -c %b "$1") || t_fail "stat $1"
	echo $(((b * 512 / MB + 8) / 16 * 16))
}

# The steps on DIR, printed for comparison.
steps() {
	local d=$1 i pids=()
	echo "== sparse"
	truncate -s 3G "$d/sparse" || t_fail "truncate"
	printf 'middle' | dd of="$d/sparse" bs=1 seek=$((2560 * MB)) \
		conv=notrunc status=none || t_fail "dd middle"
	stat -c 'size %s' "$d/sparse"
	echo "blocks $(blocks_mib "$d/sparse") MiB"
	dd if="$d/sparse" bs=1 skip=$((2560 * MB)) count=6 status=none
	echo
	cmp -n $((64 * MB)) "$d/sparse" /dev/zero && echo "hole reads zeros"
	cmp -i $((3000 * MB)):0 -n $((64 * MB)) "$d/sparse" /dev/zero &&
		echo "tail reads zeros"

	echo "== fallocate"
	fallocate -l 1G "$d/res" || t_fail "fallocate"
	stat -c 'size %s' "$d/res"
	echo "blocks $(blocks_mib "$d/res") MiB"
	fallocate -n -o 1G -l 512M "$d/res" || t_fail "fallocate -n"
	stat -c 'size %s' "$d/res"
	echo "blocks $(blocks_mib "$d/res") MiB"
	dd if="$SRC/piece" of="$d/res" bs=1M count=8 seek=100 \
		conv=notrunc status=none || t_fail "dd res"
	fallocate -p -o 0 -l 512M "$d/res" || t_fail "punch"
	echo "after punch: blocks $(blocks_mib "$d/res") MiB"
	cmp -n $((512 * MB)) "$d/res" /dev/zero && echo "punched reads zeros"
	fallocate -z -o $((1024 * MB)) -l 4M "$d/res" || t_fail "zero range"
	stat -c 'size %s' "$d/res"

	echo "== pool"
	# A worker's pool: made, reserved, unlinked while open, then 4
	# writers of distinct 1 MiB blocks with O_DIRECT at scattered offsets.
	exec 7<>"$d/pool.tmp" || t_fail "open pool"
	fallocate -l 1G "$d/pool.tmp" || t_fail "fallocate pool"
	rm "$d/pool.tmp" || t_fail "unlink pool"
	for i in 0 1 2 3; do
		(
			for ((k = 0; k < 24; k++)); do
				blk=$(((k * 4 + i) * 37 % 1024))
				dd if="$SRC/piece" of=/proc/$$/fd/7 bs=1M \
					skip=$((blk * 4096)) iflag=skip_bytes \
					seek=$blk count=1 oflag=direct \
					conv=notrunc status=none || exit 1
			done
		) &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || t_fail "pool writer"; done
	# Each block read back with O_DIRECT against what its writer wrote.
	for ((k = 0; k < 96; k++)); do
		blk=$((k * 37 % 1024))
		want=$(dd if="$SRC/piece" bs=1M skip=$((blk * 4096)) \
			iflag=skip_bytes count=1 status=none | md5sum)
		got=$(dd if=/proc/$$/fd/7 bs=1M skip=$blk count=1 \
			iflag=direct status=none | md5sum)
		[ "$want" = "$got" ] && echo "block as written" ||
			echo "block $blk differs"
	done | sort | uniq -c
	dd if=/proc/$$/fd/7 bs=1M skip=1 count=1 status=none |
		cmp -n $MB - /dev/zero && echo "unwritten pool block is zeros"
	exec 7>&-
	ls "$d"

	echo "== growing record"
	dd if="$SRC/piece" of="$d/grow" bs=1M count=3 status=none ||
		t_fail "grow"
	dd if="$SRC/piece" bs=1M count=40 status=none >>"$d/grow" ||
		t_fail "append"
	stat -c 'size %s' "$d/grow"
	md5sum <"$d/grow" | cut -c1-32

	echo "== past the largest file"
	# 1 MiB with O_DIRECT at 17 TiB, past ext4's largest file: kvfs's
	# backing file cannot grow there either, and the writer must hear
	# what it hears on the plain directory, the file keeping its bytes.
	python3 - "$d/grow" <<'PY'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_DIRECT)
try:
    os.pwrite(fd, mmap.mmap(-1, 1 << 20), 17 << 40)
    print("write at 17 TiB: done")
except OSError as e:
    print("write at 17 TiB:", e.strerror)
os.close(fd)
PY
	stat -c 'size %s' "$d/grow"
	md5sum <"$d/grow" | cut -c1-32
}

PLAIN=$(t_plain_dir plain)
steps "$PLAIN" >"$T_TMP/plain.out" 2>"$T_TMP/plain.err" ||
	t_fail "steps on the plain directory"

T_OPTS="-o record_max=4M"
t_target
steps "$T_MNT" >"$T_TMP/kvfs.out" 2>"$T_TMP/kvfs.err" || {
	t_show "$T_TMP/kvfs.err"
	t_fail "steps on kvfs"
}
t_compare steps "$T_TMP/plain.out" "$T_TMP/kvfs.out"
grep -q "hole reads zeros" "$T_TMP/kvfs.out" || t_fail "holes"
grep -q "unwritten pool block is zeros" "$T_TMP/kvfs.out" || t_fail "pool"
[ "$T_MODE" = mount ] || t_finish

# Extent files on disk: sparse, res, grow (the pool went with its close),
# each INO.kvx with its header file INO.kvh.
ls "$T_DATA/extents" | sort >"$T_TMP/ext.list"
heads=$(sed 's/\.kvh$/.kvx/' "$T_TMP/ext.list" | uniq -d | wc -l)
[ "$(grep -c '\.kvx$' "$T_TMP/ext.list")" -eq 3 ] && [ "$heads" -eq 3 ] || {
	cat "$T_TMP/ext.list" >&2
	t_fail "want 3 extent files with headers (pool removed at close)"
}
sums() { (cd "$1" && md5sum sparse res grow); }
sums "$T_MNT" >"$T_TMP/sums.before"

# A remount keeps every byte.
t_umount "$T_MNT"
t_mount "$T_DATA" "$T_MNT" $T_OPTS
sums "$T_MNT" >"$T_TMP/sums.after"
t_compare remount "$T_TMP/sums.before" "$T_TMP/sums.after"

# kill -9 with an extent file open and a pool unlinked while open: the
# saved bytes stay, the pool's backing file goes at the next start.
exec 8<>"$T_MNT/pool2.tmp" || t_fail "open pool2"
fallocate -l 256M "$T_MNT/pool2.tmp" || t_fail "fallocate pool2"
rm "$T_MNT/pool2.tmp"
dd if="$SRC/piece" of=/proc/$$/fd/8 bs=1M count=1 seek=3 conv=notrunc \
	status=none || t_fail "pool2 write"
sync "$T_MNT/grow"
pid=${T_PID[$T_MNT]}
kill -KILL "$pid"
{ wait "$pid"; } 2>/dev/null
exec 8>&-
unset "T_PID[$T_MNT]"
t_scan_log "${T_LOG[$T_MNT]}"
fusermount3 -u -z "$T_MNT" || t_fail "fusermount3 -u -z"
[ "$(ls "$T_DATA/extents" | wc -l)" -eq 8 ] ||
	t_fail "the open pool's extent file should be there after the kill"
t_mount "$T_DATA" "$T_MNT" $T_OPTS
ls "$T_DATA/extents" | sort >"$T_TMP/ext.after"
t_compare crash-extents "$T_TMP/ext.list" "$T_TMP/ext.after"
sums "$T_MNT" >"$T_TMP/sums.crash"
t_compare crash "$T_TMP/sums.before" "$T_TMP/sums.crash"
grep -q "removed 1 extent files" "${T_LOG[$T_MNT]}" ||
	t_fail "no log line for the removed pool file"

# A rename, then a rebuilt index restores the new name and the bytes.
mv "$T_MNT/grow" "$T_MNT/grown" || t_fail "rename"
t_umount "$T_MNT"
"$KVFSCTL" fsck "$T_DATA" >"$T_TMP/fsck.out" 2>&1 || {
	cat "$T_TMP/fsck.out" >&2
	t_fail "fsck of a clean data directory"
}
# An extent file no inode points at: fsck lists it, gc removes it.
head -c 8192 /dev/zero >"$T_DATA/extents/999999.kvx"
"$KVFSCTL" fsck "$T_DATA" >"$T_TMP/fsck1.out" 2>&1 ||
	t_fail "fsck: an unreferenced extent file is not damage"
grep -q "unreferenced" "$T_TMP/fsck1.out" || {
	cat "$T_TMP/fsck1.out" >&2
	t_fail "fsck does not list the unreferenced extent file"
}
"$KVFSCTL" gc "$T_DATA" >"$T_TMP/gc.out" 2>&1 || {
	cat "$T_TMP/gc.out" >&2
	t_fail "gc"
}
[ -e "$T_DATA/extents/999999.kvx" ] && t_fail "gc left the unreferenced one"
[ "$(ls "$T_DATA/extents" | wc -l)" -eq 6 ] || t_fail "gc removed a live one"
rm -f "$T_DATA"/index.db*
"$KVFSCTL" fsck --rebuild-index "$T_DATA" >"$T_TMP/rebuild.out" 2>&1 || {
	cat "$T_TMP/rebuild.out" >&2
	t_fail "rebuild"
}
t_mount "$T_DATA" "$T_MNT" $T_OPTS
(cd "$T_MNT" && md5sum sparse res grown) | sed 's/grown$/grow/' \
	>"$T_TMP/sums.rebuilt"
t_compare rebuild "$T_TMP/sums.before" "$T_TMP/sums.rebuilt"
[ "$(stat -c %s "$T_MNT/sparse")" = $((3072 * MB)) ] ||
	t_fail "the rebuilt sparse file's size"
t_umount "$T_MNT"

# A cut backing file is provably short: fsck says so, a read fails with
# EIO and the name goes.
ino=$(sed -n 's/^\([0-9]*\)\.kvx$/\1/p' "$T_TMP/ext.list" | head -1)
truncate -s $((16 * MB)) "$T_DATA/extents/$ino.kvx"
# fsck exits 4: damage found and left (kvfsctl(8)).
"$KVFSCTL" fsck "$T_DATA" >"$T_TMP/fsck2.out" 2>&1
rc=$?
[ "$rc" -eq 4 ] || t_fail "fsck of a cut extent file exited $rc, want 4"
grep -q "provably short" "$T_TMP/fsck2.out" || {
	cat "$T_TMP/fsck2.out" >&2
	t_fail "fsck did not name the cut extent file"
}
t_mount "$T_DATA" "$T_MNT" $T_OPTS
victim=
for f in sparse res grown; do
	[ "$(stat -c %i "$T_MNT/$f")" = "$ino" ] && victim=$f
done
[ -n "$victim" ] || t_fail "no file has inode $ino"
if cat "$T_MNT/$victim" >/dev/null 2>"$T_TMP/cut.err"; then
	t_fail "a read of the cut $victim succeeded"
fi
grep -q "Input/output error" "$T_TMP/cut.err" || t_fail "want EIO"
[ -e "$T_MNT/$victim" ] && t_fail "the cut $victim is still listed"
# It goes with the inode, once the kernel forgets it too (FORGET comes
# after the name's invalidation, in the background): 10 s at most.
for _ in $(seq 100); do
	[ -e "$T_DATA/extents/$ino.kvx" ] || break
	sleep 0.1
done
[ -e "$T_DATA/extents/$ino.kvx" ] && t_fail "its extent file is still there" \
	"10 s after the read"
t_log "cut extent file $victim: EIO, dropped"
t_umount "$T_MNT"

# A full disk: DATADIR on a small loop-mounted ext4. A large write runs
# into ENOSPC (the disk's last bytes stay the index's); nothing stored
# before is lost, the bytes written before the error read back, and the
# space comes back with an unlink.
SMALL=$T_TMP/small
small_umount() { umount "$SMALL" 2>/dev/null; }
T_CLEANUP_HOOKS+=(small_umount)
mkdir -p "$SMALL"
if truncate -s 160M "$T_TMP/small.img" &&
	mkfs.ext4 -q -F "$T_TMP/small.img" 2>/dev/null &&
	mount -o loop "$T_TMP/small.img" "$SMALL" 2>/dev/null; then
	mkdir "$SMALL/data"
	FULL=$(t_plain_dir full)
	t_mount "$SMALL/data" "$FULL" -o record_max=4M
	echo "a block" >"$FULL/keep" || t_fail "small store"
	dd if="$SRC/piece" of="$FULL/huge" bs=1M count=64 status=none ||
		t_fail "64 MiB on a 160 MiB disk"
	if dd if="$SRC/piece" of="$FULL/huge" bs=1M count=64 seek=64 \
		conv=notrunc 2>"$T_TMP/full.err" &&
		dd if="$SRC/piece" of="$FULL/huge" bs=1M count=64 seek=128 \
			conv=notrunc 2>>"$T_TMP/full.err"; then
		t_fail "192 MiB fitted on a 160 MiB disk"
	fi
	grep -q "No space left on device" "$T_TMP/full.err" || {
		cat "$T_TMP/full.err" >&2
		t_fail "a full disk did not say ENOSPC"
	}
	cmp -n $((64 * MB)) "$FULL/huge" "$SRC/piece" ||
		t_fail "the bytes written before the full disk"
	[ "$(cat "$FULL/keep")" = "a block" ] || t_fail "a block was lost"
	rm "$FULL/huge" || t_fail "unlink of the big file"
	echo "again" >"$FULL/after" || t_fail "a store after the unlink"
	t_umount "$FULL"
	t_log "full disk: ENOSPC, nothing lost, space back after unlink"
	umount "$SMALL" || t_fail "umount $SMALL"
else
	t_log "no loop device: the full-disk case is left out"
fi

# Queued writes (kvfs(7), extent writers), with the test hooks holding
# them in the queue: a writer that has not closed reads its own writes
# back with O_DIRECT; a queued write that fails reaches the writer as
# EIO and the log says so; writes work again after.
if [ "${KVFS_FAULT_INJECTION:-0}" = 1 ]; then
	t_mount "$T_DATA" "$T_MNT" $T_OPTS
	python3 -c 'import os; os.setxattr(os.sys.argv[1],
		"user.kvfs.fault.ext_delay_ms", b"300")' "$T_MNT" ||
		t_fail "setxattr ext_delay_ms"
	python3 - "$T_MNT/queued" "$SRC/piece" >"$T_TMP/queued.out" <<'PY' ||
import mmap, os, sys
MB = 1 << 20
src = open(sys.argv[2], "rb").read(16 * MB)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, MB)
# From 4 MiB on, past record_max: an extent file from the first write.
for i in range(4, 16):
    buf[:] = src[i * MB:(i + 1) * MB]
    os.pwrite(fd, buf, i * MB)
bad = 0
for i in range(4, 16):
    n = os.preadv(fd, [buf], i * MB)
    bad += n != MB or buf[:] != src[i * MB:(i + 1) * MB]
os.close(fd)
print("queued writes read back" if bad == 0 else f"{bad} blocks differ")
PY
		t_fail "the queued writer"
	grep -q "^queued writes read back$" "$T_TMP/queued.out" || {
		cat "$T_TMP/queued.out" >&2
		t_fail "queued writes did not read back before close"
	}
	python3 -c 'import os; os.setxattr(os.sys.argv[1],
		"user.kvfs.fault.ext_error", b"5")' "$T_MNT" ||
		t_fail "setxattr ext_error"
	if dd if="$SRC/piece" of="$T_MNT/queued" bs=1M count=8 seek=4 \
		oflag=direct conv=notrunc status=none 2>"$T_TMP/qerr.err"; then
		t_fail "writes whose queued copies failed succeeded"
	fi
	grep -q "Input/output error" "$T_TMP/qerr.err" || {
		cat "$T_TMP/qerr.err" >&2
		t_fail "a failed queued write did not say EIO"
	}
	grep -q "to extent file inode .* failed" "${T_LOG[$T_MNT]}" ||
		t_fail "no log line for the failed queued write"
	for h in ext_error ext_delay_ms; do
		python3 -c 'import os; os.setxattr(os.sys.argv[1],
			"user.kvfs.fault." + os.sys.argv[2], b"0")' "$T_MNT" "$h" ||
			t_fail "setxattr $h 0"
	done
	dd if="$SRC/piece" of="$T_MNT/queued" bs=1M count=8 seek=4 \
		oflag=direct conv=notrunc status=none ||
		t_fail "a write after the failed ones"
	cmp -i $((4 * MB)):0 -n $((8 * MB)) "$T_MNT/queued" "$SRC/piece" ||
		t_fail "the bytes written after the failed ones"
	rm "$T_MNT/queued"
	t_umount "$T_MNT"
	t_log "queued extent writes: read back before close; EIO on failure"
fi

# The cp round trip at full size, on kvfs's defaults.
CP_MB=${KVFS_TEST_CP_MB:-4096}
make_src big "$CP_MB"
T_OPTS=
t_target
cp "$SRC/big" "$T_MNT/big" || t_fail "cp into kvfs"
sync
echo 3 >/proc/sys/vm/drop_caches
cp "$T_MNT/big" "$SRC/big.back" || t_fail "cp out of kvfs"
cmp "$SRC/big" "$SRC/big.back" || t_fail "cp of $CP_MB MiB: bytes differ"
t_log "cp of $CP_MB MiB round-trips byte for byte"
rm -f "$SRC/big" "$SRC/big.back"
t_finish
