#!/bin/bash
# SPDX-License-Identifier: MIT
# Paths of any depth: files whose path from the mount's root is longer than
# PATH_MAX (4,518 bytes here) and than the 4096 bytes a record keeps
# (kvfs(5)) are made, truncated, written, rewritten, renamed and unlinked,
# a 5 MiB one an extent file (record_max=4M), as on the plain directory (deep_walk.py make, both option sets, the
# transcripts compared). Then on kvfs alone: after kvfsctl sync, and again
# after a remount, every file at the bottom has the plain directory's size
# and bytes (deep_walk.py check), each save of a deep file is logged as
# kept without its path, none as failed; and with the index rebuilt from
# the data files, the files come back under /lost+found/INODE, byte for
# byte, and fsck of the rebuilt index is clean.
#
# Needs python3; root for nothing. Environment: as lib.sh, plus KVFSCTL.
# shellcheck disable=SC2034 # read by lib.sh
T_NEEDS="KVFSCTL"
# shellcheck source=tests/mount/lib.sh
. "$(dirname "$0")/lib.sh"

t_init
command -v python3 >/dev/null || t_skip "no python3"
WALK="$(dirname "$0")/deep_walk.py"

PLAIN=$(t_plain_dir plain)
t_run "$T_TMP/make.ref" "$T_TMP/make.err" python3 "$WALK" make "$PLAIN"
FAILED='^(store|creat|truncate|ftruncate|write|rewrite|rename|unlink) .* E[A-Z]+$'
t_expect_none "$T_TMP/make.ref" "$FAILED" "deep files on the plain directory"
t_run "$T_TMP/check.ref" "$T_TMP/check.err" python3 "$WALK" check "$PLAIN"

for opts in "${T_OPTSETS[@]}"; do
	# record_max=4M: big.bin is an extent file.
	T_OPTS="$opts -o record_max=4M"
	t_target
	t_run "$T_TMP/make.got" "$T_TMP/make.err" python3 "$WALK" make "$T_MNT"
	t_compare "deep files ($T_OPTS)" "$T_TMP/make.ref" \
		"$T_TMP/make.got"
	[ "$T_MODE" = mount ] || continue
	"$KVFSCTL" sync "$T_MNT" || t_fail "kvfsctl sync"
	t_run "$T_TMP/check.got" "$T_TMP/check.err" python3 "$WALK" check \
		"$T_MNT"
	t_compare "deep files saved" "$T_TMP/check.ref" "$T_TMP/check.got"
	log=${T_LOG[$T_MNT]}
	grep -q "cannot save" "$log" && {
		t_show "$log"
		t_fail "a deep file's save failed"
	}
	# blk.bin, blk2.bin (twice: stored, then rewritten) and g, at least.
	n=$(grep -c "saved without it" "$log")
	[ "$(find "$T_DATA/extents" -name '*.kvx' | wc -l)" -ge 1 ] ||
		t_fail "big.bin is not an extent file"
	[ "$n" -ge 3 ] || {
		t_show "$log"
		t_fail "$n saves of deep files logged as kept without their path"
	}
	t_umount "$T_MNT"
	# shellcheck disable=SC2086 # options are words
	t_mount "$T_DATA" "$T_MNT" $T_OPTS
	t_run "$T_TMP/check.got" "$T_TMP/check.err" python3 "$WALK" check \
		"$T_MNT"
	t_compare "deep files after a remount" "$T_TMP/check.ref" \
		"$T_TMP/check.got"
	t_umount "$T_MNT"
done

if [ "$T_MODE" = mount ]; then
	# The records keep no path: a rebuild puts the files in lost+found.
	rm -f "$T_DATA"/index.db*
	"$KVFSCTL" fsck --rebuild-index "$T_DATA" >"$T_TMP/rebuild.out" 2>&1
	rc=$?
	# 1: repaired, files put in /lost+found (kvfsctl(8)).
	[ "$rc" -eq 1 ] || {
		cat "$T_TMP/rebuild.out" >&2
		t_fail "fsck --rebuild-index exited $rc (want 1)"
	}
	"$KVFSCTL" fsck "$T_DATA" >"$T_TMP/fsck.out" 2>&1 || {
		cat "$T_TMP/fsck.out" >&2
		t_fail "fsck of the rebuilt index"
	}
	t_mount "$T_DATA" "$T_MNT" -o record_max=4M
	sed 's/^[^ ]* //' "$T_TMP/check.ref" | sort >"$T_TMP/found.ref"
	for f in "$T_MNT"/lost+found/*; do
		[ -f "$f" ] || t_fail "nothing in lost+found after the rebuild"
		grep -q "LOST+FOUND.*lost+found/$(basename "$f")" \
			"$T_TMP/rebuild.out" ||
			t_fail "fsck did not list lost+found/$(basename "$f")"
		echo "$(stat -c %s "$f") $(md5sum <"$f" | cut -d' ' -f1)"
	done | sort >"$T_TMP/found.got"
	t_compare "deep files rebuilt in lost+found" "$T_TMP/found.ref" \
		"$T_TMP/found.got"
	t_umount "$T_MNT"
fi
t_finish
