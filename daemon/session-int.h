/*
 * flame_profd — a node session's state, shared by its files: session.c
 * (connection, replies, timeouts, the breaker's probes),
 * session-targets.c (selection, --pid, --name, initial calls),
 * session-sampling.c (the sample set) and the samplers behind
 * sampling.h (sampling-slots.c, sampling-helper.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>

#include "cost.h"
#include "daemon-log.h"
#include "notes.h"
#include "options.h"
#include "output.h"
#include "recorder.h"
#include "report.h"
#include "sampling.h"
#include "session.h"
#include "tracing.h"
#include "util.h"
#include "fp/node.h"
#include "fp/perf-script.h"
#include "fp/sample.h"
#include "fp/select.h"
#include "fp/watcher.h"

/*
 * A request that timed out is late: forgotten by whoever waits for it,
 * but not sent again until its reply has come (and is dropped) or the
 * connection has gone -- the node may still be working on it, and a
 * second copy would double that work (a scan that outlasts the timeout
 * would be run again and again). A reply can also be lost for good (the
 * node's rex restarted, or answered something that is no reply): a
 * request late for LATE_ABANDON timeouts is given up, since no work of
 * ours runs that long on a node that answers the rest.
 */
#define LATE_ABANDON 10

/* Reconnects wait this long after a loss, doubled after each failure. */
#define BACKOFF_MIN_US 500000u
#define BACKOFF_MAX_US 30000000u
struct request {
	bool active;			/* sent, no reply yet */
	bool late;			/* ... and timed out */
	uint64_t id;
	uint64_t sent_mono;
	uint64_t counted_mono;		/* when its last timeout was counted */
};

/* The --pid and --name targets, as the node resolves them, the last
 * selection, and the requests that keep them current; each change of a
 * target's state is said once. */
struct targets {
	struct request req_scan, req_whereis, req_init, req_alive;
	uint64_t next_select_mono;
	uint64_t next_ic_mono;		/* initial calls looked for */
	uint64_t select_started_mono;
	unsigned scans_done;		/* on this connection */
	unsigned scan_skips;		/* in a row, over budget */
	uint64_t swept_mono;		/* the last sweep's reply */
	bool last_full;			/* the last scan read the whole node */
	bool ranking;			/* ... was a sweep: the next ranks it */
	struct fp_pid *pinned;		/* --pid i */
	enum fp_pid_state *pin_state;	/* ... what the node says of it, then
					 * (npids more) what it said before */
	bool *pin_alive;
	bool pins_checked;
	/* the atoms each --name can mean (fp_name_candidates()), asked
	 * together: name_of[k] is the --name of candidate k */
	char (*cand)[FP_NAME_MAX];
	const char **cand_atoms;
	size_t *name_of, ncand;
	struct fp_pid *cand_pids;
	bool *cand_found;
	struct fp_pid *named;		/* --name i, when registered */
	size_t *named_as;		/* ... as candidate k */
	bool *name_found;
	bool *name_said;		/* name_found[i] as last reported */
	bool names_checked;
	struct fp_pid *top;		/* the selection's pick */
	size_t ntop;
	struct fp_pid *init_pids;	/* asked for initial calls, or alive */
	size_t ninit;
};

/* What is sampled, round robin, and the sampler that samples it. */
struct sampling {
	struct fp_pid *set;
	size_t nset;
	double owed;			/* samples due and not yet asked for */
	uint64_t last_tick_mono;
	uint64_t set_gen;		/* counts the set's rebuilds */
	const struct fpd_sampling_ops *ops;
	void *state;			/* the sampler's own */
};

struct fpd_session {
	struct fpd_source source;
	const struct fpd_options *o;
	struct fpd_run_state *run;	/* the loop's */
	struct fp_node *node;
	struct fp_select *select;
	struct fp_sampler *sampler;
	struct fpd_recorder *rec;	/* not owned: where samples go */
	struct fpd_output *out;		/* the recorder's */
	struct fpd_report report;
	struct fpd_cost cost;

	bool connected, ever_connected;
	bool patient;			/* one node of several: a first connect
					 * that fails is tried again */
	int first_error;		/* ... the exit code its first failure
					 * would have ended a run of one with */
	const char *lost;		/* why the connection was lost, until
					 * settled (fpd_session_lose()) */
	uint64_t reconnect_at, backoff_us;
	unsigned timeouts;		/* in a row, reset by any reply */
	uint64_t timeout_epoch;		/* requests sent before this counted */
	struct request req_health;
	struct request req_peers;	/* --cluster: erlang:nodes() */
	void (*on_peer)(const char *name, void *data);	/* ... its reply */
	void *peer_data;
	unsigned runq_limit;

	/* the node's watcher, for the triggers that need it (fp/watcher.h) */
	struct fp_watch_config watch;
	bool watch_wanted;
	uint64_t watch_dropped;		/* events the watcher dropped */
	uint64_t watch_said_dropped;	/* ... as last logged */

	struct targets t;
	struct sampling sm;
	struct fpd_trace *trace;	/* --trace, or NULL */
	struct request req_trace;
};

/* The most processes sampled at once: --top (or --burst-top, if more),
 * --pid and --name. */
static inline size_t
set_capacity(const struct fpd_options *o)
{
	return (o->burst_top > o->top ? o->burst_top : o->top) + o->npids +
	       o->nnames;
}

/* --timeout, for the library's waits */
static inline unsigned
timeout_ms(const struct fpd_session *s)
{
	return (unsigned)(s->o->timeout_us / 1000);
}

/* Connected, and no loss recorded: requests may be sent. */
static inline bool
live(const struct fpd_session *s)
{
	return s->connected && !s->lost;
}

/* @r was sent at @now as request @id: in flight, not late. */
static inline void
request_sent(struct request *r, uint64_t id, uint64_t now)
{
	r->active = true;
	r->late = false;
	r->id = id;
	r->sent_mono = r->counted_mono = now;
}

/*
 * Record that the connection is lost: it is torn down when the loop
 * settles the session (session.c), after the running handler has
 * returned; until then nothing more is sent (live()). The first reason
 * is the one told.
 */
static inline void
fpd_session_lose(struct fpd_session *s, const char *why)
{
	if (live(s))
		s->lost = why;
}

/* A send returned @rc: on failure the connection is lost. */
static inline void
fpd_session_check_send(struct fpd_session *s, int rc, const char *what)
{
	if (rc == 0)
		return;
	fpd_debug("sending %s failed: %s", what, strerror(-rc));
	fpd_session_lose(s, rc == -ETIMEDOUT ? "send timed out" :
			 rc == -ECANCELED ? "send given up" : "send failed");
}

/* A reply to @r: false (dropped, and @r may be sent again) when it is
 * late. */
static inline bool
fpd_request_answered(struct request *r, uint64_t now, const char *what)
{
	bool late = r->late;

	r->active = r->late = false;
	if (late)
		fpd_debug("late reply to a %s dropped, %.1f s after it was sent",
			  what, (double)(now - r->sent_mono) / 1e6);
	return !late;
}

/* Node time of a timed reply (0: none), counted in the interval. */
static inline uint64_t
fpd_session_take_time(struct fpd_session *s, struct fp_reply *reply)
{
	uint64_t us;

	if (reply->badrpc || fp_reply_take_time(reply, &us) < 0)
		return 0;
	s->report.target_us += us;
	return us;
}

/* Whether a request's timeout trips the circuit breaker. */
enum fpd_trip {
	FPD_TRIP_NEVER,		/* a side request: its work is small */
	FPD_TRIP_CLOSED,	/* trips a closed breaker */
	FPD_TRIP_PROBE,		/* the health probe: trips while probing */
};

/* A kind of request: what its reply and its timeout do. */
struct fpd_request_kind {
	const char *what;		/* for the log */
	/** The reply to @r, in time. */
	void (*on_reply)(struct fpd_session *s, struct request *r,
			 struct fp_reply *reply, uint64_t now);
	/** A late reply, dropped (may be NULL). */
	void (*on_late)(struct fpd_session *s, uint64_t now);
	/** @r has just timed out, the first time (may be NULL). */
	void (*on_timeout)(struct fpd_session *s, struct request *r);
	enum fpd_trip trip;
	/* a timeout forgets it rather than wait for it late: the helper's
	 * batches, which we do not ask for */
	bool waits_anew;
};

/* session.c */

/** Tear down a connection a handler found lost (the source's settle). */
void
fpd_session_settle(struct fpd_source *src);

/**
 * @reply, if it answers @r (of @kind): handled, a late one dropped.
 * @return whether it answered @r.
 */
bool
fpd_request_take(struct fpd_session *s, struct request *r,
		 const struct fpd_request_kind *kind, struct fp_reply *reply,
		 uint64_t now);

/**
 * @r (of @kind) unanswered for --timeout: late (or, @kind->waits_anew,
 * forgotten), counted as a timeout, maybe tripping the breaker or, for
 * the MAX_TIMEOUTS-th in a row, losing the connection.
 */
void
fpd_request_expire(struct fpd_session *s, struct request *r,
		   const struct fpd_request_kind *kind, uint64_t now);

/** Send the health probe, unless one is in flight. */
void
fpd_session_send_health(struct fpd_session *s, uint64_t now);

/* session-connect.c */

/** 0 when connected (or to try again later, after the backoff), or an
 * exit code when giving up for good. */
int
fpd_session_connect(struct fpd_session *s, uint64_t now);

/* session-watch.c */

/**
 * At connect, the node's watcher for the triggers that need it; a
 * system monitor that is held is said and left alone.
 * @return 0, or FPD_EXIT_CONFIG when, at the first connect, the node's
 *         monitor lacks an event a trigger names.
 */
int
fpd_session_start_watcher(struct fpd_session *s);

/** A message of the node's watcher: its events and gauges go to the
 * recorder, its time on the node to the cost budget. */
void
fpd_session_on_watch(struct fpd_session *s, const struct fp_reply *reply);

/** Leave the janitor now rather than when the connection closes, so
 * that the flag is back before we exit. */
void
fpd_session_restore_node(struct fpd_session *s);

/* session-targets.c */

/** The targets' arrays, for o->npids and o->nnames. */
void
fpd_targets_init(struct fpd_session *s);

/** Free what fpd_targets_init() allocated. */
void
fpd_targets_release(struct targets *t);

/** On loss of the connection: what was resolved on it is forgotten. */
void
fpd_targets_reset(struct fpd_session *s);

/**
 * At connect, the node checks the --pid targets (waiting up to
 * @timeout_ms): at the first connect a pid that is none of the node's is
 * a usage error, one that does not live is said once.
 * @return 0, or an exit code (enum fpd_exit) to give up with.
 */
int
fpd_targets_check_pins(struct fpd_session *s, unsigned timeout_ms);

/** Every --every: a selection scan, the --name lookups and the --pid
 * liveness checks that are due, within the budget. */
void
fpd_targets_start_selection(struct fpd_session *s, uint64_t now);

/** Ask the node for the initial calls the sampler wants, when due. */
void
fpd_targets_ask_initial_calls(struct fpd_session *s, uint64_t now);

/** The scan's reply: the new top-N, and the sample set rebuilt. */
void
fpd_targets_on_scan(struct fpd_session *s, struct fp_reply *reply,
		    uint64_t now);

/** The --name lookups' reply: which names are registered, to what. */
void
fpd_targets_on_whereis(struct fpd_session *s, const struct fp_reply *reply);

/** The --pid liveness reply: a target that exited is said once. */
void
fpd_targets_on_alive(struct fpd_session *s, const struct fp_reply *reply);

/** The initial calls asked for, handed to the sampler. */
void
fpd_targets_on_initial_calls(struct fpd_session *s, struct fp_reply *reply);

/** --pid and --name targets being sampled. */
size_t
fpd_targets_pinned(const struct fpd_session *s);

/* session-sampling.c */

/** The set's arrays, and the sampler of the node's request path. */
void
fpd_sampling_init(struct fpd_session *s);

/** Free the set and the sampler's state. */
void
fpd_sampling_release(struct fpd_session *s);

/** The set from the targets and the selection; requests in flight keep
 * their pids. */
void
fpd_sampling_rebuild(struct fpd_session *s);

/** @pid's place in the set, or SIZE_MAX. */
size_t
fpd_sampling_find(const struct fpd_session *s, struct fp_pid pid);

/** Connected (again), the set built: the sampler's first requests. */
void
fpd_sampling_connected(struct fpd_session *s, uint64_t now);

/** On loss of the connection: what was in flight is skipped. */
void
fpd_sampling_reset(struct fpd_session *s);

/** Every tick: what falls due is owed (or, breaker open, skipped), and
 * the sampler asks for it. */
void
fpd_sampling_tick(struct fpd_session *s, uint64_t now);

/** Every tick, after the budget: the sampler tells the node what
 * changed. */
void
fpd_sampling_sync(struct fpd_session *s);

/** @reply, if it is the sampler's: handled. @return whether it was. */
bool
fpd_sampling_on_reply(struct fpd_session *s, struct fp_reply *reply,
		      uint64_t now);

/** Every tick: the sampler's requests past --timeout. */
void
fpd_sampling_expire(struct fpd_session *s, uint64_t now);

/** Stopping: whether samples are still in flight. */
bool
fpd_sampling_in_flight(const struct fpd_session *s);

/** Stopping: the sampler asks for what is still owed. */
void
fpd_sampling_drain(struct fpd_session *s, uint64_t now);

/** Stopping for good: the samples still asked for are skipped. */
void
fpd_sampling_abandon(struct fpd_session *s);

/**
 * A decode of @probes probes (and the rest in full) went well: count it
 * and write its samples through the recorder.
 */
void
fpd_sampling_take(struct fpd_session *s, size_t probes);

/** The probes among @n asks. */
size_t
fpd_sampling_count_probes(const enum fp_ask *asks, size_t n);
