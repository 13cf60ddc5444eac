/*
 * flame_profd — triggers.
 *
 * A trigger of a per-process kind reads a metric every sample already
 * carries (the request asks for it whether or not a trigger is set), so
 * it costs the node nothing: the check runs in the daemon on each sample
 * as it is recorded. A gauge kind reads what a request the daemon sends
 * anyway returns (run_queue: the breaker's health probe, once per
 * --every), so it costs nothing either, and sees the node that often.
 * Kinds that must hear from the node itself (its system monitor, its
 * memory, its schedulers' utilisation) are read by the node's watcher
 * (fp/watcher.h), one process started at connect only when such a
 * trigger is given: its time on the node comes with each of its ticks
 * and is counted in the cost budget (cost.c); docs/PERFORMANCE.md says
 * what each costs.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trigger.h"
#include "util.h"
#include "fp/term.h"
#include "fp/watcher.h"

enum threshold_unit {
	UNIT_COUNT,	/* a whole number */
	UNIT_SIZE,	/* a size, 512M */
	UNIT_NAME,	/* appears:NAME */
	UNIT_PCT,	/* a percentage, 0 to 99 */
};

enum trigger_source {
	FROM_SAMPLE,	/* a metric of each sample */
	FROM_GAUGE,	/* a gauge of the node, [/DUR] allowed */
	FROM_GROWTH,	/* a gauge's growth over /DUR, which it needs */
	FROM_EVENT,	/* an event of the node's system monitor */
};

/* An event's limit as the node's monitor takes it (ms, words, a queue's
 * length) fits in 31 bits: thresholds above are refused. */
#define EVENT_MAX 0x7ffffffell

static const struct {
	const char *name;
	enum trigger_source source;
	enum fp_metric metric;		/* FROM_SAMPLE */
	enum fpd_gauge gauge;		/* FROM_GAUGE, FROM_GROWTH */
	int event;			/* FROM_EVENT: enum fp_watch_event */
	enum threshold_unit unit;
} kinds[FPD_TRIGGER_KINDS] = {
	[FPD_TRIGGER_MAILBOX] = { "mailbox", FROM_SAMPLE,
				  FP_METRIC_MESSAGE_QUEUE_LEN, 0, 0, UNIT_COUNT },
	[FPD_TRIGGER_MEMORY] = { "memory", FROM_SAMPLE, FP_METRIC_MEMORY, 0, 0,
				 UNIT_SIZE },
	[FPD_TRIGGER_RUN_QUEUE] = { "run_queue", FROM_GAUGE, 0,
				    FPD_GAUGE_RUN_QUEUE, 0, UNIT_COUNT },
	[FPD_TRIGGER_APPEARS] = { "appears", FROM_SAMPLE, 0, 0, 0, UNIT_NAME },
	[FPD_TRIGGER_LONG_GC] = { "long_gc", FROM_EVENT, 0, 0,
				  FP_WATCH_LONG_GC, UNIT_COUNT },
	[FPD_TRIGGER_LONG_SCHEDULE] = { "long_schedule", FROM_EVENT, 0, 0,
					FP_WATCH_LONG_SCHEDULE, UNIT_COUNT },
	[FPD_TRIGGER_LARGE_HEAP] = { "large_heap", FROM_EVENT, 0, 0,
				     FP_WATCH_LARGE_HEAP, UNIT_SIZE },
	[FPD_TRIGGER_LONG_MESSAGE_QUEUE] = { "long_message_queue", FROM_EVENT,
					     0, 0, FP_WATCH_LONG_MESSAGE_QUEUE,
					     UNIT_COUNT },
	[FPD_TRIGGER_NODE_MEMORY] = { "node.memory", FROM_GAUGE, 0,
				      FPD_GAUGE_NODE_MEMORY, 0, UNIT_SIZE },
	[FPD_TRIGGER_NODE_MEMORY_GROWTH] = { "node.memory+", FROM_GROWTH, 0,
					     FPD_GAUGE_NODE_MEMORY, 0, UNIT_SIZE },
	[FPD_TRIGGER_SCHED_UTIL] = { "sched_util", FROM_GAUGE, 0,
				     FPD_GAUGE_SCHED_UTIL, 0, UNIT_PCT },
};

#define KINDS_HELP "expected " KINDS_LIST
#define KINDS_LIST "mailbox>N, memory>SIZE, run_queue>N[/DUR], appears:NAME, " \
	"long_gc>MS, long_schedule>MS, large_heap>SIZE, long_message_queue>N, " \
	"node.memory>SIZE[/DUR], node.memory+>SIZE/DUR or sched_util>PCT[/DUR]"

/* appears:NAME: a registered name, M:F/A or label as the file writes
 * none of them escaped; nothing that would need quoting in the index,
 * the manifest or a note. */
static int
parse_name(const char *name, struct fpd_trigger *t, const char **why)
{
	size_t n = strlen(name);

	if (!n || n > FPD_TRIGGER_NAME_MAX) {
		*why = "expected appears:NAME, NAME of 1 to 48 bytes (a registered name, M:F/A or label)";
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '\'') {
			*why = "NAME takes printable ASCII without spaces or quotes";
			return -EINVAL;
		}
	}
	t->kind = FPD_TRIGGER_APPEARS;
	t->threshold = 0;
	t->for_us = 0;
	memcpy(t->name, name, n + 1);
	snprintf(t->text, sizeof(t->text), "appears:%s", name);
	return 0;
}

const char *
fpd_trigger_kind_name(enum fpd_trigger_kind kind)
{
	return kinds[kind].name;
}

static int
parse_count(const char *s, uint64_t *v)
{
	uint64_t n = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || n > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	*v = n;
	return 0;
}

int
fpd_trigger_parse(const char *expr, struct fpd_trigger *t, const char **why)
{
	const char *op = strchr(expr, '>'), *slash;
	char num[32];
	size_t namelen, numlen;
	uint64_t v, dur = 0;
	int k;

	*why = NULL;
	if (strncmp(expr, "appears:", 8) == 0)
		return parse_name(expr + 8, t, why);
	if (!op || op == expr) {
		*why = "expected KIND>THRESHOLD: " KINDS_LIST;
		return -EINVAL;
	}
	namelen = (size_t)(op - expr);
	for (k = 0; k < FPD_TRIGGER_KINDS; k++) {
		if (strlen(kinds[k].name) == namelen &&
		    memcmp(kinds[k].name, expr, namelen) == 0)
			break;
	}
	if (k == FPD_TRIGGER_KINDS) {
		*why = "unknown trigger: " KINDS_HELP;
		return -EINVAL;
	}
	slash = strchr(op + 1, '/');
	numlen = slash ? (size_t)(slash - op - 1) : strlen(op + 1);
	if (slash && kinds[k].source != FROM_GAUGE &&
	    kinds[k].source != FROM_GROWTH) {
		*why = "only run_queue, node.memory, node.memory+ and sched_util take /DUR: this kind fires at once";
		return -EINVAL;
	}
	if (!slash && kinds[k].source == FROM_GROWTH) {
		*why = "node.memory+ needs the time it grows in, e.g. node.memory+>256M/30s";
		return -EINVAL;
	}
	if (slash && (fpd_parse_duration(slash + 1, &dur) < 0 || !dur)) {
		*why = "expected a duration after '/', e.g. run_queue>200/10s";
		return -EINVAL;
	}
	if (numlen >= sizeof(num)) {
		*why = "threshold too large";
		return -EINVAL;
	}
	memcpy(num, op + 1, numlen);
	num[numlen] = '\0';
	if (kinds[k].unit == UNIT_SIZE ? fpd_parse_size(num, &v) < 0 :
					 parse_count(num, &v) < 0) {
		*why = kinds[k].unit == UNIT_SIZE ?
		       "expected a size after '>', e.g. memory>512M" :
		       kinds[k].unit == UNIT_PCT ?
		       "expected a whole percentage after '>', e.g. sched_util>90" :
		       "expected a whole number after '>', e.g. mailbox>50000";
		return -EINVAL;
	}
	if (v > INT64_MAX) {
		*why = "threshold too large";
		return -EINVAL;
	}
	if (kinds[k].unit == UNIT_PCT && v > 99) {
		*why = "a percentage of 0 to 99: utilisation is never over 100";
		return -EINVAL;
	}
	if (kinds[k].source == FROM_EVENT && v >= (uint64_t)EVENT_MAX *
	    (kinds[k].unit == UNIT_SIZE ? 4 : 1)) {
		*why = "threshold too large for the node's system monitor";
		return -EINVAL;
	}
	t->kind = (enum fpd_trigger_kind)k;
	t->threshold = (int64_t)v;
	t->for_us = dur;
	if (dur) {
		char d[32];

		fpd_format_duration(dur, d, sizeof(d));
		snprintf(t->text, sizeof(t->text), "%s>%llu/%s", kinds[k].name,
			 (unsigned long long)v, d);
	} else {
		snprintf(t->text, sizeof(t->text), "%s>%llu", kinds[k].name,
			 (unsigned long long)v);
	}
	return 0;
}

/* The process is named @name: registered so, started by that M:F/A, or
 * labelled so. */
static bool
named(const struct fp_sample *smp, const char *name)
{
	char mfa[2 * FPD_TRIGGER_NAME_MAX];
	const struct fp_frame *ic = &smp->initial_call;

	if (smp->registered_name && strcmp(smp->registered_name, name) == 0)
		return true;
	if (smp->label && strcmp(smp->label, name) == 0)
		return true;
	if (!smp->has_initial_call || !ic->module || !ic->function)
		return false;
	snprintf(mfa, sizeof(mfa), "%s:%s/%u", ic->module, ic->function,
		 (unsigned)ic->arity);
	return strcmp(mfa, name) == 0;
}

bool
fpd_trigger_check(const struct fpd_trigger *t, const struct fp_sample *smp,
		  int64_t *value)
{
	int64_t v;

	/* a --perf sample is a thread, not a process */
	if (kinds[t->kind].source != FROM_SAMPLE || smp->status == FP_STATUS_CPU)
		return false;
	if (kinds[t->kind].unit == UNIT_NAME) {
		if (!named(smp, t->name))
			return false;
		*value = 1;
		return true;
	}
	v = smp->value[kinds[t->kind].metric];
	if (v <= t->threshold)
		return false;
	*value = v;
	return true;
}

bool
fpd_trigger_gauge(const struct fpd_trigger *t, enum fpd_gauge g,
		  int64_t value, uint64_t now_us, uint64_t *since,
		  int64_t *fired)
{
	if (kinds[t->kind].source != FROM_GAUGE || kinds[t->kind].gauge != g)
		return false;
	if (value <= t->threshold) {
		*since = 0;
		return false;
	}
	if (!*since)
		*since = now_us;
	if (now_us - *since < t->for_us)
		return false;
	*fired = value;
	return true;
}

bool
fpd_trigger_growth(const struct fpd_trigger *t, enum fpd_gauge g,
		   int64_t value, uint64_t now_us, struct fpd_growth *st,
		   int64_t *fired)
{
	uint64_t len, slot;
	int64_t low = -1;

	if (kinds[t->kind].source != FROM_GROWTH || kinds[t->kind].gauge != g)
		return false;
	len = t->for_us / FPD_GROWTH_SLOTS ? t->for_us / FPD_GROWTH_SLOTS : 1;
	slot = now_us / len;
	if (!st->slot || slot - st->slot >= FPD_GROWTH_SLOTS || slot < st->slot) {
		for (unsigned i = 0; i < FPD_GROWTH_SLOTS; i++)
			st->low[i] = -1;
	} else {
		for (uint64_t s = st->slot + 1; s <= slot; s++)
			st->low[s % FPD_GROWTH_SLOTS] = -1;
	}
	st->slot = slot;
	for (unsigned i = 0; i < FPD_GROWTH_SLOTS; i++) {
		if (st->low[i] >= 0 && (low < 0 || st->low[i] < low))
			low = st->low[i];
	}
	if (st->low[slot % FPD_GROWTH_SLOTS] < 0 ||
	    value < st->low[slot % FPD_GROWTH_SLOTS])
		st->low[slot % FPD_GROWTH_SLOTS] = value;
	if (low < 0 || value - low <= t->threshold)
		return false;
	*fired = value - low;
	/* from here: the growth that fired is not counted again */
	for (unsigned i = 0; i < FPD_GROWTH_SLOTS; i++)
		st->low[i] = -1;
	st->low[slot % FPD_GROWTH_SLOTS] = value;
	return true;
}

bool
fpd_trigger_event(const struct fpd_trigger *t, enum fpd_trigger_kind kind,
		  int64_t value)
{
	return t->kind == kind && kinds[kind].source == FROM_EVENT &&
	       value > t->threshold;
}

enum fpd_trigger_kind
fpd_trigger_of_event(int e)
{
	for (int k = 0; k < FPD_TRIGGER_KINDS; k++) {
		if (kinds[k].source == FROM_EVENT && kinds[k].event == e)
			return (enum fpd_trigger_kind)k;
	}
	return FPD_TRIGGER_KINDS;
}

bool
fpd_trigger_watch(const struct fpd_trigger *ts, size_t n, uint64_t every_us,
		  struct fp_watch_config *c)
{
	bool any = false;

	memset(c, 0, sizeof(*c));
	c->every_ms = every_us / 1000 ? (unsigned)(every_us / 1000) : 1;
	c->rate = FP_WATCH_RATE_DEFAULT;
	for (size_t i = 0; i < n; i++) {
		const struct fpd_trigger *t = &ts[i];
		int e = kinds[t->kind].event;

		switch (kinds[t->kind].source) {
		case FROM_EVENT:
			/* the lowest threshold of a kind goes to the node;
			 * each trigger checks its own (fpd_trigger_event()) */
			if (!c->want[e] || (uint64_t)t->threshold < c->over[e])
				c->over[e] = (uint64_t)t->threshold;
			c->want[e] = true;
			any = true;
			break;
		case FROM_GAUGE:
		case FROM_GROWTH:
			if (kinds[t->kind].gauge == FPD_GAUGE_NODE_MEMORY)
				any = c->memory = true;
			else if (kinds[t->kind].gauge == FPD_GAUGE_SCHED_UTIL)
				any = c->util = true;
			break;
		case FROM_SAMPLE:
			break;
		}
	}
	return any;
}
