/* SPDX-License-Identifier: MIT */
/*
 * What kvfsctl's offline commands (fsck, gc: they open an unmounted data
 * directory with kvdb_open()) share on the command line: turning the
 * argument into a data directory no daemon serves, the kvdb error hook, and
 * sending what they change to the system log. Everything prints "kvfsctl CMD: ..." on stderr (kc_err) and
 * nothing else. Single-threaded, like all of kvfsctl.
 */
#ifndef KVFS_KVFSCTL_OFFLINE_H
#define KVFS_KVFSCTL_OFFLINE_H

/* How one offline command words its refusals. */
struct kc_offline {
	const char *cmd;	  /* "fsck", "gc" */
	const char *mounted_hint; /* after "(fusermount3 -u MOUNTPOINT)" */
	const char *lockers;	  /* who else takes the lock: "fsck or gc" */
};

/*
 * Resolves arg (kc_target_open) to a data directory no kvfs serves:
 * malloc'd, or NULL after saying why (not one, mounted, locked).
 */
char *kc_offline_datadir(const struct kc_offline *o, const char *arg);
/* struct kvdb_hooks.error: arg is the command's name (const char *). */
void kc_offline_error(void *arg, const char *msg);
/* From now on what the command changes goes to syslog, at level info. */
void kc_offline_log_changes(void);

#endif
