#!/bin/bash
# SPDX-License-Identifier: MIT
# kvfsctl fsck --rebuild-index of an unmounted data directory whose
# index.db (with -wal and -shm) was deleted: the rebuild restores the final
# namespace, not an older one, and loses no block whose record is intact
# (kvfsctl(8), kvfs(7)). Each case runs on a store of its own, in a
# subshell, so that one failing case does not hide the others; the test
# fails if any does. CTL_REBUILD_CASES picks cases (default "A B B2 C").
#  A  directory renames: 200 blocks stored with the engine's sequence (temp
#     name, rename) in a tree of directories; a directory holding 50 of
#     them renamed, directories inside it renamed and moved, a file moved
#     out of it, a new directory made under its old name and blocks stored
#     there under names the old directory had. The rebuilt mount lists the
#     same tree (tree_dump: paths, types, modes, sizes, bytes) and every
#     block loads byte-exact.
#  B  20 blocks of 1 MiB; the data file with most of them is cut near half
#     its size, where the name record of a block stored before starts
#     (b_cut), so that a block whose data record is whole loses its rename:
#     fsck reports exactly the blocks whose records the cut reaches (SHORT,
#     as the index's record offsets say) and the block whose rename it
#     took (NAME), and exits 4; --repair fixes that name and exits 1; fsck
#     then exits 0; the rebuilt mount holds every other block under
#     its final path, byte-exact, and nothing else, before and after a
#     remount (the first mount's start-up sweep of stale temporary files
#     has run by then).
#  B2 as B without fsck --repair: every intact block is under its final
#     path or in /lost+found under its temporary name, ".", its inode
#     number (which is its st_ino); the rebuild names each such file in its
#     output and exits 1 when there is one, 0 when not; none is lost, none
#     is there twice, and a remount keeps them all.
#  C  hard links and special files: a block with a second name in another
#     directory, a file with three names one of which is removed, a name
#     renamed over another file, a FIFO, a character and a block device
#     node (never opened), a unix socket, a symbolic link, and a FIFO made
#     and removed. The mount lists what a plain directory given the same
#     calls lists (tree_dump -C -I -r: types, modes, st_nlink, st_rdev,
#     which names are one file, bytes, link targets), and so does it after
#     a remount and after a rebuild; names of one file have one st_ino and
#     the same bytes, removed names stay gone. A name unlinked while a
#     descriptor is open: the descriptor and the other name read the bytes;
#     with every name gone, the descriptor still does.
. "$(dirname "$0")/lib.sh"

# rebuild_index DATADIR: deletes the index and rebuilds it; the exit
# status is left in RB_RC, the output in $T_TMP/out (and $T_TMP/err).
rebuild_index() {
	rm -f "$1/index.db" "$1/index.db-wal" "$1/index.db-shm"
	"$KC" fsck --rebuild-index "$1" >"$T_TMP/out" 2>"$T_TMP/err"
	RB_RC=$?
	t_log "rebuild: exit $RB_RC: $(grep '^rebuilt ' "$T_TMP/out")"
}

# rb_status WANT...: RB_RC must be one of WANT.
rb_status() {
	local w
	for w in "$@"; do
		[ "$RB_RC" -eq "$w" ] && return 0
	done
	t_show "$T_TMP/err"
	t_show "$T_TMP/out"
	t_fail "rebuild: exit status $RB_RC, want $*"
}

# files MNT: the regular files under MNT, relative, sorted.
files() {
	(cd "$1" && find . -type f -printf '%P\n') | LC_ALL=C sort
}

# load MNT REL SIZE SEED: the block reads back byte-exact (O_DIRECT).
load() {
	expect "$LP" load "$1/$2" "$3" "$4" = "load: match"
}

# --- A: directory renames --------------------------------------------------

declare -A A_SIZE=() A_SEED=()

# a_store REL SEED: a block stored under REL with the engine's sequence.
a_store() {
	local size=$((8192 + 13 * $2))
	expect "$LP" store "$MNT/$1" $size "$2" = "store: stored"
	A_SIZE[$1]=$size
	A_SEED[$1]=$2
}

# a_mv OLD NEW: a rename through the mount; the expected paths follow it.
a_mv() {
	local p n
	mv "$MNT/$1" "$MNT/$2" || t_fail "mv $1 $2"
	for p in "${!A_SIZE[@]}"; do
		case $p in
		"$1" | "$1"/*) n=$2${p#"$1"} ;;
		*) continue ;;
		esac
		A_SIZE[$n]=${A_SIZE[$p]}
		A_SEED[$n]=${A_SEED[$p]}
		unset "A_SIZE[$p]" "A_SEED[$p]"
	done
}

a_verify() {
	local p
	for p in "${!A_SIZE[@]}"; do
		load "$1" "$p" "${A_SIZE[$p]}" "${A_SEED[$p]}"
	done
}

case_A() {
	local d e k=0 n
	t_target
	MNT=$(realpath "$T_MNT")
	DATA=$(realpath "$T_DATA")
	for d in 0 1 2 3; do
		for e in 0 1 2 3 4; do
			mkdir -p "$MNT/m/d$d/e$e" || t_fail "mkdir"
			for _ in $(seq 10); do
				k=$((k + 1))
				a_store "m/d$d/e$e/k$k.bin" $k
			done
		done
	done
	[ ${#A_SIZE[@]} -eq 200 ] || t_fail "stored ${#A_SIZE[@]} blocks"
	# m/d1 holds 50 blocks; it is renamed, then directories inside it.
	a_mv m/d1 m/r1
	a_mv m/r1/e2 m/r1/f2
	a_mv m/r1/e3 m/d2/g3
	a_mv m/d3/e4 m/r1/e4/deeper
	a_mv m/r1/e0/k51.bin m/d0/e1/moved.bin
	# The old name again, with blocks under names it had before.
	mkdir -p "$MNT/m/d1/e0" "$MNT/m/d1/e2" || t_fail "mkdir under old name"
	for k in 52 53 54 71 72; do
		n=m/d1/e$(((k - 51) / 10))/k$k.bin
		a_store "$n" $((1000 + k))
	done
	[ -e "$MNT/m/r1/e0/k52.bin" ] || t_fail "m/r1/e0/k52.bin is gone"
	n=$(find "$MNT" -type d -empty | wc -l)
	[ "$n" -eq 0 ] || t_fail "$n empty directories (a rebuild drops them)"
	a_verify "$MNT"
	dump "$MNT" before
	n=$(grep -c ' reg ' "$T_TMP/before.tree")
	[ "$n" -eq ${#A_SIZE[@]} ] || t_fail "tree_dump lists $n blocks"
	t_umount "$T_MNT"
	t_log "${#A_SIZE[@]} blocks stored, directories renamed"

	# What the mount shows first, then what the rebuild said.
	rebuild_index "$DATA"
	cp "$T_TMP/out" "$T_TMP/rebuild.out"
	t_mount "$DATA" "$T_MNT"
	dump "$MNT" rebuilt
	t_compare "A-rebuild-restores-the-renamed-tree" "$T_TMP/before.tree" \
		"$T_TMP/rebuilt.tree" 0 "before" "rebuilt"
	a_verify "$MNT"
	t_log "every block loads byte-exact under its final path"
	cp "$T_TMP/rebuild.out" "$T_TMP/out"
	rb_status 0
	has rebuild "^rebuilt index.db from the data files: ${#A_SIZE[@]} files, .* 0 left out\)"
}

# --- B, B2: a data file cut in half --------------------------------------

B_N=20
B_BLK=1048576

# b_store: 20 blocks of 1 MiB stored and unmounted; $T_TMP/records holds
# their records. The data file F with the most of them is cut at CUT
# (b_cut): $T_TMP/short has the paths of the records the cut reaches,
# $T_TMP/intact the others (paths relative to the root).
b_store() {
	local k f n
	t_target
	MNT=$(realpath "$T_MNT")
	DATA=$(realpath "$T_DATA")
	mkdir "$MNT/b" || t_fail "mkdir"
	for k in $(seq $B_N); do
		expect "$LP" store "$MNT/b/k$k.bin" $B_BLK "$k" = "store: stored"
	done
	t_umount "$T_MNT"
	records "$DATA" >"$T_TMP/records"
	n=$(wc -l <"$T_TMP/records")
	[ "$n" -eq $B_N ] || t_fail "the index has $n records, want $B_N"
	# The data file with the most records (the lowest id of those).
	F=$(awk '{ print $(NF - 3) }' "$T_TMP/records" | sort -n | uniq -c |
		sort -k1,1nr -k2,2n | awk 'NR == 1 { print $2 }')
	f=$(printf '%s/data/%06d.kvd' "$DATA" "$F")
	[ -f "$f" ] || t_fail "no $f"
	b_cut "$f"
	# A record is short when it ends past the cut (header, then the
	# payload padded to 4 KiB: kvfs(5)).
	awk -v cut="$CUT" -v f="$F" '{
		end = $(NF - 2) + $(NF - 1) + int(($NF + 4095) / 4096) * 4096
		state = $(NF - 3) == f && end > cut ? "short" : "intact"
		NF -= 4
		print substr($0, 2), state }' \
		"$T_TMP/records" >"$T_TMP/state"
	awk '$NF == "short" { print $1 }' "$T_TMP/state" | LC_ALL=C sort \
		>"$T_TMP/short"
	awk '$NF == "intact" { print $1 }' "$T_TMP/state" | LC_ALL=C sort \
		>"$T_TMP/intact"
	n=$(wc -l <"$T_TMP/short")
	[ "$n" -gt 0 ] && [ "$n" -lt $B_N ] ||
		t_fail "the cut at $CUT reaches $n of $B_N records"
	truncate -s "$CUT" "$f" || t_fail "truncate $f"
	t_log "$B_N blocks stored; data file $F cut at $CUT: $n short," \
		"$(wc -l <"$T_TMP/intact") intact"
}

# headers KVD: "offset type inode path" of every record of a data file,
# from the headers (kvfs(5)); for a name record (type 2), path is the name.
headers() {
	local off n plen
	grep -obaF KVFSREC1 "$1" | cut -d: -f1 | while read -r off; do
		[ $((off % 4096)) -eq 0 ] || continue
		n=$(od -An -t u4 -j $((off + 52)) -N 4 "$1")
		plen=$(od -An -t u4 -j $((off + 56 + 4 * n)) -N 4 "$1")
		echo "$off $(od -An -t u4 -j $((off + 12)) -N 4 "$1")" \
			"$(od -An -t u8 -j $((off + 32)) -N 8 "$1")" \
			"$(tail -c +$((off + 61 + 4 * n)) "$1" | head -c $((plen)))"
	done | tr -s ' '
}

# b_cut KVD: CUT, where data file F is cut: half its size, moved to the
# start of the nearest name record in it that renamed a block whose data
# record is before it, in F, under another name (the name the block had
# when it was saved: a record written after the rename has the final name
# already, and its name record restores nothing), with a data record after
# it. Whether a rename survives such a cut then does not depend on where
# the daemon happened to put the name records, and the cut leaves a short
# block.
b_cut() {
	local half
	half=$(($(stat -c %s "$1") / 2))
	headers "$1" >"$T_TMP/headers"
	# (records: "path file offset hdr_len length"; the end of a data
	# record in another data file does not matter: 0.)
	CUT=$(awk -v half=$half -v f="$F" 'NR == FNR {
			end[$1] = $2 != f ? 0 : $3 + $4 + int(($5 + 4095) / 4096) * 4096
			if ($2 == f && $3 > last) last = $3
			next }
		$2 == 1 { hpath[$3] = $4 }
		$2 == 2 && ($4 in end) && end[$4] <= $1 && $1 < last &&
		    ($3 in hpath) && hpath[$3] != $4 {
			d = $1 - half; if (d < 0) d = -d
			if (best == "" || d < bd) { best = $1; bd = d } }
		END { print best == "" ? half : best }' \
		"$T_TMP/records" "$T_TMP/headers")
	# The block whose rename the cut takes (none when CUT is the half).
	CUT_NAME=$(awk -v cut="$CUT" '$1 == cut && $2 == 2 { print $4 }' \
		"$T_TMP/headers")
	t_log "data file $F: $(wc -l <"$T_TMP/headers") records, half at $half," \
		"cut at $CUT (the rename to ${CUT_NAME:-nothing})"
}

# b_intact_final MNT: every intact block, and nothing else, under its final
# path, byte-exact.
b_intact_final() {
	local p k
	files "$1" >"$T_TMP/files"
	t_compare "$2" "$T_TMP/intact" "$T_TMP/files" 0 "intact blocks" \
		"rebuilt mount"
	while read -r p; do
		k=${p#b/k}
		load "$1" "$p" $B_BLK "${k%.bin}"
	done <"$T_TMP/intact"
}

case_B() {
	b_store
	kc_run 4 fsck "$KC" fsck "$DATA"
	sed -n 's/^SHORT \{1,\}\/\([^:]*\): .*/\1/p' "$T_TMP/out" |
		LC_ALL=C sort >"$T_TMP/got.short"
	t_compare "B-fsck-reports-the-short-blocks" "$T_TMP/short" \
		"$T_TMP/got.short" 0 "index records past the cut" "fsck"
	[ -z "$CUT_NAME" ] ||
		has fsck "^NAME +$CUT_NAME: "
	kc_run 1 repair "$KC" fsck --repair "$DATA"
	[ -z "$CUT_NAME" ] ||
		has repair "^NAME +$CUT_NAME: .* -> fixed\$"
	kc_run 0 fsck-after-repair "$KC" fsck "$DATA"
	has fsck-after-repair "^checked $(wc -l <"$T_TMP/intact") blocks .*: 0 damaged"
	rebuild_index "$DATA"
	rb_status 0 1
	t_mount "$DATA" "$T_MNT"
	b_intact_final "$MNT" "B-rebuilt-mount"
	t_umount "$T_MNT"
	# The first mount's janitor swept stale temporary files before it
	# stopped: what is left now is what stays.
	t_mount "$DATA" "$T_MNT"
	b_intact_final "$MNT" "B-after-the-start-up-sweep"
	rb_status 0
	t_log "every intact block is back under its final path"
}

case_B2() {
	local f p k base ino nlf=0 n
	b_store
	rebuild_index "$DATA"
	rb_status 0 1
	cp "$T_TMP/out" "$T_TMP/rebuild.out"
	t_mount "$DATA" "$T_MNT"
	files "$MNT" >"$T_TMP/files"
	# Each file: the block it is, where it is.
	: >"$T_TMP/which"
	while read -r f; do
		case $f in
		b/k*.bin)
			k=${f#b/k}
			k=${k%.bin}
			;;
		lost+found/*)
			base=${f#lost+found/}
			ino=${base##*.}
			k=${base#k}
			k=${k%%.bin_*}
			[[ $base =~ ^k[0-9]+\.bin_[0-9]+\.tmp\.[0-9]+$ ]] ||
				t_fail "/$f: not TEMPNAME.INODE"
			[ "$(stat -c %i "$MNT/$f")" = "$ino" ] ||
				t_fail "/$f: st_ino $(stat -c %i "$MNT/$f"), not $ino"
			grep -F -q -- "/$f" "$T_TMP/rebuild.out" || {
				t_show "$T_TMP/rebuild.out"
				t_fail "the rebuild's output does not name /$f"
			}
			nlf=$((nlf + 1))
			;;
		*)
			t_fail "unexpected file /$f in the rebuilt mount"
			;;
		esac
		load "$MNT" "$f" $B_BLK "$k"
		echo "b/k$k.bin" >>"$T_TMP/which"
	done <"$T_TMP/files"
	LC_ALL=C sort "$T_TMP/which" >"$T_TMP/which.sorted"
	t_compare "B2-every-intact-block-once" "$T_TMP/intact" \
		"$T_TMP/which.sorted" 0 "intact blocks" "rebuilt mount"
	if [ "$nlf" -gt 0 ]; then
		rb_status 1
		grep -E -q " $nlf put in /lost\+found" "$T_TMP/rebuild.out" ||
			t_fail "the rebuild does not count $nlf in /lost+found"
	else
		rb_status 0
	fi
	t_umount "$T_MNT"
	t_mount "$DATA" "$T_MNT"
	files "$MNT" >"$T_TMP/files2"
	t_compare "B2-after-the-start-up-sweep" "$T_TMP/files" "$T_TMP/files2" \
		0 "first mount" "second mount"
	n=$(wc -l <"$T_TMP/intact")
	t_log "$n intact blocks: $((n - nlf)) under their final path," \
		"$nlf in /lost+found"
}

# --- C: hard links and special files ---------------------------------------

C_BLK=262144

# c_make DIR: the same calls on a plain directory and on the mount.
c_make() {
	local d=$1 i
	mkdir "$d/c1" "$d/c2" || t_fail "mkdir in $d"
	expect "$LP" store "$d/c1/blk.bin" $C_BLK 7 = "store: stored"
	ln "$d/c1/blk.bin" "$d/c2/blk-link.bin" || t_fail "ln blk.bin"
	for i in $(seq 300); do echo "three names $i"; done >"$d/c1/three" ||
		t_fail "write three"
	ln "$d/c1/three" "$d/c2/three-b" || t_fail "ln three-b"
	ln "$d/c1/three" "$d/c1/three-c" || t_fail "ln three-c"
	rm "$d/c1/three-c" || t_fail "rm three-c"
	expect "$LP" store "$d/c1/victim.bin" $C_BLK 8 = "store: stored"
	for i in $(seq 200); do echo "renamed over $i"; done >"$d/c1/src" ||
		t_fail "write src"
	ln "$d/c1/src" "$d/c2/src-link" || t_fail "ln src-link"
	mv "$d/c2/src-link" "$d/c1/victim.bin" || t_fail "mv over victim.bin"
	mkfifo -m 0644 "$d/c1/fifo" || t_fail "mkfifo"
	mknod -m 0644 "$d/c1/null" c 1 3 || t_fail "mknod c 1 3"
	mknod -m 0644 "$d/c2/loop" b 7 0 || t_fail "mknod b 7 0"
	expect "$LP" bind "$d/c2/sock" = "bind: OK"
	chmod 0644 "$d/c2/sock" || t_fail "chmod sock"
	ln -s ../c1/blk.bin "$d/c2/sym" || t_fail "symlink"
	mkfifo -m 0644 "$d/c1/gone-fifo" || t_fail "mkfifo gone-fifo"
	rm "$d/c1/gone-fifo" || t_fail "rm gone-fifo"
	c_open_unlink "$d"
}

# c_open_unlink DIR: names unlinked while a descriptor is open.
c_open_unlink() {
	local d=$1 i
	for i in $(seq 2000); do echo "open descriptor $i"; done >"$T_TMP/od.want"
	cp "$T_TMP/od.want" "$d/c1/od-a" || t_fail "write od-a"
	ln "$d/c1/od-a" "$d/c2/od-b" || t_fail "ln od-b"
	exec 7<"$d/c1/od-a" || t_fail "open od-a"
	rm "$d/c1/od-a" || t_fail "rm od-a"
	[ "$(stat -c %h "$d/c2/od-b")" = 1 ] || t_fail "$d/c2/od-b: st_nlink"
	cmp -s - "$T_TMP/od.want" <&7 ||
		t_fail "$d: read through the descriptor of an unlinked name"
	exec 7<&-
	cmp -s "$d/c2/od-b" "$T_TMP/od.want" ||
		t_fail "$d: read through the other name"
	# Every name gone: the descriptor still reads the bytes.
	cp "$T_TMP/od.want" "$d/c1/od-x" || t_fail "write od-x"
	ln "$d/c1/od-x" "$d/c2/od-y" || t_fail "ln od-y"
	exec 7<"$d/c2/od-y" || t_fail "open od-y"
	rm "$d/c1/od-x" "$d/c2/od-y" || t_fail "rm od-x od-y"
	cmp -s - "$T_TMP/od.want" <&7 ||
		t_fail "$d: read through the descriptor of a file with no name"
	exec 7<&-
}

# c_same A B: two names of one file: one st_ino, st_nlink 2, same bytes.
c_same() {
	local a b
	a=$(stat -c '%i %h' "$1") || t_fail "stat $1"
	b=$(stat -c '%i %h' "$2") || t_fail "stat $2"
	[ "$a" = "$b" ] || t_fail "$1 ($a) and $2 ($b): not one file"
	[ "${a#* }" = 2 ] || t_fail "$1: st_nlink ${a#* }, want 2"
	cmp -s "$1" "$2" || t_fail "$1 and $2 differ"
}

# c_stat PATH FORMAT WANT: stat -c FORMAT of PATH is WANT.
c_stat() {
	local got
	got=$(stat -c "$2" "$1") || t_fail "stat $1"
	[ "$got" = "$3" ] || t_fail "$1: stat -c '$2' is '$got', want '$3'"
}

# c_check DIR: what c_make made, checked with stat(1).
c_check() {
	local d=$1
	c_same "$d/c1/blk.bin" "$d/c2/blk-link.bin"
	load "$d" c2/blk-link.bin $C_BLK 7
	c_same "$d/c1/three" "$d/c2/three-b"
	c_same "$d/c1/src" "$d/c1/victim.bin"
	c_stat "$d/c1/fifo" '%F %a %h' "fifo 644 1"
	c_stat "$d/c1/null" '%F %a %h %t:%T' "character special file 644 1 1:3"
	c_stat "$d/c2/loop" '%F %a %h %t:%T' "block special file 644 1 7:0"
	c_stat "$d/c2/sock" '%F %a %h' "socket 644 1"
	c_stat "$d/c2/sym" '%F %h' "symbolic link 1"
	[ "$(readlink "$d/c2/sym")" = ../c1/blk.bin ] || t_fail "$d/c2/sym target"
	cmp -s "$d/c2/od-b" "$T_TMP/od.want" || t_fail "$d/c2/od-b bytes"
	c_stat "$d/c2/od-b" '%h' 1
	for n in c1/three-c c1/gone-fifo c2/src-link c1/od-a c1/od-x c2/od-y; do
		[ -e "$d/$n" ] || [ -L "$d/$n" ] && t_fail "$d/$n is there"
	done
	return 0
}

c_dump() {
	t_run "$T_TMP/$2.tree" "$T_TMP/$2.tree.err" "$TREE_DUMP" -C -I -r \
		-i .kvfs "$1"
}

case_C() {
	local plain
	t_target
	MNT=$(realpath "$T_MNT")
	DATA=$(realpath "$T_DATA")
	plain=$(t_plain_dir plain)
	c_make "$plain"
	c_check "$plain"
	c_dump "$plain" plain
	c_make "$MNT"
	c_check "$MNT"
	c_dump "$MNT" mount
	t_compare "C-mount" "$T_TMP/plain.tree" "$T_TMP/mount.tree"
	t_umount "$T_MNT"
	t_mount "$DATA" "$T_MNT"
	c_check "$MNT"
	c_dump "$MNT" remount
	t_compare "C-remount" "$T_TMP/plain.tree" "$T_TMP/remount.tree"
	t_umount "$T_MNT"
	rebuild_index "$DATA"
	cp "$T_TMP/out" "$T_TMP/rebuild.out"
	t_mount "$DATA" "$T_MNT"
	c_dump "$MNT" rebuilt
	t_compare "C-rebuild" "$T_TMP/plain.tree" "$T_TMP/rebuilt.tree"
	c_check "$MNT"
	cp "$T_TMP/rebuild.out" "$T_TMP/out"
	rb_status 0
}

# run_case NAME: case_NAME in a subshell with a scratch directory and a
# cleanup of its own (t_cleanup: its mounts go, its directory too).
run_case() {
	(
		T_NAME="$T_NAME/$1"
		T_TMP=$(t_plain_dir "case$1")
		trap t_cleanup EXIT
		"case_$1"
		for mnt in "${!T_PID[@]}"; do
			t_umount "$mnt"
		done
		T_DONE=1
		t_log "PASS"
	)
	# shellcheck disable=SC2181
	[ $? -eq 0 ] || t_error "case $1 failed (see FAIL above)"
}

kc_init
command -v sqlite3 >/dev/null || t_skip "no sqlite3 (Debian package sqlite3)"
umask 022
for c in ${CTL_REBUILD_CASES:-A B B2 C}; do
	case $c in
	A | B | B2 | C) run_case "$c" ;;
	*) t_fail "CTL_REBUILD_CASES: no case '$c'" ;;
	esac
done
t_finish
