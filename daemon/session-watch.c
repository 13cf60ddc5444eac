/*
 * flame_profd — a node session's watcher (fp/watcher.h): started at
 * connect when a trigger needs what only the node can say of itself (its
 * system monitor, its memory, its schedulers' utilisation), and its
 * messages handed to the recorder's triggers.
 */
#include <inttypes.h>
#include <string.h>

#include "session-int.h"
#include "trigger.h"

static void
list_add(char *buf, size_t size, size_t *len, const char *name)
{
	if (*len < size)
		*len += (size_t)snprintf(buf + *len, size - *len, "%s%s",
					 *len ? ", " : "", name);
}

/* For a message: the system monitor's events the triggers asked for
 * (of those in @only, if given), and with @gauges the watcher's other
 * readings. */
static void
list_events(const struct fp_watch_config *c, const bool *only, bool gauges,
	    char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int e = 0; e < FP_WATCH_EVENTS; e++) {
		if (c->want[e] && (!only || only[e]))
			list_add(buf, size, &len,
				 fp_watch_event_name((enum fp_watch_event)e));
	}
	if (gauges && c->memory)
		list_add(buf, size, &len, "node.memory");
	if (gauges && c->util)
		list_add(buf, size, &len, "sched_util");
}

int
fpd_session_start_watcher(struct fpd_session *s)
{
	struct fp_watch_start st;
	const char *node = s->o->node, *otp = fp_node_otp_release(s->node);
	char events[160];
	bool missing[FP_WATCH_EVENTS] = { false };
	bool any_missing = false;
	int rc;

	if (!s->watch_wanted)
		return 0;
	rc = fp_node_watch_start(s->node, &s->watch, &st, timeout_ms(s));
	if (rc < 0) {
		list_events(&s->watch, NULL, true, events, sizeof(events));
		fpd_warn("cannot start the watcher on %s (%s): the triggers it serves (%s) are off on this connection",
			 node, strerror(-rc), events);
		fpd_recorder_note(s->rec, "watcher: not started (%s)", strerror(-rc));
		return 0;
	}
	list_events(&s->watch, NULL, false, events, sizeof(events));
	switch (st.mode) {
	case FP_WATCH_NONE:
		break;
	case FP_WATCH_HELD:
		/* never replaced: the holder is the node's own business */
		fpd_warn("%s (OTP %s) has no trace sessions with trace:system/3, and its one system monitor is held by %s (erlang:system_monitor/2): left to it; the triggers %s are off on this connection",
			 node, otp, st.holder, events);
		fpd_recorder_note(s->rec, "watcher: system monitor held by %s; %s off",
				  st.holder, events);
		break;
	case FP_WATCH_SESSION:
	case FP_WATCH_SYSTEM_MONITOR:
		for (int e = 0; e < FP_WATCH_EVENTS; e++) {
			missing[e] = s->watch.want[e] && !st.got[e];
			any_missing |= missing[e];
		}
		if (any_missing) {
			list_events(&s->watch, missing, false, events,
				    sizeof(events));
			if (!s->ever_connected) {
				fpd_fatal("%s (OTP %s): its system monitor does not offer %s: drop that --trigger for this node",
					  node, otp, events);
				return FPD_EXIT_CONFIG;
			}
			fpd_warn("%s (OTP %s): its system monitor does not offer %s: off on this connection",
				 node, otp, events);
		}
		for (int e = 0; e < FP_WATCH_EVENTS; e++)
			missing[e] = !missing[e];
		list_events(&s->watch, missing, false, events, sizeof(events));
		if (!events[0])
			break;
		if (st.mode == FP_WATCH_SESSION)
			fpd_info("watching %s's system monitor (%s) through a trace session of our own: the node's own monitor and sessions are untouched",
				 node, events);
		else
			fpd_info("watching %s's system monitor (%s) through erlang:system_monitor/2, which nobody held: released when we go",
				 node, events);
		fpd_recorder_note(s->rec, "watcher: system monitor (%s) through %s",
				  events, st.mode == FP_WATCH_SESSION ?
				  "a trace session" : "erlang:system_monitor/2");
		break;
	}
	if (s->watch.util)
		fpd_debug("watcher holds scheduler_wall_time on %s", node);
	return 0;
}

void
fpd_session_on_watch(struct fpd_session *s, const struct fp_reply *reply)
{
	struct fp_watch_msg m;

	if (fp_node_watch_decode(reply, &m) < 0) {
		fpd_debug("a message of the watcher could not be read: dropped");
		return;
	}
	if (!m.tick) {
		fpd_recorder_event(s->rec, fpd_trigger_of_event(m.event), m.value,
				   m.pid);
		return;
	}
	fpd_cost_other(&s->cost, m.work_us);
	fpd_debug("watcher: memory %lld, utilisation %lld%%, %" PRIu64 " events dropped, %" PRIu64 " us on the node",
		  (long long)m.memory, (long long)m.util, m.dropped, m.work_us);
	if (m.memory >= 0)
		fpd_recorder_gauge(s->rec, FPD_GAUGE_NODE_MEMORY, m.memory);
	if (m.util >= 0)
		fpd_recorder_gauge(s->rec, FPD_GAUGE_SCHED_UTIL, m.util);
	s->watch_dropped += m.dropped;
	if (m.dropped && s->watch_dropped >= 2 * s->watch_said_dropped) {
		fpd_info("the node's system monitor said more than %u events a second: %" PRIu64 " dropped on the node so far",
			 s->watch.rate, s->watch_dropped);
		s->watch_said_dropped = s->watch_dropped;
	}
}
