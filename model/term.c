/*
 * flame_profd — names and parsing for the sample vocabulary.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp/term.h"

static const char *const status_names[FP_STATUS_COUNT] = {
	[FP_STATUS_UNKNOWN] = "unknown",
	[FP_STATUS_RUNNING] = "running",
	[FP_STATUS_RUNNABLE] = "runnable",
	[FP_STATUS_WAITING] = "waiting",
	[FP_STATUS_GARBAGE_COLLECTING] = "garbage_collecting",
	[FP_STATUS_SUSPENDED] = "suspended",
	[FP_STATUS_EXITING] = "exiting",
	[FP_STATUS_FREE] = "free",
	[FP_STATUS_CPU] = "cpu",
	[FP_STATUS_TRACED] = "traced",
};

static const struct {
	const char *name;
	bool counter;
} metrics[FP_METRIC_COUNT] = {
	[FP_METRIC_REDUCTIONS] = { "reductions", true },
	[FP_METRIC_MEMORY] = { "memory", false },
	[FP_METRIC_MESSAGE_QUEUE_LEN] = { "message_queue_len", false },
	[FP_METRIC_TOTAL_HEAP_SIZE] = { "total_heap_size", false },
	[FP_METRIC_HEAP_SIZE] = { "heap_size", false },
	[FP_METRIC_STACK_SIZE] = { "stack_size", false },
	[FP_METRIC_BINARY_BYTES] = { "binary_bytes", false },
	[FP_METRIC_MINOR_GCS] = { "minor_gcs", true },
};

const char *
fp_status_name(enum fp_status status)
{
	if ((unsigned)status >= FP_STATUS_COUNT)
		status = FP_STATUS_UNKNOWN;
	return status_names[status];
}

enum fp_status
fp_status_from_name(const char *name)
{
	for (int i = 1; i < FP_STATUS_COUNT; i++) {
		if (strcmp(name, status_names[i]) == 0)
			return (enum fp_status)i;
	}
	return FP_STATUS_UNKNOWN;
}

const char *
fp_metric_name(enum fp_metric metric)
{
	return metrics[metric].name;
}

bool
fp_metric_is_counter(enum fp_metric metric)
{
	return metrics[metric].counter;
}

bool
fp_sample_is_idle(const struct fp_sample *sample)
{
	/* Parked in receive or suspended, the process holds no scheduler
	 * and asks for none: at rest as the kernel's idle task is on a
	 * CPU. */
	if (sample->status == FP_STATUS_TRACED)
		/* a traced process scheduled out holds no scheduler either,
		 * whether it waits for a message or for its turn */
		return sample->nframes > 0 && sample->frames[0].module &&
		       sample->frames[0].function &&
		       strcmp(sample->frames[0].module, FP_SLEEP_MODULE) == 0 &&
		       strcmp(sample->frames[0].function, FP_SLEEP_FUNCTION) == 0;
	return sample->status == FP_STATUS_WAITING ||
	       sample->status == FP_STATUS_SUSPENDED;
}

static int
parse_u32(const char **p, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(*p, &end, 10);
	if (errno || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	*p = end;
	return 0;
}

int
fp_pid_parse(const char *str, struct fp_pid *pid)
{
	const char *p = str;
	bool bracket = false;
	uint32_t node, num, serial;

	if (*p == '<') {
		bracket = true;
		p++;
	}
	if (parse_u32(&p, &node) < 0 || *p++ != '.' ||
	    parse_u32(&p, &num) < 0 || *p++ != '.' ||
	    parse_u32(&p, &serial) < 0)
		return -EINVAL;
	if (bracket && *p++ != '>')
		return -EINVAL;
	if (*p != '\0' || node != 0)
		return -EINVAL;

	pid->num = num;
	pid->serial = serial;
	return 0;
}

int
fp_pid_parse_full(const char *str, struct fp_pid *pid, char *node,
		  size_t nodelen, uint32_t *creation)
{
	const char *p, *dot[3] = { NULL }, *end;
	size_t len = strlen(str), n = 0;
	uint32_t fields[3];

	*creation = 0;
	if (nodelen)
		node[0] = '\0';
	if (fp_pid_parse(str, pid) == 0)
		return 0;
	/* <alive@host.Creation.Number.Serial>: the host may have dots, so the
	 * three numbers are found from the end */
	if (len < 2 || str[0] != '<' || str[len - 1] != '>')
		return -EINVAL;
	end = str + len - 1;
	for (p = end - 1; p > str && n < 3; p--) {
		if (*p == '.')
			dot[n++] = p;
	}
	if (n < 3)
		return -EINVAL;
	/* dot[2] ends the node name, dot[1] the creation, dot[0] the number */
	p = dot[2] + 1;
	for (int k = 0; k < 3; k++) {
		if (parse_u32(&p, &fields[k]) < 0 || p != (k < 2 ? dot[1 - k] : end))
			return -EINVAL;
		p++;
	}
	len = (size_t)(dot[2] - (str + 1));
	if (len == 0 || len >= nodelen || !memchr(str + 1, '@', len))
		return -EINVAL;
	memcpy(node, str + 1, len);
	node[len] = '\0';
	*creation = fields[0];
	pid->num = fields[1];
	pid->serial = fields[2];
	return 1;
}

/* An Elixir alias: segments of a capital ASCII letter then letters,
 * digits and underscores, joined by dots. */
static bool
is_alias(const char *s)
{
	bool start = true;

	for (; *s; s++) {
		if (start) {
			if (*s < 'A' || *s > 'Z')
				return false;
			start = false;
		} else if (*s == '.') {
			start = true;
		} else if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
			   !(*s >= '0' && *s <= '9') && *s != '_') {
			return false;
		}
	}
	return !start;
}

int
fp_name_candidates(const char *given, char cand[2][FP_NAME_MAX])
{
	size_t len = strlen(given);
	int n = 0;

	/* Elixir's atom syntax, :foo or :"foo bar" */
	if (given[0] == ':' && len > 1) {
		given++;
		len--;
		if (given[0] == '"' && len >= 2 && given[len - 1] == '"') {
			given++;
			len -= 2;
		}
	}
	if (len == 0 || len >= FP_NAME_MAX)
		return -EINVAL;
	if (is_alias(given) && strncmp(given, "Elixir.", 7) != 0) {
		if (len + 7 < FP_NAME_MAX) {
			memcpy(cand[n], "Elixir.", 7);
			memcpy(cand[n] + 7, given, len);
			cand[n][len + 7] = '\0';
			n++;
		}
	}
	memcpy(cand[n], given, len);
	cand[n][len] = '\0';
	return n + 1;
}
