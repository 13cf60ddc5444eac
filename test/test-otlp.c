/*
 * flame_profd — unit tests: the OTLP profiles request writer
 * (formats/otlp.c), read back with a small decoder of the fields it
 * writes (opentelemetry-proto v1.11.0): the dictionary's tables and their
 * zero values, each entry held once, samples merged by stack and
 * attributes, one profile per sample type, the resource and the scope.
 * The integration test (test_push.py) decodes real requests with protoc
 * against the official .proto files.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp-test.h"
#include "fp/otlp.h"
#include "util-buf.h"

#define MAXN 64

struct cursor {
	const unsigned char *p, *end;
};

struct field {
	unsigned num, wt;
	uint64_t v;			/* varint, fixed64 */
	struct cursor sub;		/* length-delimited */
};

static uint64_t
varint(struct cursor *c)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 70; shift += 7) {
		fp_assert(c->p < c->end);
		v |= (uint64_t)(*c->p & 0x7f) << shift;
		if (!(*c->p++ & 0x80))
			return v;
	}
	fp_assert(!"varint longer than 10 bytes");
	return 0;
}

static bool
next(struct cursor *c, struct field *f)
{
	uint64_t key;

	if (c->p >= c->end)
		return false;
	key = varint(c);
	f->num = (unsigned)(key >> 3);
	f->wt = (unsigned)(key & 7);
	if (f->wt == 0) {
		f->v = varint(c);
	} else if (f->wt == 1) {
		fp_assert(c->end - c->p >= 8);
		f->v = 0;
		for (int i = 7; i >= 0; i--)
			f->v = f->v << 8 | c->p[i];
		c->p += 8;
	} else {
		fp_assert_int_eq(f->wt, 2);
		f->v = varint(c);
		fp_assert(f->v <= (uint64_t)(c->end - c->p));
		f->sub.p = c->p;
		f->sub.end = c->p + f->v;
		c->p += f->v;
	}
	return true;
}

static size_t
packed(const struct field *f, uint64_t *out, size_t max)
{
	struct cursor c = f->sub;
	size_t n = 0;

	fp_assert_int_eq(f->wt, 2);
	while (c.p < c.end) {
		fp_assert(n < max);
		out[n++] = varint(&c);
	}
	return n;
}

static char *
str(const struct field *f)
{
	char *s = malloc(f->v + 1);

	memcpy(s, f->sub.p, f->v);
	s[f->v] = '\0';
	return s;
}

struct dsample {
	uint64_t stack, attr[4], val[4];
	size_t nattr, nval;
};

struct dreq {
	char *res_key[8], *res_val[8];
	size_t nres;
	char *scope_name, *scope_version;
	struct {
		uint64_t type[2], period_type[2], time, dur;
		int64_t period;
		struct dsample sample[MAXN];
		size_t nsample;
	} prof[4];
	size_t nprof;
	/* the dictionary; [0] must be the zero value */
	char *str[256];
	size_t nstr;
	struct { uint64_t mapping, fn; int64_t line; size_t nlines, len; } loc[MAXN];
	size_t nloc;
	struct { uint64_t name, file; size_t len; } fn[MAXN];
	size_t nfn;
	struct { uint64_t loc[MAXN]; size_t n; } stack[MAXN];
	size_t nstack;
	struct { uint64_t key; char *val; size_t len; } attr[MAXN];
	size_t nattr;
	size_t map_len[4], nmap;
	uint64_t map_file[4];
	size_t nlink;
};

static char *
any_string(struct cursor c)
{
	struct field f;
	char *s = NULL;

	while (next(&c, &f)) {
		fp_assert_int_eq(f.num, 1);	/* string_value only */
		s = str(&f);
	}
	return s;
}

static void
decode_profile(struct cursor c, struct dreq *d)
{
	struct field f, g;
	typeof(&d->prof[0]) p = &d->prof[d->nprof++];

	memset(p, 0, sizeof(*p));
	while (next(&c, &f)) {
		struct cursor s = f.sub;

		switch (f.num) {
		case 1:
		case 5:
			while (next(&s, &g))
				(f.num == 1 ? p->type : p->period_type)[g.num - 1] = g.v;
			break;
		case 2: {
			struct dsample *ds = &p->sample[p->nsample++];

			memset(ds, 0, sizeof(*ds));
			while (next(&s, &g)) {
				if (g.num == 1)
					ds->stack = g.v;
				else if (g.num == 2)
					ds->nattr = packed(&g, ds->attr, 4);
				else if (g.num == 4)
					ds->nval = packed(&g, ds->val, 4);
				else
					fp_assert(!"unexpected Sample field");
			}
			break;
		}
		case 3:
			fp_assert_int_eq(f.wt, 1);
			p->time = f.v;
			break;
		case 4:
			p->dur = f.v;
			break;
		case 6:
			p->period = (int64_t)f.v;
			break;
		default:
			fp_assert(!"unexpected Profile field");
		}
	}
}

static void
decode_dictionary(struct cursor c, struct dreq *d)
{
	struct field f, g, h;

	while (next(&c, &f)) {
		struct cursor s = f.sub;

		switch (f.num) {
		case 1:
			d->map_len[d->nmap] = f.v;
			while (next(&s, &g))
				if (g.num == 4)
					d->map_file[d->nmap] = g.v;
			d->nmap++;
			break;
		case 2:
			d->loc[d->nloc].len = f.v;
			while (next(&s, &g)) {
				if (g.num == 1) {
					d->loc[d->nloc].mapping = g.v;
				} else if (g.num == 3) {
					struct cursor l = g.sub;

					d->loc[d->nloc].nlines++;
					while (next(&l, &h)) {
						if (h.num == 1)
							d->loc[d->nloc].fn = h.v;
						else if (h.num == 2)
							d->loc[d->nloc].line = (int64_t)h.v;
					}
				}
			}
			d->nloc++;
			break;
		case 3:
			d->fn[d->nfn].len = f.v;
			while (next(&s, &g)) {
				if (g.num == 1)
					d->fn[d->nfn].name = g.v;
				else if (g.num == 3)
					d->fn[d->nfn].file = g.v;
				else
					fp_assert(!"unexpected Function field");
			}
			d->nfn++;
			break;
		case 4:
			d->nlink++;
			break;
		case 5:
			d->str[d->nstr++] = str(&f);
			break;
		case 6:
			d->attr[d->nattr].len = f.v;
			while (next(&s, &g)) {
				if (g.num == 1)
					d->attr[d->nattr].key = g.v;
				else if (g.num == 2)
					d->attr[d->nattr].val = any_string(g.sub);
			}
			d->nattr++;
			break;
		case 7:
			while (next(&s, &g))
				d->stack[d->nstack].n = packed(&g, d->stack[d->nstack].loc, MAXN);
			d->nstack++;
			break;
		default:
			fp_assert(!"unexpected dictionary field");
		}
		fp_assert(d->nstr < 256 && d->nloc < MAXN && d->nfn < MAXN &&
			  d->nstack < MAXN && d->nattr < MAXN && d->nmap < 4);
	}
}

static void
decode(const struct fp_otlp *o, struct dreq *d)
{
	struct fp_text t = { 0 };
	struct cursor c, rp, sp;
	struct field f, g, h, k;

	fp_otlp_encode(o, &t);
	c.p = (const unsigned char *)t.buf;
	c.end = c.p + t.len;
	memset(d, 0, sizeof(*d));
	while (next(&c, &f)) {
		if (f.num == 2) {
			decode_dictionary(f.sub, d);
			continue;
		}
		fp_assert_int_eq(f.num, 1);
		rp = f.sub;
		while (next(&rp, &g)) {
			if (g.num == 1) {
				struct cursor r = g.sub;

				while (next(&r, &h)) {
					struct cursor kv = h.sub;

					fp_assert_int_eq(h.num, 1);
					while (next(&kv, &k)) {
						if (k.num == 1)
							d->res_key[d->nres] = str(&k);
						else
							d->res_val[d->nres] = any_string(k.sub);
					}
					d->nres++;
				}
			} else {
				fp_assert_int_eq(g.num, 2);
				sp = g.sub;
				while (next(&sp, &h)) {
					struct cursor s = h.sub;

					if (h.num == 2) {
						decode_profile(h.sub, d);
						continue;
					}
					while (next(&s, &k)) {
						if (k.num == 1)
							d->scope_name = str(&k);
						else if (k.num == 2)
							d->scope_version = str(&k);
					}
				}
			}
		}
	}
	fp_text_free(&t);
}

/* The names of stack @s's frames, leaf first, joined with ';'. */
static void
stack_names(const struct dreq *d, uint64_t s, char *out, size_t n)
{
	out[0] = '\0';
	fp_assert(s > 0 && s < d->nstack);
	for (size_t i = 0; i < d->stack[s].n; i++) {
		uint64_t l = d->stack[s].loc[i];

		fp_assert(l > 0 && l < d->nloc);
		fp_assert(d->loc[l].fn > 0 && d->loc[l].fn < d->nfn);
		fp_assert(d->fn[d->loc[l].fn].name < d->nstr);
		if (i)
			strncat(out, ";", n - strlen(out) - 1);
		strncat(out, d->str[d->fn[d->loc[l].fn].name], n - strlen(out) - 1);
	}
}

static const char *
attr_value(const struct dreq *d, const struct dsample *s, const char *key)
{
	for (size_t i = 0; i < s->nattr; i++) {
		fp_assert(s->attr[i] > 0 && s->attr[i] < d->nattr);
		if (strcmp(d->str[d->attr[s->attr[i]].key], key) == 0)
			return d->attr[s->attr[i]].val;
	}
	return NULL;
}

static void
dreq_free(struct dreq *d)
{
	for (size_t i = 0; i < d->nres; i++) {
		free(d->res_key[i]);
		free(d->res_val[i]);
	}
	for (size_t i = 0; i < d->nstr; i++)
		free(d->str[i]);
	for (size_t i = 0; i < d->nattr; i++)
		free(d->attr[i].val);
	free(d->scope_name);
	free(d->scope_version);
}

static const struct fp_otlp_attr running = { "beam.process.status", "running" };
static const struct fp_otlp_attr waiting = { "beam.process.status", "waiting" };

START_TEST(fields)
{
	struct fp_otlp *o = fp_otlp_new();
	const char *a[] = { "m:leaf/0:12", "m:mid/1", "m:root/2" };
	const char *files[] = { "m.erl", NULL, "unknown" };
	const int64_t one = 1;
	struct dreq d;
	char names[256];

	fp_otlp_add_resource_attr(o, "service.name", "svc");
	fp_otlp_add_resource_attr(o, "beam.node", "a@h");
	fp_otlp_set_scope(o, "flame_profd", "9.9");
	fp_assert_int_eq(fp_otlp_add_sample_type(o, "samples", "count"), 0);
	fp_otlp_set_period(o, "wall", "nanoseconds", 10000000);
	fp_otlp_set_time(o, 1700000000123456789ull, 2000000000);
	fp_otlp_set_mapping(o, "[beam]");
	fp_otlp_add(o, a, files, 3, &one, &running, 1);
	fp_otlp_add(o, a, files, 3, &one, &running, 1);
	fp_assert_int_eq(fp_otlp_add_sample_type(o, "late", "count"), -EBUSY);
	decode(o, &d);

	fp_assert_int_eq(d.nres, 2);
	fp_assert_str_eq(d.res_key[0], "service.name");
	fp_assert_str_eq(d.res_val[0], "svc");
	fp_assert_str_eq(d.res_key[1], "beam.node");
	fp_assert_str_eq(d.res_val[1], "a@h");
	fp_assert_str_eq(d.scope_name, "flame_profd");
	fp_assert_str_eq(d.scope_version, "9.9");

	/* every table starts with its zero value */
	fp_assert_str_eq(d.str[0], "");
	fp_assert_int_eq(d.map_len[0], 0);
	fp_assert_int_eq(d.loc[0].len, 0);
	fp_assert_int_eq(d.fn[0].len, 0);
	fp_assert_int_eq(d.attr[0].len, 0);
	fp_assert_int_eq(d.stack[0].n, 0);
	fp_assert_int_eq(d.nlink, 1);
	fp_assert_int_eq(d.nmap, 2);
	fp_assert_str_eq(d.str[d.map_file[1]], "[beam]");

	fp_assert_int_eq(d.nprof, 1);
	fp_assert_str_eq(d.str[d.prof[0].type[0]], "samples");
	fp_assert_str_eq(d.str[d.prof[0].type[1]], "count");
	fp_assert_str_eq(d.str[d.prof[0].period_type[0]], "wall");
	fp_assert_str_eq(d.str[d.prof[0].period_type[1]], "nanoseconds");
	fp_assert(d.prof[0].period == 10000000);
	fp_assert(d.prof[0].time == 1700000000123456789ull);
	fp_assert(d.prof[0].dur == 2000000000);

	fp_assert_int_eq(d.prof[0].nsample, 1);
	fp_assert_int_eq(d.prof[0].sample[0].nval, 1);
	fp_assert_int_eq(d.prof[0].sample[0].val[0], 2);
	stack_names(&d, d.prof[0].sample[0].stack, names, sizeof(names));
	fp_assert_str_eq(names, "m:leaf/0;m:mid/1;m:root/2");
	fp_assert_str_eq(attr_value(&d, &d.prof[0].sample[0], "beam.process.status"),
			 "running");
	/* the line on the location, the file on the function */
	for (size_t l = 1; l < d.nloc; l++) {
		fp_assert_int_eq(d.loc[l].mapping, 1);
		fp_assert_int_eq(d.loc[l].nlines, 1);
		if (strcmp(d.str[d.fn[d.loc[l].fn].name], "m:leaf/0") == 0) {
			fp_assert_int_eq(d.loc[l].line, 12);
			fp_assert_str_eq(d.str[d.fn[d.loc[l].fn].file], "m.erl");
		} else {
			fp_assert_int_eq(d.fn[d.loc[l].fn].file, 0);
		}
	}
	dreq_free(&d);
	fp_otlp_destroy(o);
}
END_TEST

/*
 * Dictionary de-duplication, one case a row: the samples added, and
 * what each table holds after (not counting index 0).
 */
struct dedup_case {
	const char *what;
	const char *stacks[4];		/* frames, ';'-separated, leaf first */
	const struct fp_otlp_attr *status[4];
	size_t nstacks;
	size_t functions, locations, stacks_held, attributes, samples;
};

static const struct dedup_case dedup_cases[] = {
	{ "one stack twice: one sample", { "a:f/0;a:g/0", "a:f/0;a:g/0" },
	  { &running, &running }, 2, 2, 2, 1, 1, 1 },
	{ "a frame in two stacks: its function and location once",
	  { "a:f/0;a:g/0", "a:f/0;a:h/0" }, { &running, &running }, 2, 3, 3, 2, 1, 2 },
	{ "one function at two lines: two locations",
	  { "a:f/0:1;a:g/0", "a:f/0:2;a:g/0" }, { &running, &running }, 2, 2, 3, 2, 1, 2 },
	{ "one stack, two statuses: two samples, one stack",
	  { "a:f/0", "a:f/0" }, { &running, &waiting }, 2, 1, 1, 1, 2, 2 },
	{ "one status on three stacks: one attribute",
	  { "a:f/0", "a:g/0", "a:h/0" }, { &waiting, &waiting, &waiting }, 3, 3, 3, 3, 1, 3 },
	{ "a stack that is another's tail: two stacks",
	  { "a:f/0;a:g/0", "a:g/0" }, { &running, &running }, 2, 2, 2, 2, 1, 2 },
};

START_TEST(dedup)
{
	const struct dedup_case *c = &dedup_cases[_i];
	struct fp_otlp *o = fp_otlp_new();
	struct fp_otlp_counts n;
	struct dreq d;
	int64_t total = 0;

	fp_otlp_add_sample_type(o, "samples", "count");
	for (size_t i = 0; i < c->nstacks; i++) {
		char buf[128], *save = NULL;
		const char *frames[8];
		size_t nf = 0;
		const int64_t v = (int64_t)i + 1;

		snprintf(buf, sizeof(buf), "%s", c->stacks[i]);
		for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save))
			frames[nf++] = t;
		fp_otlp_add(o, frames, NULL, nf, &v, c->status[i], 1);
		total += v;
	}
	fp_otlp_counts(o, &n);
	ck_assert_msg(n.functions == c->functions && n.locations == c->locations &&
		      n.stacks == c->stacks_held && n.attributes == c->attributes &&
		      n.samples == c->samples,
		      "%s: functions %zu locations %zu stacks %zu attributes %zu samples %zu",
		      c->what, n.functions, n.locations, n.stacks, n.attributes,
		      n.samples);

	/* the encoded tables hold what was counted, each entry once */
	decode(o, &d);
	fp_assert_int_eq(d.nfn, c->functions + 1);
	fp_assert_int_eq(d.nloc, c->locations + 1);
	fp_assert_int_eq(d.nstack, c->stacks_held + 1);
	fp_assert_int_eq(d.nattr, c->attributes + 1);
	fp_assert_int_eq(d.nstr, n.strings + 1);
	for (size_t i = 0; i < d.nstr; i++)
		for (size_t j = i + 1; j < d.nstr; j++)
			fp_assert(strcmp(d.str[i], d.str[j]) != 0);
	for (size_t i = 1; i < d.nfn; i++)
		for (size_t j = i + 1; j < d.nfn; j++)
			fp_assert(d.fn[i].name != d.fn[j].name || d.fn[i].file != d.fn[j].file);
	fp_assert_int_eq(d.prof[0].nsample, c->samples);
	for (size_t i = 0; i < d.prof[0].nsample; i++)
		total -= (int64_t)d.prof[0].sample[i].val[0];
	fp_assert_int_eq(total, 0);
	dreq_free(&d);
	fp_otlp_destroy(o);
}
END_TEST

START_TEST(profile_per_type)
{
	struct fp_otlp *o = fp_otlp_new();
	const char *a[] = { "m:f/0" };
	const int64_t v[2] = { 3, 30000000 };
	struct dreq d;

	fp_otlp_add_sample_type(o, "samples", "count");
	fp_otlp_add_sample_type(o, "wall", "nanoseconds");
	fp_otlp_add(o, a, NULL, 1, v, NULL, 0);
	decode(o, &d);
	fp_assert_int_eq(d.nprof, 2);
	fp_assert_str_eq(d.str[d.prof[0].type[0]], "samples");
	fp_assert_str_eq(d.str[d.prof[1].type[0]], "wall");
	fp_assert_int_eq(d.prof[0].sample[0].val[0], 3);
	fp_assert_int_eq(d.prof[1].sample[0].val[0], 30000000);
	/* both profiles point at the one stack of the shared dictionary */
	fp_assert_int_eq(d.prof[0].sample[0].stack, d.prof[1].sample[0].stack);
	fp_assert_int_eq(d.prof[0].sample[0].nattr, 0);
	dreq_free(&d);
	fp_otlp_destroy(o);
}
END_TEST

START_TEST(saturates)
{
	struct fp_otlp *o = fp_otlp_new();
	const char *a[] = { "m:f/0" };
	const int64_t big = INT64_MAX;

	fp_otlp_add_sample_type(o, "samples", "count");
	fp_otlp_add(o, a, NULL, 1, &big, NULL, 0);
	fp_assert(!fp_otlp_saturated(o));
	fp_otlp_add(o, a, NULL, 1, &big, NULL, 0);
	fp_assert(fp_otlp_saturated(o));
	fp_otlp_destroy(o);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("otlp");
	TCase *tc;

	tc = tcase_create("encoding");
	tcase_add_test(tc, fields);
	tcase_add_test(tc, profile_per_type);
	tcase_add_test(tc, saturates);
	suite_add_tcase(s, tc);

	tc = tcase_create("dictionary");
	tcase_add_loop_test(tc, dedup, 0,
			    (int)(sizeof(dedup_cases) / sizeof(dedup_cases[0])));
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
