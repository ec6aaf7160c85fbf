#!/bin/bash
# SPDX-License-Identifier: MIT
# kvfsctl on an unmounted data directory. The store is filled
# through a real mount with vLLM's store sequences (temp name, rename, a
# rewrite over an existing name, an eviction) and unmounted, then:
#  - status reads the index and data files offline and says "not mounted";
#    stats, verdicts and clear refuse (exit 2);
#  - fsck of the clean store: exit 0; bad arguments: exit 16, a path that
#    is no data directory and a data directory locked by someone else:
#    exit 8, and nothing changed (fsck's statuses are e2fsck's);
#  - --rebuild-index after index.db is deleted, and with index.db present
#    (moved aside): every block comes back with its name, size and bytes
#    (tree_dump of the remounted store is identical, modes included: the
#    test's files are 0644 and its directories 0755, which is the rebuild's
#    rule);
#  - a data file truncated inside a record and payload bytes overwritten in
#    another: fsck reports exactly the blocks whose records the truncation
#    cut (SHORT) and the overwritten one (CORRUPT, with its chunk), exit 4;
#    --repair drops the short ones and keeps the corrupt one, exit 4 (damage
#    left), and so does fsck after it; after a remount the dropped names are
#    absent, the corrupt block fails to read, and every other block reads
#    back byte-exact;
#  - the same truncation alone: fsck exits 4, --repair drops the short
#    blocks and exits 1 (all repaired), fsck after it exits 0.
. "$(dirname "$0")/lib.sh"

kc_init
command -v sqlite3 >/dev/null || t_skip "no sqlite3 (Debian package sqlite3)"
t_target
MNT=$(realpath "$T_MNT")
DATA=$(realpath "$T_DATA")
for phase in 1 2; do
	t_run "$T_TMP/pop$phase" "$T_TMP/pop$phase.err" \
		"$VLLM_IO" populate "$MNT" $phase
done
mkdir -p "$MNT/other/dir two" || t_fail "mkdir"
for k in 1 2 3; do
	expect "$LP" store "$MNT/other/dir two/b$k%.bin" $((1048576 + 4096 * k + 7)) \
		$k = "store: stored"
done
# A rebuild cannot bring back directories with no file below them (kvfsctl(8)):
# remove the ones the eviction left, through the mount.
find "$MNT" -mindepth 1 -type d -empty -delete || t_fail "rmdir of empty dirs"
dump "$MNT" before
NBLK=$(grep -c ' reg ' "$T_TMP/before.tree")
t_umount "$T_MNT"
[ -e "$DATA/kvfs.sock" ] && t_fail "kvfs.sock left after the unmount"
t_log "store filled: $NBLK blocks"

# status offline; the live-only commands refuse.
kc_run 0 status "$KC" status "$DATA"
has status "^kvfs data directory, not mounted"
has status "^stored .* in $NBLK blocks"
has status "^dirty memory    - \(not mounted\)"
kc_run 0 status-json "$KC" status --json "$DATA"
has status-json '"mounted": false, "datadir": '
has status-json "\"blocks\": $NBLK, "
has status-json '"verdicts": null'
sums "$DATA" >"$T_TMP/sums.before"
kc_fails "stats: .*is not mounted" "$KC" stats "$DATA"
kc_fails "stats: .*is not mounted" "$KC" stats --watch 1 "$DATA"
kc_fails "verdicts: .*is not mounted" "$KC" verdicts "$DATA"
kc_fails "verdicts: .*is not mounted" "$KC" verdicts "$DATA" /other
kc_fails "clear: .*is not mounted" "$KC" clear "$DATA" /other/x
kc_fails "status: .*neither a kvfs mount point nor" "$KC" status "$MNT"

# fsck of the clean store; bad arguments change nothing.
kc_run 0 fsck "$KC" fsck "$DATA"
has fsck "^checked $NBLK blocks .*: 0 damaged"
kc_run 0 fsck-json "$KC" fsck --json "$DATA"
has fsck-json '"damaged": \[\], "short": 0, "corrupt": 0'
has fsck-json '"clean": true\}$'
KC_FAILS_STATUS=16
kc_fails "fsck: missing DATADIR" "$KC" fsck
kc_fails "fsck: too many arguments" "$KC" fsck "$DATA" "$DATA"
kc_fails "fsck: unknown option '--fast'" "$KC" fsck --fast "$DATA"
KC_FAILS_STATUS=8
kc_fails "fsck: .*No such file or directory" "$KC" fsck "$T_TMP/none"
kc_fails "fsck: .*neither a kvfs mount point nor" "$KC" fsck "$MNT"
# A daemon holds the lock (as kvfs does, with flock): fsck keeps out.
flock -x "$DATA/kvfs.lock" sleep 60 &
holder=$!
for _ in $(seq 50); do
	flock -n -x "$DATA/kvfs.lock" true || break
	sleep 0.1
done
kc_fails "fsck: .*is locked by process [0-9]+: a kvfs serves it" \
	"$KC" fsck --repair "$DATA"
kc_fails "fsck: .*is locked by process [0-9]+: a kvfs serves it" \
	"$KC" fsck --rebuild-index "$DATA"
KC_FAILS_STATUS=
kill "$holder"
wait "$holder" 2>/dev/null
sums "$DATA" >"$T_TMP/sums.after"
t_compare "offline-refusals-change-nothing" "$T_TMP/sums.before" \
	"$T_TMP/sums.after"

# --rebuild-index with index.db deleted: everything comes back.
RB=$(copy rb)
rm -f "$RB"/index.db "$RB"/index.db-wal "$RB"/index.db-shm
kc_run 0 rebuild "$KC" fsck --rebuild-index "$RB"
has rebuild "^rebuilt index.db from the data files: $NBLK files, .* 0 left out\); there was no old index"
has rebuild "^checked $NBLK blocks .*: 0 damaged"
RBM=$(t_plain_dir rbmnt)
t_mount "$RB" "$RBM"
dump "$RBM" rebuilt
t_compare "rebuild-without-index" "$T_TMP/before.tree" "$T_TMP/rebuilt.tree"
t_run "$T_TMP/rb.verify" "$T_TMP/rb.verify.err" "$VLLM_IO" verify "$RBM" 2
t_expect_none "$T_TMP/rb.verify" 'CORRUPT|whole but|short|open/read' \
	"vLLM load of the rebuilt store"
kc_run 0 status-rebuilt "$KC" status --json "$RBM"
has status-rebuilt "\"blocks\": $NBLK, "
t_umount "$RBM"

# --rebuild-index with index.db in place: it is moved aside, not lost.
RB2=$(copy rb2)
kc_run 0 rebuild2 "$KC" fsck --rebuild-index --json "$RB2"
has rebuild2 "\"rebuilt\": \{\"files\": $NBLK, "
has rebuild2 '"old_index": "index\.db\.old\.[0-9]{8}T[0-9]{6}Z"'
ls "$RB2"/index.db.old.* >/dev/null 2>&1 || t_fail "no index.db.old.* in $RB2"
cmp -s "$DATA/index.db" "$(ls "$RB2"/index.db.old.* | head -n 1)" ||
	t_fail "the index moved aside differs from the old one"
t_mount "$RB2" "$RBM"
dump "$RBM" rebuilt2
t_compare "rebuild-over-index" "$T_TMP/before.tree" "$T_TMP/rebuilt2.tree"
t_umount "$RBM"
t_log "rebuild: every block back, byte-exact, with its name and size"

# Damage: a data file truncated inside a record, payload bytes overwritten
# in another record.
DM=$(copy dmg)
records "$DM" >"$T_TMP/records"
[ "$(wc -l <"$T_TMP/records")" -eq "$NBLK" ] ||
	t_fail "sqlite3 found $(wc -l <"$T_TMP/records") records, want $NBLK"
# The data file with the most records; cut it inside its second record
# (its first if it has one), so earlier records stay whole.
F=$(awk '{ print $(NF - 3) }' "$T_TMP/records" | sort | uniq -c | sort -rn |
	awk 'NR == 1 { print $2 }')
read -r A_OFF A_HDR < <(awk -v f="$F" '$(NF - 3) == f { n++; o = $(NF - 2);
	h = $(NF - 1); if (n == 2) exit } END { print o, h }' "$T_TMP/records")
CUT=$((A_OFF + A_HDR + 1000))
FNAME=$(printf '%s/data/%06d.kvd' "$DM" "$F")
# Blocks whose record ends past the cut: provably short.
awk -v f="$F" -v cut=$CUT '$(NF - 3) == f {
	end = $(NF - 2) + $(NF - 1) + int(($NF + 4095) / 4096) * 4096
	if (end > cut) { NF -= 4; print $0 " short" } }' \
	"$T_TMP/records" >"$T_TMP/expect.short"
# The block to corrupt: one in another data file, or one before the cut.
read -r B_FILE B_OFF B_HDR B_LEN < <(awk -v f="$F" -v cut=$CUT '
	{ end = $(NF - 2) + $(NF - 1) + int(($NF + 4095) / 4096) * 4096 }
	$(NF - 3) != f || end <= cut { print $(NF - 3), $(NF - 2), $(NF - 1), $NF; exit }' \
	"$T_TMP/records")
[ -n "${B_FILE:-}" ] || t_fail "no record left to corrupt"
B_PATH=$(awk -v f="$B_FILE" -v o="$B_OFF" '$(NF - 3) == f && $(NF - 2) == o {
	NF -= 4; print }' "$T_TMP/records")
BPOS=$((B_LEN > 200000 ? 200000 : B_LEN / 2))
CHUNK=$((BPOS / 131072))
BNAME=$(printf '%s/data/%06d.kvd' "$DM" "$B_FILE")
cp "$BNAME" "$T_TMP/b.orig"
printf 'KVFSCTL-CORRUPT!' | dd of="$BNAME" bs=1 seek=$((B_OFF + B_HDR + BPOS)) \
	conv=notrunc status=none || t_fail "overwrite in $BNAME"
cmp -s "$BNAME" "$T_TMP/b.orig" && t_fail "the overwrite changed nothing"
truncate -s $CUT "$FNAME" || t_fail "truncate $FNAME"
# The same cut alone, in another copy: damage that --repair repairs whole.
SH=$(copy short)
truncate -s $CUT "$(printf '%s/data/%06d.kvd' "$SH" "$F")" ||
	t_fail "truncate in $SH"
{
	cat "$T_TMP/expect.short"
	echo "$B_PATH corrupt"
} | sort >"$T_TMP/expect.damaged"
t_log "damage: $FNAME cut at $CUT ($(wc -l <"$T_TMP/expect.short") blocks" \
	"short), $B_PATH overwritten at payload byte $BPOS (chunk $CHUNK)"

kc_run 4 fsck-damaged "$KC" fsck --json "$DM"
has fsck-damaged '"clean": false\}$'
sed 's/}, {/}\n{/g' "$T_TMP/out" |
	sed -n 's/.*"path": "\([^"]*\)", "ino": [0-9]*, "reason": "\([a-z]*\)".*/\1 \2/p' |
	sort >"$T_TMP/got.damaged"
t_compare "fsck-reports-exactly-the-damaged-blocks" "$T_TMP/expect.damaged" \
	"$T_TMP/got.damaged"
kc_run 4 fsck-damaged-text "$KC" fsck "$DM"
has fsck-damaged-text "^CORRUPT +$B_PATH: CRC mismatch at chunk $CHUNK "
has fsck-damaged-text "^SHORT +.*: data file $(printf %06d "$F").kvd ends at $CUT, before the record's end at [0-9]+ \(provably short\)\$"
t_log "fsck found exactly the damaged blocks"

# The corrupt block is kept: damage is left.
kc_run 4 repair "$KC" fsck --repair "$DM"
[ "$(grep -c '^SHORT .* -> dropped$' "$T_TMP/out")" -eq \
	"$(wc -l <"$T_TMP/expect.short")" ] || {
	t_show "$T_TMP/out"
	t_fail "--repair did not drop every short block"
}
has repair "^CORRUPT +$B_PATH: .* -> kept\$"
kc_run 4 fsck-after-repair "$KC" fsck --json "$DM"
has fsck-after-repair '"short": 0, "corrupt": 1, '
t_log "--repair dropped the short blocks and kept the corrupt one"

# Short blocks alone: found (4), all dropped by --repair (1), gone (0).
NSHORT=$(wc -l <"$T_TMP/expect.short")
kc_run 4 fsck-short "$KC" fsck "$SH"
[ "$(grep -c '^SHORT ' "$T_TMP/out")" -eq "$NSHORT" ] || {
	t_show "$T_TMP/out"
	t_fail "fsck-short: want $NSHORT SHORT lines"
}
kc_run 1 repair-short "$KC" fsck --repair "$SH"
[ "$(grep -c '^SHORT .* -> dropped$' "$T_TMP/out")" -eq "$NSHORT" ] || {
	t_show "$T_TMP/out"
	t_fail "repair-short: want $NSHORT blocks dropped"
}
kc_run 0 fsck-after-repair-short "$KC" fsck --json "$SH"
has fsck-after-repair-short '"damaged": \[\], "short": 0, "corrupt": 0'
has fsck-after-repair-short '"clean": true\}$'
t_log "short blocks only: fsck 4, --repair 1, fsck 0"

# Remounted: the dropped names are gone, the corrupt block fails to read,
# everything else reads back byte-exact.
DMM=$(t_plain_dir dmgmnt)
t_mount "$DM" "$DMM"
while read -r line; do
	p=${line% short}
	expect "$LP" access "$DMM$p" = "access: ENOENT"
done <"$T_TMP/expect.short"
cat "$DMM$B_PATH" >/dev/null 2>&1 && t_fail "the corrupt block reads without error"
dump "$DMM" repaired
# Expected: the tree before, without the dropped and the corrupt block.
sed 's/ [a-z]*$//' "$T_TMP/expect.damaged" >"$T_TMP/damaged.paths"
# (tree_dump lines start with the path, relative, then a space.)
without_damaged() {
	awk 'NR == FNR { gone[++n] = substr($0, 2) " "; next }
		{ for (i = 1; i <= n; i++) if (index($0, gone[i]) == 1) next
		  print }' "$T_TMP/damaged.paths" "$1"
}
without_damaged "$T_TMP/before.tree" >"$T_TMP/before.kept"
without_damaged "$T_TMP/repaired.tree" >"$T_TMP/repaired.kept"
t_compare "repaired-store-keeps-the-rest" "$T_TMP/before.kept" \
	"$T_TMP/repaired.kept"
t_umount "$DMM"
t_finish
