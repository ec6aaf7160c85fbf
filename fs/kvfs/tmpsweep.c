/* SPDX-License-Identifier: MIT */
/*
 * Stale temporary files of a crashed engine (vLLM's "<block>_<n>.tmp" and
 * ".o_direct_probe_<n>.tmp"): the janitor removes all of them at start-up
 * (no process can hold one open through a mount that did not exist), and
 * later those older than tmp_max_age that no handle has open.
 */
#include <stdlib.h>
#include <string.h>

#include "datadir.h"
#include "fs.h"
#include "node.h"
#include "tmpsweep.h"

/* Names per index listing. */
#define TMP_BATCH 64

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
			if (!datadir_is_engine_tmp(batch[i].name) ||
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
