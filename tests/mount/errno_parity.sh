#!/bin/bash
# SPDX-License-Identifier: MIT
# Test 4: errno and semantics parity. errno_battery runs ~770 steps (missing
# names, ENAMETOOLONG, ENOTDIR, EISDIR, ENOTEMPTY, EEXIST, rename rules incl.
# RENAME_NOREPLACE/RENAME_EXCHANGE, rmdir/readlink misuse, symlinks and
# ELOOP, truncate up/down, O_APPEND, O_TRUNC, utimensat with UTIME_NOW and
# UTIME_OMIT, chmod/chown, user.* xattrs incl. ENODATA/ERANGE/EEXIST and an
# xattr surviving the rename of a temp file, files read after unlink or
# rename-over while open, reads at and after EOF, pread/pwrite against a
# model, O_DIRECT incl. unaligned, statfs, fsync, readdir; hard links:
# link(2)'s refusals, links to symlinks, st_nlink and ctime, one inode seen
# through every name, rename over a link and onto another name of the same
# inode, names unlinked under an open descriptor; FIFOs, sockets (mknod and
# bind) and device nodes with st_rdev and d_type; mkdir/rmdir, symlink and
# truncate/ftruncate edges; set-id bits across chown, write, truncate and
# O_TRUNC; O_RDONLY|O_TRUNC; permissions as uids 1001 and 1002: EACCES,
# EPERM of non-owners, the sticky bit, protected_hardlinks) on the plain
# directory and on the mount (with allow_other); the transcripts must be
# identical. Known differences are info lines on stderr, not transcript
# lines: O_TMPFILE (kvfs: EOPNOTSUPP) and the set-gid bit of a file that is
# not group-executable, written or truncated by a non-member (ext4 clears
# it, FUSE keeps it). Then rm -r, cp -a, find and du must work and agree
# with the plain directory; a tree of hard links, FIFOs, device nodes and a
# socket copied with cp -a (identical) and tar (the same changes on both);
# and cp -a between the two filesystems must preserve everything.
T_NEEDS="VLLM_IO ERRNO_BATTERY TREE_DUMP LOOKUP_PROBE"
. "$(dirname "$0")/lib.sh"

t_init
# Every part runs even when an earlier one differs; the test fails at the end.
T_KEEP_GOING=1
# The battery's permission steps run as uids 1001 and 1002: they must get
# through the scratch directory to the plain directory and the mount, and
# the mount must let other users in.
chmod 0711 "$T_TMP" || t_fail "chmod $T_TMP"
set=0
for opts in "${T_OPTSETS[@]}"; do
	set=$((set + 1))
	REF=$(t_plain_dir ref)
	T_OPTS="-o allow_other $opts"
	t_target
	t_run "$T_TMP/ref.$set.txt" "$T_TMP/ref.$set.err" \
		"$ERRNO_BATTERY" "$REF"
	t_expect_none "$T_TMP/ref.$set.txt" \
		'MISMATCH|[ =]BAD\b|OUT-OF-WINDOW|NONZERO|DIFFERENT|FAILED|OTHER' \
		reference
	tail -n 1 "$T_TMP/ref.$set.txt" | grep -q '^battery: done$' ||
		t_fail "reference battery did not finish"
	t_run "$T_TMP/kvfs.$set.txt" "$T_TMP/kvfs.$set.err" \
		"$ERRNO_BATTERY" "$T_MNT"
	sed 's/^/  info (kvfs): /' "$T_TMP/kvfs.$set.err" >&2
	t_compare "errno-battery-opts$set" "$T_TMP/ref.$set.txt" \
		"$T_TMP/kvfs.$set.txt"
	[ $set -eq ${#T_OPTSETS[@]} ] || t_umount "$T_MNT"
done

# tools DIR OUT: rm -r, cp -a, find, du on a tree built in DIR/tools.
tools() {
	local d=$1/tools out=$2 k
	mkdir "$d" || t_fail "mkdir $d"
	{
		"$VLLM_IO" populate "$d/src" 1 >/dev/null
		echo "status populate: $?"
		"$ERRNO_BATTERY" -p 1 "$d/src" >/dev/null
		echo "status populate-misc: $?"
		cp -a "$d/src" "$d/dst"
		echo "status cp -a: $?"
		"$TREE_DUMP" -m -C -x "$d/src" >"$d.src.dump"
		"$TREE_DUMP" -m -C -x "$d/dst" >"$d.dst.dump"
		if cmp -s "$d.src.dump" "$d.dst.dump"; then
			echo "cp -a: copy identical (modes, owners, mtimes, bytes, xattrs)"
		else
			echo "cp -a: copy differs:"
			diff "$d.src.dump" "$d.dst.dump"
		fi
		echo "find files:"
		(cd "$d" && find src -type f -printf '%p %s %m %U:%G %n\n' | sort)
		echo "find dirs:"
		(cd "$d" && find src -type d -printf '%p %m %U:%G %n\n' | sort)
		echo "find links:"
		(cd "$d" && find src -type l -printf '%p -> %l\n' | sort)
		echo "find -empty:"
		(cd "$d" && find . -empty | sort)
		echo "find -size +1M -name '*.bin':"
		(cd "$d" && find . -size +1M -name '*.bin' | sort)
		echo "find -newer: $(cd "$d" && find src/misc -newer src/misc/t_times | sort | tr '\n' ' ')"
		echo "du apparent sizes of files:"
		(cd "$d" && find src -type f -print0 |
			du -b --apparent-size --files0-from=- | sort -k2)
		echo "status du apparent: $?"
		k=$(du -sk "$d/src" | cut -f1)
		if [ "${k:-0}" -gt 0 ]; then
			echo "du -sk: nonzero"
		else
			echo "du -sk: ZERO ($k)"
		fi
		rm -r "$d/dst"
		echo "status rm -r: $?"
		[ -e "$d/dst" ] && echo "rm -r: dst still exists" ||
			echo "rm -r: dst gone"
		echo "ls after rm -r: $(ls -A "$d")"
		rm -r "$d/src"
		echo "status rm -r src: $?"
		rmdir "$d"
		echo "status rmdir tools: $?"
	} >"$out" 2>&1
	rm -f "$d.src.dump" "$d.dst.dump"
}
tools "$REF" "$T_TMP/ref.tools"
tools "$T_MNT" "$T_TMP/kvfs.tools"
t_daemons_alive "rm -r, cp -a, find, du"
t_expect_none "$T_TMP/ref.tools" 'differs|ZERO|still exists|^status [^:]*: [1-9]' \
	"reference tools"
t_compare tools "$T_TMP/ref.tools" "$T_TMP/kvfs.tools"

# special DIR OUT: a tree with hard links (in one directory and across
# directories, of a FIFO and of a device node too), FIFOs, character and
# block device nodes and a unix socket, copied with cp -a and with tar (hard
# links kept, not dereferenced); tree_dump -r -I shows st_rdev and which
# names are one file. tar leaves sockets out ("socket ignored"): its copy is
# compared without the top-level socket.
special() {
	local d=$1/special out=$2 c
	mkdir "$d" || t_fail "mkdir $d"
	{
		mkdir "$d/src" "$d/src/a" "$d/src/b" "$d/src/a/deep"
		printf 'one file, four names\n' >"$d/src/a/f"
		ln "$d/src/a/f" "$d/src/a/f2" &&
			ln "$d/src/a/f" "$d/src/b/f3" &&
			ln "$d/src/a/f" "$d/src/a/deep/f4"
		echo "status links: $?"
		head -c 70000 /dev/zero | tr '\0' x >"$d/src/b/big"
		ln "$d/src/b/big" "$d/src/big.link"
		echo "status big link: $?"
		mkfifo -m 0640 "$d/src/a/fifo" && ln "$d/src/a/fifo" "$d/src/b/fifo2"
		echo "status fifo: $?"
		mknod -m 0620 "$d/src/a/chr" c 1 7 &&
			mknod -m 0600 "$d/src/b/blk" b 8 17 &&
			ln "$d/src/b/blk" "$d/src/a/blk.link"
		echo "status mknod: $?"
		chown 1001:1002 "$d/src/a/chr" "$d/src/a/f"
		echo "status chown: $?"
		ln -s f "$d/src/a/sl"
		"$LOOKUP_PROBE" bind "$d/src/sock"
		touch -h -d @1234567890 "$d/src/a/sl" "$d/src/a/fifo" \
			"$d/src/a/chr" "$d/src/b/blk" "$d/src/a/f" \
			"$d/src/b/big" "$d/src/sock"
		touch -d @1300000000 "$d/src/a/deep" "$d/src/b" "$d/src/a"
		echo "status touch: $?"
		cp -a "$d/src" "$d/cp"
		echo "status cp -a: $?"
		mkdir "$d/tar"
		(cd "$d/src" && tar --format=posix -cf - .) 2>"$d.tar.err" |
			(cd "$d/tar" && tar xf -)
		echo "status tar: $?"
		cat "$d.tar.err"
		# In the transcript: no times (the directories' own are the
		# clock's); the copies are compared with them.
		"$TREE_DUMP" -C -x -r -I "$d/src"
		echo "status dump: $?"
		"$TREE_DUMP" -m -C -x -r -I "$d/src" >"$d.src.dump"
		"$TREE_DUMP" -m -C -x -r -I -i sock "$d/src" >"$d.nosock.dump"
		"$TREE_DUMP" -m -C -x -r -I "$d/cp" >"$d.cp.dump"
		"$TREE_DUMP" -m -C -x -r -I -i sock "$d/tar" >"$d.tar.dump"
		if cmp -s "$d.src.dump" "$d.cp.dump"; then
			echo "cp -a: copy identical (types, modes, owners, mtimes, bytes, rdev, links)"
		else
			echo "cp -a: copy differs:"
			diff "$d.src.dump" "$d.cp.dump"
		fi
		# GNU tar keeps no hard link between FIFOs or device nodes
		# (each name comes back as its own node): what it changes is
		# part of the transcript.
		echo "tar: what the copy changes:"
		diff "$d.nosock.dump" "$d.tar.dump"
		rm -r "$d"
		echo "status rm -r: $?"
	} >"$out" 2>&1
	rm -f "$d".*.dump "$d.tar.err"
}
special "$REF" "$T_TMP/ref.special"
special "$T_MNT" "$T_TMP/kvfs.special"
t_daemons_alive "cp -a and tar of hard links and special files"
t_expect_none "$T_TMP/ref.special" 'differs|^status [^:]*: [1-9]' \
	"reference special tree"
t_compare special-tree "$T_TMP/ref.special" "$T_TMP/kvfs.special"

# cp -a plain -> kvfs and kvfs -> plain preserves everything it can.
mkdir "$REF/x" || t_fail "mkdir $REF/x"
t_run "$T_TMP/x.pop" "$T_TMP/x.pop.err" "$VLLM_IO" populate "$REF/x" 1
t_run "$T_TMP/x.misc" "$T_TMP/x.misc.err" "$ERRNO_BATTERY" -p 1 "$REF/x"
cp -a "$REF/x" "$T_MNT/from-plain" || t_fail "cp -a plain -> kvfs failed"
cp -a "$T_MNT/from-plain" "$REF/back" || t_fail "cp -a kvfs -> plain failed"
t_run "$T_TMP/crossfs.src" "$T_TMP/crossfs.err" \
	"$TREE_DUMP" -m -C -x "$REF/x"
t_run "$T_TMP/crossfs.kvfs" "$T_TMP/crossfs.err" \
	"$TREE_DUMP" -m -C -x "$T_MNT/from-plain"
t_run "$T_TMP/crossfs.back" "$T_TMP/crossfs.err" \
	"$TREE_DUMP" -m -C -x "$REF/back"
t_compare cp-a-plain-to-kvfs "$T_TMP/crossfs.src" "$T_TMP/crossfs.kvfs" 1
t_compare cp-a-kvfs-to-plain "$T_TMP/crossfs.src" "$T_TMP/crossfs.back" 1
t_finish
