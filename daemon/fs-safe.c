/*
 * flame_profd — paths that nothing another user controls can redirect
 * (fs-safe.h has the rules).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs-safe.h"
#include "util-mem.h"

/* Links followed in one path at most, as the kernel's own limit. */
#define MAX_HOPS 40

static bool
owner_trusted(uid_t uid, const struct fpd_trust *t)
{
	return uid == 0 || uid == t->uid;
}

void
fpd_fs_made_of(const struct stat *st, struct fpd_made *made)
{
	made->dev = st->st_dev;
	made->ino = st->st_ino;
}

int
fpd_fs_check_dir(const struct stat *st, const struct fpd_trust *t,
		 const char **why)
{
	if (!S_ISDIR(st->st_mode)) {
		*why = "is not a directory";
		return -ENOTDIR;
	}
	if (!owner_trusted(st->st_uid, t)) {
		*why = "belongs to another user";
		return -EPERM;
	}
	/* Sticky or not: a directory anyone can write to lets anyone plant
	 * the names the daemon is about to use. */
	if (st->st_mode & S_IWOTH) {
		*why = "is writable by all users";
		return -EPERM;
	}
	/* A group is other users too (nogroup is shared by many daemons). */
	if (st->st_mode & S_IWGRP) {
		*why = "is writable by its group";
		return -EPERM;
	}
	return 0;
}

/*
 * One component @name of a path, in @fd: a directory (opened O_PATH and
 * not followed), made if missing and @mode != 0. A link is reported as
 * 1 for the caller to follow or refuse.
 */
static int
step(int fd, const char *name, mode_t mode, int *next, bool *made)
{
	struct stat st;
	int tries = 0;

	*made = false;
again:
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT || !mode)
			return -errno;
		if (mkdirat(fd, name, mode) < 0) {
			if (errno == EEXIST && tries++ < 3)
				goto again;
			return -errno;
		}
		*made = true;
	} else if (S_ISLNK(st.st_mode)) {
		return 1;
	} else if (!S_ISDIR(st.st_mode)) {
		return -ENOTDIR;
	}
	/* O_NOFOLLOW: what was swapped in since the fstatat() fails here */
	*next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*next < 0)
		return -errno;
	return 0;
}

/* The directory @fd (O_PATH) opened for reading, checked unless @made. */
static int
finish_dir(int fd, bool made, const struct fpd_trust *t, int *dirfd,
	   struct fpd_made *out, const char **why)
{
	struct stat st;
	int rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (rfd < 0)
		return -errno;
	if (fstat(rfd, &st) < 0) {
		rc = -errno;
		goto close_rfd;
	}
	if (made) {
		/* made here a moment ago: ours, unless swapped by someone who
		 * could write the directory above, which was checked */
		if (st.st_uid != geteuid()) {
			*why = "was replaced as it was made";
			rc = -EPERM;
			goto close_rfd;
		}
	} else if ((rc = fpd_fs_check_dir(&st, t, why)) < 0) {
		goto close_rfd;
	}
	if (out) {
		memset(out, 0, sizeof(*out));
		if (made)
			fpd_fs_made_of(&st, out);
	}
	*dirfd = rfd;
	return 0;

close_rfd:
	close(rfd);
	return rc;
}

/* Whether the link @name in @fd may be followed: it and the directory
 * holding it belong to root or the run's user, so one of them made it. */
static bool
link_trusted(int fd, const char *name, const struct fpd_trust *t)
{
	struct stat lst, dst;

	return fstatat(fd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fstat(fd, &dst) == 0 && owner_trusted(lst.st_uid, t) &&
	       fpd_fs_check_dir(&dst, t, &(const char *){ NULL }) == 0;
}

/*
 * Walk @path one component at a time (see fpd_fs_open_dir()), making what
 * is missing with @mode (nothing if 0).
 * @return 0 with *pathfd (O_PATH) on the last directory and *last_made,
 *         or a negative errno; -ELOOP sets *why.
 */
static int
walk(const char *path, mode_t mode, const struct fpd_trust *t, int *pathfd,
     bool *last_made_out, const char **why)
{
	/* what is left of the path, after the links met so far */
	size_t cap = strlen(path) + 1;
	char *todo = xstrdup(path), *p = todo;
	int fd, hops = 0, rc;
	bool last_made = false;

	fd = open(*p == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	for (;;) {
		char *name, target[PATH_MAX];
		int next = -1;
		ssize_t len;
		bool made_now;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		name = p;
		p += strcspn(p, "/");
		if (*p)
			*p++ = '\0';
		if (strcmp(name, ".") == 0)
			continue;
		rc = step(fd, name, mode, &next, &made_now);
		if (rc == 0) {
			close(fd);
			fd = next;
			last_made = made_now;
			continue;
		}
		if (rc < 0)
			goto out;
		/* a link */
		if (!link_trusted(fd, name, t) || ++hops > MAX_HOPS) {
			*why = "is reached through a symbolic link another user "
			       "could have made";
			rc = -ELOOP;
			goto out;
		}
		len = readlinkat(fd, name, target, sizeof(target) - 1);
		if (len <= 0) {
			rc = len < 0 ? -errno : -ENOENT;
			goto out;
		}
		target[len] = '\0';
		if (target[0] == '/') {
			close(fd);
			fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				rc = -errno;
				goto out;
			}
		}
		/* the target, then what was left after the link */
		{
			size_t rest = strlen(p), need = (size_t)len + rest + 2;
			char *buf = xzalloc(need > cap ? need : cap);

			memcpy(buf, target, (size_t)len);
			buf[len] = '/';
			memcpy(buf + len + 1, p, rest + 1);
			free(todo);
			todo = p = buf;
			cap = need > cap ? need : cap;
		}
		last_made = false;
	}
	*pathfd = fd;
	*last_made_out = last_made;
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(todo);
	return rc;
}

int
fpd_fs_open_dir(const char *path, mode_t mode, const struct fpd_trust *t,
		int *dirfd, struct fpd_made *made, const char **why)
{
	bool last_made;
	int fd, rc;

	rc = walk(path, mode, t, &fd, &last_made, why);
	if (rc < 0)
		return rc;
	rc = finish_dir(fd, last_made, t, dirfd, made, why);
	close(fd);
	return rc;
}

/*
 * Open the existing @name in @dirfd with @flags, never through a link
 * and never blocking on a FIFO (O_NONBLOCK is left set): a regular file
 * with one link.
 * @return the descriptor with *st its fstat(), or a negative errno;
 *         -EPERM and -ELOOP set *why.
 */
static int
open_regular(int dirfd, const char *name, int flags, struct stat *st,
	     const char **why)
{
	int fd, rc;

	fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
		    O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP)
			*why = "is a symbolic link";
		/* a FIFO with no reader, a socket: opened for writing */
		if (rc == -ENXIO) {
			*why = "is not a regular file";
			rc = -EPERM;
		}
		return rc;
	}
	if (fstat(fd, st) < 0) {
		rc = -errno;
		goto close_fd;
	}
	rc = -EPERM;
	if (!S_ISREG(st->st_mode)) {
		*why = "is not a regular file";
		goto close_fd;
	}
	if (st->st_nlink > 1) {
		*why = "has other hard links";
		goto close_fd;
	}
	return fd;

close_fd:
	close(fd);
	return rc;
}

int
fpd_fs_open_foreign_file(const char *path, const struct fpd_trust *t,
			 struct stat *st, const char **why)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? xstrdup(path) : NULL;
	const char *base = slash ? slash + 1 : path;
	struct stat dst;
	bool made;
	int dfd, fd, rc;

	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		free(dir);
		return -EISDIR;
	}
	if (dir)
		dir[slash - path + 1] = '\0';
	rc = walk(dir ? dir : ".", 0, t, &dfd, &made, why);
	free(dir);
	if (rc < 0)
		return rc;
	if (fstat(dfd, &dst) < 0) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	fd = open_regular(dfd, base, O_RDONLY, st, why);
	close(dfd);
	if (fd < 0)
		return fd;
	rc = -EPERM;
	/* in a directory others can write (/tmp), anyone could have put it */
	if (!owner_trusted(st->st_uid, t) && st->st_uid != dst.st_uid) {
		*why = "belongs to neither the run's user nor the owner of "
		       "its directory";
		goto close_fd;
	}
	if (!S_ISDIR(dst.st_mode) || ((dst.st_mode & (S_IWOTH | S_IWGRP)) &&
				      !(dst.st_mode & S_ISVTX))) {
		*why = "is in a directory others can write to";
		goto close_fd;
	}
	return fd;

close_fd:
	close(fd);
	return rc;
}

int
fpd_fs_open_subdir(int parent, const char *name, mode_t mode,
		   const struct fpd_trust *t, int *dirfd, struct fpd_made *made,
		   const char **why)
{
	int fd = -1, rc;
	bool made_now;

	if (!*name || strchr(name, '/') || strcmp(name, "..") == 0 ||
	    strcmp(name, ".") == 0)
		return -EINVAL;
	rc = step(parent, name, mode, &fd, &made_now);
	if (rc > 0) {
		*why = "is a symbolic link";
		return -ELOOP;
	}
	if (rc < 0) {
		if (rc == -ENOTDIR)
			*why = "is not a directory";
		return rc;
	}
	rc = finish_dir(fd, made_now, t, dirfd, made, why);
	close(fd);
	return rc;
}

int
fpd_fs_create(int dirfd, const char *name, int flags, mode_t mode,
	      struct fpd_made *made)
{
	struct stat st;
	int fd = openat(dirfd, name,
			flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
			mode);

	if (fd < 0)
		return -errno;
	if (made) {
		if (fstat(fd, &st) < 0) {
			int rc = -errno;

			close(fd);
			unlinkat(dirfd, name, 0);
			return rc;
		}
		fpd_fs_made_of(&st, made);
	}
	return fd;
}

int
fpd_fs_open_file(int dirfd, const char *name, int flags,
		 const struct fpd_trust *t, struct stat *st, const char **why)
{
	struct stat own;
	int fd, rc;

	if (!st)
		st = &own;
	/* O_NONBLOCK: a FIFO swapped in must not hold the open */
	fd = open_regular(dirfd, name, flags, st, why);
	if (fd < 0)
		return fd;
	rc = -EPERM;
	if (!owner_trusted(st->st_uid, t)) {
		*why = "belongs to another user";
		goto close_fd;
	}
	if (!(flags & O_NONBLOCK) &&
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		rc = -errno;
		goto close_fd;
	}
	return fd;

close_fd:
	close(fd);
	return rc;
}

int
fpd_fs_is_made(int dirfd, const char *name, const struct fpd_made *made)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!made->ino || !S_ISREG(st.st_mode) || st.st_dev != made->dev ||
	    st.st_ino != made->ino)
		return -ESTALE;
	return 0;
}

/* Whether @name in @dirfd (not followed) is the directory @made. */
static int
dir_is_made(int dirfd, const char *name, const struct fpd_made *made)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!made->ino || !S_ISDIR(st.st_mode) || st.st_dev != made->dev ||
	    st.st_ino != made->ino)
		return -ESTALE;
	return 0;
}

int
fpd_fs_open_made_dir(int dirfd, const char *name, const struct fpd_made *made)
{
	struct stat st;
	int fd, rc = dir_is_made(dirfd, name, made);

	if (rc < 0)
		return rc;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev != made->dev ||
	    st.st_ino != made->ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int
fpd_fs_rmdir_made(int dirfd, const char *name, const struct fpd_made *made)
{
	/* as fpd_fs_unlink_made(): only root or the run's user could swap
	 * the name between the check and the removal */
	int rc = dir_is_made(dirfd, name, made);

	if (rc < 0)
		return rc;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		return -errno;
	return 0;
}

int
fpd_fs_unlink_made(int dirfd, const char *name, const struct fpd_made *made)
{
	/* Between the check and the unlink only someone who may write the
	 * directory (root or the run's user: it was checked) could swap
	 * the name. */
	int rc = fpd_fs_is_made(dirfd, name, made);

	if (rc < 0)
		return rc;
	if (unlinkat(dirfd, name, 0) < 0)
		return -errno;
	return 0;
}

int
fpd_fs_clear_own_name(int dirfd, const char *name, const struct fpd_trust *t)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISLNK(st.st_mode) &&
	    !(S_ISREG(st.st_mode) && st.st_nlink == 1 && owner_trusted(st.st_uid, t)))
		return -EPERM;
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int
fpd_fs_rename(int dirfd, const char *from, const char *to, bool replace)
{
	if (renameat2(dirfd, from, dirfd, to, replace ? 0 : RENAME_NOREPLACE) < 0)
		return -errno;
	return 0;
}

int
fpd_fs_chown_made(int dirfd, const char *name, const struct fpd_made *made,
		  uid_t uid, gid_t gid)
{
	struct stat st;
	int fd, rc = 0;

	if (!made->ino)
		return -ESTALE;
	fd = name ? openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			   O_CLOEXEC | O_NOCTTY) : dup(dirfd);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (st.st_dev != made->dev || st.st_ino != made->ino)
		rc = -ESTALE;
	else if (fchown(fd, uid, gid) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int
fpd_fs_bind_socket(int dirfd, const char *name, const struct fpd_trust *t,
		   struct fpd_made *made, const char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	struct stat st;
	int fd = -1, rc = 0;

	*why = NULL;
	if (len >= sizeof(sa.sun_path) || memchr(name, '/', len))
		return -EINVAL;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISSOCK(st.st_mode) || !owner_trusted(st.st_uid, t)) {
			*why = "is taken by something other than a socket of "
			       "root or the run's user";
			return -EPERM;
		}
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return -errno;
	} else if (errno != ENOENT) {
		return -errno;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* bind() takes a path of at most 107 bytes: the checked directory
	 * is named by its descriptor's /proc link, and bind() fails on any
	 * name that is there again, never following it. Neither the working
	 * directory nor the umask is touched: --push's thread makes files
	 * meanwhile. The socket's own mode, set before bind(), is the mode
	 * of the name bind() makes (less the umask): 0600 from its first
	 * moment. */
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s",
			     dirfd, name) >= sizeof(sa.sun_path)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if (fchmod(fd, 0600) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		rc = -errno;
	if (rc == 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (rc == 0 && !S_ISSOCK(st.st_mode))
		rc = -ESTALE;
	if (rc == 0 && listen(fd, 8) < 0)
		rc = -errno;
	if (rc == 0)
		fpd_fs_made_of(&st, made);
out:
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int
fpd_fs_unlink_socket_made(int dirfd, const char *name,
			  const struct fpd_made *made)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!made->ino || !S_ISSOCK(st.st_mode) || st.st_dev != made->dev ||
	    st.st_ino != made->ino)
		return -ESTALE;
	if (unlinkat(dirfd, name, 0) < 0)
		return -errno;
	return 0;
}
