/* SPDX-License-Identifier: MIT */
/*
 * The read-only control files under MOUNTPOINT/.kvfs/ (ctlfiles.c): the
 * FUSE handlers ops.c and lookup.c hand control inodes to. Each replies
 * exactly once.
 */
#ifndef KVFS_CTLFILES_H
#define KVFS_CTLFILES_H

#include <fuse_lowlevel.h>
#include <stdint.h>

struct fs;

/* Whether ino is a control file's (FS_CTL_INO and up). */
int fs_ctl_ino(uint64_t ino);
/* Whether (parent, name) is .kvfs or inside it: not for changing. */
int fs_ctl_reserved(uint64_t parent, const char *name);
/* Answers a lookup of a control name; 0 when name is not one. */
int fs_ctl_lookup(struct fs *fs, fuse_req_t req, uint64_t parent,
		  const char *name);
void fs_ctl_getattr(struct fs *fs, fuse_req_t req, uint64_t ino);
void fs_ctl_open(struct fs *fs, fuse_req_t req, uint64_t ino,
		 struct fuse_file_info *fi);
void fs_ctl_read(fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_ctl_release(fuse_req_t req, struct fuse_file_info *fi);
void fs_ctl_readdir(struct fs *fs, fuse_req_t req, size_t size, off_t off,
		    int plus);

#endif
