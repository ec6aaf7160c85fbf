/* SPDX-License-Identifier: MIT */
/*
 * Stale temporary files of a crashed engine (vLLM's "<block>_<n>.tmp" and
 * ".o_direct_probe_<n>.tmp"): the janitor removes all of them at start-up
 * (no process can hold one open through a mount that did not exist), and
 * later those older than tmp_max_age that no handle has open.
 */
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "node.h"
#include "tmpsweep.h"

/* Names per index listing. */
#define TMP_BATCH 64

/* Whether name is one of the engine's temporary names. */
static int tmp_is_engine_tmp(const char *name)
{
	const char *us = strrchr(name, '_');
	size_t len = strlen(name);

	if (!us || len < 5 || strcmp(name + len - 4, ".tmp") != 0)
		return 0;
	/* "_<digits>.tmp" after "X.bin" or ".o_direct_probe" */
	for (const char *p = us + 1; p < name + len - 4; p++)
		if (*p < '0' || *p > '9')
			return 0;
	if (us == name + len - 5)
		return 0;
	return (us - name >= 4 && strncmp(us - 4, ".bin", 4) == 0) ||
	       strncmp(name, ".o_direct_probe_", 16) == 0;
}

void tmp_sweep(struct fs *fs, int64_t cutoff_ns)
{
	struct idx_name *batch;
	uint64_t after = 0, n = 0;
	int got;

	batch = calloc(TMP_BATCH, sizeof(*batch));
	if (!batch)
		return;
	while ((got = idx_tmp_names(fs->idx, after, batch, TMP_BATCH)) > 0) {
		for (int i = 0; i < got; i++) {
			if (!tmp_is_engine_tmp(batch[i].name) ||
			    batch[i].time_ns >= cutoff_ns)
				continue;
			n += (uint64_t)node_evict_name(fs, &batch[i]);
		}
		after = batch[got - 1].cookie;
	}
	free(batch);
	if (n) {
		log_info("removed %llu stale temporary files of a crashed "
			 "engine",
			 (unsigned long long)n);
		atomic_fetch_add(&fs->tmp_removed, n);
	}
}
