/*
 * flame_profd — unit tests: the path rules (daemon/fs-safe.c) and what
 * the output directory, recovery and retention make of them, on a
 * temporary directory: links at every path, a directory of another user,
 * 0777 and sticky 1777 directories, a FIFO, hard links, names dated in
 * the future, another user's file among the daemon's.
 *
 * Cases that need a second user (chown to nobody) run only as root.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp-test.h"
#include "daemon-log.h"
#include "fs-safe.h"
#include "output.h"
#include "recover.h"
#include "retention.h"

/* 2026-11-21T07:56:30.018Z, and 2099-01-01T00:00:00.000Z */
#define MS 1795247790018ULL
#define MS_2099 4070908800000ULL

static char root[64];
static struct fpd_trust me;
static uid_t nobody = 65534;
static gid_t nogroup = 65534;

static void
setup(void)
{
	struct passwd *pw = getpwnam("nobody");

	snprintf(root, sizeof(root), "/tmp/fp-fs-safe-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(root));
	me = (struct fpd_trust){ geteuid(), getegid() };
	if (pw) {
		nobody = pw->pw_uid;
		nogroup = pw->pw_gid;
	}
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	fp_assert_int_eq(system(cmd), 0);
}

static const char *
at(const char *name)
{
	static char buf[4][1024];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", root, name);
	return buf[i];
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fp_assert_ptr_nonnull(f);
	fputs(text, f);
	fp_assert_int_eq(fclose(f), 0);
}

static char *
read_file(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	size_t n;

	fp_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static bool
as_root(void)
{
	return geteuid() == 0;
}

static bool
there(const char *name)
{
	return access(at(name), F_OK) == 0;
}

/* ---- directories ---------------------------------------------------------- */

START_TEST(dir_made_and_reopened)
{
	struct fpd_made made;
	const char *why = NULL;
	struct stat st;
	int fd;

	fp_assert_int_eq(fpd_fs_open_dir(at("a/b/c"), 0750, &me, &fd, &made, &why), 0);
	fp_assert(made.ino != 0);
	fp_assert_int_eq(fstat(fd, &st), 0);
	fp_assert(st.st_ino == made.ino);
	close(fd);
	/* there now, and not made by this call */
	fp_assert_int_eq(fpd_fs_open_dir(at("a/b/c"), 0750, &me, &fd, &made, &why), 0);
	fp_assert(made.ino == 0);
	close(fd);
	/* without a mode nothing is made */
	fp_assert_int_eq(fpd_fs_open_dir(at("a/x"), 0, &me, &fd, NULL, &why), -ENOENT);
	fp_assert_int_eq(access(at("a/x"), F_OK), -1);
}
END_TEST

/* The kinds of directory refused at the last component. */
static const struct {
	mode_t mode;		/* 0: a link, S_IFIFO: a FIFO */
	bool foreign;		/* chowned to nobody */
	int rc;
	const char *why;
} dirs[] = {
	{ 0755, false, 0, NULL },
	{ 0777, false, -EPERM, "is writable by all users" },
	{ 01777, false, -EPERM, "is writable by all users" },
	{ 0700, true, -EPERM, "belongs to another user" },
	{ 0, false, -ELOOP, "is a symbolic link" },
	{ S_IFIFO, false, -ENOTDIR, "is not a directory" },
};

START_TEST(subdir_refused)
{
	const char *why = NULL;
	int parent, fd = -1, rc;

	if (dirs[_i].foreign && !as_root())
		return;
	fp_assert_int_eq(mkdir(at("victim"), 0700), 0);
	write_file(at("victim/manifest.json"), "root's\n");
	if (dirs[_i].mode == 0)
		fp_assert_int_eq(symlink(at("victim"), at("node")), 0);
	else if (dirs[_i].mode == S_IFIFO)
		fp_assert_int_eq(mkfifo(at("node"), 0600), 0);
	else {
		fp_assert_int_eq(mkdir(at("node"), 0700), 0);
		fp_assert_int_eq(chmod(at("node"), dirs[_i].mode), 0);
		if (dirs[_i].foreign)
			fp_assert_int_eq(chown(at("node"), nobody, nogroup), 0);
	}
	parent = open(root, O_RDONLY | O_DIRECTORY);
	fp_assert_int_ge(parent, 0);
	rc = fpd_fs_open_subdir(parent, "node", 0750, &me, &fd, NULL, &why);
	fp_assert_int_eq(rc, dirs[_i].rc);
	if (rc == 0)
		close(fd);
	else
		fp_assert_str_eq(why, dirs[_i].why);
	close(parent);
	fp_assert_str_eq(read_file(at("victim/manifest.json")), "root's\n");
}
END_TEST

/* Group write is refused whatever the group: a group is other users
 * (nogroup is shared by many daemons), even the run's own. */
START_TEST(group_writable)
{
	const char *why = NULL;
	struct fpd_trust t = me;
	int fd;

	fp_assert_int_eq(mkdir(at("g"), 0770), 0);
	fp_assert_int_eq(chmod(at("g"), 0770), 0);
	fp_assert_int_eq(fpd_fs_open_dir(at("g"), 0, &t, &fd, NULL, &why), -EPERM);
	fp_assert_str_eq(why, "is writable by its group");
	if (as_root()) {
		fp_assert_int_eq(chown(at("g"), 0, nogroup), 0);
		t.gid = nogroup;
		fp_assert_int_eq(fpd_fs_open_dir(at("g"), 0, &t, &fd, NULL, &why),
				 -EPERM);
	}
	fp_assert_int_eq(chmod(at("g"), 0750), 0);
	fp_assert_int_eq(fpd_fs_open_dir(at("g"), 0, &t, &fd, NULL, &why), 0);
	close(fd);
}
END_TEST

/* A link in the path is followed only where root or the run's user made
 * it, in a directory no one else can write. */
START_TEST(links_in_path)
{
	const char *why = NULL;
	int fd;

	fp_assert_int_eq(mkdir(at("real"), 0755), 0);
	fp_assert_int_eq(mkdir(at("real/out"), 0755), 0);
	/* ours, in a directory of ours: followed, also mid-path */
	fp_assert_int_eq(symlink("real", at("mine")), 0);
	fp_assert_int_eq(fpd_fs_open_dir(at("mine/out"), 0, &me, &fd, NULL, &why), 0);
	close(fd);
	fp_assert_int_eq(fpd_fs_open_dir(at("mine/new"), 0750, &me, &fd, NULL, &why), 0);
	close(fd);
	fp_assert_int_eq(access(at("real/new"), F_OK), 0);
	/* in a sticky 1777 directory, even one of ours is not */
	fp_assert_int_eq(mkdir(at("tmp"), 01777), 0);
	fp_assert_int_eq(chmod(at("tmp"), 01777), 0);
	fp_assert_int_eq(symlink(at("real"), at("tmp/l")), 0);
	fp_assert_int_eq(fpd_fs_open_dir(at("tmp/l/out"), 0, &me, &fd, NULL, &why),
			 -ELOOP);
	fp_assert_int_eq(fpd_fs_open_dir(at("tmp/l"), 0, &me, &fd, NULL, &why),
			 -ELOOP);
	/* another user's link, in a directory of ours */
	if (as_root()) {
		fp_assert_int_eq(lchown(at("mine"), nobody, nogroup), 0);
		fp_assert_int_eq(fpd_fs_open_dir(at("mine/out"), 0, &me, &fd, NULL,
						 &why), -ELOOP);
	}
	/* a loop of links ends */
	fp_assert_int_eq(symlink("loop", at("loop")), 0);
	fp_assert_int_eq(fpd_fs_open_dir(at("loop/x"), 0, &me, &fd, NULL, &why),
			 -ELOOP);
}
END_TEST

/* ---- files ---------------------------------------------------------------- */

START_TEST(create_never_through_a_link)
{
	struct fpd_made made;
	int dir = open(root, O_RDONLY | O_DIRECTORY), fd;

	write_file(at("victim"), "precious\n");
	fp_assert_int_eq(symlink(at("victim"), at("taken")), 0);
	fp_assert_int_eq(symlink(at("nothing-there"), at("dangling")), 0);
	fp_assert_int_eq(fpd_fs_create(dir, "taken", O_WRONLY, 0600, &made), -EEXIST);
	fp_assert_int_eq(fpd_fs_create(dir, "dangling", O_WRONLY, 0600, &made), -EEXIST);
	fp_assert_int_eq(access(at("nothing-there"), F_OK), -1);
	fd = fpd_fs_create(dir, "new", O_WRONLY, 0600, &made);
	fp_assert_int_ge(fd, 0);
	close(fd);
	fp_assert_int_eq(fpd_fs_is_made(dir, "new", &made), 0);
	fp_assert_int_eq(fpd_fs_is_made(dir, "taken", &made), -ESTALE);
	close(dir);
	fp_assert_str_eq(read_file(at("victim")), "precious\n");
}
END_TEST

static const struct {
	const char *what;
	int rc;
	const char *why;
} files[] = {
	{ "regular", 0, NULL },
	{ "link", -ELOOP, "is a symbolic link" },
	{ "fifo", -EPERM, "is not a regular file" },
	{ "hardlink", -EPERM, "has other hard links" },
	{ "foreign", -EPERM, "belongs to another user" },
};

START_TEST(open_file_refused)
{
	const char *why = NULL, *w = files[_i].what;
	int dir, fd;

	if (strcmp(w, "foreign") == 0 && !as_root())
		return;
	write_file(at("victim"), "precious\n");
	if (strcmp(w, "link") == 0)
		fp_assert_int_eq(symlink(at("victim"), at("f")), 0);
	else if (strcmp(w, "fifo") == 0)
		fp_assert_int_eq(mkfifo(at("f"), 0600), 0);	/* no writer: */
	else if (strcmp(w, "hardlink") == 0)		/* open would block */
		fp_assert_int_eq(link(at("victim"), at("f")), 0);
	else
		write_file(at("f"), "");
	if (strcmp(w, "foreign") == 0)
		fp_assert_int_eq(chown(at("f"), nobody, nogroup), 0);
	dir = open(root, O_RDONLY | O_DIRECTORY);
	fd = fpd_fs_open_file(dir, "f", O_WRONLY | O_APPEND, &me, NULL, &why);
	if (files[_i].rc == 0) {
		fp_assert_int_ge(fd, 0);
		fp_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
		close(fd);
	} else {
		fp_assert_int_eq(fd, files[_i].rc);
		fp_assert_str_eq(why, files[_i].why);
	}
	close(dir);
	fp_assert_str_eq(read_file(at("victim")), "precious\n");
}
END_TEST

/* A file of another user read as root (the node's cookie): its own
 * file in its own directory, never a link, FIFO, hard link or a file
 * someone else put there. */
START_TEST(foreign_file)
{
	const char *why = NULL;
	struct stat st;
	int fd;

	fp_assert_int_eq(mkdir(at("home"), 0755), 0);
	write_file(at("victim"), "precious\n");
	write_file(at("home/cookie"), "COOKIE\n");
	if (as_root()) {
		fp_assert_int_eq(chown(at("home"), nobody, nogroup), 0);
		fp_assert_int_eq(chown(at("home/cookie"), nobody, nogroup), 0);
	}
	fd = fpd_fs_open_foreign_file(at("home/cookie"), &me, &st, &why);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	close(fd);

	/* the last component a link, a FIFO (open would block), a hard link */
	fp_assert_int_eq(symlink(at("victim"), at("home/link")), 0);
	fp_assert_int_eq(fpd_fs_open_foreign_file(at("home/link"), &me, &st, &why),
			 -ELOOP);
	fp_assert_str_eq(why, "is a symbolic link");
	fp_assert_int_eq(mkfifo(at("home/fifo"), 0600), 0);
	fp_assert_int_eq(fpd_fs_open_foreign_file(at("home/fifo"), &me, &st, &why),
			 -EPERM);
	fp_assert_str_eq(why, "is not a regular file");
	fp_assert_int_eq(link(at("victim"), at("home/hard")), 0);
	fp_assert_int_eq(fpd_fs_open_foreign_file(at("home/hard"), &me, &st, &why),
			 -EPERM);
	fp_assert_str_eq(why, "has other hard links");

	if (!as_root())
		return;
	/* a directory on the way a link the other user made */
	fp_assert_int_eq(mkdir(at("secret"), 0700), 0);
	write_file(at("secret/cookie"), "ROOT\n");
	fp_assert_int_eq(symlink(at("secret"), at("home/dir")), 0);
	fp_assert_int_eq(lchown(at("home/dir"), nobody, nogroup), 0);
	fp_assert_int_eq(fpd_fs_open_foreign_file(at("home/dir/cookie"), &me, &st,
						  &why), -ELOOP);
	/* someone else's file in a directory of a third user */
	write_file(at("home/planted"), "X\n");
	fp_assert_int_eq(chown(at("home/planted"), nobody + 1, nogroup), 0);
	fp_assert_int_eq(fpd_fs_open_foreign_file(at("home/planted"), &me, &st,
						  &why), -EPERM);
	/* a directory everyone can write to, not sticky */
	fp_assert_int_eq(chmod(at("home"), 0777), 0);
	fp_assert_int_eq(fpd_fs_open_foreign_file(at("home/cookie"), &me, &st,
						  &why), -EPERM);
	fp_assert_str_eq(why, "is in a directory others can write to");
	fp_assert_str_eq(read_file(at("victim")), "precious\n");
}
END_TEST

START_TEST(unlink_and_chown_only_what_was_made)
{
	int dir = open(root, O_RDONLY | O_DIRECTORY), fd;
	struct fpd_made made;

	fd = fpd_fs_create(dir, "f", O_WRONLY, 0600, &made);
	fp_assert_int_ge(fd, 0);
	close(fd);
	/* replaced by another file under the same name */
	write_file(at("g"), "other\n");
	fp_assert_int_eq(rename(at("g"), at("f")), 0);
	fp_assert_int_eq(fpd_fs_unlink_made(dir, "f", &made), -ESTALE);
	fp_assert_int_eq(fpd_fs_chown_made(dir, "f", &made, me.uid, me.gid), -ESTALE);
	fp_assert_str_eq(read_file(at("f")), "other\n");
	/* a link to it under the name */
	fp_assert_int_eq(unlink(at("f")), 0);
	fd = fpd_fs_create(dir, "f", O_WRONLY, 0600, &made);
	close(fd);
	fp_assert_int_eq(rename(at("f"), at("real")), 0);
	fp_assert_int_eq(symlink("real", at("f")), 0);
	fp_assert_int_eq(fpd_fs_unlink_made(dir, "f", &made), -ESTALE);
	fp_assert_int_eq(fpd_fs_chown_made(dir, "f", &made, me.uid, me.gid), -ELOOP);
	fp_assert_int_eq(fpd_fs_unlink_made(dir, "real", &made), 0);
	fp_assert_int_eq(access(at("real"), F_OK), -1);
	/* nothing recorded: nothing done */
	memset(&made, 0, sizeof(made));
	fp_assert_int_eq(fpd_fs_chown_made(dir, NULL, &made, me.uid, me.gid), -ESTALE);
	close(dir);
}
END_TEST

/* The daemon's own temporary names: a link or a leftover of ours there is
 * cleared, anything else left; a FIFO as the index does not block. */
START_TEST(own_names_cleared)
{
	int dir = open(root, O_RDONLY | O_DIRECTORY);
	struct fpd_file_entry *e;
	size_t n;

	write_file(at("victim"), "precious\n");
	fp_assert_int_eq(symlink(at("victim"), at(".manifest.json.tmp")), 0);
	fp_assert_int_eq(fpd_fs_clear_own_name(dir, ".manifest.json.tmp", &me), 0);
	fp_assert(!there(".manifest.json.tmp"));
	fp_assert_str_eq(read_file(at("victim")), "precious\n");
	fp_assert_int_eq(link(at("victim"), at(".manifest.json.tmp")), 0);
	fp_assert_int_eq(fpd_fs_clear_own_name(dir, ".manifest.json.tmp", &me), -EPERM);
	fp_assert(there(".manifest.json.tmp"));
	fp_assert_int_eq(mkfifo(at(".flame_profd.index.tmp"), 0600), 0);
	fp_assert_int_eq(fpd_fs_clear_own_name(dir, ".flame_profd.index.tmp", &me), -EPERM);
	fp_assert_int_eq(fpd_fs_clear_own_name(dir, "nothing", &me), 0);
	fp_assert_int_eq(mkfifo(at(".flame_profd.index"), 0600), 0);
	fp_assert_int_eq(fpd_index_load(dir, &me, &e, &n), -EPERM);
	close(dir);
}
END_TEST

/* ---- retention and the index ---------------------------------------------- */

/* A file of ours, finished at @ms, in the index. */
static void
add_own(int dir, struct fpd_file_entry **e, size_t *n, uint64_t ms)
{
	struct fpd_file_entry entry = { .samples = 1, .bytes = 10 };
	int fd;

	fp_perf_name_format(entry.name, sizeof(entry.name), "a@b", ms, FP_PERF_PLAIN);
	fd = fpd_fs_create(dir, entry.name, O_WRONLY, 0600, &entry.made);
	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(write(fd, "0123456789", 10), 10);
	close(fd);
	entry.first_us = entry.last_us = ms * 1000;
	fpd_index_add(e, n, &entry);
}


START_TEST(retention_only_own_files)
{
	int dir = open(root, O_RDONLY | O_DIRECTORY);
	struct fpd_file_entry *e = NULL;
	char planted[2][FP_PERF_NAME_MAX], foreign[FP_PERF_NAME_MAX],
	     hard[FP_PERF_NAME_MAX], gone[2][FP_PERF_NAME_MAX];
	size_t n = 0;

	/* two names dated 2099, planted: not in the index */
	for (int i = 0; i < 2; i++) {
		fp_perf_name_format(planted[i], sizeof(planted[i]), "a@b",
				    MS_2099 + (uint64_t)i, FP_PERF_PLAIN);
		write_file(at(planted[i]), "planted\n");
	}
	/* another user's file and a hard link, named like ours */
	fp_perf_name_format(foreign, sizeof(foreign), "a@b", MS - 5000, FP_PERF_PLAIN);
	write_file(at(foreign), "theirs\n");
	if (as_root())
		fp_assert_int_eq(chown(at(foreign), nobody, nogroup), 0);
	for (int i = 0; i < 4; i++)
		add_own(dir, &e, &n, MS + (uint64_t)i * 1000);
	snprintf(gone[0], sizeof(gone[0]), "%s", e[0].name);
	snprintf(gone[1], sizeof(gone[1]), "%s", e[1].name);
	fp_perf_name_format(hard, sizeof(hard), "a@b", MS - 4000, FP_PERF_PLAIN);
	fp_assert_int_eq(link(at(e[0].name), at(hard)), 0);

	fp_assert_int_eq(fpd_retention_apply(dir, e, &n, 2, 0, 0,
					     MS * 1000 + 10000000), 2);
	fp_assert_int_eq(n, 2);
	fp_assert(there(planted[0]) && there(planted[1]));
	fp_assert(there(foreign) && there(hard));
	fp_assert(!there(gone[0]) && !there(gone[1]));
	for (size_t i = 0; i < n; i++)
		fp_assert(there(e[i].name));
	/* the two kept are the two finished last */
	{
		char last[FP_PERF_NAME_MAX];

		fp_perf_name_format(last, sizeof(last), "a@b", MS + 3000, FP_PERF_PLAIN);
		fp_assert_str_eq(e[1].name, last);
	}
	/* the index and manifest list what is left, with identities */
	fp_assert_int_eq(fpd_index_store(dir, &me, e, &n, "a@b", "25", "{}", 0600, NULL), 0);
	{
		struct fpd_file_entry *back;
		size_t nback;

		fp_assert_int_eq(fpd_index_load(dir, &me, &back, &nback), 0);
		fp_assert_int_eq(nback, 2);
		for (size_t i = 0; i < nback; i++) {
			fp_assert_str_eq(back[i].name, e[i].name);
			fp_assert(back[i].made.ino == e[i].made.ino);
			fp_assert(back[i].made.dev == e[i].made.dev);
		}
		free(back);
	}
	fp_assert(strstr(read_file(at("manifest.json")), planted[0]) == NULL);
	free(e);
	close(dir);
}
END_TEST

/* Files of ours named for the future (a clock set back) go in the order
 * they were finished: they do not push the present ones out. */
START_TEST(retention_future_dated)
{
	int dir = open(root, O_RDONLY | O_DIRECTORY);
	struct fpd_file_entry *e = NULL;
	char first[FP_PERF_NAME_MAX];
	size_t n = 0;

	add_own(dir, &e, &n, MS_2099);
	add_own(dir, &e, &n, MS_2099 + 1);
	snprintf(first, sizeof(first), "%s", e[0].name);
	add_own(dir, &e, &n, MS);
	add_own(dir, &e, &n, MS + 1000);
	fp_assert_int_eq(fpd_retention_apply(dir, e, &n, 3, 0, 0, MS * 1000 + 2000000), 1);
	fp_assert_int_eq(n, 3);
	fp_assert(!there(first));
	fp_assert(e[1].made.ino && e[0].future_told);
	/* by age: a date in the future is not trusted to be young or old;
	 * the present files past the age go, the newest stays */
	fp_assert_int_eq(fpd_retention_apply(dir, e, &n, 0, 0, 1000000,
					     MS * 1000 + 60000000), 1);
	fp_assert_int_eq(n, 2);
	free(e);
	close(dir);
}
END_TEST

/* A file the index lists but that was replaced is left alone and leaves
 * the index; entries of an older index (no identity) never count. */
START_TEST(retention_replaced_and_unknown)
{
	int dir = open(root, O_RDONLY | O_DIRECTORY);
	struct fpd_file_entry *e = NULL, old = { .bytes = 10 };
	size_t n = 0;

	fp_perf_name_format(old.name, sizeof(old.name), "a@b", MS - 1000, FP_PERF_PLAIN);
	write_file(at(old.name), "old run\n");
	fpd_index_add(&e, &n, &old);
	for (int i = 0; i < 3; i++)
		add_own(dir, &e, &n, MS + (uint64_t)i * 1000);
	write_file(at("swap"), "someone's\n");
	fp_assert_int_eq(rename(at("swap"), at(e[1].name)), 0);
	/* the replaced one is left, off the index; the next goes */
	fp_assert_int_eq(fpd_retention_apply(dir, e, &n, 1, 0, 0, MS * 1000 + 10000000), 1);
	fp_assert_int_eq(n, 2);		/* the unknown one, the last one */
	fp_assert(there(old.name));
	fp_assert(e[0].made.ino == 0);
	{
		char name[FP_PERF_NAME_MAX];

		/* e[1] was MS: replaced, so never deleted */
		fp_perf_name_format(name, sizeof(name), "a@b", MS, FP_PERF_PLAIN);
		fp_assert_str_eq(read_file(at(name)), "someone's\n");
	}
	free(e);
	close(dir);
}
END_TEST

START_TEST(index_old_lines)
{
	int dir = open(root, O_RDONLY | O_DIRECTORY);
	struct fpd_file_entry *e;
	size_t n;

	write_file(at(".flame_profd.index"),
		   "a@b.20261121T075630.018Z.perf 1 2 3 4 5 6 0\n"
		   "a@b.20261121T075631.018Z.perf 1 2 3 4 5 6 1 7\n"
		   "a@b.20261121T075632.018Z.perf 1 2 3 4 5 6 0 7 8 9\n");
	fp_assert_int_eq(fpd_index_load(dir, &me, &e, &n), 0);
	fp_assert_int_eq(n, 3);
	fp_assert(e[0].made.ino == 0 && e[1].made.ino == 0);
	fp_assert_int_eq(e[1].events, 7);
	fp_assert(e[2].made.dev == 8 && e[2].made.ino == 9);
	free(e);
	close(dir);
}
END_TEST

/* ---- recovery ------------------------------------------------------------- */

START_TEST(recover_leaves_others_alone)
{
	struct fpd_trust t = me;
	struct fpd_file_entry *e = NULL;
	char name[FP_PERF_NAME_MAX], partial[FP_PERF_PARTIAL_MAX],
	     future[FP_PERF_NAME_MAX];
	unsigned unfinished = 0;
	size_t n = 0;
	int dir;

	/* a hard link at a partial name to a file elsewhere: never cut */
	write_file(at("victim"), "precious and long enough to be cut\n");
	fp_perf_name_format(name, sizeof(name), "a@b", MS, FP_PERF_PLAIN);
	fp_perf_partial_format(partial, sizeof(partial), name);
	fp_assert_int_eq(link(at("victim"), at(partial)), 0);
	/* a link at another partial name */
	fp_perf_name_format(name, sizeof(name), "a@b", MS + 1, FP_PERF_PLAIN);
	fp_perf_partial_format(partial, sizeof(partial), name);
	fp_assert_int_eq(symlink(at("victim"), at(partial)), 0);
	/* a finished name dated 2099, not in the index */
	fp_perf_name_format(future, sizeof(future), "a@b", MS_2099, FP_PERF_PLAIN);
	write_file(at(future), "# planted\n");
	dir = open(root, O_RDONLY | O_DIRECTORY);
	fpd_recover(dir, root, "a@b", &t, &e, &n, &unfinished);
	fp_assert_int_eq(n, 0);
	fp_assert_str_eq(read_file(at("victim")),
			 "precious and long enough to be cut\n");
	fp_assert(there(future) && there(partial));
	free(e);
	close(dir);
}
END_TEST

/* ---- the output directory ------------------------------------------------- */

/* NULL when refused, with the message logged (fpd_fatal()). */
static struct fpd_output *
output_new(const char *dir)
{
	struct fpd_output *out = NULL;
	struct fpd_output_config oc = {
		.dir = dir,
		.node = "a@b",
		.header = "# test\n",
		.options_json = "{}",
		.compress = FPD_COMPRESS_NONE,
		.rotate_us = 3600000000u,
		.file_mode = 0600,
		.dir_mode = 0700,
		.uid = me.uid,
		.gid = me.gid,
	};

	fpd_output_new(&oc, &out);
	return out;
}

/* The run's log, to read what fpd_fatal() said. */
static void
log_start(void)
{
	const char *why = NULL;

	fp_assert_int_eq(fpd_log_open(at("log"), 0, 0600, &me, &why), 0);
}

static char *
log_text(void)
{
	fpd_log_close();
	return read_file(at("log"));
}

START_TEST(output_node_dir_link)
{
	log_start();
	fp_assert_int_eq(mkdir(at("out"), 0755), 0);
	fp_assert_int_eq(mkdir(at("victim"), 0700), 0);
	write_file(at("victim/manifest.json"), "root's\n");
	fp_assert_int_eq(symlink(at("victim"), at("out/a@b")), 0);
	fp_assert_ptr_null(output_new(at("out")));
	fp_assert(strstr(log_text(), "a@b is a symbolic link") != NULL);
	fp_assert_str_eq(read_file(at("victim/manifest.json")), "root's\n");
	fp_assert_int_eq(access(at("victim/.flame_profd.lock"), F_OK), -1);
}
END_TEST

START_TEST(output_sticky_out)
{
	log_start();
	fp_assert_int_eq(mkdir(at("out"), 01777), 0);
	fp_assert_int_eq(chmod(at("out"), 01777), 0);
	fp_assert_ptr_null(output_new(at("out")));
	fp_assert(strstr(log_text(), "out is writable by all users") != NULL);
	fp_assert_int_eq(access(at("out/a@b"), F_OK), -1);
}
END_TEST

/* Links (and a file) at the next names: the next free name is used. */
START_TEST(output_taken_names)
{
	char name[FP_PERF_NAME_MAX], partial[FP_PERF_PARTIAL_MAX],
	     path[FP_PERF_PARTIAL_MAX + 16];
	struct fpd_output *out;
	struct stat st;
	bool fresh;

	out = output_new(at("out"));
	fp_assert_ptr_nonnull(out);
	write_file(at("victim"), "precious\n");
	/* MS: a link at the partial name; MS+1: a link at the finished
	 * name; MS+2: a file at the finished name */
	for (int i = 0; i < 3; i++) {
		fp_perf_name_format(name, sizeof(name), "a@b", MS + (uint64_t)i,
				    FP_PERF_PLAIN);
		fp_perf_partial_format(partial, sizeof(partial), name);
		snprintf(path, sizeof(path), "out/a@b/%s", i == 0 ? partial : name);
		if (i < 2)
			fp_assert_int_eq(symlink(at("victim"), at(path)), 0);
		else
			write_file(at(path), "someone's\n");
	}
	fp_assert_ptr_nonnull(fpd_output_buffer(out, true, MS * 1000, &fresh));
	fp_assert(fresh);
	fp_perf_name_format(name, sizeof(name), "a@b", MS + 3, FP_PERF_PLAIN);
	fp_perf_partial_format(partial, sizeof(partial), name);
	snprintf(path, sizeof(path), "out/a@b/%s", partial);
	fp_assert_int_eq(lstat(at(path), &st), 0);
	fp_assert(S_ISREG(st.st_mode));
	fpd_output_destroy(out);
	fp_assert_str_eq(read_file(at("victim")), "precious\n");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("fs-safe");
	TCase *tc;

	tc = tcase_create("directories");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, dir_made_and_reopened);
	tcase_add_loop_test(tc, subdir_refused, 0, sizeof(dirs) / sizeof(dirs[0]));
	tcase_add_test(tc, group_writable);
	tcase_add_test(tc, links_in_path);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, create_never_through_a_link);
	tcase_add_loop_test(tc, open_file_refused, 0, sizeof(files) / sizeof(files[0]));
	tcase_add_test(tc, foreign_file);
	tcase_add_test(tc, unlink_and_chown_only_what_was_made);
	tcase_add_test(tc, own_names_cleared);
	suite_add_tcase(s, tc);

	tc = tcase_create("retention");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, retention_only_own_files);
	tcase_add_test(tc, retention_future_dated);
	tcase_add_test(tc, retention_replaced_and_unknown);
	tcase_add_test(tc, index_old_lines);
	tcase_add_test(tc, recover_leaves_others_alone);
	suite_add_tcase(s, tc);

	tc = tcase_create("output");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, output_node_dir_link);
	tcase_add_test(tc, output_sticky_out);
	tcase_add_test(tc, output_taken_names);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
