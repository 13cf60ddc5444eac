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

#include "run.h"
#include "ctl.h"
#include "daemon-log.h"
#include "flight.h"
#include "loop.h"
#include "notes.h"
#include "options.h"
#include "output.h"
#include "push.h"
#include "recorder.h"
#include "session.h"
#include "source-perf.h"
#include "util.h"

struct fpd_output *
fpd_run_open_output(const struct fpd_options *o, int *exit_code)
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
		.keep_captures = o->keep_captures,
		.captures_only = o->flight_us && !o->continuous,
		.file_mode = o->file_mode,
		.dir_mode = o->dir_mode,
		.uid = o->user ? o->uid : geteuid(),
		.gid = o->user ? o->gid : getegid(),
	};
	struct fpd_output *out;
	int rc;

	rc = fpd_output_new(&oc, &out);
	free(header);
	free(options);
	if (rc < 0)
		*exit_code = rc == -EWOULDBLOCK ? FPD_EXIT_TEMPFAIL : FPD_EXIT_CANTCREAT;
	else if (o->push)
		fpd_push_attach(o->push, out, o->node);
	return out;
}

int
fpd_run_hand_over(const struct fpd_options *o, struct fpd_output *out)
{
	const char *why;
	int rc = fpd_output_chown(out, o->uid, o->gid, &why);

	if (rc < 0) {
		if (why)
			fpd_fatal("output directory %s %s: not handed to user %s "
				  "(chown it to %s, or remove it)",
				  fpd_output_dir(out), why, o->user, o->user);
		else
			fpd_fatal("cannot hand output directory %s to user %s: %s",
				  fpd_output_dir(out), o->user, strerror(-rc));
		return FPD_EXIT_CANTCREAT;
	}
	return 0;
}

int
fpd_run_drop_privileges(const struct fpd_options *o)
{
	if (setgroups(0, NULL) < 0 || setgid(o->gid) < 0 ||
	    setuid(o->uid) < 0 || (o->uid != 0 && setuid(0) == 0)) {
		fpd_fatal("cannot drop privileges to user %s: %s",
			  o->user, strerror(errno));
		return FPD_EXIT_SOFTWARE;
	}
	fpd_info("running as user %s (uid %u)", o->user, (unsigned)o->uid);
	return 0;
}

/* Everything that needs root is done: cookie read, output directory made
 * and locked. Hand the directory over and drop root for good. */
static int
drop_root(const struct fpd_options *o, struct fpd_output *out)
{
	int rc = fpd_run_hand_over(o, out);

	return rc ? rc : fpd_run_drop_privileges(o);
}

/* The exit code of fpd_perf_source_open()'s @rc. */
static int
perf_exit_code(int rc)
{
	if (rc == -ESRCH)
		return FPD_EXIT_USAGE;
	if (rc == -EACCES || rc == -EPERM)
		return FPD_EXIT_NOPERM;
	return FPD_EXIT_SOFTWARE;
}

/* The events on the pid the node tells, written where the session
 * writes; every manifest of the run records that pid (0: none found). */
static int
open_perf_auto(const struct fpd_options *o, struct fpd_session *session,
	       struct fpd_recorder *rec, struct fpd_loop *loop,
	       struct fpd_perf_source **feed)
{
	struct fpd_options found = *o;
	char *json;
	int rc;

	rc = fpd_session_perf_pid(session, &found.perf_pid);
	if (rc)
		return rc;
	if (found.perf_pid && (rc = fpd_perf_source_open(&found, feed)) < 0)
		return perf_exit_code(rc);
	json = fpd_options_json(&found);
	fpd_output_settle_options(fpd_recorder_output(rec), json);
	free(json);
	if (!*feed)
		return 0;
	fpd_perf_source_attach(*feed, rec);
	fpd_loop_add(loop, fpd_perf_source_source(*feed));
	return 0;
}

/* --flight-recorder: the ring, a second destination of @rec's records
 * (the only one without --continuous), and a source of the loop. */
struct fpd_flight *
fpd_run_open_flight(const struct fpd_options *o, struct fpd_recorder *rec,
		    char **header)
{
	struct fpd_flight_config fc = {
		.window_us = o->flight_us,
		.max_bytes = o->flight_max,
		.after_us = o->after_us,
		.holdoff_us = o->holdoff_us,
		.max_per_hour = o->max_captures_per_hour,
		.level = o->compress == FPD_COMPRESS_ZSTD ? o->compress_level : 3,
		.triggers = o->triggers,
		.ntriggers = o->ntriggers,
	};
	struct fpd_flight *flight;
	char window[32];

	*header = NULL;
	if (!o->flight_us)
		return NULL;
	*header = fpd_file_header(o);
	fc.header = *header;
	flight = fpd_flight_new(&fc, fpd_recorder_output(rec));
	fpd_recorder_add_dest(rec, fpd_flight_dest(flight), o->continuous);
	fpd_format_duration(o->flight_us, window, sizeof(window));
	fpd_info("flight recorder: keeping the last %s in at most %llu bytes%s",
		 window, (unsigned long long)o->flight_max,
		 o->continuous ? ", and the continuous files" : "");
	return flight;
}

void
fpd_run_burst(void *session, bool on)
{
	fpd_session_burst(session, on);
}

int
fpd_run_open_ctl(const struct fpd_options *o, struct fpd_recorder *rec,
		 struct fpd_flight *flight, struct fpd_ctl **ctl)
{
	struct fpd_output *out = fpd_recorder_output(rec);
	struct fpd_ctl_config c = {
		.node = o->node,
		.dirfd = fpd_output_dirfd(out),
		.dir = fpd_output_dir(out),
		.uid = geteuid(),
		.gid = getegid(),
		.rec = rec,
		.flight = flight,
	};

	return fpd_ctl_new(&c, ctl) < 0 ? FPD_EXIT_CANTCREAT : 0;
}

int
fpd_run(const struct fpd_options *o, const char *cookie)
{
	struct fpd_flight *flight = NULL;
	struct fpd_ctl *ctl = NULL;
	char *header = NULL;
	struct fpd_session *session = NULL;
	struct fpd_perf_source *feed = NULL;
	struct fpd_loop *loop = NULL;
	struct fpd_recorder *rec;
	struct fpd_output *out;
	int rc = 0;

	out = fpd_run_open_output(o, &rc);
	if (!out)
		return rc;
	rec = fpd_recorder_new(o, out);
	flight = fpd_run_open_flight(o, rec, &header);
	rc = fpd_perf_source_open(o, &feed);
	if (rc < 0) {
		rc = perf_exit_code(rc);
		goto out;
	}
	if (o->user) {
		rc = drop_root(o, out);
		if (rc)
			goto out;
	}
	rc = fpd_loop_new(o->duration_us, o->user, &loop);
	if (rc < 0) {
		rc = FPD_EXIT_SOFTWARE;
		goto out;
	}
	/* made as the run's user, root dropped: the socket is that user's */
	rc = fpd_run_open_ctl(o, rec, flight, &ctl);
	if (rc)
		goto out;
	session = fpd_session_new(o, cookie, rec, fpd_loop_run_state(loop),
				  fpd_loop_give_up, loop);
	fpd_ctl_set_session(ctl, session);
	if (flight)
		fpd_flight_set_burst(flight, fpd_run_burst, session);
	fpd_loop_add(loop, fpd_session_source(session));
	fpd_loop_add(loop, fpd_ctl_source(ctl));
	if (flight)
		fpd_loop_add(loop, fpd_flight_source(flight));
	if (feed) {
		fpd_perf_source_attach(feed, rec);
		fpd_loop_add(loop, fpd_perf_source_source(feed));
	}
	if (o->push)
		fpd_push_start(o->push);
	rc = fpd_session_start(session);
	if (rc)
		goto out;
	if (o->perf_auto) {
		rc = open_perf_auto(o, session, rec, loop, &feed);
		if (rc) {
			rc = fpd_session_close(session, rc, false);
			goto out;
		}
	}
	rc = fpd_loop_run(loop);
	fpd_perf_source_finish(feed);
	rc = fpd_session_close(session, rc, fpd_loop_duration_over(loop));
out:
	fpd_ctl_destroy(ctl);
	/* the capture being written ends with the last samples */
	fpd_flight_destroy(flight);
	free(header);
	fpd_recorder_destroy(rec);
	fpd_session_destroy(session);
	fpd_perf_source_destroy(feed);
	fpd_loop_destroy(loop);
	return rc;
}
