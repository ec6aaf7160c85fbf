#!/bin/bash
# SPDX-License-Identifier: MIT
# kvfsctl against a live mount:
#  - every command's --help, and --version;
#  - status by mount point and by data directory, text and JSON: blocks,
#    bytes, data files, physical use, the verdict cache;
#  - the stats file is Prometheus text (promcheck.awk) and its counters
#    move with traffic (lookups, appends); kvfsctl stats agrees with it;
#    stats --watch prints a header and one line of rates per interval;
#  - verdicts: totals, a hit, a miss, a name with a space and a '%';
#  - a failed read quarantines a block (fault injection), verdicts shows
#    it, clear lifts it and the next lookup finds the block again;
#  - bad arguments: exit 2, a "kvfsctl CMD: ..." message, nothing on
#    stdout, and nothing changed in the mount or the verdict cache;
#  - fsck refuses a mounted data directory (exit 8) and an unknown option
#    (exit 16);
#  - the control socket is gone after the unmount.
. "$(dirname "$0")/lib.sh"
PROMCHECK=${PROMCHECK:?PROMCHECK is not set}
BLK=$((2 * 1024 * 1024))

# prom FILE NAME: the value of sample kvfs_NAME.
prom() {
	awk -v k="kvfs_$2" '$1 == k { print $2; found = 1 }
		END { if (!found) exit 1 }' "$1" ||
		t_fail "no sample kvfs_$2 in $1"
}

kc_init
t_target
MNT=$(realpath "$T_MNT")
DATA=$(realpath "$T_DATA")
LEAF="$MNT/model_r0/abc/de_g0"
mkdir -p "$LEAF" "$MNT/odd/sp ace%25" || t_fail "mkdir in $MNT"
for k in 1 2 3 4; do
	expect "$LP" store "$LEAF/k$k.bin" $BLK $k = "store: stored"
done
expect "$LP" store "$MNT/odd/sp ace%25/b 1%.bin" 8192 9 = "store: stored"
NBLK=5

# --help and --version.
kc_ok "--help" "$KC" --help
has "--help" "^usage: kvfsctl COMMAND"
for c in status stats fsck verdicts clear; do
	kc_ok "$c --help" "$KC" "$c" --help
	has "$c --help" "^usage: kvfsctl $c"
	has "$c --help" "^Exit status"
	kc_ok "help $c" "$KC" help "$c"
	has "help $c" "^usage: kvfsctl $c"
done
kc_ok "--version" "$KC" --version
has "--version" "^kvfsctl [0-9]"

# status, by mount point and by data directory.
kc_ok status "$KC" status "$MNT"
has status "^kvfs .*, mounted at $MNT \(pid [0-9]+\), up "
has status "^data directory  $DATA\$"
has status "^capacity .*backing filesystem .* free"
has status "^stored          8.01 MiB in $NBLK blocks \(regular files\)"
has status "^physical .* in [1-9][0-9]* data files"
has status "^dirty memory    "
has status "^verdict cache   [0-9]+ verdicts, 0 quarantined"
kc_ok status-json "$KC" status --json "$MNT"
cp "$T_TMP/out" "$T_TMP/status.json"
has status-json '"mounted": true'
[ "$(json_num "$T_TMP/status.json" blocks)" -eq $NBLK ] ||
	t_fail "status --json: blocks is not $NBLK"
[ "$(json_num "$T_TMP/status.json" stored_bytes)" -eq $((4 * BLK + 8192)) ] ||
	t_fail "status --json: stored_bytes is not the sum of the sizes"
[ "$(json_num "$T_TMP/status.json" physical_bytes)" -ge $((4 * BLK)) ] ||
	t_fail "status --json: physical_bytes below what was stored"
[ "$(json_num "$T_TMP/status.json" data_files)" -ge 1 ] ||
	t_fail "status --json: no data files"
kc_ok status-datadir "$KC" status "$DATA"
has status-datadir "mounted at $MNT"
t_log "status: $NBLK blocks, by mount point and by data directory"

# The stats file is Prometheus text, and its counters move with traffic.
cat "$MNT/.kvfs/stats" >"$T_TMP/stats.1" || t_fail "cannot read .kvfs/stats"
awk -f "$PROMCHECK" "$T_TMP/stats.1" >&2 ||
	t_fail ".kvfs/stats is not Prometheus text"
kc_ok stats-json "$KC" stats --json "$MNT"
has stats-json '^\{"summary": \{"lookups": [0-9]+'
lk0=$(($(prom "$T_TMP/stats.1" lookup_hits_total) +
	$(prom "$T_TMP/stats.1" lookup_misses_total)))
ap0=$(prom "$T_TMP/stats.1" store_appends_total)
rq0=$(prom "$T_TMP/stats.1" fuse_requests_total)
for k in 5 6 7; do
	expect "$LP" store "$LEAF/k$k.bin" $BLK $k = "store: stored"
done
for k in 1 2 3 4 5; do
	expect "$LP" access "$LEAF/absent$k.bin" = "access: ENOENT"
done
cat "$MNT/.kvfs/stats" >"$T_TMP/stats.2" || t_fail "cannot read .kvfs/stats"
awk -f "$PROMCHECK" "$T_TMP/stats.2" >&2 ||
	t_fail ".kvfs/stats is not Prometheus text after traffic"
lk1=$(($(prom "$T_TMP/stats.2" lookup_hits_total) +
	$(prom "$T_TMP/stats.2" lookup_misses_total)))
ap1=$(prom "$T_TMP/stats.2" store_appends_total)
rq1=$(prom "$T_TMP/stats.2" fuse_requests_total)
# 3 stores (each an access() miss and a temp-name lookup) and 5 misses.
[ $((lk1 - lk0)) -ge 8 ] || t_fail "lookups moved by $((lk1 - lk0)), want >= 8"
[ $((ap1 - ap0)) -ge 3 ] || t_fail "appends moved by $((ap1 - ap0)), want >= 3"
# Each store at least LOOKUP twice, CREATE, WRITE, FLUSH, RELEASE and
# RENAME; each miss a LOOKUP.
[ $((rq1 - rq0)) -ge 26 ] ||
	t_fail "FUSE requests moved by $((rq1 - rq0)), want >= 26"
t_log "stats: Prometheus text; lookups +$((lk1 - lk0)), appends" \
	"+$((ap1 - ap0)), FUSE requests +$((rq1 - rq0))"
kc_ok stats "$KC" stats "$MNT"
for w in lookups probes stores loads drops quarantines invalidations errors \
	write-behind "memory waits" read-ahead; do
	has stats "^$w +[0-9]+"
done
# sync: every file closed before it is saved; then the queue is empty.
head -c 3000000 /dev/urandom >"$T_TMP/sync.src" || t_fail "urandom"
cp "$T_TMP/sync.src" "$MNT/model_r0/synced.bin" || t_fail "cp to the mount"
kc_ok sync "$KC" sync "$MNT"
has sync "^synced $MNT: [0-9]+ files were queued, waited [0-9]+ ms$"
kc_ok sync-json "$KC" sync --json "$DATA"
[ "$(json_num "$T_TMP/out" queued_files)" = 0 ] ||
	t_fail "sync --json: files still queued after a sync"
[ "$(awk '$1 == "kvfs_wb_queued_files" { print $2 }' "$MNT/.kvfs/stats")" \
	= 0 ] || t_fail "kvfs_wb_queued_files is not 0 after a sync"
cmp -s "$T_TMP/sync.src" "$MNT/model_r0/synced.bin" ||
	t_fail "the synced file does not read back"
kc_ok status-wb "$KC" status "$MNT"
has status-wb "^write-behind: +0 files queued"
kc_ok stats-json "$KC" stats --json "$DATA"
lk2=$(json_num "$T_TMP/out" lookups)
[ "$lk2" -ge "$lk1" ] || t_fail "stats --json lookups $lk2 < $lk1"

# stats --watch while blocks are stored: a header, then one line of rates
# per interval, and the appends show up in them.
(for k in $(seq 20 40); do
	"$LP" store "$LEAF/w$k.bin" 65536 "$k" >/dev/null
	sleep 0.05
done) &
bg=$!
kc_ok stats-watch "$KC" stats --watch 0.5 --count 3 "$MNT"
wait $bg
[ "$(wc -l <"$T_TMP/out")" -eq 4 ] || {
	t_show "$T_TMP/out"
	t_fail "stats --watch --count 3: want a header and 3 lines"
}
has stats-watch "^ *lookup/s +probe/s +coal/s +store/s +stMiB/s +load/s"
awk 'NR > 1 && $4 > 0 { moved = 1 } END { exit !moved }' "$T_TMP/out" || {
	t_show "$T_TMP/out"
	t_fail "stats --watch: no store/s above 0 while storing"
}
kc_ok stats-watch-json "$KC" stats --json --watch 0.2 --count 2 "$MNT"
[ "$(grep -c '^{"interval_seconds": ' "$T_TMP/out")" -eq 2 ] ||
	t_fail "stats --json --watch: want 2 JSON lines"
t_log "stats --watch: header and rates"

# verdicts: totals, a hit, a miss, an odd name; absolute paths work too.
kc_ok verdicts "$KC" verdicts "$MNT"
has verdicts "^verdicts +[0-9]+ held: "
has verdicts "^probes +[0-9]+ batches"
expect "$LP" access "$LEAF/k1.bin" = "access: OK"
kc_ok verdict-hit "$KC" verdicts "$MNT" model_r0/abc/de_g0/k1.bin
has verdict-hit "^path +/model_r0/abc/de_g0/k1.bin "
has verdict-hit "^index +exists: inode [0-9]+, $BLK bytes"
has verdict-hit "^verdict +resolved, hit"
kc_ok verdict-abs "$KC" verdicts "$MNT" "$LEAF/k1.bin"
has verdict-abs "^verdict +resolved, hit"
kc_ok verdict-miss "$KC" verdicts "$DATA" /model_r0/abc/de_g0/absent1.bin
has verdict-miss "^index +no such name"
has verdict-miss "^verdict +resolved, miss"
expect "$LP" access "$MNT/odd/sp ace%25/b 1%.bin" = "access: OK"
kc_ok verdict-odd "$KC" verdicts --json "$MNT" "odd/sp ace%25/b 1%.bin"
has verdict-odd '"name": "b 1%.bin"'
has verdict-odd '"result": "hit"'
t_log "verdicts: totals, hit, miss, odd names"

if [ "${KVFS_FAULT_INJECTION:-0}" = 1 ]; then
	K="$LEAF/k2.bin"
	expect "$LP" setxattr "$K" user.kvfs.fault.read 5 = "setxattr: OK"
	expect "$LP" load "$K" $BLK 2 = "load: read EIO"
	expect "$LP" access "$K" = "access: ENOENT"
	kc_ok verdict-q "$KC" verdicts "$MNT" model_r0/abc/de_g0/k2.bin
	has verdict-q "^verdict +resolved, miss, quarantined"
	kc_ok status-q "$KC" status "$MNT"
	has status-q "^verdict cache .* 1 quarantined"
	# Still quarantined: the kernel and the verdict cache say "absent".
	expect "$LP" access "$K" = "access: ENOENT"
	kc_ok clear "$KC" clear "$MNT" "$K"
	has clear "^cleared the verdict of /model_r0/abc/de_g0/k2.bin \(was: miss, quarantined\)"
	kc_ok verdict-cleared "$KC" verdicts "$MNT" model_r0/abc/de_g0/k2.bin
	has verdict-cleared "^verdict +none held"
	# The next lookup asks the index again: the block is there.
	expect "$LP" access "$K" = "access: OK"
	expect "$LP" setxattr "$K" user.kvfs.fault.read 0 = "setxattr: OK"
	expect "$LP" load "$K" $BLK 2 = "load: match"
	kc_ok clear-none "$KC" clear --json "$MNT" model_r0/abc/de_g0/absent9.bin
	has clear-none '"changed": false'
	grep -q "cleared the verdict of /model_r0/abc/de_g0/k2.bin" \
		"${T_LOG[$T_MNT]}" || t_fail "the daemon did not log the clear"
	t_log "quarantine shown by verdicts and status, lifted by clear"
else
	t_log "fault injection not compiled in: no quarantine to clear"
fi

# Bad arguments change nothing.
PLAIN=$(t_plain_dir plain)
t_run "$T_TMP/tree.before" "$T_TMP/tree.err" "$TREE_DUMP" -C -i .kvfs "$MNT"
"$KC" verdicts --json "$MNT" >"$T_TMP/verdicts.before" ||
	t_fail "verdicts --json"
kc_fails ": missing COMMAND" "$KC"
kc_fails "unknown command 'bogus'" "$KC" bogus
kc_fails "unknown command 'bogus'" "$KC" help bogus
kc_fails "status: missing MOUNTPOINT" "$KC" status
kc_fails "status: too many arguments" "$KC" status "$MNT" "$MNT"
kc_fails "status: unknown option '--bogus'" "$KC" status --bogus "$MNT"
kc_fails "status: .*No such file or directory" "$KC" status "$T_TMP/none"
kc_fails "status: .*neither a kvfs mount point nor" "$KC" status "$PLAIN"
kc_fails "stats: --watch wants" "$KC" stats --watch 0 "$MNT"
kc_fails "stats: --watch wants" "$KC" stats --watch abc "$MNT"
kc_fails "stats: --count wants" "$KC" stats --watch 1 --count 0 "$MNT"
kc_fails "stats: --count needs --watch" "$KC" stats --count 2 "$MNT"
kc_fails "stats: option '--watch' needs a value" "$KC" stats "$MNT" --watch
kc_fails "verdicts: .*\"\.\.\" is not allowed" \
	"$KC" verdicts "$MNT" model_r0/../model_r0/abc
kc_fails "verdicts: .*does not exist \(ENOENT\)" "$KC" verdicts "$MNT" nodir/x
kc_fails "verdicts: .*not a directory \(ENOTDIR\)" \
	"$KC" verdicts "$MNT" model_r0/abc/de_g0/k1.bin/x
kc_fails "verdicts: .*root directory has no verdict" "$KC" verdicts "$MNT" /
kc_fails "verdicts: .*control files have no verdicts" \
	"$KC" verdicts "$MNT" .kvfs/stats
kc_fails "verdicts: too many arguments" "$KC" verdicts "$MNT" a b
kc_fails "clear: missing MOUNTPOINT\|DATADIR PATH" "$KC" clear "$MNT"
kc_fails "clear: PATH is empty" "$KC" clear "$MNT" ""
kc_fails "sync: too many arguments" "$KC" sync "$MNT" x
kc_fails "sync: .*neither a kvfs mount point nor" "$KC" sync "$PLAIN"
kc_fails "clear: .*does not exist \(ENOENT\)" "$KC" clear "$MNT" nodir/k1.bin
kc_fails "clear: .*neither a kvfs mount point nor" "$KC" clear "$PLAIN" /x
# fsck's statuses are e2fsck's: 8 operational error, 16 usage error.
KC_FAILS_STATUS=8 kc_fails \
	"fsck: .*is being served by kvfs \(pid [0-9]+, mounted at" \
	"$KC" fsck "$MNT"
KC_FAILS_STATUS=8 kc_fails \
	"fsck: .*is being served by kvfs \(pid [0-9]+, mounted at" \
	"$KC" fsck --repair "$DATA"
KC_FAILS_STATUS=8 kc_fails "fsck: .*is being served by kvfs" \
	"$KC" fsck --rebuild-index "$DATA"
KC_FAILS_STATUS=16 kc_fails "fsck: unknown option '--bogus'" \
	"$KC" fsck --bogus "$DATA"
"$KC" verdicts --json "$MNT" >"$T_TMP/verdicts.after" ||
	t_fail "verdicts --json"
t_run "$T_TMP/tree.after" "$T_TMP/tree.err" "$TREE_DUMP" -C -i .kvfs "$MNT"
t_compare "bad-arguments-namespace" "$T_TMP/tree.before" "$T_TMP/tree.after"
t_compare "bad-arguments-verdicts" "$T_TMP/verdicts.before" \
	"$T_TMP/verdicts.after"
[ -e "$DATA/index.db.rebuild" ] && t_fail "a refused fsck left a rebuild"
ls "$DATA" | grep -q '^index\.db\.old\.' && t_fail "a refused fsck moved the index"

# The socket is the daemon's: there while it runs, gone after.
[ -S "$DATA/kvfs.sock" ] || t_fail "no $DATA/kvfs.sock while mounted"
[ "$(stat -c %a "$DATA/kvfs.sock")" = 600 ] || t_fail "kvfs.sock is not 0600"
t_umount "$T_MNT"
[ -e "$DATA/kvfs.sock" ] && t_fail "$DATA/kvfs.sock is still there"
t_finish
