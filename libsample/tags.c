/*
 * flame_profd — dictionary values of a sample (label, callers, keys, the
 * Logger metadata) as text, rendered only when they changed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "sampler-private.h"
#include "util-mem.h"

/* Cut @len bytes of UTF-8 at FP_TAG_MAX, on a character's start. */
static size_t
tag_cut(const char *text, size_t len)
{
	if (len <= FP_TAG_MAX)
		return len;
	len = FP_TAG_MAX;
	while (len && ((unsigned char)text[len] & 0xc0) == 0x80)
		len--;
	return len;
}

/* Well-formed UTF-8 without control characters: an Elixir string
 * written as it is (overlong forms and surrogates count as binary). */
static bool
printable_utf8(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = p[i], len, cp;

		if (c < 0x20 || c == 0x7f)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
		if (!len || c >= 0xf5 || n - i < len)
			return false;
		cp = c & (0xff >> (len + 1));
		for (unsigned k = 1; k < len; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		i += len;
	}
	return true;
}

/* ei prints "{a, 1}": drop the space after each comma outside quotes,
 * so that a label reads as Erlang's io_lib:format("~w") writes it. */
static void
compact_printed(char *text)
{
	char quote = 0, *out = text;

	for (const char *p = text; *p; p++) {
		if (quote) {
			if (*p == '\\' && p[1]) {
				*out++ = *p++;
			} else if (*p == quote) {
				quote = 0;
			}
		} else if (*p == '"' || *p == '\'') {
			quote = *p;
		} else if (*p == ' ' && p > text && p[-1] == ',') {
			continue;
		}
		*out++ = *p;
	}
	*out = '\0';
}

/* Terms larger than this are named by their size, not printed. */
enum { TAG_PRINT_MAX = 64 * 1024 };

/*
 * A value as text: atoms, integers and printable UTF-8 binaries (Elixir
 * strings) as they are, anything else as Erlang prints it. NULL for
 * undefined (no label, no such key) and [] (no callers). The caller owns
 * the result.
 */
static char *
render_tag(const struct fp_sampler *s, const char *buf, struct tag_span span)
{
	char atom[MAXATOMLEN_UTF8], *out = NULL, *printed = NULL;
	int index = (int)span.at, type, size;
	long long ll;

	if (guard(s, buf, index) < 0 || ei_get_type(buf, &index, &type, &size) < 0)
		return NULL;
	if (is_atom_type(type)) {
		if (etf_decode_atom(buf, &index, atom) < 0 ||
		    strcmp(atom, "undefined") == 0)
			return NULL;
		return xstrdup(atom);
	}
	if (type == ERL_NIL_EXT)
		return NULL;
	if ((type == ERL_SMALL_INTEGER_EXT || type == ERL_INTEGER_EXT ||
	     type == ERL_SMALL_BIG_EXT) &&
	    ei_decode_longlong(buf, &index, &ll) == 0) {
		out = xzalloc(24);
		snprintf(out, 24, "%lld", ll);
		return out;
	}
	if (type == ERL_BINARY_EXT && size >= 0 && span.end - span.at == 5u + (unsigned)size &&
	    printable_utf8((const unsigned char *)buf + span.at + 5, (size_t)size)) {
		size_t n = tag_cut(buf + span.at + 5, (size_t)size);

		out = xzalloc(n + 1);
		memcpy(out, buf + span.at + 5, n);
		return out;
	}
	if (span.end - span.at > TAG_PRINT_MAX) {
		out = xzalloc(48);
		snprintf(out, 48, "#term<%u bytes>", span.end - span.at);
		return out;
	}
	index = (int)span.at;
	if (ei_s_print_term(&printed, buf, &index) < 0 || !printed) {
		free(printed);
		return NULL;
	}
	compact_printed(printed);
	printed[tag_cut(printed, strlen(printed))] = '\0';
	return printed;
}

/* '$callers', a list of pids: "<0.1.2>,<0.3.4>" as far as fits. */
static char *
render_callers(const struct fp_sampler *s, const char *buf, struct tag_span span)
{
	char text[FP_TAG_MAX + 1];
	int index = (int)span.at, count, type, size;
	size_t len = 0;

	text[0] = '\0';
	if (guard(s, buf, index) < 0 ||
	    ei_get_type(buf, &index, &type, &size) < 0 || type != ERL_LIST_EXT ||
	    ei_decode_list_header(buf, &index, &count) < 0)
		return NULL;
	for (int i = 0; i < count; i++) {
		struct fp_pid pid;
		char one[48];
		int n;

		if (ei_get_type(buf, &index, &type, &size) < 0)
			break;
		if (type != ERL_PID_EXT && type != ERL_NEW_PID_EXT) {
			if (etf_skip_term(buf, &index) < 0)
				break;
			continue;
		}
		if (etf_decode_pid(buf, &index, &pid) < 0)
			break;
		n = snprintf(one, sizeof(one), "%s<0.%u.%u>", len ? "," : "",
			     pid.num, pid.serial);
		if (n < 0 || len + (size_t)n > FP_TAG_MAX)
			break;
		memcpy(text + len, one, (size_t)n + 1);
		len += (size_t)n;
	}
	return len ? xstrdup(text) : NULL;
}

/* Logger key @k of the metadata map at @span into @memo's text. */
static void
render_logger_key(const struct fp_sampler *s, const char *buf,
		  struct tag_span span, const char *key, struct tag_memo *memo)
{
	char atom[MAXATOMLEN_UTF8];
	int index = (int)span.at, type, size, arity;

	free(memo->text);
	memo->text = NULL;
	if (!span.end || guard(s, buf, index) < 0 ||
	    ei_get_type(buf, &index, &type, &size) < 0 || type != ERL_MAP_EXT ||
	    ei_decode_map_header(buf, &index, &arity) < 0)
		return;
	for (int i = 0; i < arity; i++) {
		bool match = false;
		int at;

		if (ei_get_type(buf, &index, &type, &size) < 0)
			return;
		if (is_atom_type(type)) {
			if (etf_decode_atom(buf, &index, atom) < 0)
				return;
			match = strcmp(atom, key) == 0;
		} else if (etf_skip_term(buf, &index) < 0) {
			return;
		}
		at = index;
		if (etf_skip_term(buf, &index) < 0)
			return;
		if (match) {
			struct tag_span v = { (uint32_t)at, (uint32_t)index };

			memo->text = render_tag(s, buf, v);
			return;
		}
	}
}

/* Whether @memo still holds the value at @span; if not, it takes it. */
static bool
memo_same(struct tag_memo *memo, const char *buf, struct tag_span span)
{
	size_t len = span.end - span.at;

	if (memo->raw && memo->len == len &&
	    memcmp(memo->raw, buf + span.at, len) == 0)
		return true;
	free(memo->raw);
	memo->raw = NULL;
	memo->len = len;
	if (len <= TAG_RAW_MAX) {
		memo->raw = xzalloc(len + 1);
		memcpy(memo->raw, buf + span.at, len);
	}
	return false;
}

/*
 * The label, callers and keys of sample @i: rendered from the reply where
 * they changed since the process's last sample, else its last text; a
 * reused probe, which asked none of them, keeps its last.
 */
void
sampler_apply_tags(struct fp_sampler *s, const char *buf, size_t i,
		   struct proc_state *st, bool reused)
{
	struct fp_sample *smp = &s->samples[i];
	const struct tag_span *spans = &s->tag_spans[i * s->nspans];
	size_t nk = s->nkeys + s->nlogger, map = TAG_KEYS + s->nkeys;
	const char **keys = &s->key_text[i * nk];

	if (!st->tags)
		st->tags = xzalloc(s->ntags * sizeof(*st->tags));
	if (!reused) {
		for (size_t k = 0; k < s->nspans; k++) {
			struct tag_memo *m = &st->tags[k];

			if (!spans[k].end) {
				free(m->raw);
				free(m->text);
				m->raw = NULL;
				m->text = NULL;
				if (k == map) {
					for (size_t l = 0; l < s->nlogger; l++) {
						free(st->tags[s->nspans + l].text);
						st->tags[s->nspans + l].text = NULL;
					}
				}
				continue;
			}
			if (memo_same(m, buf, spans[k]))
				continue;
			if (k == map) {
				for (size_t l = 0; l < s->nlogger; l++)
					render_logger_key(s, buf, spans[k],
							  s->key_names[s->nkeys + l],
							  &st->tags[s->nspans + l]);
				continue;
			}
			free(m->text);
			m->text = k == TAG_CALLERS ? render_callers(s, buf, spans[k]) :
						     render_tag(s, buf, spans[k]);
		}
	}
	smp->label = st->tags[TAG_LABEL].text;
	smp->callers = st->tags[TAG_CALLERS].text;
	for (size_t k = 0; k < s->nkeys; k++)
		keys[k] = st->tags[TAG_KEYS + k].text;
	for (size_t l = 0; l < s->nlogger; l++)
		keys[s->nkeys + l] = st->tags[s->nspans + l].text;
	smp->keys = nk ? keys : NULL;
	smp->nkeys = (uint32_t)nk;
}

