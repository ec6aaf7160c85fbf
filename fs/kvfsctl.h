/* SPDX-License-Identifier: MIT */
/*
 * Kept while kvfsctl_fsck.c, kvfsctl_gc.c and kvfsctl_data.c still live in
 * fs/ and include "kvfsctl.h": kvfsctl's declarations are in kvfsctl/kc.h.
 */
#include "kvfsctl/kc.h"
