#!/bin/bash
# SPDX-License-Identifier: MIT
# kvfsctl gc on an unmounted data directory:
#  - dead space made through a mount: blocks stored, synced, then renamed
#    to their names (a name record each: a rename after the save; one
#    before it only changes the name the record is written under), most
#    of them then deleted or replaced by a rename over them;
#  - gc refuses a mounted data directory, a locked one, bad paths and bad
#    options (exit 2, nothing changed);
#  - gc --dry-run changes nothing; gc compacts: du of data/ drops, fsck
#    exits 0, a second gc finds nothing to do, and after a remount every
#    block reads back byte-exact under its name (tree_dump identical);
#  - --rebuild-index after gc brings every block back, byte-exact, with its
#    name; so it does when a data file gc removed is put back (a crash
#    between the index commit and the unlink): a copy never loses to the
#    record it was copied from, and that file is removed by the next gc.
. "$(dirname "$0")/lib.sh"
KC_FAILS_CMD=" gc: "
# Small blocks, so that dead name records (a page each) weigh.
BLK=4096
N=60

du_data() {
	du -s --block-size=1 "$1/data" | cut -f1
}

# verify MNT: every kept block reads back byte-exact (O_DIRECT, by seed).
declare -A SEED=()
verify() {
	local k
	for k in "${!SEED[@]}"; do
		expect "$LP" load "$1/d$((k % 4))/k$k.bin" $BLK "${SEED[$k]}" = \
			"load: match"
	done
}

kc_init
t_target
MNT=$(realpath "$T_MNT")
DATA=$(realpath "$T_DATA")
mkdir -p "$MNT"/d0 "$MNT"/d1 "$MNT"/d2 "$MNT"/d3 || t_fail "mkdir"
for k in $(seq 1 $N); do
	expect "$LP" store "$MNT/d$((k % 4))/t$k.bin" $BLK $k = "store: stored"
	SEED[$k]=$k
done
"$KC" sync "$MNT" >/dev/null || t_fail "kvfsctl sync"
for k in $(seq 1 $N); do
	mv "$MNT/d$((k % 4))/t$k.bin" "$MNT/d$((k % 4))/k$k.bin" ||
		t_fail "mv t$k.bin"
done
# Most blocks go: every third is deleted, every third is replaced by a
# block stored under another name and renamed over it once saved.
for k in $(seq 1 $N); do
	p="$MNT/d$((k % 4))/k$k.bin"
	case $((k % 3)) in
	0)
		rm "$p" || t_fail "rm $p"
		unset "SEED[$k]"
		;;
	1)
		expect "$LP" store "$MNT/d$((k % 4))/new$k.bin" $BLK $((k + 1000)) \
			= "store: stored"
		SEED[$k]=$((k + 1000))
		;;
	esac
done
"$KC" sync "$MNT" >/dev/null || t_fail "kvfsctl sync"
for k in $(seq 1 3 $N); do
	mv -f "$MNT/d$((k % 4))/new$k.bin" "$MNT/d$((k % 4))/k$k.bin" ||
		t_fail "mv over k$k.bin"
done
# More deletions, so that the data files are mostly dead.
for k in $(seq 1 $((2 * N / 3))); do
	[ -n "${SEED[$k]:-}" ] && [ $((k % 7)) -ne 0 ] || continue
	rm "$MNT/d$((k % 4))/k$k.bin" || t_fail "rm k$k"
	unset "SEED[$k]"
done
NLEFT=${#SEED[@]}
verify "$MNT"
dump "$MNT" before
[ "$(grep -c ' reg ' "$T_TMP/before.tree")" -eq "$NLEFT" ] ||
	t_fail "tree_dump does not show $NLEFT blocks"

# Refused while mounted.
kc_fails "is being served by kvfs \(pid [0-9]+, mounted at $MNT\)" \
	"$KC" gc "$DATA"
kc_fails "is being served by kvfs" "$KC" gc --dry-run "$MNT"
t_umount "$T_MNT"
t_log "$N blocks stored, $NLEFT left after deletes and renames over them"

# Bad arguments and a locked data directory change nothing.
PLAIN=$(t_plain_dir plain)
sums "$DATA" >"$T_TMP/sums.before"
kc_run 0 "gc --help" "$KC" gc --help
has "gc --help" "^usage: kvfsctl gc "
has "gc --help" "^Exit status"
kc_fails "missing DATADIR" "$KC" gc
kc_fails "too many arguments" "$KC" gc "$DATA" "$DATA"
kc_fails "unknown option '--bogus'" "$KC" gc --bogus "$DATA"
kc_fails "--threshold wants a percentage from 1 to 100, not '0'" \
	"$KC" gc --threshold 0 "$DATA"
kc_fails "--threshold wants a percentage from 1 to 100, not '101'" \
	"$KC" gc --threshold 101 "$DATA"
kc_fails "--threshold wants a percentage from 1 to 100, not 'x'" \
	"$KC" gc --threshold x "$DATA"
kc_fails "option '--threshold' needs a value" "$KC" gc "$DATA" --threshold
kc_fails "No such file or directory" "$KC" gc "$T_TMP/none"
kc_fails "neither a kvfs mount point nor" "$KC" gc "$PLAIN"
# The lock's holder is the process we kill (flock's child would keep it).
(
	exec 9>>"$DATA/kvfs.lock"
	flock -x 9
	exec sleep 60
) &
holder=$!
for _ in $(seq 50); do
	flock -n -x "$DATA/kvfs.lock" true || break
	sleep 0.1
done
kc_fails "is locked by process [0-9]+: a kvfs serves it" "$KC" gc "$DATA"
kill "$holder"
wait "$holder" 2>/dev/null
kc_run 0 dry-run "$KC" gc --dry-run "$DATA"
has dry-run "^nothing changed \(dry run\)\$"
sums "$DATA" >"$T_TMP/sums.after"
t_compare "refusals-and-dry-run-change-nothing" "$T_TMP/sums.before" \
	"$T_TMP/sums.after"

# Keep the data files as they were, for the crash case below.
PRE=$(copy pre "$DATA")
D0=$(du_data "$DATA")
kc_run 0 gc "$KC" gc --json "$DATA"
cp "$T_TMP/out" "$T_TMP/gc.json"
D1=$(du_data "$DATA")
t_log "gc: du of data/ $D0 -> $D1 bytes; $(cat "$T_TMP/gc.json")"
[ "$D1" -lt "$D0" ] || t_fail "gc: du of data/ did not drop ($D0 -> $D1)"
reclaimed=$(json_num "$T_TMP/gc.json" bytes_reclaimed)
[ "$reclaimed" -gt 0 ] || t_fail "gc: no bytes_reclaimed"
[ $(($(json_num "$T_TMP/gc.json" compacted) +
	$(json_num "$T_TMP/gc.json" removed))) -ge 1 ] ||
	t_fail "gc: no data file compacted or removed"
[ "$(json_num "$T_TMP/gc.json" dead_name_records)" -gt 0 ] ||
	t_fail "gc: no dead name record dropped"
[ "$(json_num "$T_TMP/gc.json" skipped)" -eq 0 ] || t_fail "gc: skipped files"
kc_run 0 fsck-after-gc "$KC" fsck "$DATA"
has fsck-after-gc "^checked $NLEFT blocks .*: 0 damaged"
kc_run 0 gc-again "$KC" gc "$DATA"
has gc-again "^compacted 0, removed 0, skipped 0 data files"
[ "$(du_data "$DATA")" -le "$D1" ] || t_fail "the second gc grew data/"

# Remounted: every block under its name, byte-exact.
t_mount "$T_DATA" "$T_MNT"
verify "$MNT"
dump "$MNT" after-gc
t_compare "gc-keeps-every-block" "$T_TMP/before.tree" "$T_TMP/after-gc.tree"
t_umount "$T_MNT"
t_log "after gc every block reads back under its name"

# --rebuild-index after gc: names from the (copied) name records.
RB=$(copy rb "$DATA")
rm -f "$RB"/index.db "$RB"/index.db-wal "$RB"/index.db-shm
kc_run 0 rebuild "$KC" fsck --rebuild-index "$RB"
has rebuild "^rebuilt index.db from the data files: $NLEFT files, .* 0 left out\)"
RBM=$(t_plain_dir rbmnt)
t_mount "$RB" "$RBM"
verify "$RBM"
dump "$RBM" rebuilt
t_compare "rebuild-after-gc" "$T_TMP/before.tree" "$T_TMP/rebuilt.tree"
t_umount "$RBM"

# A crash after the index commit, before the unlink: the files gc removed
# are back, holding the very records that were copied. fsck is clean, a
# rebuild gives the same blocks, and gc removes those files.
CR=$(copy crash "$DATA")
nback=0
for f in "$PRE"/data/*.kvd; do
	[ -e "$CR/data/$(basename "$f")" ] && continue
	cp --sparse=always "$f" "$CR/data/" || t_fail "cp $f"
	nback=$((nback + 1))
done
[ "$nback" -ge 1 ] || t_fail "gc removed no data file"
kc_run 0 fsck-crash "$KC" fsck "$CR"
has fsck-crash "^checked $NLEFT blocks .*: 0 damaged"
CR2=$(copy crash2 "$CR")
rm -f "$CR2"/index.db "$CR2"/index.db-wal "$CR2"/index.db-shm
kc_run 0 rebuild-crash "$KC" fsck --rebuild-index "$CR2"
has rebuild-crash "^rebuilt index.db from the data files: $NLEFT files, .* 0 left out\)"
t_mount "$CR2" "$RBM"
verify "$RBM"
dump "$RBM" rebuilt-crash
t_compare "rebuild-with-both-copies" "$T_TMP/before.tree" \
	"$T_TMP/rebuilt-crash.tree"
t_umount "$RBM"
kc_run 0 gc-crash "$KC" gc --json "$CR"
[ "$(json_num "$T_TMP/out" removed)" -ge "$nback" ] ||
	t_fail "gc did not remove the $nback data files put back"
t_mount "$CR" "$RBM"
verify "$RBM"
t_umount "$RBM"
t_log "put-back data files: fsck clean, rebuild exact, gc removes them"
t_finish
