/*
 * flame_profd — one run of the daemon: the output directory, root
 * dropped, the loop and the sources it drives: the node session and,
 * with --perf, the node's CPU samples written into the session's files
 * (with --perf auto, from when the first connect has found the node's
 * OS pid).
 */
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_profd.h"
#include "loop.h"
#include "notes.h"
#include "perf-feed.h"
#include "session.h"

static struct fpd_output *
open_output(const struct fpd_options *o, int *exit_code)
{
	char *header = fpd_file_header(o), *options = fpd_options_json(o);
	struct fpd_output_config oc = {
		.dir = o->out_dir,
		.node = o->node,
		.header = header,
		.options_json = options,
		.options_later = o->perf_auto,
		.compress = o->compress,
		.level = o->compress_level,
		.rotate_us = o->rotate_us,
		.rotate_bytes = o->rotate_bytes,
		.keep_files = o->keep_files,
		.keep_bytes = o->keep_bytes,
		.keep_age_us = o->keep_age_us,
		.file_mode = o->file_mode,
		.dir_mode = o->dir_mode,
		.uid = o->user ? o->uid : geteuid(),
		.gid = o->user ? o->gid : getegid(),
	};
	const char *what = "";
	struct fpd_output *out;
	int err = 0;

	out = fpd_output_new(&oc, &err, &what);
	free(header);
	free(options);
	if (!out && !err) {
		/* refused as not safe: the text says which and why */
		fprintf(stderr, "flame_profd: error: %s\n", what);
		*exit_code = FPD_EXIT_CANTCREAT;
	} else if (!out) {
		fprintf(stderr, "flame_profd: error: %s: %s/%s: %s\n", what,
			o->out_dir, o->node, strerror(err));
		*exit_code = err == EWOULDBLOCK ? FPD_EXIT_TEMPFAIL : FPD_EXIT_CANTCREAT;
	}
	return out;
}

/* Everything that needs root is done: cookie read, output directory made
 * and locked. Hand the directory over and drop root for good. */
static int
drop_root(const struct fpd_options *o, struct fpd_output *out)
{
	const char *why;
	int rc = fpd_output_chown(out, o->uid, o->gid, &why);

	if (rc < 0) {
		if (why)
			fprintf(stderr, "flame_profd: error: output directory %s %s: "
				"not handed to user %s (chown it to %s, or remove it)\n",
				fpd_output_dir(out), why, o->user, o->user);
		else
			fprintf(stderr, "flame_profd: error: cannot hand output directory %s to user %s: %s\n",
				fpd_output_dir(out), o->user, strerror(-rc));
		return FPD_EXIT_CANTCREAT;
	}
	if (setgroups(0, NULL) < 0 || setgid(o->gid) < 0 ||
	    setuid(o->uid) < 0 || (o->uid != 0 && setuid(0) == 0)) {
		fprintf(stderr, "flame_profd: error: cannot drop privileges to user %s: %s\n",
			o->user, strerror(errno));
		return FPD_EXIT_SOFTWARE;
	}
	fpd_info("running as user %s (uid %u)", o->user, (unsigned)o->uid);
	return 0;
}

/* The events on the pid the node tells, written where the session
 * writes; every manifest of the run records that pid (0: none found). */
static int
open_perf_auto(const struct fpd_options *o, struct fpd_session *session,
	       struct fpd_output *out, struct fpd_loop *loop,
	       struct fpd_perf_feed **feed)
{
	struct fpd_options found = *o;
	char *json;
	int rc;

	rc = fpd_session_perf_pid(session, &found.perf_pid);
	if (rc == 0 && found.perf_pid)
		rc = fpd_perf_feed_open(&found, feed);
	if (rc)
		return rc;
	json = fpd_options_json(&found);
	fpd_output_settle_options(out, json);
	free(json);
	if (!*feed)
		return 0;
	fpd_perf_feed_attach(*feed, fpd_session_cpu_sink(session));
	fpd_loop_add(loop, fpd_perf_feed_source(*feed));
	return 0;
}

int
fpd_run(const struct fpd_options *o, const char *cookie)
{
	struct fpd_session *session = NULL;
	struct fpd_perf_feed *feed = NULL;
	struct fpd_loop *loop = NULL;
	struct fpd_output *out;
	int rc = 0;

	out = open_output(o, &rc);
	if (!out)
		return rc;
	rc = fpd_perf_feed_open(o, &feed);
	if (rc)
		goto out;
	if (o->user) {
		rc = drop_root(o, out);
		if (rc)
			goto out;
	}
	loop = fpd_loop_new(o->duration_us, o->user);
	if (!loop) {
		fprintf(stderr, "flame_profd: error: cannot set up timers and signals: %s\n",
			strerror(errno));
		rc = FPD_EXIT_SOFTWARE;
		goto out;
	}
	session = fpd_session_new(o, cookie, out, fpd_loop_run_state(loop),
				  fpd_loop_give_up, loop);
	fpd_loop_add(loop, fpd_session_source(session));
	if (feed) {
		fpd_perf_feed_attach(feed, fpd_session_cpu_sink(session));
		fpd_loop_add(loop, fpd_perf_feed_source(feed));
	}
	rc = fpd_session_start(session);
	if (rc)
		goto out;
	if (o->perf_auto) {
		rc = open_perf_auto(o, session, out, loop, &feed);
		if (rc) {
			rc = fpd_session_close(session, rc, false);
			goto out;
		}
	}
	rc = fpd_loop_run(loop);
	fpd_perf_feed_finish(feed);
	rc = fpd_session_close(session, rc, fpd_loop_duration_over(loop));
out:
	fpd_output_destroy(out);
	fpd_session_destroy(session);
	fpd_perf_feed_destroy(feed);
	fpd_loop_destroy(loop);
	return rc;
}
