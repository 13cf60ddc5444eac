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

#define FPD_TRIGGER_TEXT_MAX 64		/* an expression's canonical text */
#define FPD_TRIGGERS_MAX 16		/* --trigger given at most this often */
#define FPD_TRIGGER_NAME_MAX 48		/* appears:NAME, NAME's bytes */

enum fpd_trigger_kind {
	FPD_TRIGGER_MAILBOX,	/* a sampled process's message_queue_len */
	FPD_TRIGGER_MEMORY,	/* a sampled process's memory, bytes */
	FPD_TRIGGER_RUN_QUEUE,	/* the node's total run queue lengths */
	FPD_TRIGGER_APPEARS,	/* a sampled process of a registered name,
				 * initial call or label */
	FPD_TRIGGER_KINDS,
};

/* What the node says of itself, read by a request the daemon sends
 * anyway (the breaker's health probe, once per --every). */
enum fpd_gauge {
	FPD_GAUGE_RUN_QUEUE,	/* erlang:statistics(total_run_queue_lengths) */
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

/** The kind's name as --trigger spells it ("mailbox"). */
const char *
fpd_trigger_kind_name(enum fpd_trigger_kind kind);
