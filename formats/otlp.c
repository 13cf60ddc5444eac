/*
 * flame_profd — OTLP profiles export request writer (fp/otlp.h).
 *
 * Written by hand on proto-wire.c, as pprof.c is. Every dictionary
 * table is an interning table of its entries' keys (bytes to index), so
 * that a stack seen a million times costs one sample's values; an
 * entry's index in the table is its index in the proto's table minus
 * one, index 0 being the zero value the proto requires there. A
 * sample's key is its stack and attribute indices; the encoder reads
 * them back from the key.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp/otlp.h"
#include "proto-wire-private.h"
#include "util-buf.h"
#include "util-mem.h"
#include "util-sat.h"

/* Field numbers, opentelemetry-proto v1.11.0. */
enum {
	/* ExportProfilesServiceRequest */
	REQ_RESOURCE_PROFILES = 1, REQ_DICTIONARY = 2,
	/* ResourceProfiles */
	RP_RESOURCE = 1, RP_SCOPE_PROFILES = 2,
	/* Resource */
	RES_ATTRIBUTES = 1,
	/* KeyValue, AnyValue */
	KV_KEY = 1, KV_VALUE = 2, ANY_STRING = 1,
	/* ScopeProfiles, InstrumentationScope */
	SP_SCOPE = 1, SP_PROFILES = 2, SCOPE_NAME = 1, SCOPE_VERSION = 2,
	/* Profile */
	PR_SAMPLE_TYPE = 1, PR_SAMPLES = 2, PR_TIME = 3, PR_DURATION = 4,
	PR_PERIOD_TYPE = 5, PR_PERIOD = 6,
	/* ValueType */
	VT_TYPE = 1, VT_UNIT = 2,
	/* Sample */
	SA_STACK = 1, SA_ATTRIBUTES = 2, SA_VALUES = 4,
	/* ProfilesDictionary */
	D_MAPPINGS = 1, D_LOCATIONS = 2, D_FUNCTIONS = 3, D_LINKS = 4,
	D_STRINGS = 5, D_ATTRIBUTES = 6, D_STACKS = 7,
	/* Mapping, Location, Line, Function, Link, Stack, KeyValueAndUnit */
	MAP_FILENAME = 4, LOC_MAPPING = 1, LOC_LINES = 3, LINE_FUNCTION = 1,
	LINE_LINE = 2, FN_NAME = 1, FN_FILENAME = 3, LINK_TRACE = 1,
	LINK_SPAN = 2, STACK_LOCATIONS = 1, KVU_KEY = 1, KVU_VALUE = 2,
};

struct fp_otlp {
	struct fp_intern strings, functions, locations, stacks, attributes;
	struct fp_intern samples;
	/* a frame as given (name, NUL, file) to its location index: one
	 * look-up per frame of a stack seen before, no file decoded */
	struct fp_intern frames;
	uint32_t *frame_loc;
	size_t frame_loc_cap;
	int64_t *values;	/* samples.count rows of ntypes */
	size_t values_cap;
	uint32_t *types;	/* type, unit string pairs */
	size_t ntypes, types_cap;
	char **resource;	/* key, value pairs */
	size_t nresource, resource_cap;
	char *scope_name, *scope_version;
	uint32_t period_type, period_unit;
	int64_t period;
	uint64_t time_unix_nano, duration_nano;
	uint32_t mapping;
	bool saturated;
	struct fp_text key;	/* scratch: the key being built */
	struct fp_text text;	/* scratch: a frame, a file shown */
};

static uint32_t
string_index(struct fp_otlp *o, const char *s, size_t len)
{
	bool added;

	return fp_intern_get(&o->strings, s, len, &added);
}

static uint32_t
string_of(struct fp_otlp *o, const char *s)
{
	return s ? string_index(o, s, strlen(s)) : 0;
}

struct fp_otlp *
fp_otlp_new(void)
{
	struct fp_otlp *o = xnew(struct fp_otlp);

	fp_intern_init(&o->strings);
	fp_intern_init(&o->functions);
	fp_intern_init(&o->locations);
	fp_intern_init(&o->stacks);
	fp_intern_init(&o->attributes);
	fp_intern_init(&o->samples);
	fp_intern_init(&o->frames);
	/* string_table[0] is always "" */
	string_index(o, "", 0);
	return o;
}

void
fp_otlp_destroy(struct fp_otlp *o)
{
	if (!o)
		return;
	fp_intern_free(&o->strings);
	fp_intern_free(&o->functions);
	fp_intern_free(&o->locations);
	fp_intern_free(&o->stacks);
	fp_intern_free(&o->attributes);
	fp_intern_free(&o->samples);
	fp_intern_free(&o->frames);
	free(o->frame_loc);
	free(o->values);
	free(o->types);
	for (size_t i = 0; i < 2 * o->nresource; i++)
		free(o->resource[i]);
	free(o->resource);
	free(o->scope_name);
	free(o->scope_version);
	fp_text_free(&o->key);
	fp_text_free(&o->text);
	free(o);
}

void
fp_otlp_add_resource_attr(struct fp_otlp *o, const char *key, const char *value)
{
	FP_GROW(o->resource, o->resource_cap, 2 * o->nresource + 2);
	o->resource[2 * o->nresource] = xstrdup(key);
	o->resource[2 * o->nresource + 1] = xstrdup(value);
	o->nresource++;
}

void
fp_otlp_set_scope(struct fp_otlp *o, const char *name, const char *version)
{
	free(o->scope_name);
	free(o->scope_version);
	o->scope_name = name ? xstrdup(name) : NULL;
	o->scope_version = version ? xstrdup(version) : NULL;
}

int
fp_otlp_add_sample_type(struct fp_otlp *o, const char *type, const char *unit)
{
	if (o->samples.count)
		return -EBUSY;
	FP_GROW(o->types, o->types_cap, 2 * o->ntypes + 2);
	o->types[2 * o->ntypes] = string_of(o, type);
	o->types[2 * o->ntypes + 1] = string_of(o, unit);
	return (int)o->ntypes++;
}

void
fp_otlp_set_period(struct fp_otlp *o, const char *type, const char *unit,
		   int64_t period)
{
	o->period_type = string_of(o, type);
	o->period_unit = string_of(o, unit);
	o->period = period;
}

void
fp_otlp_set_time(struct fp_otlp *o, uint64_t time_unix_nano,
		 uint64_t duration_nano)
{
	o->time_unix_nano = time_unix_nano;
	o->duration_nano = duration_nano;
}

void
fp_otlp_set_mapping(struct fp_otlp *o, const char *filename)
{
	o->mapping = string_of(o, filename);
}

/* The location_table index of a frame. */
static uint32_t
location_index(struct fp_otlp *o, const char *frame, const char *file)
{
	uint32_t fn[2], f;
	uint64_t loc[2];
	int64_t line;
	size_t n;
	bool added;

	o->text.len = 0;
	fp_text_put_str(&o->text, frame, strlen(frame));
	if (file)
		fp_text_puts(&o->text, file);
	f = fp_intern_get(&o->frames, o->text.buf, o->text.len, &added);
	if (!added)
		return o->frame_loc[f];

	n = fp_frame_split_line(frame, &line);
	fn[0] = string_index(o, frame, n);
	fn[1] = 0;
	if (fp_frame_file_shown(file, &o->text))
		fn[1] = string_index(o, o->text.buf ? o->text.buf : "", o->text.len);
	loc[0] = fp_intern_get(&o->functions, fn, sizeof(fn), &added) + 1;
	loc[1] = (uint64_t)line;
	FP_GROW(o->frame_loc, o->frame_loc_cap, (size_t)f + 1);
	o->frame_loc[f] = fp_intern_get(&o->locations, loc, sizeof(loc), &added) + 1;
	return o->frame_loc[f];
}

void
fp_otlp_add(struct fp_otlp *o, const char *const *frames,
	    const char *const *files, size_t nframes, const int64_t *values,
	    const struct fp_otlp_attr *attrs, size_t nattrs)
{
	uint32_t stack, s;
	int64_t *row;
	bool added;

	/* the stack's key: its location indices */
	o->key.len = 0;
	for (size_t i = 0; i < nframes; i++) {
		uint32_t loc = location_index(o, frames[i], files ? files[i] : NULL);

		fp_text_put(&o->key, &loc, sizeof(loc));
	}
	stack = fp_intern_get(&o->stacks, o->key.buf ? o->key.buf : "",
			      o->key.len, &added) + 1;

	/* the sample's key: its stack, then its attribute indices */
	o->key.len = 0;
	fp_text_put(&o->key, &stack, sizeof(stack));
	for (size_t i = 0; i < nattrs; i++) {
		uint32_t kv[2] = { string_of(o, attrs[i].key),
				   string_of(o, attrs[i].value) };
		uint32_t a = fp_intern_get(&o->attributes, kv, sizeof(kv), &added) + 1;

		fp_text_put(&o->key, &a, sizeof(a));
	}
	s = fp_intern_get(&o->samples, o->key.buf, o->key.len, &added);
	if (!o->ntypes)
		return;
	if (added) {
		FP_GROW(o->values, o->values_cap, ((size_t)s + 1) * o->ntypes);
		memset(o->values + (size_t)s * o->ntypes, 0,
		       o->ntypes * sizeof(*o->values));
	}
	row = o->values + (size_t)s * o->ntypes;
	for (size_t i = 0; i < o->ntypes; i++)
		o->saturated |= sat_add_i64(&row[i], values[i]);
}

void
fp_otlp_counts(const struct fp_otlp *o, struct fp_otlp_counts *c)
{
	c->strings = o->strings.count - 1;
	c->functions = o->functions.count;
	c->locations = o->locations.count;
	c->stacks = o->stacks.count;
	c->attributes = o->attributes.count;
	c->samples = o->samples.count;
}

bool
fp_otlp_saturated(const struct fp_otlp *o)
{
	return o->saturated;
}

/* ---- the wire format ---- */

static void
put_string(struct fp_text *t, unsigned field, const char *s)
{
	fp_pb_put_bytes(t, field, s, strlen(s));
}

/* An empty message: the zero value at index 0 of a dictionary table. */
static void
put_empty(struct fp_text *t, unsigned field)
{
	fp_pb_put_bytes(t, field, "", 0);
}

static void
put_value_type(struct fp_text *t, unsigned field, uint32_t type, uint32_t unit,
	       struct fp_text *msg)
{
	msg->len = 0;
	fp_pb_put_uint(msg, VT_TYPE, type);
	fp_pb_put_uint(msg, VT_UNIT, unit);
	fp_pb_put_message(t, field, msg);
}

/* A KeyValue of a string value. */
static void
put_key_value(struct fp_text *t, unsigned field, const char *key,
	      const char *value, struct fp_text *msg, struct fp_text *any)
{
	any->len = 0;
	put_string(any, ANY_STRING, value);
	msg->len = 0;
	put_string(msg, KV_KEY, key);
	fp_pb_put_message(msg, KV_VALUE, any);
	fp_pb_put_message(t, field, msg);
}

/* The uint32s of a key from @k to @end as a packed field (none: left
 * out). */
static void
put_packed_u32(struct fp_text *t, unsigned field, const char *k,
	       const char *end, struct fp_text *packed)
{
	packed->len = 0;
	for (; k < end; k += sizeof(uint32_t)) {
		uint32_t v;

		memcpy(&v, k, sizeof(v));
		fp_pb_put_varint(packed, v);
	}
	if (packed->len)
		fp_pb_put_message(t, field, packed);
}

/* Profile @type: its samples carry column @type of each row. */
static void
encode_profile(const struct fp_otlp *o, size_t type, struct fp_text *t,
	       struct fp_text *msg, struct fp_text *sample, struct fp_text *packed)
{
	msg->len = 0;
	put_value_type(msg, PR_SAMPLE_TYPE, o->types[2 * type],
		       o->types[2 * type + 1], sample);
	for (size_t s = 0; s < o->samples.count; s++) {
		size_t len;
		const char *k = fp_intern_key(&o->samples, s, &len);
		uint32_t stack;

		memcpy(&stack, k, sizeof(stack));
		sample->len = 0;
		fp_pb_put_uint(sample, SA_STACK, stack);
		put_packed_u32(sample, SA_ATTRIBUTES, k + sizeof(stack), k + len,
			       packed);
		packed->len = 0;
		fp_pb_put_varint(packed, (uint64_t)o->values[s * o->ntypes + type]);
		fp_pb_put_message(sample, SA_VALUES, packed);
		fp_pb_put_message(msg, PR_SAMPLES, sample);
	}
	fp_pb_put_fixed64(msg, PR_TIME, o->time_unix_nano);
	fp_pb_put_uint(msg, PR_DURATION, o->duration_nano);
	if (o->period_type || o->period_unit)
		put_value_type(msg, PR_PERIOD_TYPE, o->period_type,
			       o->period_unit, sample);
	fp_pb_put_int(msg, PR_PERIOD, o->period);
	fp_pb_put_message(t, SP_PROFILES, msg);
}

static void
encode_resource_profiles(const struct fp_otlp *o, struct fp_text *t)
{
	struct fp_text rp = { 0 }, sp = { 0 }, msg = { 0 }, a = { 0 }, b = { 0 },
		       c = { 0 };

	/* the resource */
	msg.len = 0;
	for (size_t i = 0; i < o->nresource; i++)
		put_key_value(&msg, RES_ATTRIBUTES, o->resource[2 * i],
			      o->resource[2 * i + 1], &a, &b);
	fp_pb_put_message(&rp, RP_RESOURCE, &msg);

	/* its one scope, and a profile per sample type */
	msg.len = 0;
	if (o->scope_name)
		put_string(&msg, SCOPE_NAME, o->scope_name);
	if (o->scope_version)
		put_string(&msg, SCOPE_VERSION, o->scope_version);
	fp_pb_put_message(&sp, SP_SCOPE, &msg);
	for (size_t i = 0; i < o->ntypes; i++)
		encode_profile(o, i, &sp, &a, &b, &c);
	fp_pb_put_message(&rp, RP_SCOPE_PROFILES, &sp);
	fp_pb_put_message(t, REQ_RESOURCE_PROFILES, &rp);
	fp_text_free(&rp);
	fp_text_free(&sp);
	fp_text_free(&msg);
	fp_text_free(&a);
	fp_text_free(&b);
	fp_text_free(&c);
}

static void
encode_dictionary(const struct fp_otlp *o, struct fp_text *t)
{
	/* Link{trace_id = 16 zero bytes, span_id = 8}: the zero value the
	 * proto recommends over an empty Link, for codecs that check
	 * the ids' lengths */
	static const char zero[16];
	struct fp_text d = { 0 }, msg = { 0 }, sub = { 0 }, packed = { 0 };

	/* mapping_table: [0] the zero value, [1] the one mapping */
	put_empty(&d, D_MAPPINGS);
	msg.len = 0;
	fp_pb_put_uint(&msg, MAP_FILENAME, o->mapping);
	fp_pb_put_message(&d, D_MAPPINGS, &msg);

	put_empty(&d, D_LOCATIONS);
	for (size_t i = 0; i < o->locations.count; i++) {
		size_t len;
		const char *k = fp_intern_key(&o->locations, i, &len);
		uint64_t loc[2];

		memcpy(loc, k, sizeof(loc));
		sub.len = 0;
		fp_pb_put_uint(&sub, LINE_FUNCTION, loc[0]);
		fp_pb_put_int(&sub, LINE_LINE, (int64_t)loc[1]);
		msg.len = 0;
		fp_pb_put_uint(&msg, LOC_MAPPING, 1);
		fp_pb_put_message(&msg, LOC_LINES, &sub);
		fp_pb_put_message(&d, D_LOCATIONS, &msg);
	}

	put_empty(&d, D_FUNCTIONS);
	for (size_t i = 0; i < o->functions.count; i++) {
		size_t len;
		const char *k = fp_intern_key(&o->functions, i, &len);
		uint32_t fn[2];

		memcpy(fn, k, sizeof(fn));
		msg.len = 0;
		fp_pb_put_uint(&msg, FN_NAME, fn[0]);
		/* no system name: a BEAM function has one name */
		fp_pb_put_uint(&msg, FN_FILENAME, fn[1]);
		fp_pb_put_message(&d, D_FUNCTIONS, &msg);
	}

	msg.len = 0;
	fp_pb_put_bytes(&msg, LINK_TRACE, zero, 16);
	fp_pb_put_bytes(&msg, LINK_SPAN, zero, 8);
	fp_pb_put_message(&d, D_LINKS, &msg);

	for (size_t i = 0; i < o->strings.count; i++) {
		size_t len;
		const char *s = fp_intern_key(&o->strings, i, &len);

		fp_pb_put_bytes(&d, D_STRINGS, s, len);
	}

	put_empty(&d, D_ATTRIBUTES);
	for (size_t i = 0; i < o->attributes.count; i++) {
		size_t len;
		const char *k = fp_intern_key(&o->attributes, i, &len);
		uint32_t kv[2];
		const char *v;
		size_t vlen;

		memcpy(kv, k, sizeof(kv));
		v = fp_intern_key(&o->strings, kv[1], &vlen);
		sub.len = 0;
		fp_pb_put_bytes(&sub, ANY_STRING, v, vlen);
		msg.len = 0;
		fp_pb_put_uint(&msg, KVU_KEY, kv[0]);
		fp_pb_put_message(&msg, KVU_VALUE, &sub);
		fp_pb_put_message(&d, D_ATTRIBUTES, &msg);
	}

	put_empty(&d, D_STACKS);
	for (size_t i = 0; i < o->stacks.count; i++) {
		size_t len;
		const char *k = fp_intern_key(&o->stacks, i, &len);

		msg.len = 0;
		put_packed_u32(&msg, STACK_LOCATIONS, k, k + len, &packed);
		fp_pb_put_message(&d, D_STACKS, &msg);
	}
	fp_pb_put_message(t, REQ_DICTIONARY, &d);
	fp_text_free(&d);
	fp_text_free(&msg);
	fp_text_free(&sub);
	fp_text_free(&packed);
}

void
fp_otlp_encode(const struct fp_otlp *o, struct fp_text *t)
{
	encode_resource_profiles(o, t);
	encode_dictionary(o, t);
}

int
fp_otlp_write_gzip(const struct fp_otlp *o, FILE *out)
{
	struct fp_text raw = { 0 };
	int rc;

	fp_otlp_encode(o, &raw);
	rc = fp_gzip_write(raw.buf, raw.len, out);
	fp_text_free(&raw);
	return rc;
}
