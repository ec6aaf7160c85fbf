#!/bin/bash
# SPDX-License-Identifier: MIT
# Recovery horizons (start-up does not read every stored block).
# After a kill -9 of an idle daemon, start-up reads nothing of the data
# files: the janitor recorded each file's horizon at its end. Every block
# still reads back byte-exact. A clean start forgets the horizon of a data
# file that is gone (a later file may get its number).
. "$(dirname "$0")/lib.sh"

NBLK=32
GONE_ID=4000000

t_init
[ "$T_MODE" = mount ] || t_finish
command -v sqlite3 >/dev/null || t_skip "no sqlite3 (Debian package sqlite3)"
T_DATA=$(t_plain_dir data)
T_MNT=$(t_plain_dir mnt)
SRC=$(t_plain_dir src)
t_mount "$T_DATA" "$T_MNT"

horizons() {
	sqlite3 -readonly "$T_DATA/index.db" "$1"
}

for i in $(seq "$NBLK"); do
	head -c $((2 * 1024 * 1024)) /dev/urandom >"$SRC/b$i"
	dd if="$SRC/b$i" of="$T_MNT/b$i" bs=1M oflag=direct status=none ||
		t_fail "storing b$i failed"
done
# The janitor records horizons every 200 ms.
sleep 1
n=$(horizons "SELECT count(*) FROM horizons")
[ "${n:-0}" -ge 1 ] || t_fail "no recovery horizon recorded ($n rows)"

pid=${T_PID[$T_MNT]}
kill -KILL "$pid"
{ wait "$pid"; } 2>/dev/null
unset "T_PID[$T_MNT]"
fusermount3 -u -z "$T_MNT"
t_mount "$T_DATA" "$T_MNT"
log=${T_LOG[$T_MNT]}
line=$(grep -m 1 'crash recovery: read' "$log") ||
	t_fail "no crash-recovery line in $log"
mib=$(sed -n 's/.*crash recovery: read \([0-9]*\) MiB.*/\1/p' <<<"$line")
t_log "after kill -9: $line"
[ "$mib" = 0 ] ||
	t_fail "recovery read $mib MiB of $((2 * NBLK)) MiB stored (want 0)"
for i in $(seq "$NBLK"); do
	cmp -s "$SRC/b$i" "$T_MNT/b$i" || t_fail "b$i differs after the crash"
done
t_umount "$T_MNT"

# A horizon for a data file that does not exist: gone after a clean start.
sqlite3 "$T_DATA/index.db" \
	"INSERT INTO horizons (file_id, off) VALUES ($GONE_ID, 4096)" ||
	t_fail "cannot add a horizon row"
t_mount "$T_DATA" "$T_MNT"
t_umount "$T_MNT"
n=$(horizons "SELECT count(*) FROM horizons WHERE file_id = $GONE_ID")
[ "$n" = 0 ] || t_fail "the horizon of a missing data file was kept"
n=$(horizons "SELECT count(*) FROM horizons")
[ "${n:-0}" -ge 1 ] || t_fail "the clean start dropped every horizon"
t_finish
