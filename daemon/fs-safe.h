/*
 * flame_profd — the one way the daemon opens, creates, chowns and
 * deletes files and directories.
 *
 * The daemon runs as root beside directories other users can write.
 * Every path goes through here, relative to a directory descriptor that
 * was opened without following a link and checked with fstat():
 *
 * - a link is never followed in the directories the daemon writes to; in
 *   the operator's --out and --log-file paths a link is followed only if
 *   it and the directory holding it belong to root or the run's user;
 * - a directory the daemon did not create is used only if it belongs to
 *   root or the run's user and neither its group nor others can write
 *   to it;
 * - a file is opened with O_NOFOLLOW|O_NONBLOCK and checked after the
 *   open: regular, one link, owned by root or the run's user;
 * - chown and unlink act only on a file whose device and inode the
 *   daemon recorded when it created it.
 *
 * Refusals return -EPERM (or -ELOOP for a link, -ENOTDIR) and set *why to
 * a static text that ends a sentence naming the path.
 */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Whom the daemon trusts besides root: the user it runs as (--user, or
 * the user that started it). */
struct fpd_trust {
	uid_t uid;
	gid_t gid;
};

/* What the daemon created, to chown or delete later. */
struct fpd_made {
	dev_t dev;
	ino_t ino;
};

/** Whether @st may be trusted as a directory the daemon did not make.
 * @return 0, or -EPERM / -ENOTDIR with *why set. */
int
fpd_fs_check_dir(const struct stat *st, const struct fpd_trust *t,
		 const char **why);

/**
 * Open the directory @path (absolute or relative to the working
 * directory), making what is missing of it with @mode (mkdir -p), one
 * component at a time (see the rules above). The last component, if the
 * daemon did not make it, must pass fpd_fs_check_dir().
 * @param made if not NULL, set to the identity of the last component when
 *        this call made it, else zeroed (ino 0).
 * @return 0 with *dirfd (the caller's, O_RDONLY|O_DIRECTORY), or a
 *         negative errno; -EPERM, -ELOOP and -ENOTDIR set *why.
 */
int
fpd_fs_open_dir(const char *path, mode_t mode, const struct fpd_trust *t,
		int *dirfd, struct fpd_made *made, const char **why);

/**
 * Open (or with @mode != 0, make if missing) the directory @name in
 * @parent, never through a link; one the daemon did not make must pass
 * fpd_fs_check_dir().
 * @return as fpd_fs_open_dir().
 */
int
fpd_fs_open_subdir(int parent, const char *name, mode_t mode,
		   const struct fpd_trust *t, int *dirfd, struct fpd_made *made,
		   const char **why);

/**
 * Create the new regular file @name in @dirfd (O_CREAT|O_EXCL|O_NOFOLLOW,
 * plus @flags such as O_RDWR or O_APPEND), recording its identity.
 * @return the descriptor (the caller's), or -EEXIST when the name is
 *         taken (by anything: a file, a link, a FIFO), or a negative errno.
 */
int
fpd_fs_create(int dirfd, const char *name, int flags, mode_t mode,
	      struct fpd_made *made);

/**
 * Open the existing file @name in @dirfd with @flags (O_NOFOLLOW,
 * O_NONBLOCK and O_NOCTTY added, O_NONBLOCK cleared again after the
 * checks): a regular file with one link, owned by root or @t's user.
 * @param st if not NULL, gets the file's fstat().
 * @return the descriptor (the caller's), or a negative errno; -EPERM,
 *         -ELOOP set *why.
 */
int
fpd_fs_open_file(int dirfd, const char *name, int flags,
		 const struct fpd_trust *t, struct stat *st, const char **why);

/**
 * Open for reading the existing file @path that may belong to another
 * user (the node's cookie): its directories walked as fpd_fs_open_dir()
 * walks them (a link followed only if root or the run's user made it),
 * the file itself never a link, regular, with one link, owned by root,
 * the run's user or the owner of its directory, in a directory that
 * others cannot write to (or a sticky one).
 * @param st gets the file's fstat().
 * @return the descriptor (the caller's, O_NONBLOCK), or a negative
 *         errno; -EPERM and -ELOOP set *why.
 */
int
fpd_fs_open_foreign_file(const char *path, const struct fpd_trust *t,
			 struct stat *st, const char **why);

/** Whether @name in @dirfd (not followed if a link) is the file @made.
 * @return 0, -ENOENT, or -ESTALE when it is something else. */
int
fpd_fs_is_made(int dirfd, const char *name, const struct fpd_made *made);

/**
 * Open @name in @dirfd if it is still the directory @made (checked by
 * name without following a link, then on what was opened).
 * @return the descriptor (the caller's), -ENOENT, -ESTALE when it is
 *         something else, or a negative errno.
 */
int
fpd_fs_open_made_dir(int dirfd, const char *name, const struct fpd_made *made);

/** Remove the empty directory @name from @dirfd if it is still the
 * directory @made. @return 0, -ENOENT, -ESTALE, -ENOTEMPTY or a negative
 * errno. */
int
fpd_fs_rmdir_made(int dirfd, const char *name, const struct fpd_made *made);

/** Delete @name from @dirfd if it is still the file @made.
 * @return 0, or -ESTALE (left alone), or a negative errno. */
int
fpd_fs_unlink_made(int dirfd, const char *name, const struct fpd_made *made);

/** Give @name in @dirfd (or @dirfd itself with @name NULL) to @uid:@gid
 * if it is still @made.
 * @return 0, or -ESTALE (left alone), or a negative errno. */
int
fpd_fs_chown_made(int dirfd, const char *name, const struct fpd_made *made,
		  uid_t uid, gid_t gid);

/**
 * Clear @name in @dirfd, a name only the daemon uses (its temporary
 * names): a link there is removed (never followed), a regular file only
 * if it has one link and belongs to root or @t's user.
 * @return 0 (also when nothing is there), -EPERM when something else is
 *         there (left alone), or a negative errno.
 */
int
fpd_fs_clear_own_name(int dirfd, const char *name, const struct fpd_trust *t);

/**
 * Rename @from to @to within @dirfd; with @replace false never over
 * anything at @to (-EEXIST). A link at either name is moved or replaced
 * itself, never followed.
 * @return 0 or a negative errno.
 */
int
fpd_fs_rename(int dirfd, const char *from, const char *to, bool replace);

/** The identity of what @fd is open on. */
void
fpd_fs_made_of(const struct stat *st, struct fpd_made *made);

/**
 * Make the listening AF_UNIX stream socket @name in @dirfd, mode 0600,
 * owned by the calling user, non-blocking and close-on-exec. What is at
 * the name already is replaced only if it is a socket of root or @t's
 * user (an earlier run's; the caller holds the directory's lock), never
 * followed.
 * @param made gets the socket's identity, for fpd_fs_unlink_socket_made().
 * @return the descriptor (the caller's), or a negative errno; -EPERM sets
 *         *why.
 */
int
fpd_fs_bind_socket(int dirfd, const char *name, const struct fpd_trust *t,
		   struct fpd_made *made, const char **why);

/** Delete the socket @name from @dirfd if it is still @made.
 * @return 0, -ENOENT, -ESTALE (left alone), or a negative errno. */
int
fpd_fs_unlink_socket_made(int dirfd, const char *name,
			  const struct fpd_made *made);
