/*
 * flame_profd — pprof profile.proto writer.
 *
 * The protobuf is written by hand: profile.proto uses varints and
 * length-delimited fields only. Strings, functions, locations and
 * samples are interned in four tables of one kind (bytes to index), so
 * that a stack seen a million times costs one sample's values. A
 * sample's key is its location ids and labels as bytes; the encoder
 * reads them back from the key when it writes the sample.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fp/pprof.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-hash.h"
#include "util-mem.h"
#include "util-sat.h"

/* Wire types of the protobuf encoding. */
enum { WT_VARINT = 0, WT_LEN = 2 };

/* A table of distinct byte strings, each with its index (insertion
 * order). */
struct intern {
	struct fp_text keys;
	size_t *off;		/* key i: keys.buf[off[i] .. off[i + 1]) */
	size_t count, off_cap;
	uint32_t *slots;	/* index + 1; 0: empty */
	size_t nslots;		/* a power of two */
};

struct fp_pprof {
	struct intern strings, functions, locations, samples;
	/* a frame as given (name, NUL, file) to its location id: one
	 * look-up per frame of a stack seen before, no file decoded */
	struct intern frames;
	uint32_t *frame_loc;
	size_t frame_loc_cap;
	int64_t *values;	/* samples.count rows of ntypes */
	size_t values_cap;
	uint32_t *types;	/* type, unit string pairs */
	size_t ntypes, types_cap;
	uint32_t *comments;
	size_t ncomments, comments_cap;
	uint32_t default_type;
	uint32_t period_type, period_unit;
	int64_t period;
	int64_t time_nanos, duration_nanos;
	uint32_t mapping;
	bool saturated;
	struct fp_text key;	/* scratch: the key being built */
	struct fp_text text;	/* scratch: a file name shown */
};

/* One location and one label as they are held in a sample's key. */
struct key_label {
	uint32_t key, str, unit;
	int64_t num;
};

static void
intern_init(struct intern *in)
{
	in->nslots = 256;
	in->slots = xzalloc(in->nslots * sizeof(*in->slots));
	FP_GROW(in->off, in->off_cap, 1);
	in->off[0] = 0;
}

static void
intern_free(struct intern *in)
{
	fp_text_free(&in->keys);
	free(in->off);
	free(in->slots);
}

static const char *
intern_key(const struct intern *in, size_t i, size_t *len)
{
	*len = in->off[i + 1] - in->off[i];
	return in->keys.buf + in->off[i];
}

static void
intern_rehash(struct intern *in)
{
	free(in->slots);
	in->nslots *= 2;
	in->slots = xzalloc(in->nslots * sizeof(*in->slots));
	for (size_t i = 0; i < in->count; i++) {
		size_t len;
		const char *k = intern_key(in, i, &len);
		size_t j = hash_bytes(k, len) & (in->nslots - 1);

		while (in->slots[j])
			j = (j + 1) & (in->nslots - 1);
		in->slots[j] = (uint32_t)(i + 1);
	}
}

/* The index of @len bytes at @k, added if new (*@added then true). */
static uint32_t
intern_get(struct intern *in, const void *k, size_t len, bool *added)
{
	size_t j = hash_bytes(k, len) & (in->nslots - 1);

	*added = false;
	while (in->slots[j]) {
		size_t n;
		const char *have = intern_key(in, in->slots[j] - 1, &n);

		if (n == len && memcmp(have, k, len) == 0)
			return in->slots[j] - 1;
		j = (j + 1) & (in->nslots - 1);
	}
	if (in->count >= UINT32_MAX - 1)
		x_out_of_memory(SIZE_MAX);
	fp_text_put(&in->keys, k, len);
	FP_GROW(in->off, in->off_cap, in->count + 2);
	in->off[++in->count] = in->keys.len;
	in->slots[j] = (uint32_t)in->count;
	*added = true;
	if (in->count * 2 > in->nslots)
		intern_rehash(in);
	return (uint32_t)(in->count - 1);
}

static uint32_t
string_index(struct fp_pprof *pp, const char *s, size_t len)
{
	bool added;

	return intern_get(&pp->strings, s, len, &added);
}

static uint32_t
string_of(struct fp_pprof *pp, const char *s)
{
	return s ? string_index(pp, s, strlen(s)) : 0;
}

struct fp_pprof *
fp_pprof_new(void)
{
	struct fp_pprof *pp = xnew(struct fp_pprof);

	intern_init(&pp->strings);
	intern_init(&pp->functions);
	intern_init(&pp->locations);
	intern_init(&pp->samples);
	intern_init(&pp->frames);
	/* string_table[0] is always "" */
	string_index(pp, "", 0);
	return pp;
}

void
fp_pprof_destroy(struct fp_pprof *pp)
{
	if (!pp)
		return;
	intern_free(&pp->strings);
	intern_free(&pp->functions);
	intern_free(&pp->locations);
	intern_free(&pp->samples);
	intern_free(&pp->frames);
	free(pp->frame_loc);
	free(pp->values);
	free(pp->types);
	free(pp->comments);
	fp_text_free(&pp->key);
	fp_text_free(&pp->text);
	free(pp);
}

int
fp_pprof_add_sample_type(struct fp_pprof *pp, const char *type,
			 const char *unit)
{
	if (pp->samples.count)
		return -EBUSY;
	FP_GROW(pp->types, pp->types_cap, 2 * pp->ntypes + 2);
	pp->types[2 * pp->ntypes] = string_of(pp, type);
	pp->types[2 * pp->ntypes + 1] = string_of(pp, unit);
	return (int)pp->ntypes++;
}

void
fp_pprof_set_default_sample_type(struct fp_pprof *pp, const char *type)
{
	pp->default_type = string_of(pp, type);
}

void
fp_pprof_set_period(struct fp_pprof *pp, const char *type, const char *unit,
		    int64_t period)
{
	pp->period_type = string_of(pp, type);
	pp->period_unit = string_of(pp, unit);
	pp->period = period;
}

void
fp_pprof_set_time(struct fp_pprof *pp, int64_t time_nanos,
		  int64_t duration_nanos)
{
	pp->time_nanos = time_nanos;
	pp->duration_nanos = duration_nanos;
}

void
fp_pprof_set_mapping(struct fp_pprof *pp, const char *filename)
{
	pp->mapping = string_of(pp, filename);
}

void
fp_pprof_add_comment(struct fp_pprof *pp, const char *text)
{
	FP_GROW(pp->comments, pp->comments_cap, pp->ncomments + 1);
	pp->comments[pp->ncomments++] = string_of(pp, text);
}

/* A file as written (\xHH escapes) as shown: decoded, then escaped
 * under the one rule, so that a space or a parenthesis reads as itself
 * and a control character never reaches pprof's terminal. */
static uint32_t
file_index(struct fp_pprof *pp, const char *file)
{
	struct fp_text raw = { 0 };
	uint32_t at;

	if (!file || !*file || strcmp(file, "unknown") == 0)
		return 0;
	for (const char *s = file; *s;) {
		int byte = fp_hex_escape_at(s);

		if (byte >= 0) {
			fp_text_putc(&raw, (char)byte);
			s += 4;
		} else {
			fp_text_putc(&raw, *s++);
		}
	}
	pp->text.len = 0;
	fp_text_put_escaped(&pp->text, raw.buf, raw.len, NULL);
	fp_text_free(&raw);
	at = string_index(pp, pp->text.buf ? pp->text.buf : "", pp->text.len);
	return at;
}

/* "m:f/2:123": the length of "m:f/2" and the line 123; the whole name
 * and line 0 without one. */
static size_t
split_line(const char *name, int64_t *line)
{
	const char *slash = strrchr(name, '/');
	const char *colon = slash ? strchr(slash, ':') : NULL;
	int64_t v = 0;

	*line = 0;
	if (!colon || !colon[1])
		return strlen(name);
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9' || v > 400000000)
			return strlen(name);
		v = v * 10 + (*p - '0');
	}
	*line = v;
	return (size_t)(colon - name);
}

/* The location id (index + 1) of a frame. */
static uint32_t
location_id(struct fp_pprof *pp, const char *frame, const char *file)
{
	uint32_t fn[2], fid, f;
	uint64_t loc[2];
	int64_t line;
	size_t n;
	bool added;

	pp->text.len = 0;
	fp_text_put_str(&pp->text, frame, strlen(frame));
	if (file)
		fp_text_puts(&pp->text, file);
	f = intern_get(&pp->frames, pp->text.buf, pp->text.len, &added);
	if (!added)
		return pp->frame_loc[f];

	n = split_line(frame, &line);
	fn[0] = string_index(pp, frame, n);
	fn[1] = file_index(pp, file);
	fid = intern_get(&pp->functions, fn, sizeof(fn), &added) + 1;
	loc[0] = fid;
	loc[1] = (uint64_t)line;
	FP_GROW(pp->frame_loc, pp->frame_loc_cap, (size_t)f + 1);
	pp->frame_loc[f] = intern_get(&pp->locations, loc, sizeof(loc), &added) + 1;
	return pp->frame_loc[f];
}

void
fp_pprof_add(struct fp_pprof *pp, const char *const *frames,
	     const char *const *files, size_t nframes, const int64_t *values,
	     const struct fp_pprof_label *labels, size_t nlabels)
{
	uint32_t n = (uint32_t)nframes, s;
	int64_t *row;
	bool added;

	/* the key: frame count, location ids, then the labels */
	pp->key.len = 0;
	fp_text_put(&pp->key, &n, sizeof(n));
	for (size_t i = 0; i < nframes; i++) {
		uint32_t id = location_id(pp, frames[i], files ? files[i] : NULL);

		fp_text_put(&pp->key, &id, sizeof(id));
	}
	for (size_t i = 0; i < nlabels; i++) {
		struct key_label l;

		/* the padding is part of the key: zero it */
		memset(&l, 0, sizeof(l));
		l.key = string_of(pp, labels[i].key);
		if (labels[i].str) {
			l.str = string_of(pp, labels[i].str);
		} else {
			l.num = labels[i].num;
			l.unit = string_of(pp, labels[i].num_unit);
		}
		fp_text_put(&pp->key, &l, sizeof(l));
	}
	s = intern_get(&pp->samples, pp->key.buf, pp->key.len, &added);
	if (!pp->ntypes)
		return;
	if (added) {
		FP_GROW(pp->values, pp->values_cap, (s + 1) * pp->ntypes);
		memset(pp->values + (size_t)s * pp->ntypes, 0,
		       pp->ntypes * sizeof(*pp->values));
	}
	row = pp->values + (size_t)s * pp->ntypes;
	for (size_t i = 0; i < pp->ntypes; i++)
		pp->saturated |= sat_add_i64(&row[i], values[i]);
}

size_t
fp_pprof_samples(const struct fp_pprof *pp)
{
	return pp->samples.count;
}

bool
fp_pprof_saturated(const struct fp_pprof *pp)
{
	return pp->saturated;
}

/* ---- the wire format ---- */

static void
put_varint(struct fp_text *t, uint64_t v)
{
	char b[10];
	size_t n = 0;

	do {
		b[n] = (char)(v & 0x7f);
		v >>= 7;
		if (v)
			b[n] |= (char)0x80;
		n++;
	} while (v);
	fp_text_put(t, b, n);
}

static void
put_tag(struct fp_text *t, unsigned field, unsigned wire_type)
{
	put_varint(t, (uint64_t)field << 3 | wire_type);
}

/* A varint field; proto3 leaves out a field of value 0. */
static void
put_uint(struct fp_text *t, unsigned field, uint64_t v)
{
	if (!v)
		return;
	put_tag(t, field, WT_VARINT);
	put_varint(t, v);
}

/* int64: a negative value is its two's complement, ten bytes */
static void
put_int(struct fp_text *t, unsigned field, int64_t v)
{
	put_uint(t, field, (uint64_t)v);
}

static void
put_bytes(struct fp_text *t, unsigned field, const void *p, size_t len)
{
	put_tag(t, field, WT_LEN);
	put_varint(t, len);
	fp_text_put(t, p, len);
}

static void
put_message(struct fp_text *t, unsigned field, const struct fp_text *msg)
{
	put_bytes(t, field, msg->buf, msg->len);
}

static void
put_value_type(struct fp_text *t, unsigned field, uint32_t type, uint32_t unit,
	       struct fp_text *msg)
{
	msg->len = 0;
	put_uint(msg, 1, type);
	put_uint(msg, 2, unit);
	put_message(t, field, msg);
}

static void
encode_sample(const struct fp_pprof *pp, size_t s, struct fp_text *t,
	      struct fp_text *msg, struct fp_text *packed, struct fp_text *lab)
{
	size_t len;
	const char *k = intern_key(&pp->samples, s, &len), *end = k + len;
	const int64_t *row = pp->ntypes ? pp->values + s * pp->ntypes : NULL;
	uint32_t n;

	msg->len = 0;
	memcpy(&n, k, sizeof(n));
	k += sizeof(n);
	packed->len = 0;
	for (uint32_t i = 0; i < n; i++, k += sizeof(uint32_t)) {
		uint32_t id;

		memcpy(&id, k, sizeof(id));
		put_varint(packed, id);
	}
	if (n)
		put_message(msg, 1, packed);
	packed->len = 0;
	for (size_t i = 0; i < pp->ntypes; i++)
		put_varint(packed, (uint64_t)row[i]);
	if (pp->ntypes)
		put_message(msg, 2, packed);
	while (k < end) {
		struct key_label l;

		memcpy(&l, k, sizeof(l));
		k += sizeof(l);
		lab->len = 0;
		put_uint(lab, 1, l.key);
		put_uint(lab, 2, l.str);
		put_int(lab, 3, l.num);
		put_uint(lab, 4, l.unit);
		put_message(msg, 3, lab);
	}
	put_message(t, 2, msg);
}

void
fp_pprof_encode(const struct fp_pprof *pp, struct fp_text *t)
{
	struct fp_text msg = { 0 }, packed = { 0 }, lab = { 0 };

	for (size_t i = 0; i < pp->ntypes; i++)
		put_value_type(t, 1, pp->types[2 * i], pp->types[2 * i + 1], &msg);
	for (size_t s = 0; s < pp->samples.count; s++)
		encode_sample(pp, s, t, &msg, &packed, &lab);

	/* one mapping: names, files and lines are already here */
	msg.len = 0;
	put_uint(&msg, 1, 1);
	put_uint(&msg, 5, pp->mapping);
	put_uint(&msg, 7, 1);
	put_uint(&msg, 8, 1);
	put_uint(&msg, 9, 1);
	put_message(t, 3, &msg);

	for (size_t i = 0; i < pp->locations.count; i++) {
		size_t len;
		const char *k = intern_key(&pp->locations, i, &len);
		uint64_t loc[2];

		memcpy(loc, k, sizeof(loc));
		lab.len = 0;
		put_uint(&lab, 1, loc[0]);
		put_int(&lab, 2, (int64_t)loc[1]);
		msg.len = 0;
		put_uint(&msg, 1, i + 1);
		put_uint(&msg, 2, 1);
		put_message(&msg, 4, &lab);
		put_message(t, 4, &msg);
	}
	for (size_t i = 0; i < pp->functions.count; i++) {
		size_t len;
		const char *k = intern_key(&pp->functions, i, &len);
		uint32_t fn[2];

		memcpy(fn, k, sizeof(fn));
		msg.len = 0;
		put_uint(&msg, 1, i + 1);
		put_uint(&msg, 2, fn[0]);
		/* no system_name: pprof demangles a function whose system
		 * name is its name, and reads '<&>' in a quoted atom as C++
		 * template arguments to drop */
		put_uint(&msg, 4, fn[1]);
		put_message(t, 5, &msg);
	}
	for (size_t i = 0; i < pp->strings.count; i++) {
		size_t len;
		const char *s = intern_key(&pp->strings, i, &len);

		put_bytes(t, 6, s, len);
	}
	put_int(t, 9, pp->time_nanos);
	put_int(t, 10, pp->duration_nanos);
	if (pp->period_type || pp->period_unit)
		put_value_type(t, 11, pp->period_type, pp->period_unit, &msg);
	put_int(t, 12, pp->period);
	for (size_t i = 0; i < pp->ncomments; i++)
		put_uint(t, 13, pp->comments[i]);
	put_uint(t, 14, pp->default_type);
	fp_text_free(&msg);
	fp_text_free(&packed);
	fp_text_free(&lab);
}

int
fp_pprof_write(const struct fp_pprof *pp, FILE *out)
{
	struct fp_text raw = { 0 };
	unsigned char buf[65536];
	z_stream z = { 0 };
	int rc = 0, zr;

	fp_pprof_encode(pp, &raw);
	/* windowBits 15 + 16: a gzip member, as pprof reads */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		rc = -ENOMEM;
		goto free_raw;
	}
	z.next_in = (unsigned char *)raw.buf;
	z.avail_in = 0;
	do {
		size_t left = raw.len - (size_t)((char *)z.next_in - raw.buf);

		if (!z.avail_in)
			z.avail_in = left > (1u << 30) ? 1u << 30 : (unsigned)left;
		z.next_out = buf;
		z.avail_out = sizeof(buf);
		zr = deflate(&z, z.avail_in == left ? Z_FINISH : Z_NO_FLUSH);
		if (zr == Z_STREAM_ERROR) {
			rc = -EIO;
			break;
		}
		if (fwrite(buf, 1, sizeof(buf) - z.avail_out, out) !=
		    sizeof(buf) - z.avail_out) {
			rc = -EIO;
			break;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
free_raw:
	fp_text_free(&raw);
	return rc;
}
