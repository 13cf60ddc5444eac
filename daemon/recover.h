/*
 * flame_profd — what an earlier run left in a node directory, and names
 * that are never taken twice (recover.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "retention.h"

/**
 * Move @from to the finished name @name in @dirfd, or if that is taken to
 * the next free millisecond's name: never over a file that is there.
 * @name (of @size bytes) gets the name used.
 * @return 0, or a negative errno (-EEXIST when 1000 names in a row are
 *         taken, -EINVAL when @name is not a finished name).
 */
int
fpd_rename_free(int dirfd, const char *from, char *name, size_t size);

/**
 * What an earlier run left in the node directory @dirfd (at the path
 * @dir) of @node_s: partial files are recovered (or set aside), and
 * finished files the index does not list (a run killed between the rename
 * and the index update) are counted and added to the index @entries of
 * *@n entries. Only regular files with one link, owned by root or
 * @trust's user, are touched or listed; a finished name dated in the
 * future is reported and not listed. Entries of an older index without
 * a device and inode get those of such a file. *@unfinished counts the
 * files that must stay as they are.
 * @return whether the index changed.
 */
bool
fpd_recover(int dirfd, const char *dir, const char *node_s,
	    const struct fpd_trust *trust, struct fpd_file_entry **entries,
	    size_t *n, unsigned *unfinished);
