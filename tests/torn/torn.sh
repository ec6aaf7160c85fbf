#!/bin/bash
# SPDX-License-Identifier: MIT
# Torn files, one scenario per run: damages the data files under a live
# kvfs mount in one of the ways kvfs(7) (FAILURE POLICY) names and checks
# what an engine sees.
#
#   torn.sh SCENARIO
#   torn.sh --list      the scenario names, one a line
#
# Every scenario starts on a fresh store (tests/torn/lib.sh: a new DATADIR
# and mount, a few hundred blocks of mixed sizes stored with vLLM's store
# sequence: access, mkdir -p, O_EXCL temp, one write, close, rename;
# O_DIRECT for sizes that are 4 KiB multiples, buffered otherwise; each
# block's record found whole in the data files with matching CRCs, and the
# kernel's cached pages dropped). Then one kind of damage:
#   1-payload-direct, 1-payload-buffered, 1-header, 1-boundary, 1-zero:
#      a data file truncated inside a payload (of an O_DIRECT block, and of
#      a buffered block past the kernel's first readahead window), inside
#      a header, at a record boundary, to zero;
#   2-delete-active, 2-delete-sealed: a data file deleted (one the daemon
#      still appends to, and a sealed one after a remount);
#   3-overwrite: bytes overwritten inside two payloads (same length);
#   4-truncate-mount: a block truncated to half through the mount, then
#      loaded;
#   5-eio: EIO injected on one O_DIRECT and one buffered block, then
#      cleared (needs a daemon built with -Dfault_injection=true; skipped,
#      exit 77, unless KVFS_FAULT_INJECTION=1);
#   6-full-disk: the backing filesystem (a 300 MiB loop-mounted ext4, tmpfs
#      when there is no loop device) filled until a store fails.
# Then every block runs the engine's lookup and load sequence (access,
# open, one read, access). Blocks wholly before the damage must read back
# byte-exact; damaged ones must get EIO (never a short count) and miss at
# once, and be dropped (1, 2: logged "dropped", the hole punched) or
# quarantined (3, 5: logged "quarantined", data kept); after 4 the
# engine's unlink frees the space; in 6 the writer gets ENOSPC and every
# stored block stays readable. Every damaged name is stored again and
# must read back byte-exact; the daemon must stay up, exit 0 on unmount
# with no sanitizer report, and after a remount every name must read back
# its latest version.
#
# stdout: one table row, "SCENARIO DROPPED QUARANTINED INTACT FREED RESULT"
# ("-" for what the scenario does not measure); progress and failure
# details go to stderr. Exit status: 0 pass, 77 skip (not root, no
# /dev/fuse or fusermount3, no fault injection for 5-eio), 1 fail.
#
# Environment: as tests/mount/lib.sh, plus
#   KVFS, KVFSCTL, TORN_CLIENT, TORN_RECORDS   the daemon, kvfsctl and the
#                   tests/torn helpers
#   KVFS_FAULT_INJECTION   1: the daemon has the fault hooks (5-eio runs)
#   TORN_TMP        scratch space (default KVFS_TEST_TMP, /var/tmp; a disk
#                   filesystem)
#   TORN_SEED       seed of the random choices (default 1); which data
#                   file a block lands in varies from run to run, so a
#                   seed fixes the choices only for a given layout
#   TORN_BLOCKS     blocks per store (default 256)
#   KVFS_STEP_LIMIT seconds before a step counts as hung (default 120)
# shellcheck source=tests/torn/lib.sh disable=SC2034 # table columns
. "$(dirname "$0")/lib.sh"

# --- 1: truncated data files -----------------------------------------------

# Truncates data file FILE to CUT bytes and checks that exactly the blocks
# whose record ends past CUT are dropped.
truncate_case() {
	local file=$1 cut=$2 lo hi lohi
	t_log "$SC_ID: truncating $(data_file "$file") to $cut bytes" \
		"(was $(stat -c %s "$(data_file "$file")"))"
	truncate -s "$cut" "$(data_file "$file")" || t_fail "truncate failed"
	kvawk -v file="$file" -v cut="$cut" '
		n("file") == file + 0 && n("off") + n("span") > cut + 0 {
			print "rel=" f("rel"), "class=dropped" }' \
		"$SC_DIR/blocks" >"$SC_DIR/exp" || t_fail "cannot read blocks"
	# The record cut in two keeps its first part until the daemon
	# punches it out; nothing else may go.
	lohi=$(kvawk -v file="$file" -v cut="$cut" -v slack="$SLACK" '
		n("file") == file + 0 && n("off") < cut + 0 &&
		n("off") + n("span") > cut + 0 { p = cut - n("off") }
		END { print int(p / 4096) * 4096,
			int((p + 4095) / 4096) * 4096 + slack }' \
		"$SC_DIR/blocks") || t_fail "cannot read blocks"
	read -r lo hi <<<"$lohi"
	[ -s "$SC_DIR/exp" ] || t_error "test bug: the cut damages nothing"
	verify "$SC_DIR/exp"
	freed_between "$lo" "$hi"
	restore "$SC_DIR/exp"
	finish_store
}

# 1, inside the payload of a block not first in its data file: an O_DIRECT
# one anywhere in the payload, or a buffered one late in it.
sc_trunc_payload() {
	local kind=$1 f cut file
	fresh_store
	if [ "$kind" = direct ]; then
		file=$(busiest_file) || t_fail "cannot read blocks"
		file_records "$file" | kvawk '
			n("idx") > 0 && n("size") % 4096 == 0 &&
			n("size") >= 8192' >"$SC_DIR/cand" ||
			t_fail "cannot read blocks"
	else
		for f in $(block_files); do
			file_records "$f" || t_fail "cannot read blocks"
		done | kvawk 'n("idx") > 0 && n("size") % 4096 != 0 &&
			n("size") >= 1048576' >"$SC_DIR/cand" ||
			t_fail "cannot read blocks"
	fi
	pick "$SC_DIR/cand" || t_fail "test bug: no candidate block"
	kv_split "$PICK"
	local len=${KV[len]} off=${KV[off]} hdr=${KV[hdr_len]}
	if [ "$kind" = direct ]; then
		rand $((len - 1))
		cut=$((off + hdr + 1 + R))
	else
		rand $((len - len / 2))
		cut=$((off + hdr + len / 2 + R))
	fi
	t_log "$SC_ID: cutting record ${KV[idx]} (${KV[rel]}, $len bytes) of" \
		"data file ${KV[file]} at payload byte $((cut - off - hdr))"
	truncate_case "${KV[file]}" "$cut"
}

# 1, inside the header of a data record, or at its first byte.
sc_trunc_header() {
	local where=$1 cut file
	fresh_store
	file=$(busiest_file) || t_fail "cannot read blocks"
	file_records "$file" | kvawk 'n("idx") > 0' \
		>"$SC_DIR/cand" || t_fail "cannot read blocks"
	pick "$SC_DIR/cand" || t_fail "test bug: no candidate record"
	kv_split "$PICK"
	if [ "$where" = header ]; then
		rand $((KV[hdr_len] - 1))
		cut=$((KV[off] + 1 + R))
	else
		cut=${KV[off]}
	fi
	t_log "$SC_ID: cutting data file ${KV[file]} at $cut: record" \
		"${KV[idx]} (${KV[rel]}) starts at ${KV[off]}"
	truncate_case "${KV[file]}" "$cut"
}

sc_trunc_zero() {
	local file
	fresh_store
	file=$(busiest_file) || t_fail "cannot read blocks"
	truncate_case "$file" 0
}

# --- 2: deleted data files ---------------------------------------------------

# The data file goes; all its blocks are dropped.
sc_delete() {
	local sealed=$1 file
	fresh_store
	if [ "$sealed" = sealed ]; then
		# A new daemon appends to new files: the old ones are sealed.
		torn_umount
		# No read-ahead, as in fresh_store (lib.sh).
		t_mount "$SC_DATA" "$SC_MNT" -o prefetch=0
		baseline load
	fi
	file=$(busiest_file) || t_fail "cannot read blocks"
	kvawk -v file="$file" 'n("file") == file + 0 {
		print "rel=" f("rel"), "class=dropped" }' "$SC_DIR/blocks" \
		>"$SC_DIR/exp" || t_fail "cannot read blocks"
	t_log "$SC_ID: deleting $(data_file "$file")" \
		"($(wc -l <"$SC_DIR/exp") blocks)"
	rm -f "$(data_file "$file")"
	verify "$SC_DIR/exp"
	freed_between 0 "$SLACK"
	restore "$SC_DIR/exp"
	finish_store
}

# --- 3: overwritten payloads -------------------------------------------------

# Same-length overwrites late in two payloads (an O_DIRECT block of at
# least 1 MiB and a buffered one); both are quarantined, data kept.
sc_overwrite() {
	local at f0 c rel
	fresh_store
	: >"$SC_DIR/exp"
	kvawk 'n("size") % 4096 == 0 && n("size") >= 1048576' \
		"$SC_DIR/blocks" >"$SC_DIR/cand" || t_fail "cannot read blocks"
	kvawk 'n("size") % 4096 != 0 && n("size") >= 1048576' \
		"$SC_DIR/blocks" >"$SC_DIR/cand2" || t_fail "cannot read blocks"
	for c in cand cand2; do
		pick "$SC_DIR/$c" || t_fail "test bug: no candidate block ($c)"
		kv_split "$PICK"
		rand $((KV[len] - KV[len] / 2 - 64))
		at=$((KV[len] / 2 + R))
		t_log "$SC_ID: inverting 64 bytes of ${KV[rel]} (${KV[len]}" \
			"bytes) at payload byte $at"
		"$TORN_CLIENT" corrupt "$(data_file "${KV[file]}")" \
			$((KV[off] + KV[hdr_len] + at)) 64 ||
			t_fail "torn_client corrupt failed"
		echo "rel=${KV[rel]} class=quarantined" >>"$SC_DIR/exp"
	done
	stats
	f0=${ST[store_frees_total]}
	verify "$SC_DIR/exp"
	freed_between 0 0
	[ "${ST[store_frees_total]}" -eq "$f0" ] ||
		t_error "records were freed although only quarantines happened"
	[ "${ST[quarantined]}" -eq 2 ] ||
		t_error "kvfs_quarantined is ${ST[quarantined]}, want 2"
	# Data kept: both records still in their data files, as damaged.
	step "$SC_DIR/recs.after" "$TORN_RECORDS" -c "$SC_DATA"
	for rel in $(kvawk '{ print f("rel") }' "$SC_DIR/exp"); do
		has_record crc "$rel" "$SC_DIR/recs.after" ||
			t_error "the record of quarantined $rel is gone"
	done
	restore "$SC_DIR/exp"
	stats
	[ "${ST[quarantined]}" -eq 0 ] ||
		t_error "storing the names again left ${ST[quarantined]}" \
			"quarantined"
	finish_store
}

# --- 4: a truncate through the mount -----------------------------------------

# An ordinary truncate through the mount to half the size; the engine's
# whole-block read comes back short, the engine unlinks the block, and
# that frees the space.
sc_truncate_mount() {
	local blk size span ino half b0 d0 q0 got
	fresh_store
	kvawk 'n("size") % 4096 == 0 && n("size") >= 262144' \
		"$SC_DIR/blocks" >"$SC_DIR/cand" || t_fail "cannot read blocks"
	pick "$SC_DIR/cand" || t_fail "test bug: no candidate block"
	kv_split "$PICK"
	blk=${KV[rel]} size=${KV[size]} span=${KV[span]} ino=${KV[ino]}
	half=$((size / 2))
	manifest_line "$blk" >"$SC_DIR/one.man" || t_fail "$blk not in the manifest"
	b0=$(data_bytes)
	stats
	d0=${ST[dropped_total]}
	q0=${ST[quarantined_total]}
	t_log "$SC_ID: truncate -s $half $blk (was $size)"
	truncate -s "$half" "$SC_MNT$blk" ||
		t_error "truncate -s $half through the mount failed"
	got=$(stat -c %s "$SC_MNT$blk" 2>&1 || true)
	[ "$got" = "$half" ] || t_error "size after truncate: $got, want $half"
	step "$SC_DIR/one.chk" "$TORN_CLIENT" check "$SC_DIR/one.man"
	got=$(outcome "$SC_DIR/one.chk")
	[ "$got" = "pre=hit load=short:$half+unlinked post=miss" ] ||
		t_error "engine load after the truncate: $got"
	settle
	SC_FREED=$((b0 - $(data_bytes)))
	freed_between "$span" $((span + SLACK))
	step "$SC_DIR/one.chk2" "$TORN_CLIENT" check "$SC_DIR/one.man"
	got=$(outcome "$SC_DIR/one.chk2")
	[ "$got" = "pre=miss load=open:ENOENT post=miss" ] ||
		t_error "a later lookup of the unlinked block: $got"
	step "$SC_DIR/recs.after" "$TORN_RECORDS" "$SC_DATA"
	kvawk -v ino="$ino" 'f("type") == "data" && n("ino") == ino + 0' \
		"$SC_DIR/recs.after" >"$SC_DIR/bad" || t_fail "cannot read records"
	if [ -s "$SC_DIR/bad" ]; then
		t_error "inode $ino still has data records after the unlink:" \
			"$(head -1 "$SC_DIR/bad")"
	fi
	echo "rel=$blk class=skip" >"$SC_DIR/exp"
	verify "$SC_DIR/exp"
	SC_FREED=$((b0 - $(data_bytes)))
	SC_NDROP=$((ST[dropped_total] - d0))
	SC_NQUAR=$((ST[quarantined_total] - q0))
	if [ "$SC_NDROP" -ne 0 ] || [ "$SC_NQUAR" -ne 0 ]; then
		t_error "a truncate and unlink through the mount counted" \
			"$SC_NDROP drops, $SC_NQUAR quarantines"
	fi
	echo "rel=$blk class=restore" >"$SC_DIR/exp"
	restore "$SC_DIR/exp"
	finish_store
}

# --- 5: injected EIO ---------------------------------------------------------

# Injected EIO on an O_DIRECT and a buffered block, then cleared. Both
# are quarantined with their data kept; the first is stored again, the
# second must read back byte-exact after a remount.
sc_eio() {
	local a b got n d0 q0 f0 b0 l0 blk
	fresh_store
	kvawk 'n("size") % 4096 == 0 && n("size") >= 262144' \
		"$SC_DIR/blocks" >"$SC_DIR/cand" || t_fail "cannot read blocks"
	kvawk 'n("size") % 4096 != 0' "$SC_DIR/blocks" >"$SC_DIR/cand2" ||
		t_fail "cannot read blocks"
	pick "$SC_DIR/cand" || t_fail "test bug: no candidate block"
	kv_split "$PICK"
	a=${KV[rel]}
	pick "$SC_DIR/cand2" || t_fail "test bug: no candidate buffered block"
	kv_split "$PICK"
	b=${KV[rel]}
	printf 'rel=%s class=quarantined\nrel=%s class=quarantined\n' \
		"$a" "$b" >"$SC_DIR/exp.q"
	printf 'rel=%s class=skip\nrel=%s class=skip\n' "$a" "$b" \
		>"$SC_DIR/exp"
	snapshot
	n=0
	for blk in "$a" "$b"; do
		kv_split "$(manifest_line "$blk")"
		step "$SC_DIR/eio.$n" "$TORN_CLIENT" eio "${KV[path]}" \
			"${KV[size]}" "${KV[seed]}"
		got=$(outcome "$SC_DIR/eio.$n")
		t_log "$SC_ID: $blk: $got"
		[ "$got" = "inject=OK pre=hit load=read:EIO post=miss clear=OK after=miss" ] ||
			t_error "injected EIO on $blk: $got"
		n=$((n + 1))
	done
	settle
	tail -n +$((l0 + 1)) "$(dlog)" >"$SC_DIR/verify.log" ||
		t_fail "cannot read the daemon's log"
	check_logged quarantined "$SC_DIR/exp.q"
	check_logged dropped "$SC_DIR/exp.q"
	[ "${ST[quarantined]}" -eq 2 ] ||
		t_error "kvfs_quarantined is ${ST[quarantined]}, want 2"
	[ "${ST[store_frees_total]}" -eq "$f0" ] ||
		t_error "records were freed although only quarantines happened"
	[ "$(data_bytes)" -eq "$b0" ] ||
		t_error "data files changed size: $b0 -> $(data_bytes)"
	step "$SC_DIR/recs.after" "$TORN_RECORDS" -c "$SC_DATA"
	for blk in "$a" "$b"; do
		has_record ok "$blk" "$SC_DIR/recs.after" ||
			t_error "the record of quarantined $blk is not intact"
	done
	# Everything else is untouched.
	verify "$SC_DIR/exp"
	SC_NDROP=$((ST[dropped_total] - d0))
	SC_NQUAR=$((ST[quarantined_total] - q0))
	SC_FREED=$((b0 - $(data_bytes)))
	if [ "$SC_NQUAR" -ne 2 ] || [ "$SC_NDROP" -ne 0 ]; then
		t_error "counted $SC_NDROP drops and $SC_NQUAR quarantines," \
			"want 0 and 2"
	fi
	echo "rel=$a class=restore" >"$SC_DIR/exp"
	restore "$SC_DIR/exp"
	stats
	[ "${ST[quarantined]}" -eq 1 ] ||
		t_error "after storing $a again kvfs_quarantined is" \
			"${ST[quarantined]}, want 1 ($b)"
	# The remount in finish_store reads $b back with its original bytes.
	finish_store
}

# --- 6: a full disk ----------------------------------------------------------

# Mounts a 300 MiB ext4 (a loop device) or tmpfs on $1 for DATADIR.
small_fs() {
	local fsdir=$1
	mkdir -p "$fsdir"
	if truncate -s 300M "$SC_DIR/fs.img" &&
		mkfs.ext4 -q -F "$SC_DIR/fs.img" 2>"$SC_DIR/mkfs.err" &&
		mount -o loop "$SC_DIR/fs.img" "$fsdir" 2>"$SC_DIR/mount.err"; then
		t_log "$SC_ID: DATADIR on a 300 MiB loop-mounted ext4"
	elif mount -t tmpfs -o size=300M tmpfs "$fsdir"; then
		t_log "$SC_ID: no loop-mounted ext4" \
			"($(cat "$SC_DIR/mkfs.err" "$SC_DIR/mount.err" 2>/dev/null |
				head -1)): DATADIR on a 300 MiB tmpfs"
	else
		t_fail "cannot mount a small filesystem for DATADIR"
	fi
	SC_LOOP=$fsdir
}

# stored_of OUT MAN: the lines of manifest MAN whose store in OUT stored.
stored_of() {
	kvawk 'FILENAME == ARGV[1] { ok[f("path")] = (f("store") == "stored")
			next }
		ok[f("path")]' "$1" "$2" || t_fail "cannot read $1 and $2"
}

# A small backing filesystem filled with 2 MiB stores until one fails.
sc_full() {
	local fsdir=$SC_DIR/fs6 nstored fail opts=() b0 got help
	small_fs "$fsdir"
	# A capacity larger than the disk: the disk, not eviction, is what
	# runs out (daemons with the capacity option only).
	help=$("$KVFS" --help 2>&1 || true)
	if [[ $help == *capacity=* ]]; then
		opts=(-o capacity=1T)
	fi
	fresh_store "$fsdir" "${opts[@]}"
	step "$SC_DIR/fill.man" "$TORN_CLIENT" gen "$SC_MNT" 400 \
		$((SEED + 6)) 2097152
	step "$SC_DIR/fill.out" "$TORN_CLIENT" store "$SC_DIR/fill.man"
	nstored=$(grep -c ' store=stored$' "$SC_DIR/fill.out" || true)
	fail=$(grep -v -e ' store=stored$' -e ' store=skipped$' \
		"$SC_DIR/fill.out" || true)
	t_log "$SC_ID: $nstored more 2 MiB blocks stored, then: ${fail:-nothing}"
	t_log "$SC_ID: $(df -h "$fsdir" | tail -1)"
	if [ "$(echo "$fail" | wc -l)" -ne 1 ] ||
		! [[ $fail =~ \ store=fail\ step=(write|close)\ err=ENOSPC$ ]]; then
		t_error "the store that filled the disk: '${fail:-none}', want" \
			"one 'store=fail step=close err=ENOSPC'"
	fi
	[ "$nstored" -ge 1 ] || t_error "not one 2 MiB block fitted"
	fail=${fail%% *}
	fail=${fail#path=}
	if [ -n "$fail" ] && [ -e "$fail" ]; then
		t_error "the name whose store failed exists"
	fi
	find "$SC_MNT" -name '*.tmp' >"$SC_DIR/bad" ||
		t_fail "find in the mount failed"
	if [ -s "$SC_DIR/bad" ]; then
		t_error "temp files left behind by the failed store:" \
			"$(head -1 "$SC_DIR/bad")"
	fi
	daemon_ok "after ENOSPC"
	# Every block already stored reads back.
	stored_of "$SC_DIR/fill.out" "$SC_DIR/fill.man" >>"$SC_DIR/man"
	step /dev/null "$TORN_CLIENT" evict "$SC_DIR/man"
	: >"$SC_DIR/exp"
	verify "$SC_DIR/exp"
	# The engine deletes ten blocks: the space comes back and the store
	# that failed now succeeds.
	step "$SC_DIR/recs.full" "$TORN_RECORDS" "$SC_DATA"
	# (Through a file: head closing the pipe early would fail the awk.)
	stored_of "$SC_DIR/fill.out" "$SC_DIR/fill.man" >"$SC_DIR/stored.man"
	head -10 "$SC_DIR/stored.man" >"$SC_DIR/evict.man"
	b0=$(data_bytes)
	kvawk '{ print f("path") }' "$SC_DIR/evict.man" | xargs rm -f -- ||
		t_error "the engine's unlinks failed"
	settle
	SC_FREED=$((b0 - $(data_bytes)))
	freed_between $((10 * (2097152 + 4096))) \
		$((10 * (2097152 + 4096) + SLACK))
	kvawk 'FILENAME == ARGV[1] { gone[f("path")] = 1; next }
		!(f("path") in gone)' "$SC_DIR/evict.man" "$SC_DIR/man" \
		>"$SC_DIR/man.new" || t_fail "cannot update the manifest"
	mv "$SC_DIR/man.new" "$SC_DIR/man" || t_fail "mv failed"
	if [ -n "$fail" ]; then
		grep -F "path=$fail " "$SC_DIR/fill.man" >"$SC_DIR/again.man" ||
			t_fail "$fail is not in the fill manifest"
		step "$SC_DIR/again.out" "$TORN_CLIENT" store "$SC_DIR/again.man"
		got=$(outcome "$SC_DIR/again.out")
		[ "$got" = store=stored ] ||
			t_error "storing the failed name after the unlinks: $got"
		cat "$SC_DIR/again.man" >>"$SC_DIR/man"
	fi
	finish_store "${opts[@]}"
}

# The scenarios in table order (torn.sh --list prints them).
SCENARIOS=(1-payload-direct 1-payload-buffered 1-header 1-boundary 1-zero
	2-delete-active 2-delete-sealed 3-overwrite 4-truncate-mount 5-eio
	6-full-disk)

case ${1-} in
--list)
	printf '%s\n' "${SCENARIOS[@]}"
	exit 0
	;;
1-payload-direct) run=(sc_trunc_payload direct) ;;
1-payload-buffered) run=(sc_trunc_payload buffered) ;;
1-header) run=(sc_trunc_header header) ;;
1-boundary) run=(sc_trunc_header boundary) ;;
1-zero) run=(sc_trunc_zero) ;;
2-delete-active) run=(sc_delete active) ;;
2-delete-sealed) run=(sc_delete sealed) ;;
3-overwrite) run=(sc_overwrite) ;;
4-truncate-mount) run=(sc_truncate_mount) ;;
5-eio) run=(sc_eio) ;;
6-full-disk) run=(sc_full) ;;
*)
	echo "usage: $0 SCENARIO (one of the names at the top of $0)" >&2
	exit 2
	;;
esac

torn_init "$1"
if [ "$1" = 5-eio ] && [ "${KVFS_FAULT_INJECTION:-0}" != 1 ]; then
	t_skip "the daemon has no fault injection (build with" \
		"-Dfault_injection=true, set KVFS_FAULT_INJECTION=1)"
fi
"${run[@]}"
t_finish
