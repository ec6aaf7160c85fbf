# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034 # variables used by torn.sh
# Helpers of the torn suite (sourced by tests/torn/torn.sh, not run), on top
# of the mount suite's (tests/mount/lib.sh: mounts, steps, cleanup, exit 77
# without /dev/fuse).
#
# A scenario starts on a fresh store (fresh_store): a new DATADIR and mount,
# a few hundred blocks of mixed sizes stored with the engine's store
# sequence, each block's record found whole in the data files with
# matching CRCs (torn_records), the kernel's cached pages dropped. It then
# damages something, and verify runs the engine's lookup and load on every
# block and checks each outcome, the daemon's counters and its log against
# what the scenario expects; restore stores the damaged names again;
# finish_store unmounts, remounts and reads every name back.
#
# The helpers print key=value words (torn_client, torn_records); every
# field is read by name: kvawk in awk, kv_split in bash. A missing key
# fails the test.
#
# Scenario state (the table row's columns are the SC_N*/SC_FREED ones):
#   SC_ID      the scenario's name, e.g. 1-header
#   SC_DIR     its scratch directory ($T_TMP)
#   SC_DATA    DATADIR
#   SC_MNT     the mount point
#   SC_NDROP   observed kvfs_dropped_total delta ("-": not measured)
#   SC_NQUAR   observed kvfs_quarantined_total delta
#   SC_NINTACT blocks that read back byte-exact
#   SC_FREED   bytes the data files shrank by
#   SC_LOOP    a small filesystem mounted for DATADIR (6-full-disk)
#
# Files in SC_DIR: man (the manifest: path= size= seed=), blocks (one line
# a block: rel= size= seed= file= off= hdr_len= len= span= ino=, rel the
# path within the mount), exp (the expected class of damaged blocks:
# rel= class=intact|dropped|quarantined|skip|restore).

. "$(dirname "${BASH_SOURCE[0]}")/../mount/lib.sh"

SEED=${TORN_SEED:-1}
NBLOCKS=${TORN_BLOCKS:-256}
KVFS_STEP_LIMIT=${KVFS_STEP_LIMIT:-120}
RANDOM=$SEED

SC_ID=
SC_DIR=
SC_DATA=
SC_MNT=
SC_FREED=-
SC_NDROP=-
SC_NQUAR=-
SC_NINTACT=-
SC_LOOP=
NSTEP=0

# awk program text run before a caller's rules: splits a line of key=value
# words into kv_v[] (lines starting with "#" are skipped; the kv_ names
# are its own, callers use others) and defines f(KEY),
# the value as a string, and n(KEY), as a number; both stop awk with exit
# status 2 when the line has no KEY.
KV_AWK='
function f(k) {
	if (!(k in kv_v)) {
		printf "%s:%d: no %s= in: %s\n", FILENAME, FNR, k, $0 \
			> "/dev/stderr"
		exit 2
	}
	return kv_v[k]
}
function n(k) {
	return f(k) + 0
}
/^#/ { next }
{
	split("", kv_v)
	for (kv_i = 1; kv_i <= NF; kv_i++) {
		kv_p = index($kv_i, "=")
		if (kv_p)
			kv_v[substr($kv_i, 1, kv_p - 1)] = substr($kv_i, kv_p + 1)
	}
}
'

# kvawk [awk -v options] PROGRAM FILE...: awk with KV_AWK in front of
# PROGRAM. Options must come first, each as "-v NAME=VALUE".
kvawk() {
	local opts=()
	while [ "$1" = -v ]; do
		opts+=(-v "$2")
		shift 2
	done
	awk "${opts[@]}" "$KV_AWK$1" "${@:2}"
}

# kv_split LINE: KV[KEY] = value for every key=value word of LINE. Reading
# a key LINE lacks stops the script (set -u).
declare -A KV=()
kv_split() {
	local w
	KV=()
	for w in $1; do
		KV[${w%%=*}]=${w#*=}
	done
}

# The torn suite's own preconditions, then t_init.
torn_init() {
	SC_ID=$1
	T_NAME=torn-$SC_ID
	[ "$(id -u)" -eq 0 ] || t_skip "needs root (loop mounts, data files)"
	[ -c /dev/fuse ] || t_skip "no /dev/fuse"
	local tool
	for tool in fusermount3 mountpoint timeout; do
		command -v "$tool" >/dev/null || t_skip "no $tool"
	done
	[ -n "${KVFS:-}" ] || t_fail "KVFS is not set (scripts/torn-test" \
		"builds the programs)"
	KVFS_TEST_TMP=${TORN_TMP:-${KVFS_TEST_TMP:-/var/tmp}}
	T_NEEDS="TORN_CLIENT TORN_RECORDS"
	t_init
	trap torn_exit EXIT
	T_CLEANUP_HOOKS+=(torn_umount_loop)
	SC_DIR=$T_TMP
	t_log "=== $SC_ID"
}

# The EXIT trap: the table row on stdout, then lib.sh's cleanup.
torn_exit() {
	local rc=$? result
	trap - EXIT
	case $rc in
	0) result=PASS ;;
	77) result=SKIP ;;
	*) result=FAIL ;;
	esac
	[ "$rc" -eq 0 ] && [ "$T_DONE" -ne 1 ] && result=FAIL
	echo "$SC_ID $SC_NDROP $SC_NQUAR $SC_NINTACT $SC_FREED $result"
	(exit "$rc")
	t_cleanup
}

# A cleanup hook: the small filesystem of 6-full-disk goes after the daemon.
torn_umount_loop() {
	if [ -n "$SC_LOOP" ]; then
		umount -l "$SC_LOOP" 2>/dev/null
		SC_LOOP=
	fi
	return 0
}

# step OUT CMD...: runs a helper (lib.sh's t_run: time limit, must exit 0,
# the daemons must still run), stdout to OUT.
step() {
	local out=$1
	shift
	NSTEP=$((NSTEP + 1))
	t_run "$out" "$SC_DIR/step.$NSTEP.err" "$@"
}

# daemon_ok WHEN: the daemon is still up and serving.
daemon_ok() {
	local pid=${T_PID[$SC_MNT]:-}
	if [ -z "$pid" ] || ! t_alive "$pid"; then
		t_show "${T_LOG[$SC_MNT]:-}" 60
		t_fail "daemon not running $1"
	fi
	if ! timeout -k 5 30 stat "$SC_MNT/.kvfs/stats" >"$SC_DIR/stat.out" 2>&1
	then
		t_dump_daemons
		t_fail "mount not answering $1 (stat of .kvfs/stats:" \
			"$(tr '\n' ' ' <"$SC_DIR/stat.out"))"
	fi
}

# torn_umount: the daemon still serves, then lib.sh's t_umount (exit 0,
# no sanitizer report).
torn_umount() {
	daemon_ok "before unmounting"
	t_umount "$SC_MNT"
}

# The current daemon's log.
dlog() {
	echo "${T_LOG[$SC_MNT]}"
}

# stats: one snapshot of MOUNT/.kvfs/stats into ST (ST[dropped_total] is
# kvfs_dropped_total). Read as seldom as possible: in an ASan build the
# daemon can abort on a control-file read (ASan checks writev's buffers
# after the call, when the reader may already have closed the file and
# another worker freed the snapshot in RELEASE).
declare -A ST=()
stats() {
	local k v
	ST=()
	while read -r k v; do
		case $k in
		kvfs_*) ST[${k#kvfs_}]=$v ;;
		esac
	done < <(grep -v '^#' "$SC_MNT/.kvfs/stats" 2>/dev/null || true)
	for k in dropped_total quarantined_total quarantined store_frees_total; do
		if [ -z "${ST[$k]:-}" ]; then
			t_error "no counter kvfs_$k in $SC_MNT/.kvfs/stats"
			ST[$k]=-1
		fi
	done
}

# Counters before a scenario's damage, into the caller's d0 q0 f0 b0 l0
# (declare them local there): drops, quarantines, record frees, physical
# bytes of the data files, lines of the daemon log.
snapshot() {
	stats
	d0=${ST[dropped_total]}
	q0=${ST[quarantined_total]}
	f0=${ST[store_frees_total]}
	b0=$(data_bytes)
	l0=$(wc -l <"$(dlog)")
}

# Physical bytes the data files take.
data_bytes() {
	du -s --block-size=1 "$SC_DATA/data" | cut -f1
}

# unexpected FILE REGEX: the lines of FILE that do not match REGEX go to
# $SC_DIR/bad (the first ones also to stderr); succeeds when there are any.
unexpected() {
	grep -v -E -- "$2" "$1" >"$SC_DIR/bad" || true
	[ -s "$SC_DIR/bad" ] || return 1
	head -5 "$SC_DIR/bad" >&2
}

# Waits until the daemon has freed what it will (frees happen on release,
# after the engine's close returned): the data files' size unchanged for
# a second. Then takes a stats snapshot (in ST).
settle() {
	local prev='' cur same=0
	for _ in $(seq 60); do
		cur=$(data_bytes)
		if [ "$cur" = "$prev" ]; then
			same=$((same + 1))
			[ "$same" -ge 2 ] && break
		else
			same=0
		fi
		prev=$cur
		sleep 0.5
	done
	stats
}

# rand N: R = a random number in [0, N). Not in a subshell: RANDOM's
# sequence must advance here for TORN_SEED to fix every choice.
rand() {
	R=$((((RANDOM << 30) | (RANDOM << 15) | RANDOM) % $1))
}

# pick FILE: PICK = a random line of FILE; 1 when FILE is empty.
pick() {
	local n
	n=$(wc -l <"$1")
	PICK=
	[ "$n" -gt 0 ] || return 1
	rand "$n"
	PICK=$(sed -n "$((R + 1))p" "$1")
}

# fresh_store [BASE [daemon args]]: DATADIR and mount for the scenario, the
# base manifest stored, the block table written, the kernel caches
# dropped. Sets SC_DATA SC_MNT; writes $SC_DIR/man and $SC_DIR/blocks.
# DATADIR goes on BASE when given; the other arguments go to the daemon.
fresh_store() {
	local base=
	if [ $# -gt 0 ]; then
		base=$1
		shift
	fi
	SC_MNT=$SC_DIR/mnt
	SC_DATA=${base:-$SC_DIR}/data
	mkdir -p "$SC_MNT" "$SC_DATA" || t_fail "mkdir -p $SC_MNT $SC_DATA"
	# No read-ahead (-o prefetch=0): the block table looks every block up
	# before a scenario damages its data file, and bytes read ahead then,
	# read and checked before the damage, would answer the loads that must
	# meet it. What a read-ahead that meets damage does: mount/prefetch.sh.
	t_mount "$SC_DATA" "$SC_MNT" -o prefetch=0 "$@"
	step "$SC_DIR/man" "$TORN_CLIENT" gen "$SC_MNT" "$NBLOCKS" "$SEED"
	step "$SC_DIR/store.out" "$TORN_CLIENT" store -j 4 "$SC_DIR/man"
	if unexpected "$SC_DIR/store.out" ' store=stored$'; then
		t_fail "base store: not every block was stored:" \
			"$(head -1 "$SC_DIR/bad")"
	fi
	baseline store
}

# baseline store|load: the block table (each block must have one whole record
# whose chunks match their CRCs), then the kernel's cached pages dropped;
# with "load", first reads every block back through the mount (all must
# match), which also makes the daemon open every data file.
baseline() {
	if [ "${1:-}" = load ]; then
		step "$SC_DIR/base.chk" "$TORN_CLIENT" check -j 4 "$SC_DIR/man"
		if unexpected "$SC_DIR/base.chk" ' pre=hit load=match post=hit$'
		then
			t_fail "base store: a freshly stored block did not" \
				"read back: $(head -1 "$SC_DIR/bad")"
		fi
	fi
	list_blocks
	step /dev/null "$TORN_CLIENT" evict "$SC_DIR/man"
}

# The manifest joined with the data records (torn_records -m) into
# $SC_DIR/blocks.
list_blocks() {
	local rc=0
	# Stores are written behind: the records are all there once the
	# mount's queue is drained (kvfsctl sync).
	timeout -k 10 "$KVFS_STEP_LIMIT" "$KVFSCTL" sync "$SC_MNT" \
		>"$SC_DIR/sync.out" 2>&1 ||
		t_fail "kvfsctl sync $SC_MNT: $(cat "$SC_DIR/sync.out")"
	timeout -k 10 "$KVFS_STEP_LIMIT" "$TORN_RECORDS" -c -m "$SC_DIR/man" \
		-p "$SC_MNT" "$SC_DATA" >"$SC_DIR/blocks" \
		2>"$SC_DIR/blocks.err" || rc=$?
	if [ "$rc" -ne 0 ]; then
		t_show "$SC_DIR/blocks.err" 20
		t_fail "the data files do not hold exactly one record per" \
			"block (torn_records exited with $rc)"
	fi
}

# The data file with the most data records (the lowest number on a tie).
busiest_file() {
	kvawk '{ c[n("file")]++ }
		END {
			for (x in c)
				if (c[x] > bc || (c[x] == bc && x + 0 < bx + 0)) {
					bc = c[x]
					bx = x
				}
			print bx
		}' "$SC_DIR/blocks"
}

# file_records FILE: the blocks of data file FILE in file order, each line
# with idx=N (from 0) in front.
file_records() {
	kvawk -v file="$1" 'n("file") == file + 0 { print n("off"), $0 }' \
		"$SC_DIR/blocks" | sort -n |
		awk '{ sub(/^[0-9]+ /, ""); print "idx=" NR - 1, $0 }'
}

# The data files that hold blocks, one number a line.
block_files() {
	kvawk '{ print n("file") }' "$SC_DIR/blocks" | sort -un
}

data_file() {
	printf '%s/data/%06u.kvd' "$SC_DATA" "$1"
}

# has_record STATE REL FILE: the record listing FILE (torn_records) holds a
# data record in STATE written under REL's temp name.
has_record() {
	local got
	got=$(kvawk -v st="$1" -v rel="$2" '
		f("type") == "data" && f("state") == st {
			# The name at append time: the temporary one, or the
			# final one when write-behind appended after the rename.
			p = f("path")
			sub(/_[0-9]*\.tmp$/, "", p)
			if (p == rel)
				c++
		}
		END { print c + 0 }' "$3") || t_fail "cannot read $3"
	[ "$got" -gt 0 ]
}

# manifest_line REL: the manifest's line of the block at REL.
manifest_line() {
	grep -F "path=$SC_MNT$1 " "$SC_DIR/man"
}

# outcome FILE: a one-block torn_client output line without its path.
outcome() {
	sed 's/^path=[^ ]* //' "$1"
}

# verify EXP: the engine's lookup and load on every block of the manifest,
# compared with EXP (rel= class=: intact, dropped, quarantined; blocks not
# listed are intact, those classed "skip" are left out). Fills the
# observed columns and checks the counters and the daemon's log.
verify() {
	local exp=$1 d0 q0 f0 b0 l0 d1 q1 f1 b1 want nman
	kvawk -v mnt="$SC_MNT" 'FILENAME == ARGV[1] { c[f("rel")] = f("class")
			next }
		{ rel = substr(f("path"), length(mnt) + 1)
		  if (c[rel] != "skip") print }' "$exp" "$SC_DIR/man" \
		>"$SC_DIR/verify.man" || t_fail "verify: bad $exp or manifest"
	snapshot
	step "$SC_DIR/verify.chk" "$TORN_CLIENT" check -j 4 "$SC_DIR/verify.man"
	settle
	d1=${ST[dropped_total]}
	q1=${ST[quarantined_total]}
	f1=${ST[store_frees_total]}
	b1=$(data_bytes)
	SC_NDROP=$((d1 - d0))
	SC_NQUAR=$((q1 - q0))
	SC_FREED=$((b0 - b1))
	SC_NINTACT=$(grep -c ' pre=hit load=match post=hit$' \
		"$SC_DIR/verify.chk" || true)
	t_log "$SC_ID: loads: $SC_NINTACT intact, dropped +$SC_NDROP," \
		"quarantined +$SC_NQUAR, frees +$((f1 - f0)), $SC_FREED bytes freed"
	# The loads covered every block, and all but the damaged ones held.
	nman=$(wc -l <"$SC_DIR/verify.man")
	want=$(($(wc -l <"$SC_DIR/man") - $(grep -c ' class=skip$' "$exp" || true)))
	if [ "$nman" -ne "$want" ] || [ "$nman" -lt "$((NBLOCKS - 2))" ] ||
		[ "$(wc -l <"$SC_DIR/verify.chk")" -ne "$nman" ]; then
		t_error "the loads covered $(wc -l <"$SC_DIR/verify.chk") of" \
			"$nman blocks (want $want)"
	fi
	want=$(grep -c -E ' class=(dropped|quarantined)$' "$exp" || true)
	[ "$SC_NINTACT" -eq $((nman - want)) ] ||
		t_error "$SC_NINTACT blocks read back intact, want $((nman - want))"
	verify_outcomes "$exp"
	# The log names each dropped and quarantined block exactly once.
	tail -n +$((l0 + 1)) "$(dlog)" >"$SC_DIR/verify.log" ||
		t_fail "cannot read the daemon's log"
	check_logged dropped "$exp"
	check_logged quarantined "$exp"
	want=$(grep -c ' class=dropped$' "$exp" || true)
	[ "$SC_NDROP" -eq "$want" ] ||
		t_error "kvfs_dropped_total grew by $SC_NDROP, want $want"
	want=$(grep -c ' class=quarantined$' "$exp" || true)
	[ "$SC_NQUAR" -eq "$want" ] ||
		t_error "kvfs_quarantined_total grew by $SC_NQUAR, want $want"
	daemon_ok "after the loads"
}

# verify_outcomes EXP: each block's outcome in verify.chk against its
# class: intact blocks load whole, damaged ones fail with EIO (never a
# short count) and miss at once.
verify_outcomes() {
	kvawk -v mnt="$SC_MNT" 'FILENAME == ARGV[1] { c[f("rel")] = f("class")
			next }
		{
			rel = substr(f("path"), length(mnt) + 1)
			cls = (rel in c) ? c[rel] : "intact"
			got = "pre=" f("pre") " load=" f("load") " post=" f("post")
			want = cls == "intact" ? "pre=hit load=match post=hit" \
					       : "pre=hit load=read:EIO post=miss"
			if (got != want)
				print cls " " rel ": got \"" got "\", want \"" \
					want "\""
		}' "$1" "$SC_DIR/verify.chk" >"$SC_DIR/verify.bad" ||
		t_fail "verify: cannot read the check output"
	if [ -s "$SC_DIR/verify.bad" ]; then
		head -5 "$SC_DIR/verify.bad" >&2
		t_error "$(wc -l <"$SC_DIR/verify.bad") blocks with the wrong" \
			"outcome, e.g. $(head -1 "$SC_DIR/verify.bad")"
	fi
}

# check_logged WHAT EXP: the log lines "WHAT PATH (inode" since verify
# began (verify.log) name exactly the blocks EXP classes as WHAT, each once.
check_logged() {
	local what=$1 exp=$2 diffs
	diffs=$(diff <(kvawk -v w="$what" 'f("class") == w { print f("rel") }' \
		"$exp" | sort) \
		<(grep -oE "(warning: [a-z_]+: )?$what /[^ ]+ \\(inode" \
			"$SC_DIR/verify.log" |
			sed -E 's/ \(inode$//; s/^.* //' | sort) || true)
	if [ -n "$diffs" ]; then
		head -10 <<<"$diffs" >&2
		t_error "the '$what' log lines do not name the $what blocks" \
			"exactly once each (< expected, > logged):" \
			"$(grep -E '^[<>]' <<<"$diffs" | head -2 | tr '\n' ' ')"
	fi
}

# freed_between LO HI: the data files shrank by SC_FREED bytes, which must
# lie in [LO - SLACK, HI] when LO > 0, in [0, HI] otherwise: a punched
# hole that splits an extent may cost ext4 an extent-tree block, and
# freeing one may free one, so the callers add SLACK to HI.
SLACK=16384
freed_between() {
	local lo=$1
	[ "$lo" -gt 0 ] && lo=$((lo > SLACK ? lo - SLACK : 0))
	if [ "$SC_FREED" -lt "$lo" ] || [ "$SC_FREED" -gt "$2" ]; then
		t_error "data files shrank by $SC_FREED bytes, want $lo..$2"
	fi
}

# restore EXP: stores every block EXP lists (not "skip") again with a new
# seed; each must be stored and read back byte-exact. The manifest then
# holds the new versions.
restore() {
	local exp=$1
	kvawk -v mnt="$SC_MNT" 'FILENAME == ARGV[1] {
			if (f("class") != "skip")
				c[f("rel")] = 1
			next
		}
		{
			rel = substr(f("path"), length(mnt) + 1)
			if (rel in c)
				print "path=" f("path"), "size=" f("size"),
					"seed=" (n("seed") + 7777777)
		}' "$exp" "$SC_DIR/man" >"$SC_DIR/restore.man" ||
		t_fail "restore: bad $exp or manifest"
	[ -s "$SC_DIR/restore.man" ] || return 0
	step "$SC_DIR/restore.out" "$TORN_CLIENT" store "$SC_DIR/restore.man"
	if unexpected "$SC_DIR/restore.out" ' store=stored$'; then
		t_error "storing a damaged name again failed:" \
			"$(head -1 "$SC_DIR/bad")"
	fi
	step "$SC_DIR/restore.chk" "$TORN_CLIENT" check "$SC_DIR/restore.man"
	if unexpected "$SC_DIR/restore.chk" ' pre=hit load=match post=hit$'; then
		t_error "a damaged name stored again does not read back:" \
			"$(head -1 "$SC_DIR/bad")"
	fi
	kvawk 'FILENAME == ARGV[1] { s[f("path")] = f("seed"); next }
		{
			p = f("path")
			if (p in s)
				print "path=" p, "size=" f("size"), "seed=" s[p]
			else
				print
		}' "$SC_DIR/restore.man" "$SC_DIR/man" >"$SC_DIR/man.new" ||
		t_fail "restore: cannot update the manifest"
	mv "$SC_DIR/man.new" "$SC_DIR/man" || t_fail "mv failed"
}

# The end of every scenario: the daemon is up, unmounts cleanly, and after
# a remount (empty caches, verdicts rebuilt from the index) every name in
# the manifest reads back its latest version byte-exact.
finish_store() {
	torn_umount
	t_mount "$SC_DATA" "$SC_MNT" "$@"
	step "$SC_DIR/final.chk" "$TORN_CLIENT" check -j 4 "$SC_DIR/man"
	if unexpected "$SC_DIR/final.chk" ' pre=hit load=match post=hit$'; then
		t_error "after a remount, $(wc -l <"$SC_DIR/bad") names do not" \
			"read back, e.g. $(head -1 "$SC_DIR/bad")"
	fi
	torn_umount
}
