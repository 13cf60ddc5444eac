/*
 * flame_profd — daemon logging: stderr or --log-file, level checked
 * before formatting, and libsample's messages routed through here.
 *
 * Warnings are rate-limited by kind, a kind being the call site's format
 * string: a node that fails every request (a misnamed --name, a node
 * that answers badrpc) would otherwise write a line per request. Errors
 * and everything below warnings pass: errors are few and end the run,
 * info and debug lines are periodic or asked for with -v; so do the
 * warnings of events each of which an operator must see (a lost
 * connection: one per reconnect, which backs off).
 *
 * Lines come from the event loop and from --push's thread: one lock
 * keeps a line whole, the rate limits counted once and the stream open
 * while a line is written to it (SIGHUP's reopen swaps it under the
 * same lock). The node a line is of is the thread's own.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-log.h"
#include "util.h"
#include "util-mem.h"

#define LIMIT_US 10000000u	/* one warning per kind per 10 s */
#define LIMIT_KINDS 64

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_stream;
static char *log_path;
static int log_dirfd = -1;	/* the directory checked at start-up */
static const char *log_base;	/* the file's name in it (in log_path) */
static struct fpd_trust log_trust;
static char dir_why[4096 + 128];	/* why the log's directory was refused */
static mode_t log_mode;
static bool log_created;	/* the file was made by fpd_log_open() */
static enum fp_log_priority log_threshold = FP_LOG_INFO;
/* the node a line is of (fpd_log_set_node()), the calling thread's */
static _Thread_local const char *log_node;

/* A kind of warning: when one was last printed, how many were withheld
 * since. */
static struct limit {
	const char *kind;
	const char *node;	/* of the node it was logged for, or NULL */
	uint64_t shown_us;
	uint64_t suppressed;
} limits[LIMIT_KINDS];

static const char *
priority_name(enum fp_log_priority p)
{
	switch (p) {
	case FP_LOG_DEBUG: return "debug";
	case FP_LOG_INFO: return "info";
	case FP_LOG_WARNING: return "warning";
	case FP_LOG_ERROR: return "error";
	}
	return "?";
}

static void
print_line(enum fp_log_priority priority, const char *format, va_list args,
	   uint64_t suppressed)
	__attribute__((format(printf, 2, 0)));

static void
print_line(enum fp_log_priority priority, const char *format, va_list args,
	   uint64_t suppressed)
{
	FILE *f = log_stream ? log_stream : stderr;
	char stamp[40];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "%s.%03ldZ flame_profd %s: ", stamp, ts.tv_nsec / 1000000,
		priority_name(priority));
	if (log_node)
		fprintf(f, "[%s] ", log_node);
	vfprintf(f, format, args);
	if (suppressed)
		fprintf(f, " (and %llu more like this since the last one shown)",
			(unsigned long long)suppressed);
	fputc('\n', f);
	fflush(f);
}

static void
print_plain(enum fp_log_priority priority, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static void
print_plain(enum fp_log_priority priority, const char *format, ...)
{
	va_list args;

	va_start(args, format);
	print_line(priority, format, args, 0);
	va_end(args);
}

/* The count of a kind no later line will carry. */
static void
print_summary(const struct limit *l)
{
	if (FP_LOG_WARNING >= log_threshold)
		print_plain(FP_LOG_WARNING, "%llu more warnings were not shown, like: %s",
			    (unsigned long long)l->suppressed, l->kind);
}

/*
 * Whether a warning of @kind at @now_us is printed: the first of its
 * kind, then one per LIMIT_US after the last one printed. *suppressed is
 * what was withheld in between, for the line printed. A kind new when
 * every slot is taken takes the one printed longest ago, whose count is
 * summed up first.
 */
static bool
limit_pass(const char *kind, uint64_t now_us, uint64_t *suppressed)
{
	struct limit *l = NULL, *oldest = &limits[0];

	for (size_t i = 0; i < LIMIT_KINDS; i++) {
		if (limits[i].kind == kind && limits[i].node == log_node) {
			l = &limits[i];
			break;
		}
		if (!limits[i].kind || (oldest->kind &&
					limits[i].shown_us < oldest->shown_us))
			oldest = &limits[i];
	}
	if (!l) {
		if (oldest->kind && oldest->suppressed) {
			struct limit gone = *oldest;

			oldest->kind = NULL;
			print_summary(&gone);
		}
		*oldest = (struct limit){ .kind = kind, .node = log_node,
					  .shown_us = now_us };
		*suppressed = 0;
		return true;
	}
	if (now_us - l->shown_us < LIMIT_US) {
		l->suppressed++;
		return false;
	}
	*suppressed = l->suppressed;
	l->shown_us = now_us;
	l->suppressed = 0;
	return true;
}

static void
vlog_at(enum fp_log_priority priority, const char *format, va_list args,
	uint64_t now_us)
	__attribute__((format(printf, 2, 0)));

/* A line, under log_lock. */
static void
vlog_locked(enum fp_log_priority priority, const char *format, va_list args,
	    uint64_t now_us)
	__attribute__((format(printf, 2, 0), noinline));

static void
vlog_locked(enum fp_log_priority priority, const char *format, va_list args,
	    uint64_t now_us)
{
	uint64_t suppressed = 0;

	if (priority == FP_LOG_WARNING &&
	    !limit_pass(format, now_us, &suppressed))
		return;
	print_line(priority, format, args, suppressed);
}

static void
vlog_at(enum fp_log_priority priority, const char *format, va_list args,
	uint64_t now_us)
{
	if (priority < log_threshold)
		return;
	pthread_mutex_lock(&log_lock);
	vlog_locked(priority, format, args, now_us);
	pthread_mutex_unlock(&log_lock);
}

static void
vlog(enum fp_log_priority priority, const char *format, va_list args)
	__attribute__((format(printf, 2, 0)));

static void
vlog(enum fp_log_priority priority, const char *format, va_list args)
{
	vlog_at(priority, format, args, fpd_now_mono_us());
}

static void
library_handler(enum fp_log_priority priority, const char *format,
		va_list args)
	__attribute__((format(printf, 2, 0)));

static void
library_handler(enum fp_log_priority priority, const char *format,
		va_list args)
{
	vlog(priority, format, args);
}

void
fpd_log_set_node(const char *node)
{
	log_node = node;
}

void
fpd_log(enum fp_log_priority priority, const char *format, ...)
{
	va_list args;

	if (priority < log_threshold)
		return;
	va_start(args, format);
	vlog(priority, format, args);
	va_end(args);
}

void
fpd_warn_event(const char *format, ...)
{
	va_list args;

	if (FP_LOG_WARNING < log_threshold)
		return;
	va_start(args, format);
	pthread_mutex_lock(&log_lock);
	print_line(FP_LOG_WARNING, format, args, 0);
	pthread_mutex_unlock(&log_lock);
	va_end(args);
}

void
fpd_fatal(const char *format, ...)
{
	va_list args;

	va_start(args, format);
	pthread_mutex_lock(&log_lock);
	fputs("flame_profd: error: ", stderr);
	vfprintf(stderr, format, args);
	fputc('\n', stderr);
	va_end(args);
	if (log_stream) {
		va_start(args, format);
		print_line(FP_LOG_ERROR, format, args, 0);
		va_end(args);
	}
	pthread_mutex_unlock(&log_lock);
}

/*
 * Append to the log file, making it with --file-mode if it is not there
 * (the umask does not narrow it: the mode is what the user asked for).
 * Never through a link, never a file another user could have put there
 * (fs-safe.h).
 */
static FILE *
open_log(mode_t mode, bool *created, const char **why)
{
	FILE *f;
	int fd;

	*created = false;
	fd = fpd_fs_create(log_dirfd, log_base, O_WRONLY | O_APPEND, mode, NULL);
	if (fd >= 0) {
		*created = true;
		if (fchmod(fd, mode) < 0)
			goto close_fd;
	} else if (fd == -EEXIST) {
		fd = fpd_fs_open_file(log_dirfd, log_base, O_WRONLY | O_APPEND,
				      &log_trust, NULL, why);
		if (fd < 0) {
			errno = -fd;
			return NULL;
		}
	} else {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "a");
	if (!f)
		goto close_fd;
	return f;

close_fd:
	{
		int err = errno;

		close(fd);
		errno = err;
	}
	return NULL;
}

int
fpd_log_open(const char *path, int verbosity, mode_t mode,
	     const struct fpd_trust *trust, const char **why)
{
	char *dir, *slash;
	int rc;

	*why = NULL;
	log_threshold = verbosity > 0 ? FP_LOG_DEBUG :
			verbosity < 0 ? FP_LOG_WARNING : FP_LOG_INFO;
	fp_log_set_handler(library_handler, log_threshold);
	if (!path)
		return 0;
	slash = strrchr(path, '/');
	if (!*path || (slash && !slash[1]))
		return -EISDIR;
	log_path = xstrdup(path);
	log_mode = mode;
	log_trust = *trust;
	log_base = slash ? log_path + (slash - path) + 1 : log_path;
	if (slash) {
		size_t len = slash == path ? 1 : (size_t)(slash - path);

		dir = xzalloc(len + 1);
		memcpy(dir, path, len);
	} else {
		dir = xstrdup(".");
	}
	rc = fpd_fs_open_dir(dir, 0, trust, &log_dirfd, NULL, why);
	if (rc < 0 && *why) {
		/* the sentence names the file: say it is about its directory */
		snprintf(dir_why, sizeof(dir_why), "is in %s, which %s", dir, *why);
		*why = dir_why;
	}
	free(dir);
	if (rc < 0)
		goto fail;
	log_stream = open_log(mode, &log_created, why);
	if (!log_stream) {
		rc = -errno;
		goto fail;
	}
	return 0;

fail:
	if (log_dirfd >= 0)
		close(log_dirfd);
	log_dirfd = -1;
	free(log_path);
	log_path = NULL;
	return rc;
}

int
fpd_log_chown(uid_t uid, gid_t gid, const char *user)
{
	struct stat st;

	if (!log_stream)
		return 0;
	/* A file the daemon made is its own: the user it runs as must be
	 * able to open it again on SIGHUP, and logrotate's "create" copies
	 * the owner of the file it rotates. A file that was there is
	 * someone's choice: left alone, with a word if it will not
	 * reopen. */
	if (log_created) {
		if (fchown(fileno(log_stream), uid, gid) < 0)
			return -errno;
		return 0;
	}
	if (fstat(fileno(log_stream), &st) == 0 && st.st_uid != uid)
		fpd_warn("log file %s is owned by uid %u, not by %s: after "
			 "logrotate, SIGHUP can reopen it only if the new file "
			 "is %s's or the directory is writable by %s",
			 log_path, (unsigned)st.st_uid, user, user, user);
	return 0;
}

int
fpd_log_reopen(void)
{
	const char *why = NULL;
	FILE *f;
	bool created;

	if (!log_path)
		return 0;
	f = open_log(log_mode, &created, &why);
	if (!f) {
		int rc = -errno;

		if (why)
			fpd_err("log file %s %s: not reopened", log_path, why);
		return rc;
	}
	pthread_mutex_lock(&log_lock);
	if (log_stream)
		fclose(log_stream);
	log_stream = f;
	pthread_mutex_unlock(&log_lock);
	return 0;
}

void
fpd_log_close(void)
{
	/* what the last lines of each kind did not show */
	pthread_mutex_lock(&log_lock);
	for (size_t i = 0; i < LIMIT_KINDS; i++) {
		if (limits[i].kind && limits[i].suppressed) {
			struct limit gone = limits[i];

			limits[i].kind = NULL;
			print_summary(&gone);
		}
	}
	if (log_stream)
		fclose(log_stream);
	log_stream = NULL;
	pthread_mutex_unlock(&log_lock);
	if (log_dirfd >= 0)
		close(log_dirfd);
	log_dirfd = -1;
	free(log_path);
	log_path = NULL;
}
