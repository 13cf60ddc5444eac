/*
 * flame_profd — frame names, Erlang and Elixir form (docs/FORMAT.md).
 *
 * The Elixir form follows Elixir's own printing (Exception.format_mfa/3,
 * Macro.inspect_atom(:literal | :remote_call, _) and
 * Code.Identifier.extract_anonymous_fun_parent/1) wherever that keeps a
 * frame whole in the readers of perf-script text; where it would not, the
 * name is quoted and escaped as Elixir also reads it back ("\x2B"):
 *
 *  - an operator holding '+' (Kernel.+/2): Flamescope cuts a name at its
 *    first '+';
 *  - a space, ';', control characters, "->" inside a quoted name, as in
 *    the Erlang form; '"', '\' and "#{" because the quotes are Elixir's;
 *  - a function name with non-ASCII letters is quoted: Elixir decides
 *    with its Unicode identifier tokenizer, which a C writer cannot
 *    follow exactly, and quoting is always valid Elixir.
 */
#include <stdlib.h>

#include "frame-names-private.h"
#include "util-escape.h"

static const char *const reserved_words[] = {
	"after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl",
	"bsr", "bxor", "case", "catch", "cond", "div", "else", "end", "fun",
	"if", "let", "maybe", "not", "of", "or", "orelse", "receive", "rem",
	"try", "when", "xor",
};

bool
fp_atom_is_reserved(const char *word, size_t len)
{
	/* Every atom of every frame comes through here: reserved words are
	 * 2 to 7 letters long, so most atoms leave at once. */
	if (len < 2 || len > 7)
		return false;
	for (size_t i = 0; i < sizeof(reserved_words) / sizeof(reserved_words[0]); i++) {
		if (reserved_words[i][0] == word[0] &&
		    strlen(reserved_words[i]) == len &&
		    memcmp(reserved_words[i], word, len) == 0)
			return true;
	}
	return false;
}

static inline bool
is_lower(char c)
{
	return c >= 'a' && c <= 'z';
}

static inline bool
is_upper(char c)
{
	return c >= 'A' && c <= 'Z';
}

static inline bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static inline bool
is_word(char c)
{
	return is_lower(c) || is_upper(c) || is_digit(c) || c == '_';
}

static inline bool
is_upper_hex(char c)
{
	return is_digit(c) || (c >= 'A' && c <= 'F');
}

/* ---- writing ---- */

static bool
atom_is_bare(const char *a, size_t len)
{
	if (!len || !is_lower(a[0]))
		return false;
	for (size_t i = 1; i < len; i++) {
		if (!is_word(a[i]) && a[i] != '@')
			return false;
	}
	return !fp_atom_is_reserved(a, len);
}

/* Whether the byte at @p is written \xHH between @quote's. */
static bool
escaped(const unsigned char *p, const unsigned char *start,
	const unsigned char *end, char quote)
{
	unsigned char c = *p;

	if (c < 0x20 || c == 0x7f || c == ' ' || c == ';' || c == '+' ||
	    c == '\\' || c == (unsigned char)quote)
		return true;
	/* stackcollapse-perf.pl (and inferno) cut a name at its first '(',
	 * C++ argument lists being no part of a function's name */
	if (c == '(' || c == ')')
		return true;
	/* "->" splits a frame in Flamescope (inlined-frame notation) */
	if (c == '>' && p > start && p[-1] == '-')
		return true;
	/* "#{" would interpolate in an Elixir string */
	return quote == '"' && c == '#' && p + 1 < end && p[1] == '{';
}

static void
put_quoted(struct fp_text *t, const char *s, size_t len, char quote)
{
	const unsigned char *start = (const unsigned char *)s;
	const unsigned char *end = start + len;

	fp_text_putc(t, quote);
	for (const unsigned char *p = start; p < end;) {
		size_t n;

		if (*p < 0x80) {
			if (escaped(p, start, end, quote))
				fp_text_put_hex_escape(t, *p);
			else
				fp_text_putc(t, (char)*p);
			p++;
			continue;
		}
		n = fp_utf8_len(p, (size_t)(end - p));
		if (n && !(n == 2 && *p == 0xc2 && p[1] < 0xa0)) {
			fp_text_put(t, p, n);
			p += n;
			continue;
		}
		/* a NUL (FP_NUL_CARRIER), a C1 control's lead byte or a byte
		 * of no character: as the rule for node text writes them */
		n = *p == 0xc0 && end - p >= 2 && p[1] == 0x80 ? 2 : 1;
		fp_text_put_escaped(t, (const char *)p, n, NULL);
		p += n;
	}
	fp_text_putc(t, quote);
}

void
fp_name_put_atom(struct fp_text *t, const char *atom, size_t len)
{
	if (atom_is_bare(atom, len))
		fp_text_put(t, atom, len);
	else
		put_quoted(t, atom, len, '\'');
}

/*
 * Elixir.Foo.Bar where Foo.Bar is an alias Elixir prints bare: segments
 * of [A-Z][A-Za-z0-9_]*. Elixir prints Elixir.Elixir and Elixir.Elixir.*
 * whole; those, and every other module, keep the Erlang form.
 */
static bool
elixir_module(const char *m, size_t len)
{
	const char *p = m + 7, *end = m + len;

	if (len <= 7 || memcmp(m, "Elixir.", 7) != 0)
		return false;
	if (end - p >= 6 && memcmp(p, "Elixir", 6) == 0 &&
	    (end - p == 6 || p[6] == '.'))
		return false;
	for (;;) {
		if (p == end || !is_upper(*p))
			return false;
		for (p++; p < end && is_word(*p); p++)
			;
		if (p == end)
			return true;
		if (*p++ != '.')
			return false;
	}
}

/*
 * The operators Macro.inspect_atom(:remote_call, _) prints bare (unary and
 * binary operators, less the ones that are not callable: . .. ... ..// ->
 * % %{} {} <<>>). The word operators (and, in, not, or, when) are
 * identifiers here. Those with '+' (+ ++ +++) are written quoted.
 */
static const char *const elixir_operators[] = {
	"&", "!", "^", "-", "@", "~~~", "<-", "\\\\", "::", "|", "=", "||",
	"|||", "&&", "&&&", "==", "!=", "=~", "===", "!==", "<", "<=", ">=",
	">", "|>", "<<<", ">>>", "<~", "~>", "<<~", "~>>", "<~>", "<|>", "^^^",
	"--", "<>", "---", "*", "/", "**",
};

#define N_OPERATORS (sizeof(elixir_operators) / sizeof(elixir_operators[0]))

static bool
elixir_operator(const char *f, size_t len)
{
	for (size_t i = 0; i < N_OPERATORS; i++) {
		if (strlen(elixir_operators[i]) == len &&
		    memcmp(elixir_operators[i], f, len) == 0)
			return true;
	}
	return false;
}

/* [a-z_][A-Za-z0-9_]*[?!]?, ASCII only (see the top of the file) */
static bool
elixir_identifier(const char *f, size_t len)
{
	size_t i;

	if (!len || !(is_lower(f[0]) || f[0] == '_'))
		return false;
	for (i = 1; i < len && is_word(f[i]); i++)
		;
	return i == len || (i == len - 1 && (f[i] == '?' || f[i] == '!'));
}

static void
put_elixir_function(struct fp_text *t, const char *f, size_t len)
{
	if (elixir_identifier(f, len) || elixir_operator(f, len))
		fp_text_put(t, f, len);
	else
		put_quoted(t, f, len, '"');
}

/*
 * Elixir's extract_anonymous_fun_parent/1: -NAME/ARITY-INNER-COUNT-
 * (NAME may hold '/'). Elixir takes any ARITY; here it must be a number,
 * so that the Elixir form stays within the grammar.
 */
static bool
anonymous_parent(const char *f, size_t len, size_t *name_len,
		 const char **arity, size_t *arity_len)
{
	const char *end = f + len, *slash = NULL, *p;
	int dashes = 0;

	if (len < 2 || f[0] != '-' || end[-1] != '-')
		return false;
	for (p = f + 1; p < end; p++) {
		if (*p == '/')
			slash = p;
	}
	if (!slash)
		return false;
	for (p = slash + 1; p < end; p++)
		dashes += *p == '-';
	if (dashes != 3)
		return false;
	for (p = slash + 1; p < end && is_digit(*p); p++)
		;
	if (*p != '-' || p == slash + 1 || p - slash > 11 ||
	    (slash[1] == '0' && p - slash > 2))
		return false;
	*name_len = (size_t)(slash - f - 1);
	*arity = slash + 1;
	*arity_len = (size_t)(p - slash - 1);
	return true;
}

void
fp_name_put_mfa(struct fp_text *t, const char *module, size_t mlen,
		const char *function, size_t flen, uint64_t arity, bool elixir)
{
	const char *parent_arity;
	size_t name_len, parent_arity_len;

	if (!elixir || !elixir_module(module, mlen)) {
		fp_name_put_atom(t, module, mlen);
		fp_text_putc(t, ':');
		fp_name_put_atom(t, function, flen);
		fp_text_putc(t, '/');
		fp_text_put_u64(t, arity);
		return;
	}
	if (anonymous_parent(function, flen, &name_len, &parent_arity,
			     &parent_arity_len)) {
		fp_text_put(t, "anonymous fn/", 13);
		fp_text_put_u64(t, arity);
		fp_text_put(t, " in ", 4);
		fp_text_put(t, module + 7, mlen - 7);
		fp_text_putc(t, '.');
		put_elixir_function(t, function + 1, name_len);
		fp_text_putc(t, '/');
		fp_text_put(t, parent_arity, parent_arity_len);
		return;
	}
	fp_text_put(t, module + 7, mlen - 7);
	fp_text_putc(t, '.');
	put_elixir_function(t, function, flen);
	fp_text_putc(t, '/');
	fp_text_put_u64(t, arity);
}

void
fp_name_put_process(struct fp_text *t, const char *atom, size_t len,
		    bool elixir)
{
	if (elixir && elixir_module(atom, len))
		fp_text_put(t, atom + 7, len - 7);
	else
		fp_name_put_atom(t, atom, len);
}

/* ---- scanning ---- */

/* Length of the UTF-8 sequence at p (within end), 0 if invalid. */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
	size_t n;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A quoted name at p (p[0] is the quote): its end, or NULL. */
static const char *
scan_quoted(const char *p, const char *end)
{
	const char *start = p;
	char quote = *p++;

	while (p < end) {
		unsigned char ch = (unsigned char)*p;
		size_t n;

		if (ch == (unsigned char)quote)
			return p + 1;
		if (ch == '\\') {
			if (end - p < 4 || p[1] != 'x' || !is_upper_hex(p[2]) ||
			    !is_upper_hex(p[3]))
				return NULL;
			p += 4;
			continue;
		}
		if (ch < 0x20 || ch == 0x7f || ch == ' ' || ch == ';' ||
		    ch == '+')
			return NULL;
		if (ch == '>' && p > start + 1 && p[-1] == '-')
			return NULL;
		if (quote == '"' && ch == '#' && p + 1 < end && p[1] == '{')
			return NULL;
		n = utf8_len((const unsigned char *)p, (const unsigned char *)end);
		/* a C1 control is written \xC2\xHH (util-escape.h): raw,
		 * it would reach a terminal from every output */
		if (n == 0 || (n == 2 && ch == 0xc2 && (unsigned char)p[1] < 0xa0))
			return NULL;
		p += n;
	}
	return NULL;
}

const char *
fp_name_scan_atom(const char *p, const char *end)
{
	const char *start = p;

	if (p >= end)
		return NULL;
	if (*p == '\'')
		return scan_quoted(p, end);
	if (!is_lower(*p))
		return NULL;
	while (p < end && (is_word(*p) || *p == '@'))
		p++;
	return fp_atom_is_reserved(start, (size_t)(p - start)) ? NULL : p;
}

/* An alias as the writer writes one (not Elixir or Elixir.*). */
static const char *
scan_alias(const char *p, const char *end)
{
	const char *start = p;

	for (;;) {
		if (p == end || !is_upper(*p))
			return NULL;
		for (p++; p < end && is_word(*p); p++)
			;
		if (p + 1 < end && p[0] == '.' && is_upper(p[1])) {
			p++;
			continue;
		}
		break;
	}
	if (p - start >= 6 && memcmp(start, "Elixir", 6) == 0 &&
	    (p - start == 6 || start[6] == '.'))
		return NULL;
	return p;
}

/* A function name after "Alias.", up to the '/' of its arity. */
static const char *
scan_elixir_function(const char *p, const char *end)
{
	const char *q;

	if (p >= end)
		return NULL;
	if (*p == '"')
		return scan_quoted(p, end);
	if (is_lower(*p) || *p == '_') {
		for (q = p + 1; q < end && is_word(*q); q++)
			;
		if (q < end && (*q == '?' || *q == '!'))
			q++;
		return q;
	}
	/* an operator: the one followed by "/DIGIT" (Kernel.//2) */
	for (size_t i = 0; i < N_OPERATORS; i++) {
		size_t n = strlen(elixir_operators[i]);

		if ((size_t)(end - p) >= n + 2 &&
		    memcmp(p, elixir_operators[i], n) == 0 && p[n] == '/' &&
		    is_digit(p[n + 1]))
			return p + n;
	}
	return NULL;
}

static const char *
scan_arity(const char *p, const char *end, uint64_t *arity)
{
	uint64_t v = 0;
	const char *start = p;

	while (p < end && is_digit(*p)) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return NULL;
		p++;
	}
	*arity = v;
	return p > start ? p : NULL;
}

const char *
fp_name_scan_process(const char *p, const char *end)
{
	if (p < end && is_upper(*p))
		return scan_alias(p, end);
	return fp_name_scan_atom(p, end);
}

static bool
eat(const char **p, const char *end, const char *lit, size_t n)
{
	if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
		return false;
	*p += n;
	return true;
}

const char *
fp_name_scan_mfa(const char *p, const char *end, struct fp_name_mfa *mfa)
{
	memset(mfa, 0, sizeof(*mfa));
	if (eat(&p, end, "anonymous fn/", 13)) {
		mfa->anonymous = true;
		if (!(p = scan_arity(p, end, &mfa->fn_arity)) ||
		    !eat(&p, end, " in ", 4))
			return NULL;
	}
	if (mfa->anonymous || (p < end && is_upper(*p))) {
		mfa->elixir = true;
		mfa->module = p;
		if (!(p = scan_alias(p, end)))
			return NULL;
		mfa->mlen = (size_t)(p - mfa->module);
		if (!eat(&p, end, ".", 1))
			return NULL;
	} else {
		mfa->module = p;
		if (!(p = fp_name_scan_atom(p, end)))
			return NULL;
		mfa->mlen = (size_t)(p - mfa->module);
		if (!eat(&p, end, ":", 1))
			return NULL;
	}
	mfa->function = p;
	p = mfa->elixir ? scan_elixir_function(p, end) : fp_name_scan_atom(p, end);
	if (!p)
		return NULL;
	mfa->flen = (size_t)(p - mfa->function);
	if (!eat(&p, end, "/", 1))
		return NULL;
	return scan_arity(p, end, &mfa->arity);
}

/* ---- converting ---- */

/* The bytes a quoted name stands for (between its quotes). */
static void
decode_quoted(struct fp_text *t, const char *p, size_t len)
{
	const char *end = p + len;

	while (p < end) {
		if (*p == '\\') {
			char hex[3] = { p[2], p[3], 0 };

			fp_text_putc(t, (char)strtoul(hex, NULL, 16));
			p += 4;
		} else {
			fp_text_putc(t, *p++);
		}
	}
}

static void
decode_name(struct fp_text *t, const char *p, size_t len)
{
	if (len >= 2 && (p[0] == '\'' || p[0] == '"'))
		decode_quoted(t, p + 1, len - 2);
	else
		fp_text_put(t, p, len);
}

bool
fp_name_mfa_other_form(const struct fp_name_mfa *mfa, bool elixir)
{
	if (mfa->elixir)
		return !elixir;
	return elixir && mfa->mlen > 8 && memcmp(mfa->module, "'Elixir.", 8) == 0;
}

void
fp_name_convert_mfa(struct fp_text *t, const struct fp_name_mfa *mfa,
		    bool elixir)
{
	struct fp_text m = { 0 }, f = { 0 };
	uint64_t arity = mfa->arity;

	if (mfa->elixir) {
		fp_text_put(&m, "Elixir.", 7);
		fp_text_put(&m, mfa->module, mfa->mlen);
		if (mfa->anonymous) {
			/* The Elixir form has no fun index: '?' says so. */
			fp_text_putc(&f, '-');
			decode_name(&f, mfa->function, mfa->flen);
			fp_text_putc(&f, '/');
			fp_text_put_u64(&f, mfa->arity);
			fp_text_put(&f, "-fun-?-", 7);
			arity = mfa->fn_arity;
		} else {
			decode_name(&f, mfa->function, mfa->flen);
		}
	} else {
		decode_name(&m, mfa->module, mfa->mlen);
		decode_name(&f, mfa->function, mfa->flen);
	}
	fp_text_reserve(&m, 1);
	fp_text_reserve(&f, 1);
	fp_name_put_mfa(t, m.buf, m.len, f.buf, f.len, arity, elixir);
	free(m.buf);
	free(f.buf);
}

void
fp_name_convert_process(struct fp_text *t, const char *p, const char *end,
			bool elixir)
{
	struct fp_text a = { 0 };

	if (p < end && is_upper(*p))
		fp_text_put(&a, "Elixir.", 7);
	decode_name(&a, p, (size_t)(end - p));
	fp_text_reserve(&a, 1);
	fp_name_put_process(t, a.buf, a.len, elixir);
	free(a.buf);
}
