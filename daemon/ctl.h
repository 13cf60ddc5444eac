/*
 * flame_profd — the control socket: `flame_profd ctl` (ctl-client.c)
 * asks a running daemon for a capture or its status over an AF_UNIX
 * socket in the node's directory (ctl.c); the protocol both ends speak
 * is here (ctl-proto.c).
 *
 * A request is one line of at most FPD_CTL_LINE_MAX bytes, '\n' included:
 *   status
 *   trigger REASON         (REASON: 1 to FPD_CAPTURE_REASON_RAW bytes)
 * The answer is "ok\n" followed by "key: value\n" lines, or one line
 * "error: CODE TEXT\n" (CODE one of enum fpd_ctl_error's names); the
 * daemon then closes the connection.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "retention.h"

#define FPD_CTL_SOCKET "ctl.sock"	/* in the node's directory */
#define FPD_CTL_LINE_MAX 512		/* a request, '\n' included */
#define FPD_CTL_CLIENT_US 1000000u	/* a client sends its request within */

enum fpd_ctl_verb {
	FPD_CTL_STATUS,
	FPD_CTL_TRIGGER,
};

/* A request, parsed. */
struct fpd_ctl_request {
	enum fpd_ctl_verb verb;
	char reason[FPD_CAPTURE_REASON_RAW + 1];	/* trigger: as sent */
};

/* Why the daemon says no, as the answer's CODE and the client's exit. */
enum fpd_ctl_error {
	FPD_CTL_ERR_REQUEST,	/* "request": not a request it knows */
	FPD_CTL_ERR_REFUSED,	/* "refused": neither root nor its user */
	FPD_CTL_ERR_NO_RECORDER,	/* "no-recorder": no --flight-recorder */
	FPD_CTL_ERR_HELD_OFF,	/* "held-off": a capture is being written */
	FPD_CTL_ERR_CAPPED,	/* "capped": --max-captures-per-hour */
	FPD_CTL_ERRORS,
};

/**
 * Parse the request @line of @len bytes (without its '\n'; any byte may
 * be in it) into @req.
 * @return 0, or -EINVAL with *@why saying what is wrong (static text).
 */
int
fpd_ctl_parse(const char *line, size_t len, struct fpd_ctl_request *req,
	      const char **why);

/** The CODE of @e in an answer ("held-off"). */
const char *
fpd_ctl_error_name(enum fpd_ctl_error e);

/**
 * The error an answer's first line names ("error: capped ..."), or
 * FPD_CTL_ERRORS for "ok" and -1 for a line that is neither.
 */
int
fpd_ctl_answer_error(const char *line);

struct fpd_ctl;
struct fpd_flight;
struct fpd_recorder;
struct fpd_session;
struct fpd_source;

/* What the control socket answers about: not owned, all but the recorder
 * may be NULL (a run without a flight recorder, a session not made). */
struct fpd_ctl_config {
	const char *node;
	int dirfd;			/* the node's directory (not owned) */
	const char *dir;		/* ... its path, for the log */
	uid_t uid;			/* served besides root: the run's user */
	gid_t gid;
	struct fpd_recorder *rec;
	struct fpd_flight *flight;
	const struct fpd_session *session;
};

/**
 * Make the control socket FPD_CTL_SOCKET in c->dirfd (mode 0600, through
 * fs-safe.h: a socket left there by an earlier run of root or the run's
 * user is replaced; anything else at the name is refused) and listen.
 * The daemon holds the node directory's lock, so no other daemon serves
 * that name.
 * @return 0 with *@out (the caller frees it with fpd_ctl_destroy()), or a
 *         negative errno, logged with fpd_fatal().
 */
int
fpd_ctl_new(const struct fpd_ctl_config *c, struct fpd_ctl **out);

/** Removes the socket if it is still the one made; NULL is a no-op. */
void
fpd_ctl_destroy(struct fpd_ctl *ctl);

/** Set what the status tells of after the socket is made (may be NULL). */
void
fpd_ctl_set_session(struct fpd_ctl *ctl, const struct fpd_session *session);

/** The socket as a source of the loop (owned by @ctl). */
struct fpd_source *
fpd_ctl_source(struct fpd_ctl *ctl);

/**
 * `flame_profd ctl ...`: the client. @argv[0] is "ctl".
 * @return the exit status (flame_profd(1), "ctl").
 */
int
fpd_ctl_main(int argc, char **argv);
