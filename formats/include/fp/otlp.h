/*
 * flame_profd — an OTLP profiles export request: the protobuf body of
 * OTLP/HTTP's POST /v1development/profiles, an
 * opentelemetry.proto.collector.profiles.v1development.
 * ExportProfilesServiceRequest as opentelemetry-proto v1.11.0 defines it
 * (github.com/open-telemetry/opentelemetry-proto, tag v1.11.0, commit
 * 790608c4d51e6ffc12210b541e8514cbed9e91a4; wire-identical to v1.10.0,
 * not to v1.9.0 and older, whose Sample numbers its fields otherwise).
 *
 * One resource (its attributes), one instrumentation scope, and one
 * Profile per sample type, all sharing the request's one dictionary:
 * strings, functions, locations, stacks and attributes are each held
 * once, at index 1 on (index 0 is every table's zero value, as the proto
 * requires), and every location belongs to mapping 1, which names the
 * one "binary" that already holds names, files and lines. Samples with
 * the same stack and the same attributes are one Sample of one
 * aggregated value per profile, as the proto recommends.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fp_text;		/* util-buf.h */

struct fp_otlp;

/* A string attribute (of the resource or of a sample). */
struct fp_otlp_attr {
	const char *key;
	const char *value;
};

/* The dictionary's tables, each counted without its zero value at
 * index 0: what fp_otlp_add() has interned so far. */
struct fp_otlp_counts {
	size_t strings, functions, locations, stacks, attributes, samples;
};

/** Caller owns the result; free with fp_otlp_destroy(). */
struct fp_otlp *
fp_otlp_new(void);

/** NULL is a no-op. */
void
fp_otlp_destroy(struct fp_otlp *o);

/** Add a resource attribute (strings copied), e.g. service.name. */
void
fp_otlp_add_resource_attr(struct fp_otlp *o, const char *key, const char *value);

/** The instrumentation scope's name and version (copied; NULL: none). */
void
fp_otlp_set_scope(struct fp_otlp *o, const char *name, const char *version);

/**
 * Add a sample type: one Profile of the request, e.g. ("samples",
 * "count"). Every type is added before the first sample.
 *
 * @return the type's index in the values fp_otlp_add() takes; -EBUSY
 *         once a sample was added.
 */
int
fp_otlp_add_sample_type(struct fp_otlp *o, const char *type, const char *unit);

/** What one sample stands for: @period of @type in @unit (every
 * profile's period_type and period). */
void
fp_otlp_set_period(struct fp_otlp *o, const char *type, const char *unit,
		   int64_t period);

/** When every profile starts (epoch nanoseconds) and how long it lasts. */
void
fp_otlp_set_time(struct fp_otlp *o, uint64_t time_unix_nano,
		 uint64_t duration_nano);

/** The file name of the one mapping every location belongs to. */
void
fp_otlp_set_mapping(struct fp_otlp *o, const char *filename);

/**
 * Add one sample (merged with an earlier one of the same stack and
 * attributes). @frames are leaf first, each "NAME" or "NAME:LINE" as
 * flame_profd writes them; @files parallel (may be NULL or hold NULL
 * entries) in the file's written form, shown as pprof.h's fp_pprof_add()
 * shows them. @values has one entry per sample type; sums that leave
 * the 64-bit range are held at the bound (fp_otlp_saturated()).
 * @attrs are kept in the order given (give them in one order for
 * samples to merge); a key appears at most once. Strings are copied.
 */
void
fp_otlp_add(struct fp_otlp *o, const char *const *frames,
	    const char *const *files, size_t nframes, const int64_t *values,
	    const struct fp_otlp_attr *attrs, size_t nattrs);

/** What the dictionary and the samples hold so far, into @c. */
void
fp_otlp_counts(const struct fp_otlp *o, struct fp_otlp_counts *c);

/** Whether a value's sum was held at a bound of the 64-bit range. */
bool
fp_otlp_saturated(const struct fp_otlp *o);

/** Append the request, serialised and not compressed, to @out. */
void
fp_otlp_encode(const struct fp_otlp *o, struct fp_text *out);

/**
 * Write the request gzip-compressed (one gzip member, as OTLP/HTTP's
 * Content-Encoding: gzip) to @out (which the caller owns and closes).
 *
 * @return 0, -EIO on a write error, -ENOMEM if zlib cannot start.
 */
int
fp_otlp_write_gzip(const struct fp_otlp *o, FILE *out);
