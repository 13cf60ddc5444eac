/*
 * flame_prof — the pprof command: the samples selected, as pprof's
 * profile.proto (formats/pprof.c), for go tool pprof and the
 * continuous-profiling servers that take pprof (docs/FORMAT.md, "pprof").
 *
 * Every sample selected counts, as in top's summary: the same options
 * select them (stack.c), so the profile's total is top's "samples:".
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp/pprof.h"
#include "util-escape.h"
#include "util-mem.h"

/* The labels of a sample: node, pid, status, registered_name,
 * initial_call, label, callers, then the recorded keys. */
#define FIXED_LABELS 7

struct pprof_run {
	const struct fpp_options *o;
	struct fpp_run *r;
	struct fp_pprof *pp;
	size_t ncolumns;
	int64_t *values;
	char *node_as_read;		/* the last sample's node, as read */
	char *node;			/* ... and as shown */
	double rate;			/* the first file's that gives one */
	struct fp_pprof_label *labels;
	size_t labels_cap;
	struct fp_text text;		/* label values and names, NUL-ended */
	size_t *offs;			/* where each string starts in text */
	size_t offs_cap;
	int64_t *nums;			/* keys' values that are integers */
	size_t nums_cap;
	const char **frames;
	size_t frames_cap;
};

/* The unit pprof shows a metric's value and delta in. */
static const char *
metric_unit(enum fp_metric m)
{
	switch (m) {
	case FP_METRIC_MEMORY:
	case FP_METRIC_BINARY_BYTES:
		return "bytes";
	case FP_METRIC_TOTAL_HEAP_SIZE:
	case FP_METRIC_HEAP_SIZE:
	case FP_METRIC_STACK_SIZE:
		return "words";
	default:
		return "count";
	}
}

/*
 * The columns: samples, then every metric's value and, for the
 * counters, its delta. A gauge's delta is signed: pprof would sum
 * growth and release into one net number per stack, which hides both
 * (flame_prof top -w NAME_delta shows them apart).
 */
static void
add_columns(struct pprof_run *p)
{
	char name[64];

	fp_pprof_add_sample_type(p->pp, "samples", "count");
	p->ncolumns = 1;
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		const char *metric = fp_metric_name((enum fp_metric)m);

		fp_pprof_add_sample_type(p->pp, metric, metric_unit((enum fp_metric)m));
		p->ncolumns++;
		if (!fp_metric_is_counter((enum fp_metric)m))
			continue;
		snprintf(name, sizeof(name), "%s_delta", metric);
		fp_pprof_add_sample_type(p->pp, name, metric_unit((enum fp_metric)m));
		p->ncolumns++;
	}
	fp_pprof_set_default_sample_type(p->pp, "samples");
	p->values = xzalloc(p->ncolumns * sizeof(*p->values));
}

/* Node text as shown (util-escape.h), kept in p->text; returns its
 * offset. */
static size_t
put_shown(struct pprof_run *p, const char *s)
{
	size_t at = p->text.len;

	fp_text_puts_escaped(&p->text, s, NULL);
	fp_text_putc(&p->text, '\0');
	return at;
}

/* A decimal integer that fits int64, and only that. */
static bool
as_integer(const char *s, int64_t *v)
{
	char *end;

	if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
		return false;
	if ((s[0] == '0' && s[1]) || (s[0] == '-' && (!s[1] || s[1] == '0')))
		return false;	/* 007, -0: text, not a number pprof would print back */
	errno = 0;
	*v = strtoll(s, &end, 10);
	return !errno && !*end;
}

/* The node of @rec shown, escaped once per change of node (a file). */
static void
node_of(struct pprof_run *p, const struct fp_perf_record *rec)
{
	struct fp_text t = { 0 };

	if (p->r->reader && p->rate <= 0)
		p->rate = fp_perf_reader_rate(p->r->reader);
	if (!rec->node || (p->node_as_read && strcmp(p->node_as_read, rec->node) == 0)) {
		if (!rec->node) {
			free(p->node_as_read);
			free(p->node);
			p->node_as_read = p->node = NULL;
		}
		return;
	}
	free(p->node_as_read);
	free(p->node);
	p->node_as_read = xstrdup(rec->node);
	fp_text_puts_escaped(&t, rec->node, NULL);
	fp_text_putc(&t, '\0');
	p->node = t.buf;
}

/* "m:f/2:17" -> the length of "m:f/2" */
static size_t
without_line(const char *name)
{
	const char *slash = strrchr(name, '/');
	const char *colon = slash ? strchr(slash, ':') : NULL;

	return colon ? (size_t)(colon - name) : strlen(name);
}

static void
on_sample(void *data, const struct fp_perf_record *rec)
{
	struct pprof_run *p = data;
	struct fp_pprof_label *l;
	size_t n = 0, col = 1, label_at = SIZE_MAX, callers_at = SIZE_MAX;
	const char *const *frames = rec->frames;
	char pid[48];

	node_of(p, rec);
	p->values[0] = 1;
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		p->values[col++] = rec->value[m];
		if (fp_metric_is_counter((enum fp_metric)m))
			p->values[col++] = rec->delta[m];
	}

	/* the strings first, as offsets: the text moves while it grows */
	p->text.len = 0;
	FP_GROW(p->offs, p->offs_cap, 2 * (size_t)rec->nkeys + rec->nframes + 1);
	FP_GROW(p->nums, p->nums_cap, (size_t)rec->nkeys + 1);
	if (rec->label && *rec->label)
		label_at = put_shown(p, rec->label);
	if (rec->callers && *rec->callers)
		callers_at = put_shown(p, rec->callers);
	for (uint32_t i = 0; i < rec->nkeys; i++) {
		/* KEYNAME's bytes need no escaping (docs/FORMAT.md) */
		p->offs[2 * i] = p->text.len;
		fp_text_put(&p->text, "key.", 4);
		fp_text_puts(&p->text, rec->key_names[i]);
		fp_text_putc(&p->text, '\0');
		p->offs[2 * i + 1] = as_integer(rec->key_values[i], &p->nums[i]) ?
				     SIZE_MAX : put_shown(p, rec->key_values[i]);
	}
	if (p->o->strip_lines) {
		size_t *at = p->offs + 2 * (size_t)rec->nkeys;

		for (uint32_t i = 0; i < rec->nframes; i++)
			at[i] = fp_text_put_str(&p->text, rec->frames[i],
						without_line(rec->frames[i]));
		FP_GROW(p->frames, p->frames_cap, (size_t)rec->nframes + 1);
		for (uint32_t i = 0; i < rec->nframes; i++)
			p->frames[i] = p->text.buf + at[i];
		frames = p->frames;
	}

	FP_GROW(p->labels, p->labels_cap, FIXED_LABELS + (size_t)rec->nkeys);
	l = p->labels;
	if (p->node)
		l[n++] = (struct fp_pprof_label){ .key = "node", .str = p->node };
	snprintf(pid, sizeof(pid), "<0.%" PRIu32 ".%" PRIu32 ">", rec->pid.num,
		 rec->pid.serial);
	l[n++] = (struct fp_pprof_label){ .key = "pid", .str = pid };
	l[n++] = (struct fp_pprof_label){ .key = "status",
					  .str = fp_status_name(rec->status) };
	/* written atoms and MFAs: already in a form safe to show */
	if (rec->registered_name)
		l[n++] = (struct fp_pprof_label){ .key = "registered_name",
						  .str = rec->registered_name };
	if (rec->initial_call)
		l[n++] = (struct fp_pprof_label){ .key = "initial_call",
						  .str = rec->initial_call };
	if (label_at != SIZE_MAX)
		l[n++] = (struct fp_pprof_label){ .key = "label",
						  .str = p->text.buf + label_at };
	if (callers_at != SIZE_MAX)
		l[n++] = (struct fp_pprof_label){ .key = "callers",
						  .str = p->text.buf + callers_at };
	for (uint32_t i = 0; i < rec->nkeys; i++) {
		l[n] = (struct fp_pprof_label){ .key = p->text.buf + p->offs[2 * i] };
		if (p->offs[2 * i + 1] == SIZE_MAX)
			l[n].num = p->nums[i];
		else
			l[n].str = p->text.buf + p->offs[2 * i + 1];
		n++;
	}
	fp_pprof_add(p->pp, frames, rec->files, rec->nframes, p->values, l, n);
}

int
fpp_cmd_pprof(const struct fpp_options *o, char *const *args, size_t nargs)
{
	struct fpp_run r = { .o = o };
	struct pprof_run p = { .o = o, .r = &r, .pp = fp_pprof_new() };
	struct fpp_output out;
	char comment[256];
	int64_t period = 0;
	int ex;

	if (!o->output && isatty(STDOUT_FILENO)) {
		fpp_fail("pprof: the profile is binary (gzip): give -o FILE or "
			 "redirect standard output");
		ex = FPP_EXIT_USAGE;
		goto free_run;
	}
	add_columns(&p);
	r.sink = on_sample;
	r.sink_data = &p;
	ex = fpp_read_inputs(&r, args, nargs);
	if (ex != FPP_EXIT_OK)
		goto free_run;

	/* a sample of a process stands for 1/rate s of its wall time */
	if (p.rate > 0) {
		period = (int64_t)(1e9 / p.rate + 0.5);
		fp_pprof_set_period(p.pp, "wall", "nanoseconds", period);
	}
	if (r.matched)
		fp_pprof_set_time(p.pp, (int64_t)(r.first_us * 1000),
				  (int64_t)((r.last_us - r.first_us) * 1000) + period);
	fp_pprof_set_mapping(p.pp, "[beam]");
	snprintf(comment, sizeof(comment), "flame_prof %s: %" PRIu64
		 " samples of flame_profd (docs/FORMAT.md, \"pprof\")",
		 FP_VERSION, r.matched);
	fp_pprof_add_comment(p.pp, comment);

	ex = fpp_output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_run;
	ex = fpp_output_close(&out, fp_pprof_write(p.pp, out.f));
	fpp_warn_saturated(o, fp_pprof_saturated(p.pp));

free_run:
	fp_pprof_destroy(p.pp);
	free(p.values);
	free(p.node_as_read);
	free(p.node);
	free(p.labels);
	free(p.offs);
	free(p.nums);
	free(p.frames);
	fp_text_free(&p.text);
	fpp_run_free(&r);
	return ex;
}
