/*
 * flame_profd — the node's watcher: one process on the node, run by its
 * own erl_eval (nothing is loaded), that tells the daemon what the node
 * signals of itself: its system monitor's events (long_gc,
 * long_schedule, large_heap, long_message_queue), its memory and its
 * schedulers' utilisation. It is linked to the daemon's connection and
 * holds nothing once that goes (SIGKILL included).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fp/node.h"

/* What the node's system monitor reports. */
enum fp_watch_event {
	FP_WATCH_LONG_GC = 0,		/* a garbage collection's ms */
	FP_WATCH_LONG_SCHEDULE,		/* a process or port ran this many ms */
	FP_WATCH_LARGE_HEAP,		/* a heap's bytes after a collection */
	FP_WATCH_LONG_MESSAGE_QUEUE,	/* a message queue reached a length */
	FP_WATCH_EVENTS,
};

/* How the watcher reads the node's system monitor. */
enum fp_watch_mode {
	FP_WATCH_NONE = 0,		/* no event was asked for */
	FP_WATCH_SESSION,		/* a trace session of its own
					 * (trace:system/3): the node's own
					 * monitor and sessions untouched */
	FP_WATCH_SYSTEM_MONITOR,	/* erlang:system_monitor/2, which
					 * nobody held */
	FP_WATCH_HELD,			/* someone holds the node's one
					 * system monitor: no event */
};

/* The most events forwarded a second unless asked otherwise. */
#define FP_WATCH_RATE_DEFAULT 10

/* What to watch. */
struct fp_watch_config {
	unsigned every_ms;		/* a tick (memory, utilisation) */
	unsigned rate;			/* events forwarded a second at most;
					 * the rest are dropped and counted */
	bool want[FP_WATCH_EVENTS];
	/* reported above this (ms, bytes, messages) */
	uint64_t over[FP_WATCH_EVENTS];
	bool memory;			/* erlang:memory(total) each tick */
	bool util;			/* scheduler utilisation each tick:
					 * holds scheduler_wall_time on */
};

/* What the watcher got. */
struct fp_watch_start {
	enum fp_watch_mode mode;
	bool got[FP_WATCH_EVENTS];	/* events the node's monitor took */
	char holder[32];		/* FP_WATCH_HELD: the holder's pid */
};

/* One message of the watcher. */
struct fp_watch_msg {
	bool tick;			/* a tick, else one event */
	enum fp_watch_event event;
	int64_t value;			/* the event's (ms, bytes, length) */
	char pid[32];			/* ... the process or port, as the
					 * node prints it ("<0.88.0>") */
	int64_t memory;			/* a tick: bytes; -1 not read */
	int64_t util;			/* ... percent; -1 not read */
	uint64_t dropped;		/* ... events dropped since the last */
	uint64_t work_us;		/* ... its time on the node since */
};

/** The name --trigger and the node give @e ("long_gc"). */
const char *
fp_watch_event_name(enum fp_watch_event e);

/**
 * Start the watcher for this connection (synchronous). On a node with
 * trace sessions (probed: trace:system/3 exported) the events come
 * through a session of its own; on others through erlang:system_monitor/2
 * only where nobody holds it (never replaced: a holder is said in
 * @st->holder, and no event is watched), cleared when the watcher goes
 * only while it is still the watcher's. Events the node does not offer
 * are left out of @st->got. Its messages arrive as replies with
 * fp_node_watch_id().
 *
 * @return 0; -EPROTO for an unexpected answer (nothing is left on the
 *         node); or as fp_node_receive().
 */
int
fp_node_watch_start(struct fp_node *node, const struct fp_watch_config *c,
		    struct fp_watch_start *st, unsigned timeout_ms);

/** The id the watcher's messages arrive under (0: no watcher). */
uint64_t
fp_node_watch_id(const struct fp_node *node);

/**
 * Decode a message of the watcher (a reply with fp_node_watch_id()).
 * @return 0 or -EBADMSG.
 */
int
fp_node_watch_decode(const struct fp_reply *reply, struct fp_watch_msg *m);
