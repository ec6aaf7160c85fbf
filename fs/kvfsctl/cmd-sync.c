/* SPDX-License-Identifier: MIT */
/*
 * kvfsctl sync: asks the running kvfs, over its control socket, to finish
 * its write-behind queue and make what it holds durable; the one way to
 * wait for it from outside, since syncfs(2) on a FUSE mount never reaches
 * the daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kc.h"

static const char kc_sync_usage[] =
	"usage: kvfsctl sync [--json] MOUNTPOINT|DATADIR\n"
	"\n"
	"Waits until every file closed on the mount before the command "
	"started\n"
	"is saved (written to a data file and committed to the index), then\n"
	"makes the data files and the index durable, as fsync(2) of each file\n"
	"would. syncfs(2) and sync(1) cannot do this for a kvfs mount: the\n"
	"kernel does not pass them on to a FUSE daemon. With the shared tier\n"
	"(rados_pool=), it then waits for the puts of the blocks saved, and\n"
	"says how long the local part took. The daemon waits at most 10\n"
	"minutes for each queue.\n"
	"\n"
	"  --json      print the daemon's JSON answer\n"
	"  -h, --help  print this help\n"
	"\n"
	"Exit status: 0 everything saved and durable (also when the data\n"
	"directory is not mounted: nothing is queued then), 2 usage or\n"
	"operational error (the queue did not drain, an I/O error).\n";

int kc_sync(int argc, char **argv)
{
	const char *cmd = "sync";
	struct ctlproto_json resp;
	uint64_t files = 0, ms = 0, local = 0;
	const char *shared;
	struct kc_target t;
	struct kc_opts o;
	char *raw = NULL;
	int i, rc, ret = KC_EXIT_ERROR;

	i = kc_begin(cmd, argc, argv, 0, kc_sync_usage, 1, 1,
		     "MOUNTPOINT|DATADIR", &o);
	if (i < 0)
		return i == KC_BEGIN_HELP ? KC_EXIT_OK : KC_EXIT_ERROR;
	if (kc_target_open(cmd, argv[i], &t) < 0)
		return KC_EXIT_ERROR;
	if (!t.mounted) {
		printf("%s is not mounted: nothing is queued\n", t.datadir);
		kc_target_free(&t);
		return KC_EXIT_OK;
	}
	rc = kc_request_wait(t.datadir, CTLPROTO_SYNC, NULL, &resp, &raw,
			     CTLPROTO_SYNC_TIMEOUT_S);
	if (rc < 0) {
		kc_request_err(cmd, &t, rc);
		goto out_free;
	}
	if (rc > 0) {
		kc_daemon_err(cmd, "sync", &resp);
		goto out_json;
	}
	ret = KC_EXIT_OK;
	if (o.json) {
		fputs(raw, stdout);
		goto out_json;
	}
	ctlproto_json_u64(&resp, "queued_files", &files);
	ctlproto_json_u64(&resp, "waited_ms", &ms);
	ctlproto_json_u64(&resp, "local_ms", &local);
	shared = ctlproto_json_get(&resp, "shared");
	printf("synced %s: %llu files were queued, waited %llu ms",
	       t.mountpoint ? t.mountpoint : t.datadir,
	       (unsigned long long)files, (unsigned long long)ms);
	/* The shared tier's puts come after the local sync. */
	if (shared && strcmp(shared, "off") != 0)
		printf(" (local %llu ms; shared tier: %s)",
		       (unsigned long long)local,
		       strcmp(shared, "done") == 0 ? "every put done"
		       : strcmp(shared, "unreachable") == 0
			       ? "out of reach, puts still queued"
			       : "puts still queued");
	printf("\n");
out_json:
	ctlproto_json_free(&resp);
out_free:
	free(raw);
	kc_target_free(&t);
	return ret;
}
