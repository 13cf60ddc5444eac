/*
 * flame_prof procs — a table of the sampled processes.
 *
 * A row per pid: its registered name (the last one seen) or initial
 * call, or for an OS thread of the node (the cpu samples of --perf, pid
 * <0.0.TID>) the thread's name, its label; samples by status, the
 * reductions it did (the sum of its reductions_delta), the longest
 * mailbox and the largest memory seen in its samples. Text for people;
 * CSV and JSON for scripts.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp/speedscope.h"
#include "util-escape.h"
#include "util-hash.h"
#include "util-mem.h"
#include "util-sat.h"

/* statuses in the order of enum fp_status, unknown last */
#define STATUS_AT(i) ((enum fp_status)(((i) + 1) % FP_STATUS_COUNT))

struct proc {
	struct fp_pid pid;
	char *name;		/* registered, the last seen; or NULL */
	char *initial_call;	/* initial_call_better's pick, or NULL */
	char *thread;		/* cpu samples' label, the last seen, or NULL */
	uint64_t samples;
	uint64_t status[FP_STATUS_COUNT];
	int64_t reductions;
	int64_t mailbox_max;
	int64_t memory_max;
};

struct procs {
	struct proc *procs;
	size_t count, cap;
	uint32_t *slots;	/* index + 1, 0 empty */
	size_t nslots;
	uint64_t samples;
	bool saturated;
	struct fp_text esc;	/* a label as shown (util-escape.h) */
};

static uint64_t
pid_hash(const struct fp_pid *pid)
{
	uint64_t h = fnv1a_update(FNV1A_BASIS, &pid->num, sizeof(pid->num));

	return fnv1a_update(h, &pid->serial, sizeof(pid->serial));
}

static void
procs_rehash(struct procs *t)
{
	free(t->slots);
	t->nslots = t->nslots ? t->nslots * 2 : 256;
	t->slots = xzalloc(t->nslots * sizeof(*t->slots));
	for (size_t i = 0; i < t->count; i++) {
		size_t j = pid_hash(&t->procs[i].pid) & (t->nslots - 1);

		while (t->slots[j])
			j = (j + 1) & (t->nslots - 1);
		t->slots[j] = (uint32_t)(i + 1);
	}
}

static struct proc *
proc_of(struct procs *t, const struct fp_pid *pid)
{
	size_t j = pid_hash(pid) & (t->nslots - 1);
	struct proc *p;

	while (t->slots[j]) {
		p = &t->procs[t->slots[j] - 1];
		if (p->pid.num == pid->num && p->pid.serial == pid->serial)
			return p;
		j = (j + 1) & (t->nslots - 1);
	}
	FP_GROW(t->procs, t->cap, t->count + 1);
	p = &t->procs[t->count++];
	memset(p, 0, sizeof(*p));
	p->pid = *pid;
	p->mailbox_max = INT64_MIN;
	p->memory_max = INT64_MIN;
	t->slots[j] = (uint32_t)t->count;
	if (t->count * 2 > t->nslots)
		procs_rehash(t);
	return p;
}

/* @text, when given, replaces what *@slot held */
static void
keep_last(char **slot, const char *text)
{
	if (text && (!*slot || strcmp(*slot, text) != 0)) {
		free(*slot);
		*slot = xstrdup(text);
	}
}

/*
 * A process started through proc_lib shows proc_lib:init_p/3 or /5 until
 * the daemon has read the call proc_lib recorded (docs/FORMAT.md "Process
 * identity"), and keeps it for good where that record is never read. So
 * the last call seen wins, except that proc_lib's own never replaces a
 * recorded one.
 */
static bool
initial_call_better(const char *seen, const char *kept)
{
	static const char proc_lib[] = "proc_lib:init_p/";

	if (!seen)
		return false;
	return !kept || strncmp(seen, proc_lib, sizeof(proc_lib) - 1) != 0 ||
	       strncmp(kept, proc_lib, sizeof(proc_lib) - 1) == 0;
}

static void
procs_add(void *data, const struct fp_perf_record *rec)
{
	struct procs *t = data;
	struct proc *p = proc_of(t, &rec->pid);
	int64_t mailbox = rec->value[FP_METRIC_MESSAGE_QUEUE_LEN];
	int64_t memory = rec->value[FP_METRIC_MEMORY];

	t->samples++;
	p->samples++;
	p->status[(unsigned)rec->status < FP_STATUS_COUNT ? rec->status : 0]++;
	t->saturated |= sat_add_i64(&p->reductions, rec->delta[FP_METRIC_REDUCTIONS]);
	if (mailbox > p->mailbox_max)
		p->mailbox_max = mailbox;
	if (memory > p->memory_max)
		p->memory_max = memory;
	keep_last(&p->name, rec->registered_name);
	if (initial_call_better(rec->initial_call, p->initial_call))
		keep_last(&p->initial_call, rec->initial_call);
	/* a process's label is a term of its own; a thread's is its name,
	 * kept as shown: the names are as written, escaped already */
	if (rec->status == FP_STATUS_CPU && rec->label) {
		t->esc.len = 0;
		fp_text_puts_escaped(&t->esc, rec->label, NULL);
		fp_text_putc(&t->esc, '\0');
		keep_last(&p->thread, t->esc.buf);
	}
}

struct fpp_names {
	struct procs t;
};

static void
procs_free(struct procs *t)
{
	for (size_t i = 0; i < t->count; i++) {
		free(t->procs[i].name);
		free(t->procs[i].initial_call);
		free(t->procs[i].thread);
	}
	free(t->procs);
	free(t->slots);
	fp_text_free(&t->esc);
}

/* The slot of @pid, or NULL: proc_of() without adding it. */
static const struct proc *
proc_find(const struct procs *t, const struct fp_pid *pid)
{
	size_t j = pid_hash(pid) & (t->nslots - 1);

	while (t->slots[j]) {
		const struct proc *p = &t->procs[t->slots[j] - 1];

		if (p->pid.num == pid->num && p->pid.serial == pid->serial)
			return p;
		j = (j + 1) & (t->nslots - 1);
	}
	return NULL;
}

/*
 * Standard input read a second time: a file is rewound; a pipe is
 * copied to an unlinked temporary file first, which then stands in for
 * it. Returns 0 or a negative errno.
 */
static int
stdin_rewindable(void)
{
	char buf[65536];
	FILE *tmp;
	ssize_t got;
	int rc = 0;

	if (lseek(STDIN_FILENO, 0, SEEK_CUR) >= 0)
		return 0;
	tmp = tmpfile();
	if (!tmp)
		return -errno;
	while ((got = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 ||
		    fwrite(buf, 1, (size_t)got, tmp) != (size_t)got) {
			rc = got < 0 ? -errno : -EIO;
			goto close_tmp;
		}
	}
	if (fflush(tmp) != 0 || dup2(fileno(tmp), STDIN_FILENO) < 0 ||
	    lseek(STDIN_FILENO, 0, SEEK_SET) < 0)
		rc = -errno;
close_tmp:
	fclose(tmp);
	return rc;
}

int
fpp_names_read(const struct fpp_options *o, char *const *args, size_t nargs,
	       struct fpp_names **out)
{
	struct fpp_names *names = xnew(struct fpp_names);
	struct fpp_options quiet = *o;
	struct fpp_run r = { .o = &quiet, .sink = procs_add,
			     .sink_data = &names->t };
	off_t start = -1;
	bool piped = false;
	int ex, rc;

	*out = NULL;
	for (size_t i = 0; i < nargs; i++)
		piped |= strcmp(args[i], "-") == 0;
	if (piped) {
		rc = stdin_rewindable();
		if (rc < 0) {
			fpp_fail("cannot keep standard input for a second "
				 "reading: %s", strerror(-rc));
			ex = FPP_EXIT_IOERR;
			goto free_names;
		}
		start = lseek(STDIN_FILENO, 0, SEEK_CUR);
	}
	/* the pass that follows says what there is to say */
	quiet.quiet = true;
	procs_rehash(&names->t);
	ex = fpp_read_inputs(&r, args, nargs);
	fpp_run_free(&r);
	if (ex == FPP_EXIT_OK && piped &&
	    lseek(STDIN_FILENO, start, SEEK_SET) < 0) {
		fpp_fail("cannot rewind standard input: %s", strerror(errno));
		ex = FPP_EXIT_IOERR;
	}
	if (ex == FPP_EXIT_OK) {
		*out = names;
		return ex;
	}
free_names:
	fpp_names_destroy(names);
	return ex;
}

void
fpp_names_destroy(struct fpp_names *names)
{
	if (!names)
		return;
	procs_free(&names->t);
	free(names);
}

void
fpp_names_of(const struct fpp_names *names, const struct fp_pid *pid,
	     const char **registered_name, const char **initial_call)
{
	const struct proc *p = names ? proc_find(&names->t, pid) : NULL;

	if (p) {
		*registered_name = p->name;
		*initial_call = p->initial_call;
	}
}

static int
pid_cmp(const struct proc *x, const struct proc *y)
{
	if (x->pid.num != y->pid.num)
		return x->pid.num < y->pid.num ? -1 : 1;
	if (x->pid.serial != y->pid.serial)
		return x->pid.serial < y->pid.serial ? -1 : 1;
	return 0;
}

static const char *
display_name(const struct proc *p)
{
	return p->name ? p->name : p->initial_call ? p->initial_call :
	       p->thread ? p->thread : "-";
}

/* largest first, then by pid */
static int
by_sort(const void *a, const void *b, void *data)
{
	const struct proc *x = *(const struct proc *const *)a;
	const struct proc *y = *(const struct proc *const *)b;
	int64_t kx = 0, ky = 0;
	int c;

	switch (*(const int *)data) {
	case FPP_PROCS_SAMPLES:
		kx = (int64_t)x->samples;
		ky = (int64_t)y->samples;
		break;
	case FPP_PROCS_REDUCTIONS:
		kx = x->reductions;
		ky = y->reductions;
		break;
	case FPP_PROCS_MAILBOX:
		kx = x->mailbox_max;
		ky = y->mailbox_max;
		break;
	case FPP_PROCS_MEMORY:
		kx = x->memory_max;
		ky = y->memory_max;
		break;
	case FPP_PROCS_NAME:
		c = strcmp(display_name(x), display_name(y));
		if (c)
			return c;
		break;
	default:
		break;
	}
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return pid_cmp(x, y);
}

static void
csv_field(FILE *f, const char *s)
{
	if (!s)
		return;
	if (!s[strcspn(s, ",\"\r\n")]) {
		fputs(s, f);
		return;
	}
	putc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			putc('"', f);
		putc(*s, f);
	}
	putc('"', f);
}

static void
json_string_or_null(FILE *f, const char *s)
{
	if (s)
		fp_json_write_string(f, s);
	else
		fputs("null", f);
}

static void
write_text(const struct procs *t, const struct proc *const *rows, size_t n,
	   FILE *f)
{
	fprintf(f, "processes: %zu\nsamples: %" PRIu64 "\n\n", t->count, t->samples);
	fprintf(f, "%-16s %9s %7s %15s %11s %13s  %s\n", "PID", "SAMPLES",
		"SAMPLES%", "REDUCTIONS", "MAILBOX_MAX", "MEMORY_MAX",
		"NAME (STATUSES)");
	for (size_t i = 0; i < n; i++) {
		const struct proc *p = rows[i];
		char pid[40];
		const char *sep = "";

		snprintf(pid, sizeof(pid), "<0.%" PRIu32 ".%" PRIu32 ">",
			 p->pid.num, p->pid.serial);
		fprintf(f, "%-16s %9" PRIu64 " %6.2f%% %15" PRId64 " %11" PRId64
			" %13" PRId64 "  %s (", pid, p->samples,
			100.0 * (double)p->samples / (double)t->samples,
			p->reductions, p->mailbox_max, p->memory_max,
			display_name(p));
		for (int k = 0; k < FP_STATUS_COUNT; k++) {
			enum fp_status s = STATUS_AT(k);

			if (!p->status[s])
				continue;
			fprintf(f, "%s%s %" PRIu64, sep, fp_status_name(s), p->status[s]);
			sep = ", ";
		}
		fputs(")\n", f);
	}
	if (n < t->count)
		fprintf(f, "(%zu more processes; --limit 0 shows all)\n", t->count - n);
}

static void
write_csv(const struct proc *const *rows, size_t n, FILE *f)
{
	fputs("pid,registered_name,initial_call,thread,samples", f);
	for (int i = 0; i < FP_STATUS_COUNT; i++)
		fprintf(f, ",%s", fp_status_name(STATUS_AT(i)));
	fputs(",reductions,mailbox_max,memory_max\r\n", f);
	for (size_t i = 0; i < n; i++) {
		const struct proc *p = rows[i];

		fprintf(f, "<0.%" PRIu32 ".%" PRIu32 ">,", p->pid.num, p->pid.serial);
		csv_field(f, p->name);
		putc(',', f);
		csv_field(f, p->initial_call);
		putc(',', f);
		csv_field(f, p->thread);
		fprintf(f, ",%" PRIu64, p->samples);
		for (int k = 0; k < FP_STATUS_COUNT; k++)
			fprintf(f, ",%" PRIu64, p->status[STATUS_AT(k)]);
		fprintf(f, ",%" PRId64 ",%" PRId64 ",%" PRId64 "\r\n",
			p->reductions, p->mailbox_max, p->memory_max);
	}
}

static void
write_json(const struct proc *const *rows, size_t n, FILE *f)
{
	fputs("[", f);
	for (size_t i = 0; i < n; i++) {
		const struct proc *p = rows[i];
		const char *sep = "";

		fprintf(f, "%s\n{\"pid\": \"<0.%" PRIu32 ".%" PRIu32 ">\", "
			"\"registered_name\": ", i ? "," : "", p->pid.num,
			p->pid.serial);
		json_string_or_null(f, p->name);
		fputs(", \"initial_call\": ", f);
		json_string_or_null(f, p->initial_call);
		fputs(", \"thread\": ", f);
		json_string_or_null(f, p->thread);
		fprintf(f, ", \"samples\": %" PRIu64 ", \"statuses\": {", p->samples);
		for (int k = 0; k < FP_STATUS_COUNT; k++) {
			enum fp_status s = STATUS_AT(k);

			if (!p->status[s])
				continue;
			fprintf(f, "%s\"%s\": %" PRIu64, sep, fp_status_name(s),
				p->status[s]);
			sep = ", ";
		}
		fprintf(f, "}, \"reductions\": %" PRId64 ", \"mailbox_max\": %" PRId64
			", \"memory_max\": %" PRId64 "}", p->reductions,
			p->mailbox_max, p->memory_max);
	}
	fputs(n ? "\n]\n" : "]\n", f);
}

int
fpp_cmd_procs(const struct fpp_options *o, char *const *args, size_t nargs)
{
	struct procs t = { 0 };
	struct fpp_run r = { .o = o, .sink = procs_add, .sink_data = &t };
	const struct proc **rows = NULL;
	struct fpp_output out;
	size_t shown;
	int ex;

	procs_rehash(&t);
	ex = fpp_read_inputs(&r, args, nargs);
	if (ex != FPP_EXIT_OK)
		goto free_procs;
	rows = xzalloc((t.count ? t.count : 1) * sizeof(*rows));
	for (size_t i = 0; i < t.count; i++)
		rows[i] = &t.procs[i];
	qsort_r(rows, t.count, sizeof(*rows), by_sort, (void *)&o->sort);
	shown = o->limit && o->limit < t.count ? o->limit : t.count;

	ex = fpp_output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_procs;
	switch (o->format) {
	case FPP_FORMAT_CSV:
		write_csv(rows, shown, out.f);
		break;
	case FPP_FORMAT_JSON:
		write_json(rows, shown, out.f);
		break;
	case FPP_FORMAT_TEXT:
		write_text(&t, rows, shown, out.f);
		break;
	}
	ex = fpp_output_close(&out, 0);
	if (t.saturated && !o->quiet)
		fpp_fail("warning: sums of reductions pass the 64-bit range; they "
			 "are shown held at the largest value");

free_procs:
	procs_free(&t);
	free(rows);
	fpp_run_free(&r);
	return ex;
}
