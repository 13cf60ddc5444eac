/*
 * flame_profd — a node session: the connection to one node and all that
 * lives on it (the selection, the --pid and --name targets, the sampling
 * slots or the helper, the requests in flight), with the output, cost
 * model and interval reports of that node. The loop sees it as a source
 * (fpd_session_source()).
 */
#pragma once

#include <stdbool.h>

#include "options.h"
#include "source.h"

struct fpd_session;

struct fpd_recorder;

/**
 * A session for o->node, writing through @rec (not owned), stopping through
 * @run; @give_up(@give_up_data) is asked between the slices of a wait
 * for the node (fp_node_set_give_up()). Not connected yet.
 */
struct fpd_session *
fpd_session_new(const struct fpd_options *o, const char *cookie,
		struct fpd_recorder *rec, struct fpd_run_state *run,
		bool (*give_up)(void *data), void *give_up_data);

/** NULL is a no-op; the recorder is not the session's. */
void
fpd_session_destroy(struct fpd_session *s);

/**
 * One node of several (fleet.c): a first connect that fails is logged
 * as a warning and tried again as a reconnect is, rather than ending
 * the run.
 */
void
fpd_session_set_patient(struct fpd_session *s);

/**
 * A node of several that epmd lists again: if not connected, connect at
 * the next tick rather than after the backoff.
 */
void
fpd_session_wake(struct fpd_session *s);

/**
 * --cluster: ask the node for the visible nodes it is connected to
 * (fp_node_peers_request(): one timed request, counted as the node's
 * other work). When the reply comes, @each(@name, @data) for each name
 * (the node's text, unchecked), then @each(NULL, @data) once the whole
 * list was read; a reply that is no list, or none, calls nothing.
 * @return 0 when sent, -EBUSY while one is in flight, -ENOTCONN when not
 *         connected.
 */
int
fpd_session_ask_peers(struct fpd_session *s, uint64_t now,
		      void (*each)(const char *name, void *data), void *data);

/** Connected now. */
bool
fpd_session_connected(const struct fpd_session *s);

/**
 * A patient session never connected: the exit code its first failed
 * connect calls for (FPD_EXIT_UNAVAILABLE, FPD_EXIT_NOPERM, ...); 0 once
 * connected, or before any attempt.
 */
int
fpd_session_unreached(const struct fpd_session *s);

/** The first connect: 0, or an exit code (struct fpd_exit). */
int
fpd_session_start(struct fpd_session *s);

/**
 * A capture's after-window begins (@on) or ends: --burst-rate and
 * --burst-top are asked of the cost budget (budget.h: its cuts win), and
 * a raised top-N is selected at once. Nothing without those options.
 */
void
fpd_session_burst(struct fpd_session *s, bool on);

/** The session as the loop's source (owned by @s). */
struct fpd_source *
fpd_session_source(struct fpd_session *s);

/**
 * --perf auto, after fpd_session_start(): the node's OS pid, asked of
 * the node (one request, counted as node work) and checked on this
 * host (perf-pid.h). *@pid is 0 when the start was stopped before a
 * connection.
 * @return 0, or an exit code with the reason on stderr:
 *         FPD_EXIT_CONFIG for a node on another host, a pid that is not
 *         the node's process here, or a node without a perf map;
 *         FPD_EXIT_SOFTWARE when the node's answer is no pid;
 *         FPD_EXIT_UNAVAILABLE when it does not answer.
 */
int
fpd_session_perf_pid(struct fpd_session *s, pid_t *pid);

/**
 * The end of the run: the last interval line, the node put back, the
 * file finished, and what the files hold logged.
 * @return @exit_code, or the exit code what the run wrote calls for
 *         (@duration_over: a --duration run that reached its end).
 */
int
fpd_session_close(struct fpd_session *s, int exit_code, bool duration_over);
