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

enum fpd_trigger_kind {
	FPD_TRIGGER_MAILBOX,	/* a sampled process's message_queue_len */
	FPD_TRIGGER_MEMORY,	/* a sampled process's memory, bytes */
	FPD_TRIGGER_KINDS,
};

/* One --trigger, parsed. */
struct fpd_trigger {
	enum fpd_trigger_kind kind;
	int64_t threshold;		/* fires above it */
	char text[FPD_TRIGGER_TEXT_MAX];	/* canonical: "mailbox>50000" */
};

/**
 * Parse @expr ("mailbox>50000", "memory>512M") into @t.
 * @return 0, or -EINVAL with *@why saying what is wrong (static text).
 */
int
fpd_trigger_parse(const char *expr, struct fpd_trigger *t, const char **why);

/**
 * Whether @smp fires @t; its value is put in *@value then.
 */
bool
fpd_trigger_check(const struct fpd_trigger *t, const struct fp_sample *smp,
		  int64_t *value);

/** The kind's name as --trigger spells it ("mailbox"). */
const char *
fpd_trigger_kind_name(enum fpd_trigger_kind kind);
