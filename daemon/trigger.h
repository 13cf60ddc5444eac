/*
 * flame_profd — the flight recorder's triggers (trigger.c): what
 * --trigger EXPR says, and whether a sample fires it. Each kind is a row
 * of one table, which says what the node pays for it; a kind that reads
 * the node itself (a request of its own, counted by cost.c) is a row with
 * its own check.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fp_sample;
struct fp_watch_config;

#define FPD_TRIGGER_TEXT_MAX 64		/* an expression's canonical text */
#define FPD_TRIGGERS_MAX 16		/* --trigger given at most this often */
#define FPD_TRIGGER_NAME_MAX 48		/* appears:NAME, NAME's bytes */

enum fpd_trigger_kind {
	FPD_TRIGGER_MAILBOX,	/* a sampled process's message_queue_len */
	FPD_TRIGGER_MEMORY,	/* a sampled process's memory, bytes */
	FPD_TRIGGER_RUN_QUEUE,	/* the node's total run queue lengths */
	FPD_TRIGGER_APPEARS,	/* a sampled process of a registered name,
				 * initial call or label */
	/* the node's system monitor, through its watcher (fp/watcher.h) */
	FPD_TRIGGER_LONG_GC,	/* a garbage collection's ms */
	FPD_TRIGGER_LONG_SCHEDULE,	/* a process or port ran this many ms */
	FPD_TRIGGER_LARGE_HEAP,	/* a heap's bytes after a collection */
	FPD_TRIGGER_LONG_MESSAGE_QUEUE,	/* a message queue's length */
	/* what the watcher reads each --every */
	FPD_TRIGGER_NODE_MEMORY,	/* erlang:memory(total) */
	FPD_TRIGGER_NODE_MEMORY_GROWTH,	/* ... grown by this much in /DUR */
	FPD_TRIGGER_SCHED_UTIL,	/* scheduler utilisation, percent */
	FPD_TRIGGER_KINDS,
};

/* What the node says of itself, read by a request the daemon sends
 * anyway (the breaker's health probe, once per --every). */
enum fpd_gauge {
	FPD_GAUGE_RUN_QUEUE,	/* erlang:statistics(total_run_queue_lengths) */
	/* read by the node's watcher each --every (fp/watcher.h) */
	FPD_GAUGE_NODE_MEMORY,	/* erlang:memory(total), bytes */
	FPD_GAUGE_SCHED_UTIL,	/* busy share of the schedulers' wall time, % */
};

/* node.memory+: the lowest reading of each sixteenth of its /DUR, so
 * that growth is measured from the lowest of the last DUR. */
#define FPD_GROWTH_SLOTS 16

struct fpd_growth {
	int64_t low[FPD_GROWTH_SLOTS];	/* -1: no reading */
	uint64_t slot;			/* now_us / (DUR / SLOTS) of the last */
};

/* One --trigger, parsed. */
struct fpd_trigger {
	enum fpd_trigger_kind kind;
	int64_t threshold;		/* fires above it */
	uint64_t for_us;		/* ... held this long (a gauge's /DUR) */
	char name[FPD_TRIGGER_NAME_MAX + 1];	/* appears: what to match */
	char text[FPD_TRIGGER_TEXT_MAX];	/* canonical: "mailbox>50000" */
};

/**
 * Parse @expr ("mailbox>50000", "memory>512M", "run_queue>200/10s",
 * "appears:my_handler") into @t.
 * @return 0, or -EINVAL with *@why saying what is wrong (static text).
 */
int
fpd_trigger_parse(const char *expr, struct fpd_trigger *t, const char **why);

/**
 * Whether @smp fires @t; its value is put in *@value then (1 for
 * appears: the caller tells a process's first match from the next).
 */
bool
fpd_trigger_check(const struct fpd_trigger *t, const struct fp_sample *smp,
		  int64_t *value);

/**
 * Whether the gauge @g read @value at @now_us fires @t, which it has been
 * over since *@since (0: it was not; updated here): over the threshold
 * for t->for_us. Its value is put in *@fired then.
 */
bool
fpd_trigger_gauge(const struct fpd_trigger *t, enum fpd_gauge g,
		  int64_t value, uint64_t now_us, uint64_t *since,
		  int64_t *fired);

/**
 * Whether a growth gauge @g read @value at @now_us fires @t: it grew by
 * more than the threshold since the lowest reading of the last t->for_us
 * (@st, zeroed at first, keeps those readings). The growth is put in
 * *@fired then, and the readings start again from @value.
 */
bool
fpd_trigger_growth(const struct fpd_trigger *t, enum fpd_gauge g,
		   int64_t value, uint64_t now_us, struct fpd_growth *st,
		   int64_t *fired);

/**
 * Whether the node's watcher's event of @kind (one of the system
 * monitor's: FPD_TRIGGER_LONG_GC ...) with @value fires @t.
 */
bool
fpd_trigger_event(const struct fpd_trigger *t, enum fpd_trigger_kind kind,
		  int64_t value);

/**
 * What the node's watcher must watch for @ts (@n of them), ticking every
 * @every_us, into @c (zeroed here).
 * @return whether any of them needs the watcher.
 */
bool
fpd_trigger_watch(const struct fpd_trigger *ts, size_t n, uint64_t every_us,
		  struct fp_watch_config *c);

/** The trigger kind of the watcher's event @e (enum fp_watch_event). */
enum fpd_trigger_kind
fpd_trigger_of_event(int e);

/** The kind's name as --trigger spells it ("mailbox"). */
const char *
fpd_trigger_kind_name(enum fpd_trigger_kind kind);
