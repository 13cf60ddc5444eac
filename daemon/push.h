/*
 * flame_profd — --push: every finished file of every node, turned into a
 * pprof profile (formats' pprof.h) and sent to a Pyroscope-compatible
 * server's /ingest, or with --push-format otlp into an OTLP profiles
 * export request (otlp.h) sent to an OTLP/HTTP receiver's
 * /v1development/profiles (docs/OPERATIONS.md, "Pushing profiles").
 *
 * The loop only hands over the name of a file it has finished; a thread
 * of the pusher's own reads the file, writes the profile into the node's
 * spool (DIR/<node>/push-spool/, through fs-safe.h) and sends the spool,
 * oldest first, with libcurl. A profile leaves the spool only after the
 * server's 2xx, so a slow or absent server never holds up sampling, and
 * a restart sends what the last run left first.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-safe.h"

struct fpd_output;

#define FPD_PUSH_SPOOL_DIR "push-spool"
#define FPD_PUSH_SPOOL_MIN (64u << 10)	/* --push-spool-max at least 64K */

struct fpd_push_config {
	const char *url;		/* --push: the server (".../ingest",
					 * ".../v1development/profiles" or its
					 * base, the format's path then added) */
	const char *header_file;	/* --push-header-file, or NULL */
	const char *service;		/* --push-service, or NULL: each
					 * node's name before the @ */
	bool otlp;			/* --push-format otlp: OTLP profiles
					 * to URL's /v1development/profiles */
	uint64_t spool_max;		/* --push-spool-max, per node */
	uint64_t timeout_us;		/* --push-timeout, one request */
	struct fpd_trust trust;		/* who may own the header file */
};

/* What the pusher has done, for the run's last line and the tests. */
struct fpd_push_stats {
	uint64_t queued;	/* files handed over */
	uint64_t spooled;	/* profiles written to a spool */
	uint64_t sent;		/* profiles the server took (2xx) */
	uint64_t failed;	/* requests that failed (retried) */
	uint64_t rejected;	/* profiles the server refused for good:
				 * /ingest a 4xx other than 408/429, OTLP
				 * a 4xx or 5xx other than 429/502/503/504;
				 * dropped */
	uint64_t dropped;	/* profiles dropped: spool full, or a file
				 * that could not be read */
};

struct fpd_push;

/**
 * A pusher as @c says (strings copied). Reads the header file now
 * (fpd_fs_open_foreign_file(), as root may still be), never logs its
 * contents. No thread runs before fpd_push_start().
 * @return 0 with *@out (the caller's: fpd_push_destroy()), -EINVAL for a
 *         URL libcurl does not take, -EBADMSG for a header file that is
 *         not lines of "Name: value", -ENOMEM when libcurl cannot start,
 *         or the negative errno of opening or reading the header file
 *         (-EPERM, -ELOOP: not safe, fs-safe.h); each logged with
 *         fpd_fatal().
 */
int
fpd_push_new(const struct fpd_push_config *c, struct fpd_push **out);

/**
 * Push @out's finished files from now on (fpd_output_set_finished()),
 * and what @out's spool holds from an earlier run, first. @node is the
 * node's name (copied). Call before fpd_push_start() or after, from the
 * loop's thread.
 */
void
fpd_push_attach(struct fpd_push *p, struct fpd_output *out, const char *node);

/** Start the thread that spools and sends: after root is dropped, so
 * that the spools are the run's user's. A second call does nothing.
 * @return 0 or a negative errno (logged). */
int
fpd_push_start(struct fpd_push *p);

/**
 * Stop: spool what is still queued and try the spool once more, both
 * until a second after the call (the file being converted is finished,
 * a request in flight given up then), then end the thread. What is left
 * stays for the next run: profiles in the spool, files not spooled in
 * the node directory after the mark (taken up by fpd_push_attach()).
 * Call once every output is finished.
 */
void
fpd_push_stop(struct fpd_push *p);

/** Stops (fpd_push_stop()) and frees; NULL is a no-op. */
void
fpd_push_destroy(struct fpd_push *p);

/** The counts so far, into @s. */
void
fpd_push_stats(struct fpd_push *p, struct fpd_push_stats *s);
