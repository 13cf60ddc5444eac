/*
 * flame_profd — the protobuf wire format as the profile writers use it
 * (private to formats/): varints and length-delimited fields written by
 * hand into an fp_text, a table that interns byte strings, and gzip.
 *
 * pprof's profile.proto (pprof.c) and OTLP's profiles.proto (otlp.c)
 * are both tables of interned strings, functions and locations that
 * samples point into: one interning table serves every one of them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util-buf.h"

/* Wire types of the protobuf encoding. */
enum { FP_PB_VARINT = 0, FP_PB_I64 = 1, FP_PB_LEN = 2 };

/* A table of distinct byte strings, each with its index (insertion
 * order). */
struct fp_intern {
	struct fp_text keys;
	size_t *off;		/* key i: keys.buf[off[i] .. off[i + 1]) */
	size_t count, off_cap;
	uint32_t *slots;	/* index + 1; 0: empty */
	size_t nslots;		/* a power of two */
};

/* An empty table; fp_intern_free() releases it. */
void
fp_intern_init(struct fp_intern *in);

void
fp_intern_free(struct fp_intern *in);

/* Key @i (its bytes and *@len), valid until the next fp_intern_get(). */
const char *
fp_intern_key(const struct fp_intern *in, size_t i, size_t *len);

/* The index of @len bytes at @k, added if new (*@added then true).
 * Aborts past UINT32_MAX - 1 keys, as on running out of memory. */
uint32_t
fp_intern_get(struct fp_intern *in, const void *k, size_t len, bool *added);

void
fp_pb_put_varint(struct fp_text *t, uint64_t v);

void
fp_pb_put_tag(struct fp_text *t, unsigned field, unsigned wire_type);

/* A varint field; proto3 leaves out a field of value 0. */
void
fp_pb_put_uint(struct fp_text *t, unsigned field, uint64_t v);

/* int64 (and int32): a negative value is its two's complement, ten
 * bytes; 0 is left out. */
void
fp_pb_put_int(struct fp_text *t, unsigned field, int64_t v);

/* A fixed64 field; 0 is left out. */
void
fp_pb_put_fixed64(struct fp_text *t, unsigned field, uint64_t v);

/* A length-delimited field (bytes, string, a message), also when empty. */
void
fp_pb_put_bytes(struct fp_text *t, unsigned field, const void *p, size_t len);

/* @msg as a length-delimited field. */
void
fp_pb_put_message(struct fp_text *t, unsigned field, const struct fp_text *msg);

/*
 * A frame's FILE field as written (\xHH escapes) as a profile shows it,
 * into @out (emptied first): decoded, then escaped under util-escape.h's
 * one rule, so that a space or a parenthesis reads as itself and a
 * control character never reaches a viewer's terminal.
 * @return false (@out untouched) for no file: NULL, empty or "unknown",
 *         the writer's word for none.
 */
bool
fp_frame_file_shown(const char *file, struct fp_text *out);

/* "m:f/2:123": the length of "m:f/2" and the line 123 in *@line; the
 * whole name and line 0 without one. */
size_t
fp_frame_split_line(const char *name, int64_t *line);

/*
 * Write @len bytes at @p to @out as one gzip member.
 * @return 0, -EIO on a write error, -ENOMEM if zlib cannot start.
 */
int
fp_gzip_write(const void *p, size_t len, FILE *out);
