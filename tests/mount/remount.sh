#!/bin/bash
# SPDX-License-Identifier: MIT
# Test 3: remount. Everything written through one mount is there after
# fusermount3 -u and a new mount of the same DATADIR: names, types, modes,
# owners, link counts, sizes, mtimes and ctimes (ns), atimes of regular
# files, symlink targets, user.* xattrs, and every byte (vLLM blocks of all
# four sizes, loaded with vLLM's load sequence, plus sparse, truncated,
# appended, renamed and exchanged files). Done twice: phase 1 writes a tree
# and remounts; phase 2 changes it after the remount (rename over, unlink,
# rmdir, chmod/chown, xattr replace/remove, new times) and remounts again.
# The content is also compared with a plain directory that got the same
# operations (times there only where they were set explicitly: "t_*").
# Run once per daemon option set (T_OPTSETS).
. "$(dirname "$0")/lib.sh"

# meta DIR TAG: metadata-only dump (reads no file data, so atimes hold).
meta() {
	t_run "$T_TMP/$2.meta" "$T_TMP/$2.meta.err" \
		"$TREE_DUMP" -m -a -c -x -i .kvfs "$1"
}

# content DIR TAG: bytes, targets, xattrs, and times where the test set them.
content() {
	t_run "$T_TMP/$2.content" "$T_TMP/$2.content.err" \
		"$TREE_DUMP" -C -x -e -m -a -i .kvfs "$1"
}

t_init
# Every comparison runs even when an earlier one differs; fail at the end.
T_KEEP_GOING=1
set=0
for opts in "${T_OPTSETS[@]}"; do
	set=$((set + 1))
	REF=$(t_plain_dir ref)
	T_OPTS=$opts
	t_target
	for phase in 1 2; do
		p=o$set-p$phase
		for side in ref kvfs; do
			[ $side = ref ] && root=$REF || root=$T_MNT
			t_run "$T_TMP/$side.$p.pop" "$T_TMP/$side.$p.pop.err" \
				"$VLLM_IO" populate "$root" $phase
			t_run "$T_TMP/$side.$p.misc" "$T_TMP/$side.$p.misc.err" \
				"$ERRNO_BATTERY" -p $phase "$root"
		done
		t_compare "$p-populate" "$T_TMP/ref.$p.pop" "$T_TMP/kvfs.$p.pop"
		t_compare "$p-populate-misc" "$T_TMP/ref.$p.misc" \
			"$T_TMP/kvfs.$p.misc"

		meta "$T_MNT" "before.$p"
		t_umount "$T_MNT"
		if [ "$T_MODE" = mount ]; then
			[ -z "$(ls -A "$T_MNT")" ] ||
				t_fail "mountpoint not empty after unmount"
			[ -n "$(ls -A "$T_DATA")" ] || t_fail "DATADIR is empty"
		fi
		# shellcheck disable=SC2086
		t_mount "$T_DATA" "$T_MNT" $T_OPTS
		meta "$T_MNT" "after.$p"
		t_compare "$p-remount-metadata" "$T_TMP/before.$p.meta" \
			"$T_TMP/after.$p.meta" 0 "kvfs before unmount" \
			"kvfs after remount"

		content "$REF" "ref.$p"
		content "$T_MNT" "kvfs.$p"
		t_compare "$p-remount-content-vs-plain" \
			"$T_TMP/ref.$p.content" "$T_TMP/kvfs.$p.content" 1
		for side in ref kvfs; do
			[ $side = ref ] && root=$REF || root=$T_MNT
			t_run "$T_TMP/$side.$p.verify" "$T_TMP/$side.$p.verify.err" \
				"$VLLM_IO" verify "$root" $phase
		done
		t_expect_none "$T_TMP/ref.$p.verify" \
			'CORRUPT|whole but|short|open/read' "reference verify $p"
		t_compare "$p-remount-vllm-load" "$T_TMP/ref.$p.verify" \
			"$T_TMP/kvfs.$p.verify"
	done
	# The metadata check must have compared times and xattrs at all.
	grep -q 't_times reg .* mtime=1700000000.987654321 atime=1600000000.123456789' \
		"$T_TMP/ref.o$set-p2.content" ||
		t_fail "explicit times of misc/t_times missing in the reference"
	grep -q 'misc/xa reg .*xattrs=\[user.a=6:' "$T_TMP/ref.o$set-p2.content" ||
		t_fail "xattr user.a missing in the reference"
	t_umount "$T_MNT"
done
t_finish
