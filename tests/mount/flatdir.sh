#!/bin/bash
# SPDX-License-Identifier: MIT
# Listings of one flat directory (kvfs(7), DIRECTORY LISTINGS), on the
# plain directory and on kvfs under both option sets:
#  - dir_race: while threads create and unlink names in the directory,
#    every listing shows each untouched name exactly once, no name twice
#    and no name unlinked before it began; telldir/seekdir positions lead
#    back to the same names; a last listing holds exactly what exists;
#  - a listing after a create, an unlink and a rename through the mount
#    shows them, though the kernel keeps listings between opendirs;
# and on kvfs only:
#  - a name kvfs removes on its own (a stale engine temp file, swept by the
#    janitor) leaves a listing the kernel kept, also when the kernel had
#    dropped (or never had) the name's own entry.
T_NEEDS=DIR_RACE
. "$(dirname "$0")/lib.sh"

DR=${DIR_RACE:?DIR_RACE is not set}
STABLE=3000

t_init

# changes DIR OUT: lists DIR (so that the kernel may keep the listing),
# then after each change made through the mount lists it again, into OUT.
changes() {
	local d=$1 out=$2
	{
		"$DR" list "$d" | wc -l
		: >"$d/new.data" && "$DR" list "$d" | grep -c '^new.data$'
		mv "$d/new.data" "$d/moved.data" &&
			"$DR" list "$d" | grep -c '^new.data$\|^moved.data$'
		"$DR" list "$d" | grep -c '^moved.data$'
		rm "$d/moved.data" && "$DR" list "$d" | grep -c '^moved.data$'
		"$DR" list "$d" | wc -l
	} >"$out" 2>&1
}

REF=$(t_plain_dir ref)
mkdir "$REF/flat" || t_fail "mkdir $REF/flat"
t_run "$T_TMP/race.plain" "$T_TMP/race.plain.err" "$DR" race "$REF/flat" \
	$STABLE 4 4
changes "$REF/flat" "$T_TMP/changes.plain"
t_expect_none "$T_TMP/race.plain" "^race: [^o]" "race on the plain directory"

for T_OPTS in "${T_OPTSETS[@]}"; do
	t_target
	mkdir "$T_MNT/flat" || t_fail "mkdir $T_MNT/flat"
	t_run "$T_TMP/race.kvfs" "$T_TMP/race.kvfs.err" "$DR" race \
		"$T_MNT/flat" $STABLE 4 4
	t_log "$(cat "$T_TMP/race.kvfs.err")"
	t_compare race "$T_TMP/race.plain" "$T_TMP/race.kvfs"
	changes "$T_MNT/flat" "$T_TMP/changes.kvfs"
	t_compare changes "$T_TMP/changes.plain" "$T_TMP/changes.kvfs"
	t_umount "$T_MNT"
done
[ "$T_MODE" = mount ] || t_finish

# A stale temp file that the janitor removes, in a directory whose listing
# the kernel keeps (the directory stays open, so its pages stay), while
# the kernel has no entry for the temp's name any more.
T_OPTS="-o tmp_max_age=1"
t_target
D=$T_MNT/sweep
mkdir "$D" || t_fail "mkdir $D"
for i in $(seq 200); do : >"$D/k$i.bin"; done
: >"$D/blk.bin_7.tmp" || t_fail "create the temp file"
exec 3<"$D"
"$DR" list "$D" >"$T_TMP/sweep.before"
grep -q '^blk.bin_7.tmp$' "$T_TMP/sweep.before" ||
	t_fail "the temp file is not listed before the sweep"
# Drops the kernel's unused dentries (the temp's among them), not the open
# directory's pages.
sync
echo 2 >/proc/sys/vm/drop_caches
for _ in $(seq 100); do
	n=$(awk '$1 == "kvfs_tmp_removed_total" { print $2 }' \
		"$T_MNT/.kvfs/stats")
	[ "${n:-0}" -ge 1 ] && break
	sleep 0.1
done
[ "${n:-0}" -ge 1 ] || t_fail "the janitor did not sweep the temp file"
"$DR" list "$D" >"$T_TMP/sweep.after"
exec 3<&-
grep -q '^blk.bin_7.tmp$' "$T_TMP/sweep.after" &&
	t_fail "a listing still shows the temp file the janitor removed"
[ "$(wc -l <"$T_TMP/sweep.after")" -eq 200 ] ||
	t_fail "after the sweep the listing has $(wc -l <"$T_TMP/sweep.after") names, not 200"
t_log "a name the janitor removed left the kept listing"
t_umount "$T_MNT"
t_finish
