/*
 * flame_prof — reading the inputs: which samples are selected, and the
 * stack each one becomes (group, sign, status and process frames above
 * its own), fed to the sinks of a run.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp/flame-tree.h"
#include "fp/heatmap-svg.h"
#include "fp/speedscope.h"
#include "fp/top.h"
#include "util-escape.h"
#include "util-mem.h"

const char *
fpp_field_value(const struct fp_perf_record *rec, const struct fpp_field *f)
{
	switch (f->kind) {
	case FPP_FIELD_LABEL:
		return rec->label;
	case FPP_FIELD_CALLERS:
		return rec->callers;
	case FPP_FIELD_NODE:
		return rec->node;
	case FPP_FIELD_KEY:
		for (uint32_t i = 0; i < rec->nkeys; i++) {
			if (strlen(rec->key_names[i]) == f->keylen &&
			    memcmp(rec->key_names[i], f->key, f->keylen) == 0)
				return rec->key_values[i];
		}
		return NULL;
	}
	return NULL;
}

const char *
fpp_field_title(const struct fpp_field *f)
{
	return f->kind == FPP_FIELD_LABEL ? "label" :
	       f->kind == FPP_FIELD_CALLERS ? "callers" :
	       f->kind == FPP_FIELD_NODE ? "node" : f->title;
}

static bool
where_holds(const struct fpp_where *w, const struct fp_perf_record *rec)
{
	const char *v = fpp_field_value(rec, &w->field);

	if (!v)
		return false;
	if (!w->contains)
		return strcmp(v, w->text) == 0;
	/* callers~0.101.0 and callers~<0.101.0> alike */
	if (w->field.kind == FPP_FIELD_CALLERS && w->text[0] != '<') {
		char pid[64];

		snprintf(pid, sizeof(pid), "<%s>", w->text);
		return strstr(v, pid) != NULL;
	}
	return strstr(v, w->text) != NULL;
}

/* ---- reading ---- */

/* The weight of a sample: 1, or its metric, a signed one turned by
 * --sign into growth, release or magnitude (all but split) */
static int64_t
weight_of(const struct fpp_options *o, const struct fp_perf_record *rec)
{
	int64_t w;

	if (o->weight < 0)
		return 1;
	w = o->delta ? rec->delta[o->weight] : rec->value[o->weight];
	if (!fpp_weight_is_signed(o))
		return w;
	switch (o->sign) {
	case FPP_SIGN_POSITIVE:
		return w > 0 ? w : 0;
	case FPP_SIGN_NEGATIVE:
		return w < 0 ? (w == INT64_MIN ? INT64_MAX : -w) : 0;
	case FPP_SIGN_ABS:
		return w < 0 ? (w == INT64_MIN ? INT64_MAX : -w) : w;
	case FPP_SIGN_SPLIT:
		break;
	}
	return w;
}

bool
fpp_selected(const struct fpp_options *o, const struct fp_perf_record *rec)
{
	bool ok;

	if (o->status_filter && !o->status_ok[rec->status])
		return false;
	for (size_t i = 0; i < o->nwheres; i++) {
		if (!where_holds(&o->wheres[i], rec))
			return false;
	}
	if (o->npids) {
		ok = false;
		for (size_t i = 0; i < o->npids && !ok; i++)
			ok = o->pids[i].num == rec->pid.num &&
			     o->pids[i].serial == rec->pid.serial;
		if (!ok)
			return false;
	}
	if (o->nnames) {
		ok = false;
		for (size_t i = 0; i < o->nnames && !ok && rec->registered_name; i++)
			ok = strcmp(o->names[i], rec->registered_name) == 0;
		if (!ok)
			return false;
	}
	return true;
}

static bool
accept(struct fpp_run *r, const struct fp_perf_record *rec)
{
	const struct fpp_options *o = r->o;

	if (!fpp_selected(o, rec))
		return false;
	if (!r->resolved) {
		/* relative bounds count from the first sample read */
		r->resolved = true;
		r->from_us = o->from.set ? o->from.us +
			     (o->from.relative ? rec->time_us : 0) : 0;
		r->to_us = o->to.set ? o->to.us +
			   (o->to.relative ? rec->time_us : 0) : UINT64_MAX;
	}
	return rec->time_us >= r->from_us && rec->time_us < r->to_us;
}

static size_t
scratch_put(struct fpp_run *r, const char *s, size_t n)
{
	return fp_text_put_str(&r->text, s, n);
}

/* "m:f/2:17" -> length of "m:f/2" */
static size_t
without_line(const char *name)
{
	const char *slash = strrchr(name, '/');
	const char *colon = slash ? strchr(slash, ':') : NULL;

	return colon ? (size_t)(colon - name) : strlen(name);
}

/*
 * Build the stack of a sample, root first, in r->names/r->files, and
 * the leaf-first frame names in r->leaf. Returns the number of group
 * frames in *ngroups and the (non-negative) weight in *mag; false if
 * the sample has no place in a weighted graph.
 */
static bool
build_stack(struct fpp_run *r, const struct fp_perf_record *rec, int64_t w,
	    size_t *n, size_t *ngroups, uint64_t *mag, bool with_status)
{
	const struct fpp_options *o = r->o;
	size_t k = 0, need = rec->nframes + 4;
	size_t sign_at = SIZE_MAX, proc_at = SIZE_MAX, group_at = SIZE_MAX;
	bool placed = true;

	if (need > r->cap) {
		/* files, leaf and text_offs are as long as names */
		FP_GROW(r->names, r->cap, need);
		r->files = xrealloc(r->files, r->cap * sizeof(*r->files));
		r->leaf = xrealloc(r->leaf, r->cap * sizeof(*r->leaf));
		r->text_offs = xrealloc(r->text_offs, r->cap * sizeof(*r->text_offs));
	}
	r->text.len = 0;

	*mag = 0;
	if (o->weight < 0) {
		*mag = 1;
	} else if (fpp_weight_is_signed(o) && o->sign == FPP_SIGN_SPLIT) {
		placed = w != 0;
		*mag = w < 0 ? (uint64_t)0 - (uint64_t)w : (uint64_t)w;
		if (placed) {
			char frame[80];
			int len = snprintf(frame, sizeof(frame), "[%c%s]",
					   w > 0 ? '+' : '-', o->weight_name);

			sign_at = k;
			r->text_offs[k] = scratch_put(r, frame, (size_t)len);
			r->files[k++] = NULL;
		}
	} else {
		/* values and counter deltas are never negative, nor are
		 * signed weights turned by --sign */
		placed = w > 0;
		*mag = placed ? (uint64_t)w : 0;
	}
	if (o->group && !r->groups_by_table) {
		const char *v = fpp_field_value(rec, &o->group_by);
		const char *t = fpp_field_title(&o->group_by);

		group_at = k;
		r->text_offs[k] = scratch_put(r, t, strlen(t));
		r->text.len--;
		scratch_put(r, ":", 1);
		r->text.len--;
		/* the value is the node's text: one frame, on one line */
		r->esc.len = 0;
		if (v)
			fp_text_puts_escaped(&r->esc, v, ";");
		else
			fp_text_putc(&r->esc, '-');
		scratch_put(r, r->esc.buf, r->esc.len);
		r->files[k++] = NULL;
	}
	if (with_status) {
		r->names[k] = fp_status_name(rec->status);
		r->files[k++] = NULL;
	}
	if (o->process) {
		char frame[64];
		int len = snprintf(frame, sizeof(frame), "<0.%" PRIu32 ".%" PRIu32 ">",
				   rec->pid.num, rec->pid.serial);
		const char *reg = rec->registered_name, *ic = rec->initial_call;
		size_t at;

		fpp_names_of(r->proc_names, &rec->pid, &reg, &ic);
		if (reg) {
			at = scratch_put(r, reg, strlen(reg));
		} else {
			at = scratch_put(r, frame, (size_t)len);
			if (ic) {
				/* extend the pid with " INITIAL_CALL" */
				r->text.len--;
				scratch_put(r, " ", 1);
				r->text.len--;
				scratch_put(r, ic, strlen(ic));
			}
		}
		proc_at = k;
		r->text_offs[k] = at;
		r->files[k++] = NULL;
	}
	*ngroups = k;
	for (uint32_t i = 0; i < rec->nframes; i++) {
		const char *name = rec->frames[rec->nframes - 1 - i];

		if (o->strip_lines) {
			r->text_offs[k] = scratch_put(r, name, without_line(name));
			name = NULL;
		}
		r->names[k] = name;
		r->files[k++] = rec->files[rec->nframes - 1 - i];
	}
	/* scratch text may have moved while growing: resolve offsets last */
	if (sign_at != SIZE_MAX)
		r->names[sign_at] = r->text.buf + r->text_offs[sign_at];
	if (proc_at != SIZE_MAX)
		r->names[proc_at] = r->text.buf + r->text_offs[proc_at];
	if (group_at != SIZE_MAX)
		r->names[group_at] = r->text.buf + r->text_offs[group_at];
	for (size_t i = *ngroups; i < k; i++) {
		if (o->strip_lines)
			r->names[i] = r->text.buf + r->text_offs[i];
		r->leaf[k - 1 - i] = r->names[i];
	}
	*n = k;
	return placed;
}

static void
report_progress(struct fpp_run *r, bool final)
{
	struct timespec now;
	uint64_t done, total;
	double ms;

	if (!r->progress)
		return;
	if (final) {
		if (r->reported)
			fputs("\r\033[K", stderr);
		r->reported = false;
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (double)(now.tv_sec - r->last_report.tv_sec) * 1e3 +
	     (double)(now.tv_nsec - r->last_report.tv_nsec) / 1e6;
	if (ms < 200)
		return;
	r->last_report = now;
	fp_perf_reader_progress(r->reader, &done, &total);
	fprintf(stderr, "\r\033[Kflame_prof: file %zu/%zu %s: ",
		r->file_index + 1, r->file_count, r->file);
	if (total)
		fprintf(stderr, "%.0f%% of %.1f MB", 100.0 * (double)done / (double)total,
			(double)total / 1e6);
	else
		fprintf(stderr, "%.1f MB", (double)done / 1e6);
	fprintf(stderr, ", %" PRIu64 " samples", r->read);
	r->reported = true;
}

struct fp_func_table *
fpp_group_table(struct fpp_run *r, const struct fp_perf_record *rec)
{
	const char *v;

	if (!r->groups_by_table)
		return r->table;
	v = fpp_field_value(rec, &r->o->group_by);
	for (size_t i = 0; i < r->ngroups; i++) {
		if (v ? r->groups[i].value && strcmp(r->groups[i].value, v) == 0 :
			!r->groups[i].value)
			return r->groups[i].table;
	}
	FP_GROW(r->groups, r->groups_cap, r->ngroups + 1);
	r->groups[r->ngroups].value = v ? xstrdup(v) : NULL;
	r->groups[r->ngroups].table = fp_func_table_new();
	return r->groups[r->ngroups++].table;
}

/* speedscope: the profile a sample goes to */
static void
profile_name(const struct fpp_run *r, const struct fp_perf_record *rec,
	     char *dst, size_t size)
{
	const char *reg = rec->registered_name, *ic = rec->initial_call;

	switch (r->o->profiles) {
	case FPP_PROFILES_STATUS:
		snprintf(dst, size, "%s", fp_status_name(rec->status));
		break;
	case FPP_PROFILES_ALL:
		snprintf(dst, size, "all");
		break;
	case FPP_PROFILES_PROCESS:
		fpp_names_of(r->proc_names, &rec->pid, &reg, &ic);
		if (reg)
			snprintf(dst, size, "%s <0.%" PRIu32 ".%" PRIu32 ">",
				 reg, rec->pid.num, rec->pid.serial);
		else
			snprintf(dst, size, "<0.%" PRIu32 ".%" PRIu32 ">%s%s",
				 rec->pid.num, rec->pid.serial,
				 ic ? " " : "", ic ? ic : "");
		break;
	}
}

/* The heat map's source number of the samples of @node: one per node
 * (a file without a node name is one more), the last one's first. */
static unsigned
heat_source(struct fpp_run *r, const char *node)
{
	size_t i = r->heat_last;

	if (i < r->nheat_nodes &&
	    (node && r->heat_nodes[i] ? strcmp(node, r->heat_nodes[i]) == 0 :
	     node == r->heat_nodes[i]))
		return (unsigned)i;
	for (i = 0; i < r->nheat_nodes; i++) {
		if (node && r->heat_nodes[i] ? strcmp(node, r->heat_nodes[i]) == 0 :
		    node == r->heat_nodes[i])
			break;
	}
	if (i == r->nheat_nodes) {
		FP_GROW(r->heat_nodes, r->heat_nodes_cap, r->nheat_nodes + 1);
		r->heat_nodes[r->nheat_nodes++] = node ? xstrdup(node) : NULL;
	}
	r->heat_last = i;
	return (unsigned)i;
}

static int
on_record(void *data, const struct fp_perf_record *rec)
{
	struct fpp_run *r = data;
	const struct fpp_options *o = r->o;
	int64_t w = weight_of(o, rec);
	size_t n, ngroups;
	uint64_t mag;
	bool placed;

	if ((++r->read & 1023) == 0)
		report_progress(r, false);
	if (!accept(r, rec))
		return 0;
	if (!r->matched || rec->time_us < r->first_us)
		r->first_us = rec->time_us;
	if (rec->time_us > r->last_us)
		r->last_us = rec->time_us;
	r->matched++;

	if (r->heatmap && rec->idle && r->skips_idle) {
		fp_heatmap_cover(r->heatmap, rec->time_us);
		r->idle_left_out++;
	} else if (r->heatmap) {
		fp_heatmap_add_from(r->heatmap, rec->time_us, w,
				    heat_source(r, rec->node));
	}

	placed = build_stack(r, rec, w, &n, &ngroups, &mag,
			     !o->no_status && !(r->speedscope &&
						o->profiles == FPP_PROFILES_STATUS));
	if (r->table && rec->idle && r->skips_idle)
		fp_func_table_add_unranked(fpp_group_table(r, rec), rec->status);
	else if (r->table)
		fp_func_table_add(fpp_group_table(r, rec), rec->status, r->leaf,
				  n - ngroups, w);
	if (r->sink)
		r->sink(r->sink_data, rec);
	if (!placed) {
		r->dropped++;
		return 0;
	}
	if (r->tree)
		fp_flame_tree_add(r->tree, r->set, r->names, r->files, n,
				  ngroups, mag);
	if (r->speedscope) {
		char profile[512];

		profile_name(r, rec, profile, sizeof(profile));
		fp_speedscope_add(r->speedscope, profile, r->names, r->files, n,
				  mag, rec->time_us);
	}
	return 0;
}

int
fpp_read_inputs(struct fpp_run *r, char *const *args, size_t nargs)
{
	const struct fpp_options *o = r->o;
	struct fpp_inputs in;
	struct fpp_names *names = NULL;
	const char *bad = NULL;
	int rc, ex = FPP_EXIT_OK;

	/* a process is named once, from all its samples: a name read
	 * after its first samples (proc_lib's recorded initial call, a
	 * registration mid-file) must not make it two */
	if (!r->proc_names && !r->sink &&
	    (o->process || (r->speedscope && o->profiles == FPP_PROFILES_PROCESS))) {
		ex = fpp_names_read(o, args, nargs, &names);
		if (ex != FPP_EXIT_OK)
			return ex;
		r->proc_names = names;
	}
	rc = fpp_inputs_expand(args, nargs, &o->from, &o->to, &in, &bad);
	if (rc == -ENODATA) {
		fpp_fail("%s: no perf-script files (*.perf, *.perf.gz, *.perf.zst) below it",
		     bad);
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	if (rc == -EINVAL) {
		fpp_fail("%s: not a regular file or a directory (a pipe is read as -)",
		     bad);
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	if (rc == -ELOOP) {
		fpp_fail("%s: directories nest deeper than 32 levels; name a "
		     "directory further down", bad);
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	if (rc < 0) {
		fpp_fail("cannot open %s: %s", bad, strerror(-rc));
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	r->progress = !o->quiet && isatty(STDERR_FILENO);
	r->file_count = in.count;
	clock_gettime(CLOCK_MONOTONIC, &r->last_report);
	for (size_t i = 0; i < in.count && ex == FPP_EXIT_OK; i++) {
		struct fp_perf_reader *reader = NULL;

		if (in.files[i].skip)
			continue;
		rc = fp_perf_reader_open(in.files[i].path, &reader);
		if (rc == -EINVAL) {
			/* replaced since the inputs were listed */
			fpp_fail("%s: not a regular file", in.files[i].path);
			ex = FPP_EXIT_NOINPUT;
			break;
		}
		if (rc < 0) {
			fpp_fail("cannot open %s: %s", in.files[i].path, strerror(-rc));
			ex = FPP_EXIT_NOINPUT;
			break;
		}
		fp_perf_reader_set_erlang_names(reader, o->erlang_names);
		if (r->comment)
			fp_perf_reader_set_comment_fn(reader, r->comment, r->comment_data);
		r->reader = reader;
		r->file = in.files[i].path;
		r->file_index = i;
		rc = fp_perf_read(reader, on_record, r);
		report_progress(r, true);
		if (rc == -EBADMSG) {
			fpp_fail("%s", fp_perf_reader_error(reader));
			ex = FPP_EXIT_DATAERR;
		} else if (rc < 0) {
			fpp_fail("%s", fp_perf_reader_error(reader)[0] ?
				     fp_perf_reader_error(reader) : strerror(-rc));
			ex = FPP_EXIT_IOERR;
		}
		r->reader = NULL;
		fp_perf_reader_destroy(reader);
	}
	if (ex == FPP_EXIT_OK && !o->quiet && r->matched == 0)
		fpp_fail("warning: no samples%s", r->read ? " matched the selection" : "");
	else if (ex == FPP_EXIT_OK && !o->quiet && r->dropped &&
		 r->dropped == r->matched && o->weight >= 0)
		fpp_fail("warning: every sample has weight 0 (or the other sign) for %s",
		     o->weight_name);
free_inputs:
	fpp_inputs_free(&in);
	if (names) {
		r->proc_names = NULL;
		fpp_names_destroy(names);
	}
	return ex;
}

void
fpp_run_free(struct fpp_run *r)
{
	for (size_t i = 0; i < r->nheat_nodes; i++)
		free(r->heat_nodes[i]);
	free(r->heat_nodes);
	free(r->names);
	free(r->files);
	free(r->leaf);
	fp_text_free(&r->text);
	free(r->text_offs);
	fp_text_free(&r->esc);
}

