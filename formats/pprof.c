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

#include "fp/pprof.h"
#include "proto-wire-private.h"
#include "util-buf.h"
#include "util-mem.h"
#include "util-sat.h"

struct fp_pprof {
	struct fp_intern strings, functions, locations, samples;
	/* a frame as given (name, NUL, file) to its location id: one
	 * look-up per frame of a stack seen before, no file decoded */
	struct fp_intern frames;
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

static uint32_t
string_index(struct fp_pprof *pp, const char *s, size_t len)
{
	bool added;

	return fp_intern_get(&pp->strings, s, len, &added);
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

	fp_intern_init(&pp->strings);
	fp_intern_init(&pp->functions);
	fp_intern_init(&pp->locations);
	fp_intern_init(&pp->samples);
	fp_intern_init(&pp->frames);
	/* string_table[0] is always "" */
	string_index(pp, "", 0);
	return pp;
}

void
fp_pprof_destroy(struct fp_pprof *pp)
{
	if (!pp)
		return;
	fp_intern_free(&pp->strings);
	fp_intern_free(&pp->functions);
	fp_intern_free(&pp->locations);
	fp_intern_free(&pp->samples);
	fp_intern_free(&pp->frames);
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

static uint32_t
file_index(struct fp_pprof *pp, const char *file)
{
	if (!fp_frame_file_shown(file, &pp->text))
		return 0;
	return string_index(pp, pp->text.buf ? pp->text.buf : "", pp->text.len);
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
	f = fp_intern_get(&pp->frames, pp->text.buf, pp->text.len, &added);
	if (!added)
		return pp->frame_loc[f];

	n = fp_frame_split_line(frame, &line);
	fn[0] = string_index(pp, frame, n);
	fn[1] = file_index(pp, file);
	fid = fp_intern_get(&pp->functions, fn, sizeof(fn), &added) + 1;
	loc[0] = fid;
	loc[1] = (uint64_t)line;
	FP_GROW(pp->frame_loc, pp->frame_loc_cap, (size_t)f + 1);
	pp->frame_loc[f] = fp_intern_get(&pp->locations, loc, sizeof(loc), &added) + 1;
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
	s = fp_intern_get(&pp->samples, pp->key.buf, pp->key.len, &added);
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
put_value_type(struct fp_text *t, unsigned field, uint32_t type, uint32_t unit,
	       struct fp_text *msg)
{
	msg->len = 0;
	fp_pb_put_uint(msg, 1, type);
	fp_pb_put_uint(msg, 2, unit);
	fp_pb_put_message(t, field, msg);
}

static void
encode_sample(const struct fp_pprof *pp, size_t s, struct fp_text *t,
	      struct fp_text *msg, struct fp_text *packed, struct fp_text *lab)
{
	size_t len;
	const char *k = fp_intern_key(&pp->samples, s, &len), *end = k + len;
	const int64_t *row = pp->ntypes ? pp->values + s * pp->ntypes : NULL;
	uint32_t n;

	msg->len = 0;
	memcpy(&n, k, sizeof(n));
	k += sizeof(n);
	packed->len = 0;
	for (uint32_t i = 0; i < n; i++, k += sizeof(uint32_t)) {
		uint32_t id;

		memcpy(&id, k, sizeof(id));
		fp_pb_put_varint(packed, id);
	}
	if (n)
		fp_pb_put_message(msg, 1, packed);
	packed->len = 0;
	for (size_t i = 0; i < pp->ntypes; i++)
		fp_pb_put_varint(packed, (uint64_t)row[i]);
	if (pp->ntypes)
		fp_pb_put_message(msg, 2, packed);
	while (k < end) {
		struct key_label l;

		memcpy(&l, k, sizeof(l));
		k += sizeof(l);
		lab->len = 0;
		fp_pb_put_uint(lab, 1, l.key);
		fp_pb_put_uint(lab, 2, l.str);
		fp_pb_put_int(lab, 3, l.num);
		fp_pb_put_uint(lab, 4, l.unit);
		fp_pb_put_message(msg, 3, lab);
	}
	fp_pb_put_message(t, 2, msg);
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
	fp_pb_put_uint(&msg, 1, 1);
	fp_pb_put_uint(&msg, 5, pp->mapping);
	fp_pb_put_uint(&msg, 7, 1);
	fp_pb_put_uint(&msg, 8, 1);
	fp_pb_put_uint(&msg, 9, 1);
	fp_pb_put_message(t, 3, &msg);

	for (size_t i = 0; i < pp->locations.count; i++) {
		size_t len;
		const char *k = fp_intern_key(&pp->locations, i, &len);
		uint64_t loc[2];

		memcpy(loc, k, sizeof(loc));
		lab.len = 0;
		fp_pb_put_uint(&lab, 1, loc[0]);
		fp_pb_put_int(&lab, 2, (int64_t)loc[1]);
		msg.len = 0;
		fp_pb_put_uint(&msg, 1, i + 1);
		fp_pb_put_uint(&msg, 2, 1);
		fp_pb_put_message(&msg, 4, &lab);
		fp_pb_put_message(t, 4, &msg);
	}
	for (size_t i = 0; i < pp->functions.count; i++) {
		size_t len;
		const char *k = fp_intern_key(&pp->functions, i, &len);
		uint32_t fn[2];

		memcpy(fn, k, sizeof(fn));
		msg.len = 0;
		fp_pb_put_uint(&msg, 1, i + 1);
		fp_pb_put_uint(&msg, 2, fn[0]);
		/* no system_name: pprof demangles a function whose system
		 * name is its name, and reads '<&>' in a quoted atom as C++
		 * template arguments to drop */
		fp_pb_put_uint(&msg, 4, fn[1]);
		fp_pb_put_message(t, 5, &msg);
	}
	for (size_t i = 0; i < pp->strings.count; i++) {
		size_t len;
		const char *s = fp_intern_key(&pp->strings, i, &len);

		fp_pb_put_bytes(t, 6, s, len);
	}
	fp_pb_put_int(t, 9, pp->time_nanos);
	fp_pb_put_int(t, 10, pp->duration_nanos);
	if (pp->period_type || pp->period_unit)
		put_value_type(t, 11, pp->period_type, pp->period_unit, &msg);
	fp_pb_put_int(t, 12, pp->period);
	for (size_t i = 0; i < pp->ncomments; i++)
		fp_pb_put_uint(t, 13, pp->comments[i]);
	fp_pb_put_uint(t, 14, pp->default_type);
	fp_text_free(&msg);
	fp_text_free(&packed);
	fp_text_free(&lab);
}

int
fp_pprof_write(const struct fp_pprof *pp, FILE *out)
{
	struct fp_text raw = { 0 };
	int rc;

	fp_pprof_encode(pp, &raw);
	rc = fp_gzip_write(raw.buf, raw.len, out);
	fp_text_free(&raw);
	return rc;
}
