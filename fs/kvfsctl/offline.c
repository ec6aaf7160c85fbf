/* SPDX-License-Identifier: MIT */
/*
 * The command-line part kvfsctl fsck and kvfsctl gc share. See offline.h.
 */
#include "offline.h"

#include <stdlib.h>

#include "kc.h"
#include "log.h"

char *kc_offline_datadir(const struct kc_offline *o, const char *arg)
{
	struct kc_target t;
	char *datadir = NULL;

	if (kc_target_open(o->cmd, arg, &t) < 0)
		return NULL;
	if (t.mounted && t.mountpoint)
		kc_err(o->cmd,
		       "%s is being served by kvfs (pid %ld, mounted at %s): "
		       "%s works on an unmounted data directory only; "
		       "unmount it first (fusermount3 -u %s)%s",
		       t.datadir, t.pid, t.mountpoint, o->cmd, t.mountpoint,
		       o->mounted_hint);
	else if (t.mounted)
		kc_err(o->cmd,
		       "%s is locked by process %ld: a kvfs serves it or "
		       "another kvfsctl %s runs; %s works on an unmounted "
		       "data directory only",
		       t.datadir, t.pid, o->lockers, o->cmd);
	if (!t.mounted) {
		datadir = t.datadir;
		t.datadir = NULL;
	}
	kc_target_free(&t);
	return datadir;
}

void kc_offline_error(void *arg, const char *msg)
{
	kc_err(arg, "%s", msg);
}

void kc_offline_log_changes(void)
{
	log_use_syslog("kvfsctl");
	log_set_level(LOG_LVL_INFO);
}
