/*
 * flame_profd — the daemon's log: stderr or --log-file (daemon-log.c).
 */
#pragma once

#include <sys/types.h>

#include "fp/log.h"
#include "fs-safe.h"

/**
 * Log to stderr, or append to @path (made with @mode if absent). The
 * file's directory is opened as fs-safe.h's fpd_fs_open_dir() does and
 * kept for fpd_log_reopen(); the file is opened without following a link
 * and must be regular, with one link, owned by root or @trust's user.
 * @return 0, or a negative errno; -EPERM, -ELOOP or -ENOTDIR set *why.
 */
int
fpd_log_open(const char *path, int verbosity, mode_t mode,
	     const struct fpd_trust *trust, const char **why);

/* Hand the log file to the user the daemon drops to (as root, before the
 * drop), if the daemon made it; 0 or a negative errno. */
int
fpd_log_chown(uid_t uid, gid_t gid, const char *user);

/** Reopen the log file (SIGHUP, after logrotate); 0 or a negative
 * errno (logging goes on to the old file then). */
int
fpd_log_reopen(void);

/** Close the log file; logging goes to stderr again. */
void
fpd_log_close(void);

/**
 * The lines logged from here on are of @node (NULL: of none): they
 * start with "[@node] " and are rate-limited apart from other nodes'.
 * @node is shown as it is (escaped by the caller) and must outlive its
 * use; a run of several nodes sets it around each node's work.
 */
void
fpd_log_set_node(const char *node);

/** A line at @priority, if the verbosity lets it through; warnings are
 * rate-limited by their format string. */
void
fpd_log(enum fp_log_priority priority, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/**
 * Why the run ends with an exit code (enum fpd_exit): one
 * "flame_profd: error: ..." line on stderr, what whoever started the
 * daemon reads whatever the log, and the same at error level in the log
 * file when there is one.
 */
void
fpd_fatal(const char *format, ...) __attribute__((format(printf, 1, 2)));

/**
 * A warning of an event each of which matters (a lost connection), never
 * rate-limited as other warnings are by kind; its causes must bound how
 * often it comes.
 */
void
fpd_warn_event(const char *format, ...) __attribute__((format(printf, 1, 2)));

#define fpd_info(...) fpd_log(FP_LOG_INFO, __VA_ARGS__)
#define fpd_warn(...) fpd_log(FP_LOG_WARNING, __VA_ARGS__)
#define fpd_err(...) fpd_log(FP_LOG_ERROR, __VA_ARGS__)
#define fpd_debug(...) fpd_log(FP_LOG_DEBUG, __VA_ARGS__)
