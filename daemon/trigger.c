/*
 * flame_profd — triggers.
 *
 * A trigger of a per-process kind reads a metric every sample already
 * carries (the request asks for it whether or not a trigger is set), so
 * it costs the node nothing: the check runs in the daemon on each sample
 * as it is recorded. Kinds that must ask the node something of their own
 * go in the same table with the request they make and its cost.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trigger.h"
#include "util.h"
#include "fp/term.h"

enum threshold_unit {
	UNIT_COUNT,	/* a whole number */
	UNIT_SIZE,	/* a size, 512M */
};

static const struct {
	const char *name;
	enum fp_metric metric;
	enum threshold_unit unit;
} kinds[FPD_TRIGGER_KINDS] = {
	[FPD_TRIGGER_MAILBOX] = { "mailbox", FP_METRIC_MESSAGE_QUEUE_LEN, UNIT_COUNT },
	[FPD_TRIGGER_MEMORY] = { "memory", FP_METRIC_MEMORY, UNIT_SIZE },
};

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
	const char *op = strchr(expr, '>');
	size_t namelen;
	uint64_t v;
	int k;

	*why = NULL;
	if (!op || op == expr) {
		*why = "expected KIND>THRESHOLD: mailbox>N or memory>SIZE";
		return -EINVAL;
	}
	namelen = (size_t)(op - expr);
	for (k = 0; k < FPD_TRIGGER_KINDS; k++) {
		if (strlen(kinds[k].name) == namelen &&
		    memcmp(kinds[k].name, expr, namelen) == 0)
			break;
	}
	if (k == FPD_TRIGGER_KINDS) {
		*why = "unknown trigger: expected mailbox>N or memory>SIZE";
		return -EINVAL;
	}
	if (kinds[k].unit == UNIT_COUNT ? parse_count(op + 1, &v) < 0 :
					  fpd_parse_size(op + 1, &v) < 0) {
		*why = kinds[k].unit == UNIT_COUNT ?
		       "expected a whole number after '>', e.g. mailbox>50000" :
		       "expected a size after '>', e.g. memory>512M";
		return -EINVAL;
	}
	if (v > INT64_MAX) {
		*why = "threshold too large";
		return -EINVAL;
	}
	t->kind = (enum fpd_trigger_kind)k;
	t->threshold = (int64_t)v;
	snprintf(t->text, sizeof(t->text), "%s>%llu", kinds[k].name,
		 (unsigned long long)v);
	return 0;
}

bool
fpd_trigger_check(const struct fpd_trigger *t, const struct fp_sample *smp,
		  int64_t *value)
{
	int64_t v;

	/* a --perf sample is a thread, not a process */
	if (smp->status == FP_STATUS_CPU)
		return false;
	v = smp->value[kinds[t->kind].metric];
	if (v <= t->threshold)
		return false;
	*value = v;
	return true;
}
