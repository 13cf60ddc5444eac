/*
 * flame_profd — unit tests: the pprof writer (formats/pprof.c), read
 * back with a small protobuf decoder of profile.proto's fields: string
 * table, sample types, samples merged by stack and labels, functions,
 * locations and lines, labels (str and num), period, time, comments,
 * and the gzip member around it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "fp-test.h"
#include "fp/pprof.h"
#include "util-buf.h"

#define MAXN 64

/* ---- a decoder of the fields the writer uses ---- */

struct cursor {
	const unsigned char *p, *end;
};

struct field {
	unsigned num, wt;
	uint64_t v;			/* varint */
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

struct dlabel {
	uint64_t key, str, unit;
	int64_t num;
};

struct dsample {
	uint64_t loc[MAXN];
	size_t nloc;
	int64_t val[MAXN];
	size_t nval;
	struct dlabel lab[MAXN];
	size_t nlab;
};

struct dprof {
	char *str[256];
	size_t nstr;
	uint64_t type[MAXN][2];
	size_t ntype;
	struct dsample sample[MAXN];
	size_t nsample;
	struct { uint64_t id, mapping, fid; int64_t line; size_t nline; } loc[MAXN];
	size_t nloc;
	struct { uint64_t id, name, sys, file; } fn[MAXN];
	size_t nfn;
	struct { uint64_t id, file; bool funcs, files, lines; } map[4];
	size_t nmap;
	int64_t time, dur, period;
	uint64_t period_type[2], default_type;
	uint64_t comment[8];
	size_t ncomment;
};

/* every varint of a packed field, or the one of an unpacked one */
static size_t
packed(const struct field *f, uint64_t *out, size_t max)
{
	struct cursor c = f->sub;
	size_t n = 0;

	if (f->wt == 0) {
		out[0] = f->v;
		return 1;
	}
	while (c.p < c.end) {
		fp_assert(n < max);
		out[n++] = varint(&c);
	}
	return n;
}

static void
value_type(struct cursor c, uint64_t *vt)
{
	struct field f;

	vt[0] = vt[1] = 0;
	while (next(&c, &f))
		vt[f.num == 1 ? 0 : 1] = f.v;
}

static void
decode_sample(struct cursor c, struct dsample *s)
{
	struct field f, g;

	memset(s, 0, sizeof(*s));
	while (next(&c, &f)) {
		if (f.num == 1) {
			s->nloc += packed(&f, s->loc + s->nloc, MAXN - s->nloc);
		} else if (f.num == 2) {
			uint64_t v[MAXN];
			size_t n = packed(&f, v, MAXN);

			for (size_t i = 0; i < n; i++)
				s->val[s->nval++] = (int64_t)v[i];
		} else if (f.num == 3) {
			struct cursor l = f.sub;
			struct dlabel *d = &s->lab[s->nlab++];

			memset(d, 0, sizeof(*d));
			while (next(&l, &g)) {
				if (g.num == 1)
					d->key = g.v;
				else if (g.num == 2)
					d->str = g.v;
				else if (g.num == 3)
					d->num = (int64_t)g.v;
				else if (g.num == 4)
					d->unit = g.v;
			}
		}
	}
}

static void
decode(const char *buf, size_t len, struct dprof *d)
{
	struct cursor c = { (const unsigned char *)buf,
			    (const unsigned char *)buf + len };
	struct field f, g, h;

	memset(d, 0, sizeof(*d));
	while (next(&c, &f)) {
		switch (f.num) {
		case 1:
			value_type(f.sub, d->type[d->ntype++]);
			break;
		case 2:
			fp_assert(d->nsample < MAXN);
			decode_sample(f.sub, &d->sample[d->nsample++]);
			break;
		case 3: {
			struct cursor m = f.sub;

			while (next(&m, &g)) {
				if (g.num == 1)
					d->map[d->nmap].id = g.v;
				else if (g.num == 5)
					d->map[d->nmap].file = g.v;
				else if (g.num == 7)
					d->map[d->nmap].funcs = g.v;
				else if (g.num == 8)
					d->map[d->nmap].files = g.v;
				else if (g.num == 9)
					d->map[d->nmap].lines = g.v;
			}
			d->nmap++;
			break;
		}
		case 4: {
			struct cursor l = f.sub;

			fp_assert(d->nloc < MAXN);
			while (next(&l, &g)) {
				if (g.num == 1) {
					d->loc[d->nloc].id = g.v;
				} else if (g.num == 2) {
					d->loc[d->nloc].mapping = g.v;
				} else if (g.num == 4) {
					struct cursor ln = g.sub;

					d->loc[d->nloc].nline++;
					while (next(&ln, &h)) {
						if (h.num == 1)
							d->loc[d->nloc].fid = h.v;
						else if (h.num == 2)
							d->loc[d->nloc].line = (int64_t)h.v;
					}
				}
			}
			d->nloc++;
			break;
		}
		case 5: {
			struct cursor fn = f.sub;

			fp_assert(d->nfn < MAXN);
			while (next(&fn, &g)) {
				if (g.num == 1)
					d->fn[d->nfn].id = g.v;
				else if (g.num == 2)
					d->fn[d->nfn].name = g.v;
				else if (g.num == 3)
					d->fn[d->nfn].sys = g.v;
				else if (g.num == 4)
					d->fn[d->nfn].file = g.v;
			}
			d->nfn++;
			break;
		}
		case 6:
			fp_assert(d->nstr < 256);
			d->str[d->nstr] = xzalloc(f.v + 1);
			memcpy(d->str[d->nstr++], f.sub.p, f.v);
			break;
		case 9:
			d->time = (int64_t)f.v;
			break;
		case 10:
			d->dur = (int64_t)f.v;
			break;
		case 11:
			value_type(f.sub, d->period_type);
			break;
		case 12:
			d->period = (int64_t)f.v;
			break;
		case 13:
			d->comment[d->ncomment++] = f.v;
			break;
		case 14:
			d->default_type = f.v;
			break;
		default:
			fp_assert(!"a field the writer does not write");
		}
	}
}

static void
dprof_free(struct dprof *d)
{
	for (size_t i = 0; i < d->nstr; i++)
		free(d->str[i]);
}

static const char *
S(const struct dprof *d, uint64_t i)
{
	fp_assert(i < d->nstr);
	return d->str[i];
}

/* the name and line of location id @id */
static const char *
loc_name(const struct dprof *d, uint64_t id, int64_t *line, const char **file)
{
	for (size_t i = 0; i < d->nloc; i++) {
		if (d->loc[i].id != id)
			continue;
		fp_assert_int_eq(d->loc[i].nline, 1);
		*line = d->loc[i].line;
		for (size_t k = 0; k < d->nfn; k++) {
			if (d->fn[k].id == d->loc[i].fid) {
				*file = S(d, d->fn[k].file);
				fp_assert_int_eq(d->fn[k].sys, 0);
				return S(d, d->fn[k].name);
			}
		}
	}
	fp_assert(!"no such location");
	return NULL;
}

static const struct dlabel *
label(const struct dprof *d, const struct dsample *s, const char *key)
{
	for (size_t i = 0; i < s->nlab; i++) {
		if (strcmp(S(d, s->lab[i].key), key) == 0)
			return &s->lab[i];
	}
	return NULL;
}

/* ---- the tests ---- */

static struct fp_pprof *
two_columns(void)
{
	struct fp_pprof *pp = fp_pprof_new();

	fp_assert_int_eq(fp_pprof_add_sample_type(pp, "samples", "count"), 0);
	fp_assert_int_eq(fp_pprof_add_sample_type(pp, "memory", "bytes"), 1);
	return pp;
}

START_TEST(fields)
{
	static const char *const frames[] = { "lists:foldl_1/3:1263",
					      "'my mod':f/0", "m:g/1" };
	static const char *const files[] = { "lists.erl", "my\\x20file\\x28x\\x29.erl",
					     "unknown" };
	struct fp_pprof_label labs[] = {
		{ .key = "pid", .str = "<0.1.0>" },
		{ .key = "key.n", .num = -42, .num_unit = "requests" },
	};
	int64_t v1[] = { 1, 100 }, v2[] = { 1, -300 };
	struct fp_pprof *pp = two_columns();
	struct fp_text raw = { 0 };
	struct dprof d;
	const struct dsample *s;
	const struct dlabel *l;
	const char *file;
	int64_t line;

	fp_pprof_set_period(pp, "wall", "nanoseconds", 100000000);
	fp_pprof_set_time(pp, 1795248670466466000, 8880000000);
	fp_pprof_set_default_sample_type(pp, "samples");
	fp_pprof_set_mapping(pp, "[beam]");
	fp_pprof_add_comment(pp, "hello");
	fp_pprof_add(pp, frames, files, 3, v1, labs, 2);
	fp_pprof_add(pp, frames, files, 3, v2, labs, 2);	/* merged */
	labs[0].str = "<0.2.0>";
	fp_pprof_add(pp, frames + 1, files + 1, 2, v1, labs, 1);
	fp_pprof_add(pp, NULL, NULL, 0, v1, NULL, 0);		/* no frame */
	fp_assert_int_eq(fp_pprof_samples(pp), 3);
	fp_assert(!fp_pprof_saturated(pp));
	fp_assert_int_eq(fp_pprof_add_sample_type(pp, "late", "count"), -EBUSY);

	fp_pprof_encode(pp, &raw);
	decode(raw.buf, raw.len, &d);
	fp_assert_str_eq(S(&d, 0), "");
	fp_assert_int_eq(d.ntype, 2);
	fp_assert_str_eq(S(&d, d.type[0][0]), "samples");
	fp_assert_str_eq(S(&d, d.type[0][1]), "count");
	fp_assert_str_eq(S(&d, d.type[1][0]), "memory");
	fp_assert_str_eq(S(&d, d.type[1][1]), "bytes");
	fp_assert_str_eq(S(&d, d.default_type), "samples");
	fp_assert_str_eq(S(&d, d.period_type[0]), "wall");
	fp_assert_str_eq(S(&d, d.period_type[1]), "nanoseconds");
	fp_assert(d.period == 100000000);
	fp_assert(d.time == 1795248670466466000);
	fp_assert(d.dur == 8880000000);
	fp_assert_int_eq(d.ncomment, 1);
	fp_assert_str_eq(S(&d, d.comment[0]), "hello");
	fp_assert_int_eq(d.nmap, 1);
	fp_assert_int_eq(d.map[0].id, 1);
	fp_assert_str_eq(S(&d, d.map[0].file), "[beam]");
	fp_assert(d.map[0].funcs && d.map[0].files && d.map[0].lines);
	for (size_t i = 0; i < d.nloc; i++)
		fp_assert_int_eq(d.loc[i].mapping, 1);
	fp_assert_int_eq(d.nloc, 3);
	fp_assert_int_eq(d.nfn, 3);

	fp_assert_int_eq(d.nsample, 3);
	s = &d.sample[0];
	fp_assert_int_eq(s->nval, 2);
	fp_assert(s->val[0] == 2 && s->val[1] == -200);	/* signed sums */
	fp_assert_int_eq(s->nloc, 3);
	/* leaf first; the line apart from the name; files shown */
	fp_assert_str_eq(loc_name(&d, s->loc[0], &line, &file), "lists:foldl_1/3");
	fp_assert(line == 1263);
	fp_assert_str_eq(file, "lists.erl");
	fp_assert_str_eq(loc_name(&d, s->loc[1], &line, &file), "'my mod':f/0");
	fp_assert(line == 0);
	fp_assert_str_eq(file, "my file(x).erl");
	fp_assert_str_eq(loc_name(&d, s->loc[2], &line, &file), "m:g/1");
	fp_assert_str_eq(file, "");
	fp_assert_int_eq(s->nlab, 2);
	l = label(&d, s, "pid");
	fp_assert_ptr_nonnull(l);
	fp_assert_str_eq(S(&d, l->str), "<0.1.0>");
	fp_assert(l->num == 0 && l->unit == 0);
	l = label(&d, s, "key.n");
	fp_assert_ptr_nonnull(l);
	fp_assert(l->num == -42 && l->str == 0);
	fp_assert_str_eq(S(&d, l->unit), "requests");

	s = &d.sample[1];
	fp_assert(s->val[0] == 1 && s->val[1] == 100);
	fp_assert_int_eq(s->nloc, 2);
	fp_assert_int_eq(s->loc[0], d.sample[0].loc[1]);	/* shared */
	fp_assert_str_eq(S(&d, label(&d, s, "pid")->str), "<0.2.0>");
	fp_assert_int_eq(d.sample[2].nloc, 0);
	fp_assert_int_eq(d.sample[2].nlab, 0);

	dprof_free(&d);
	fp_text_free(&raw);
	fp_pprof_destroy(pp);
}
END_TEST

START_TEST(saturates)
{
	int64_t big[] = { 1, INT64_MAX }, neg[] = { 1, INT64_MIN };
	struct fp_pprof *pp = two_columns();
	struct fp_text raw = { 0 };
	struct dprof d;

	fp_pprof_add(pp, NULL, NULL, 0, big, NULL, 0);
	fp_assert(!fp_pprof_saturated(pp));
	fp_pprof_add(pp, NULL, NULL, 0, big, NULL, 0);
	fp_assert(fp_pprof_saturated(pp));
	fp_pprof_encode(pp, &raw);
	decode(raw.buf, raw.len, &d);
	fp_assert(d.sample[0].val[1] == INT64_MAX);
	dprof_free(&d);
	fp_text_free(&raw);
	fp_pprof_destroy(pp);

	pp = two_columns();
	raw.len = 0;
	fp_pprof_add(pp, NULL, NULL, 0, neg, NULL, 0);
	fp_pprof_encode(pp, &raw);
	decode(raw.buf, raw.len, &d);
	fp_assert(d.sample[0].val[1] == INT64_MIN);	/* a 10-byte varint */
	dprof_free(&d);
	fp_text_free(&raw);
	fp_pprof_destroy(pp);
}
END_TEST

/* Labels in another order, or another label, are another sample;
 * many samples of few stacks stay few. */
START_TEST(merging)
{
	static const char *const frames[] = { "a:b/0", "c:d/1" };
	struct fp_pprof_label ab[] = { { .key = "a", .str = "1" },
				       { .key = "b", .str = "2" } };
	struct fp_pprof_label ba[] = { { .key = "b", .str = "2" },
				       { .key = "a", .str = "1" } };
	struct fp_pprof_label an[] = { { .key = "a", .num = 1 } };
	int64_t v[] = { 1, 5 };
	struct fp_pprof *pp = two_columns();

	for (int i = 0; i < 100000; i++)
		fp_pprof_add(pp, frames + (i & 1), NULL, 1, v, ab, 2);
	fp_assert_int_eq(fp_pprof_samples(pp), 2);
	fp_pprof_add(pp, frames, NULL, 1, v, ba, 2);
	fp_pprof_add(pp, frames, NULL, 1, v, an, 1);
	fp_pprof_add(pp, frames, NULL, 1, v, ab, 1);
	fp_assert_int_eq(fp_pprof_samples(pp), 5);
	fp_pprof_destroy(pp);
}
END_TEST

/* A function is a name and a file, a location a function and a line;
 * a frame seen again is the same location. */
START_TEST(frames_shared)
{
	static const char *const frames[] = { "m:f/1:3", "m:f/1:3", "m:f/1:4",
					      "m:f/1:3", "m:f/1" };
	static const char *const files[] = { "a.erl", "b.erl", "a.erl", "a.erl",
					     "a.erl" };
	int64_t v[] = { 1, 0 };
	struct fp_pprof *pp = two_columns();
	struct fp_text raw = { 0 };
	struct dprof d;
	const char *file;
	int64_t line;

	for (int i = 0; i < 5; i++)
		fp_pprof_add(pp, frames + i, files + i, 1, v, NULL, 0);
	fp_assert_int_eq(fp_pprof_samples(pp), 4);
	fp_pprof_encode(pp, &raw);
	decode(raw.buf, raw.len, &d);
	fp_assert_int_eq(d.nfn, 2);
	fp_assert_int_eq(d.nloc, 4);
	fp_assert_int_eq(d.sample[0].val[0], 2);	/* the first and fourth */
	fp_assert_str_eq(loc_name(&d, d.sample[1].loc[0], &line, &file), "m:f/1");
	fp_assert(line == 3);
	fp_assert_str_eq(file, "b.erl");
	loc_name(&d, d.sample[2].loc[0], &line, &file);
	fp_assert(line == 4);
	fp_assert_str_eq(file, "a.erl");
	loc_name(&d, d.sample[3].loc[0], &line, &file);
	fp_assert(line == 0);
	dprof_free(&d);
	fp_text_free(&raw);
	fp_pprof_destroy(pp);
}
END_TEST

/* The file is one gzip member holding exactly the encoded profile. */
START_TEST(gzip)
{
	static const char *const frames[] = { "a:b/0" };
	int64_t v[] = { 1, 5 };
	struct fp_pprof *pp = two_columns();
	struct fp_text raw = { 0 };
	char *buf = NULL, out[65536];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	z_stream z = { 0 };

	for (int i = 0; i < 1000; i++) {
		char name[32];
		const char *fr[] = { name };

		snprintf(name, sizeof(name), "m:f%d/0", i);
		fp_pprof_add(pp, fr, NULL, 1, v, NULL, 0);
	}
	fp_pprof_add(pp, frames, NULL, 1, v, NULL, 0);
	fp_assert_int_eq(fp_pprof_write(pp, f), 0);
	fclose(f);
	fp_assert(len > 18);
	fp_assert((unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b);
	fp_pprof_encode(pp, &raw);
	fp_assert(raw.len < sizeof(out));

	fp_assert_int_eq(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (unsigned char *)buf;
	z.avail_in = (unsigned)len;
	z.next_out = (unsigned char *)out;
	z.avail_out = sizeof(out);
	fp_assert_int_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
	fp_assert_int_eq(z.avail_in, 0);
	fp_assert_int_eq(sizeof(out) - z.avail_out, raw.len);
	fp_assert(memcmp(out, raw.buf, raw.len) == 0);
	inflateEnd(&z);

	free(buf);
	fp_text_free(&raw);
	fp_pprof_destroy(pp);
}
END_TEST

/* A file whose characters a terminal would act on is shown escaped;
 * "unknown" and no file are the empty string. */
static const struct {
	const char *file, *shown;
} file_cases[] = {
	{ "lib/a.ex", "lib/a.ex" },
	{ "a\\x1Bb", "a\\x1Bb" },
	{ "a\\x5Cb", "a\\x5Cb" },
	{ "caf\\xC3\\xA9", "caf\xc3\xa9" },
	{ "\\xFF", "\\xFF" },
	{ "unknown", "" },
	{ NULL, "" },
};

START_TEST(files_shown)
{
	static const char *const frames[] = { "a:b/0" };
	const char *files[] = { file_cases[_i].file };
	int64_t v[] = { 1, 0 };
	struct fp_pprof *pp = two_columns();
	struct fp_text raw = { 0 };
	struct dprof d;
	const char *file;
	int64_t line;

	fp_pprof_add(pp, frames, files, 1, v, NULL, 0);
	fp_pprof_encode(pp, &raw);
	decode(raw.buf, raw.len, &d);
	loc_name(&d, d.sample[0].loc[0], &line, &file);
	fp_assert_str_eq(file, file_cases[_i].shown);
	dprof_free(&d);
	fp_text_free(&raw);
	fp_pprof_destroy(pp);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("pprof");
	TCase *tc;

	tc = tcase_create("encoding");
	tcase_add_test(tc, fields);
	tcase_add_test(tc, saturates);
	tcase_add_loop_test(tc, files_shown, 0,
			    (int)(sizeof(file_cases) / sizeof(file_cases[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("merging");
	tcase_add_test(tc, merging);
	tcase_add_test(tc, frames_shared);
	suite_add_tcase(s, tc);

	tc = tcase_create("gzip");
	tcase_add_test(tc, gzip);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
