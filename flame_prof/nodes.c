/*
 * flame_prof nodes — a table of the nodes whose files are read: a row
 * per node (the one each file's header names) with its samples, their
 * span and rate, what the daemon's interval notes say of the rate it
 * achieved and its cost to the node, and the node's hottest function.
 *
 * Samples are the ones the options select, and a node is listed when
 * any of its samples is; its interval notes are the node's, from every
 * file read (files outside --from/--to by their names are not read),
 * whatever the options select.
 *
 * The same table stands under a heat map of several nodes
 * (fpp_nodes_new(), render.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame_prof.h"
#include "fp/top.h"
#include "util-escape.h"
#include "util-mem.h"

struct node_row {
	char *name;			/* as read; NULL: a file without one */
	uint64_t samples, idle;
	uint64_t first_us, last_us;
	struct fp_func_table *funcs;
	uint64_t intervals;		/* interval notes */
	uint64_t nachieved, ncost;	/* ... of them with achieved=, cost= */
	double achieved_sum;		/* their achieved=N/s */
	double cost_sum, cost_max;	/* their cost=C% */
};

struct fpp_nodes {
	struct fpp_run *r;
	struct node_row *rows;
	size_t count, cap;
	struct node_row *last;		/* the last sample's, for the next */
};

static struct node_row *
row_of(struct fpp_nodes *t, const char *name)
{
	if (t->last && (name && t->last->name ? strcmp(t->last->name, name) == 0 :
			name == t->last->name))
		return t->last;
	for (size_t i = 0; i < t->count; i++) {
		struct node_row *n = &t->rows[i];

		if (name && n->name ? strcmp(n->name, name) == 0 : name == n->name)
			return t->last = n;
	}
	FP_GROW(t->rows, t->cap, t->count + 1);
	t->last = NULL;		/* the rows may have moved */
	t->rows[t->count] = (struct node_row){
		.name = name ? xstrdup(name) : NULL,
		.funcs = fp_func_table_new(),
	};
	return t->last = &t->rows[t->count++];
}

static void
on_sample(void *data, const struct fp_perf_record *rec)
{
	struct fpp_nodes *t = data;
	struct node_row *n = row_of(t, rec->node);

	if (!n->samples || rec->time_us < n->first_us)
		n->first_us = rec->time_us;
	if (rec->time_us > n->last_us)
		n->last_us = rec->time_us;
	n->samples++;
	/* the hottest function is where the node works, as in top */
	if (rec->idle) {
		fp_func_table_add_unranked(n->funcs, rec->status);
		n->idle++;
	}
	else
		fp_func_table_add(n->funcs, rec->status, rec->frames, rec->nframes, 1);
}

/* "... KEY=NUMBER..." in @text: the number, or -1 */
static double
note_value(const char *text, size_t len, const char *key)
{
	size_t k = strlen(key);
	char num[32];

	for (size_t i = 0; i + k < len; i++) {
		size_t n = 0;

		if (text[i] != ' ' || memcmp(text + i + 1, key, k) != 0)
			continue;
		for (i += 1 + k; i < len && n < sizeof(num) - 1 &&
		     ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'); i++)
			num[n++] = text[i];
		num[n] = '\0';
		return n ? strtod(num, NULL) : -1;
	}
	return -1;
}

static void
on_comment(void *data, const char *text, size_t len)
{
	static const char prefix[] = "flame_profd: ";
	struct fpp_nodes *t = data;
	const char *at;
	struct node_row *n;
	double achieved, cost;

	if (len < sizeof(prefix) - 1 || memcmp(text, prefix, sizeof(prefix) - 1) != 0)
		return;
	/* "flame_profd: TIME interval: ..." */
	at = memchr(text + sizeof(prefix) - 1, ' ', len - (sizeof(prefix) - 1));
	if (!at || (size_t)(text + len - at) < 11 || memcmp(at, " interval: ", 11) != 0)
		return;
	n = row_of(t, t->r->reader ? fp_perf_reader_node(t->r->reader) : NULL);
	achieved = note_value(at, (size_t)(text + len - at), "achieved=");
	cost = note_value(at, (size_t)(text + len - at), "cost=");
	n->intervals++;
	if (achieved >= 0) {
		n->achieved_sum += achieved;
		n->nachieved++;
	}
	if (cost >= 0) {
		n->ncost++;
		n->cost_sum += cost;
		if (cost > n->cost_max)
			n->cost_max = cost;
	}
}

static int
row_cmp(const void *a, const void *b)
{
	const struct node_row *x = a, *y = b;

	if (!x->name || !y->name)
		return !x->name - !y->name;
	return strcmp(x->name, y->name);
}

/* The function of the most self samples (ties by name), or NULL. */
static const struct fp_func_stats *
hottest(const struct fp_func_table *funcs)
{
	const struct fp_func_stats *best = NULL;

	for (size_t i = 0; i < fp_func_table_count(funcs); i++) {
		const struct fp_func_stats *f = fp_func_table_at(funcs, i);

		if (!best || f->self_samples > best->self_samples ||
		    (f->self_samples == best->self_samples &&
		     strcmp(f->name, best->name) < 0))
			best = f;
	}
	return best && best->self_samples ? best : NULL;
}

static int
write_table(struct fpp_nodes *t, FILE *f)
{
	struct fp_text esc = { 0 };

	if (t->count)
		qsort(t->rows, t->count, sizeof(*t->rows), row_cmp);
	t->last = NULL;
	fprintf(f, "%-32s %9s %8s %9s %9s %10s %6s %6s  %s\n", "NODE", "SAMPLES",
		"SPAN_S", "SAMPLES/S", "INTERVALS", "ACHIEVED/S", "COST%", "MAX%",
		"HOTTEST FUNCTION (SELF% of samples in rows)");
	for (size_t i = 0; i < t->count; i++) {
		const struct node_row *n = &t->rows[i];
		const struct fp_func_stats *hot = hottest(n->funcs);
		double span = n->samples ? (double)(n->last_us - n->first_us) / 1e6 : 0;
		uint64_t ranked = n->samples - n->idle;

		/* notes alone: none of its samples is selected */
		if (!n->samples)
			continue;
		/* the node's name is text a user and a node control */
		esc.len = 0;
		if (n->name)
			fp_text_puts_escaped(&esc, n->name, " ");
		else
			fp_text_putc(&esc, '-');
		fprintf(f, "%-32.*s %9" PRIu64 " %8.1f ", (int)esc.len, esc.buf,
			n->samples, span);
		if (span > 0)
			fprintf(f, "%9.1f ", (double)n->samples / span);
		else
			fprintf(f, "%9s ", "-");
		fprintf(f, "%9" PRIu64 " ", n->intervals);
		if (n->nachieved)
			fprintf(f, "%10.1f ", n->achieved_sum / (double)n->nachieved);
		else
			fprintf(f, "%10s ", "-");
		/* files of versions before cost= have none */
		if (n->ncost)
			fprintf(f, "%6.2f %6.2f  ", n->cost_sum / (double)n->ncost, n->cost_max);
		else
			fprintf(f, "%6s %6s  ", "-", "-");
		if (hot)
			fprintf(f, "%s (%.1f%%)\n", hot->name,
				100.0 * (double)hot->self_samples / (double)ranked);
		else
			fprintf(f, "-\n");
	}
	fp_text_free(&esc);
	return ferror(f) ? -EIO : 0;
}

struct fpp_nodes *
fpp_nodes_new(struct fpp_run *r)
{
	struct fpp_nodes *t = xnew(struct fpp_nodes);

	t->r = r;
	r->sink = on_sample;
	r->sink_data = t;
	r->comment = on_comment;
	r->comment_data = t;
	return t;
}

void
fpp_nodes_destroy(struct fpp_nodes *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->count; i++) {
		free(t->rows[i].name);
		fp_func_table_destroy(t->rows[i].funcs);
	}
	free(t->rows);
	free(t);
}

size_t
fpp_nodes_count(const struct fpp_nodes *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->count; i++)
		n += t->rows[i].samples > 0;
	return n;
}

int
fpp_nodes_write(struct fpp_nodes *t, FILE *f)
{
	return write_table(t, f);
}

int
fpp_cmd_nodes(const struct fpp_options *o, char *const *args, size_t nargs)
{
	struct fpp_run r = { .o = o };
	struct fpp_nodes *t = fpp_nodes_new(&r);
	struct fpp_output out;
	int ex;

	ex = fpp_read_inputs(&r, args, nargs);
	if (ex != FPP_EXIT_OK)
		goto free_rows;
	ex = fpp_output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_rows;
	ex = fpp_output_close(&out, write_table(t, out.f));

free_rows:
	fpp_nodes_destroy(t);
	fpp_run_free(&r);
	return ex;
}
