/*
 * flame_profd — the protobuf wire format, an interning table and gzip
 * for the profile writers (proto-wire-private.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "proto-wire-private.h"
#include "util-escape.h"
#include "util-hash.h"
#include "util-mem.h"

void
fp_intern_init(struct fp_intern *in)
{
	in->nslots = 256;
	in->slots = xzalloc(in->nslots * sizeof(*in->slots));
	FP_GROW(in->off, in->off_cap, 1);
	in->off[0] = 0;
}

void
fp_intern_free(struct fp_intern *in)
{
	fp_text_free(&in->keys);
	free(in->off);
	free(in->slots);
}

const char *
fp_intern_key(const struct fp_intern *in, size_t i, size_t *len)
{
	*len = in->off[i + 1] - in->off[i];
	return in->keys.buf + in->off[i];
}

static void
intern_rehash(struct fp_intern *in)
{
	free(in->slots);
	in->nslots *= 2;
	in->slots = xzalloc(in->nslots * sizeof(*in->slots));
	for (size_t i = 0; i < in->count; i++) {
		size_t len;
		const char *k = fp_intern_key(in, i, &len);
		size_t j = hash_bytes(k, len) & (in->nslots - 1);

		while (in->slots[j])
			j = (j + 1) & (in->nslots - 1);
		in->slots[j] = (uint32_t)(i + 1);
	}
}

uint32_t
fp_intern_get(struct fp_intern *in, const void *k, size_t len, bool *added)
{
	size_t j = hash_bytes(k, len) & (in->nslots - 1);

	*added = false;
	while (in->slots[j]) {
		size_t n;
		const char *have = fp_intern_key(in, in->slots[j] - 1, &n);

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

void
fp_pb_put_varint(struct fp_text *t, uint64_t v)
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

void
fp_pb_put_tag(struct fp_text *t, unsigned field, unsigned wire_type)
{
	fp_pb_put_varint(t, (uint64_t)field << 3 | wire_type);
}

void
fp_pb_put_uint(struct fp_text *t, unsigned field, uint64_t v)
{
	if (!v)
		return;
	fp_pb_put_tag(t, field, FP_PB_VARINT);
	fp_pb_put_varint(t, v);
}

void
fp_pb_put_int(struct fp_text *t, unsigned field, int64_t v)
{
	fp_pb_put_uint(t, field, (uint64_t)v);
}

void
fp_pb_put_fixed64(struct fp_text *t, unsigned field, uint64_t v)
{
	unsigned char b[8];

	if (!v)
		return;
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	fp_pb_put_tag(t, field, FP_PB_I64);
	fp_text_put(t, b, sizeof(b));
}

void
fp_pb_put_bytes(struct fp_text *t, unsigned field, const void *p, size_t len)
{
	fp_pb_put_tag(t, field, FP_PB_LEN);
	fp_pb_put_varint(t, len);
	fp_text_put(t, p, len);
}

void
fp_pb_put_message(struct fp_text *t, unsigned field, const struct fp_text *msg)
{
	fp_pb_put_bytes(t, field, msg->buf, msg->len);
}

bool
fp_frame_file_shown(const char *file, struct fp_text *out)
{
	struct fp_text raw = { 0 };

	if (!file || !*file || strcmp(file, "unknown") == 0)
		return false;
	for (const char *s = file; *s;) {
		int byte = fp_hex_escape_at(s);

		if (byte >= 0) {
			fp_text_putc(&raw, (char)byte);
			s += 4;
		} else {
			fp_text_putc(&raw, *s++);
		}
	}
	out->len = 0;
	fp_text_put_escaped(out, raw.buf, raw.len, NULL);
	fp_text_free(&raw);
	return true;
}

size_t
fp_frame_split_line(const char *name, int64_t *line)
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

int
fp_gzip_write(const void *p, size_t len, FILE *out)
{
	unsigned char buf[65536];
	z_stream z = { 0 };
	int rc = 0, zr;

	/* windowBits 15 + 16: a gzip member, as pprof and HTTP's
	 * Content-Encoding: gzip read */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (unsigned char *)p;
	z.avail_in = 0;
	do {
		size_t left = len - (size_t)((const char *)z.next_in - (const char *)p);

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
	return rc;
}
