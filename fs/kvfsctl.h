/* SPDX-License-Identifier: MIT */
/*
 * Kept only while kvfsctl_fsck.c, kvfsctl_gc.c and kvfsctl_data.c still
 * live in fs/ and include "kvfsctl.h": kvfsctl's declarations are in
 * kvfsctl/kc.h, and the data-file usage those files measure is core's
 * (datadir.h), under the names they use. Goes away with those files.
 */
#include "datadir.h"
#include "kvfsctl/kc.h"

#define kc_usage datadir_usage
#define kc_data_usage datadir_usage
