#!/bin/bash
# SPDX-License-Identifier: MIT
# Access times (issue 14): what a read does to st_atime, per -o relatime
# (the default, ext4's rules), -o noatime and -o atime, and that the
# atime a read set survives a remount (it goes to the index in the
# batches of last uses). The relatime rules are also checked on the plain
# directory the test runs in, where the kernel applies them, when that
# file system is mounted relatime.
. "$(dirname "$0")/lib.sh"

t_init

# atime_of FILE: seconds.nanoseconds of its atime.
atime_of() {
	stat -c %.9X "$1" || t_fail "stat $1"
}

# read_after DIR NAME: waits past the current second, reads NAME whole,
# and prints its atime before and after.
read_after() {
	local before after
	sleep 1.1
	before=$(atime_of "$1/$2")
	cat "$1/$2" >/dev/null || t_fail "read $1/$2"
	after=$(atime_of "$1/$2")
	echo "$before $after"
}

moved() { # moved "BEFORE AFTER": 0 when AFTER is later
	awk -v b="${1% *}" -v a="${1#* }" 'BEGIN { exit !(a > b) }'
}

# check_mode OPT DIR: the rules of OPT on a tree DIR (kvfs or plain).
check_mode() {
	local opt=$1 dir=$2 r
	echo "a block" >"$dir/f" || t_fail "write $dir/f"
	r=$(read_after "$dir" f)
	case $opt in
	noatime) moved "$r" && t_fail "$opt: a read moved the atime ($r)" ;;
	*) moved "$r" || t_fail "$opt: the first read kept the atime ($r)" ;;
	esac
	# Read again: relatime keeps an atime already after the mtime; the
	# kernel's page cache answers this read, so kvfs sees it only after
	# the cache is dropped.
	sync
	echo 3 >/proc/sys/vm/drop_caches
	r=$(read_after "$dir" f)
	case $opt in
	atime) moved "$r" || t_fail "$opt: a second read kept the atime ($r)" ;;
	*) moved "$r" && t_fail "$opt: a second read moved the atime ($r)" ;;
	esac
	# A write moves the mtime past the atime: relatime lets a read set it.
	sleep 1.1
	echo "again" >>"$dir/f" || t_fail "append $dir/f"
	r=$(read_after "$dir" f)
	case $opt in
	noatime) moved "$r" && t_fail "$opt: a read moved the atime ($r)" ;;
	*) moved "$r" || t_fail "$opt: a read after a write kept it ($r)" ;;
	esac
	t_log "$opt: rules hold on $dir"
}

for opt in relatime noatime atime; do
	T_OPTS="-o $opt"
	t_target
	check_mode "$opt" "$T_MNT"
	want=$(atime_of "$T_MNT/f")
	t_umount "$T_MNT"
	t_mount "$T_DATA" "$T_MNT" $T_OPTS
	got=$(atime_of "$T_MNT/f")
	[ "$got" = "$want" ] ||
		t_fail "$opt: atime $want became $got after a remount"
	t_log "$opt: the atime survives a remount ($got)"
	t_umount "$T_MNT"
done

REF=$(t_plain_dir ref)
if findmnt -n -o OPTIONS -T "$REF" | tr , '\n' | grep -qx relatime; then
	check_mode relatime "$REF"
else
	t_log "the plain directory is not on a relatime mount: not compared"
fi
t_finish
