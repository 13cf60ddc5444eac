/*
 * flame_profd — sub-second heat map writer.
 *
 * Flamescope's view: a column per second, its rows the offsets within
 * the second, so periodic work (a timer every 200 ms, a GC burst every
 * few seconds) shows as a pattern. Samples are kept as (time, value)
 * pairs until the end because files of several nodes may come in any
 * order and the first second is known only then. Each sample keeps its
 * source (a node of several): samples of every node fall into the same
 * cells by their wall-clock time, and a cell's title says how much of
 * it each node holds.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp/heatmap-svg.h"
#include "svg-util.h"
#include "util-buf.h"
#include "util-mem.h"
#include "util-sat.h"

#define LEFT 76
#define TOP 60
#define BOTTOM 92	/* second labels, the legend, the details line */
#define RIGHT 20
#define MAX_CELLS (20 * 1000 * 1000)
/* sources named in a cell's title, the largest sums first */
#define CELL_SOURCES 3
#define NOTE_LINE 14	/* px a line of fp_heatmap_options.notes */
#define NOTE_CHAR 7	/* px a character of them, at most (monospace 11px) */

struct point {
	uint64_t time_us;
	int64_t value;
	unsigned source;
};

/* A sample placed: its cell, source and value (a cell's sources). */
struct placed {
	uint64_t cell;
	unsigned source;
	int64_t value;
};

struct fp_heatmap {
	unsigned rows;
	struct point *points;
	size_t count, cap;
	uint64_t tmin, tmax;	/* of every sample added or covered */
	bool saturated;		/* a cell's sum, from the last write */
};

static const char script[] =
"\"use strict\";\n"
"var details, T0, ROWS, first = null;\n"
"function cellTime(r, end) {\n"
"\tvar c = +r.getAttribute(\"data-c\"), k = +r.getAttribute(\"data-r\") + (end ? 1 : 0);\n"
"\treturn T0 + c + k / ROWS;\n"
"}\n"
"function init(evt) {\n"
"\tvar svg = document.documentElement;\n"
"\tT0 = +svg.getAttribute(\"data-t0\");\n"
"\tROWS = +svg.getAttribute(\"data-rows\");\n"
"\tdetails = document.getElementById(\"details\").firstChild;\n"
"\tvar cmd = svg.getAttribute(\"data-command\");\n"
"\tsvg.addEventListener(\"mouseover\", function (e) {\n"
"\t\tif (e.target.classList.contains(\"c\") && first === null)\n"
"\t\t\tdetails.nodeValue = e.target.querySelector(\"title\").textContent;\n"
"\t});\n"
"\tsvg.addEventListener(\"click\", function (e) {\n"
"\t\tvar r = e.target;\n"
"\t\tif (!r.classList.contains(\"c\")) return;\n"
"\t\tvar sel = document.querySelectorAll(\"rect.sel\");\n"
"\t\tfor (var i = 0; i < sel.length; i++) sel[i].classList.remove(\"sel\");\n"
"\t\tif (first === null) {\n"
"\t\t\tfirst = r;\n"
"\t\t\tr.classList.add(\"sel\");\n"
"\t\t\tdetails.nodeValue = \"from \" + cellTime(r, false).toFixed(3) + \": click the last cell of the range\";\n"
"\t\t\treturn;\n"
"\t\t}\n"
"\t\tvar a = cellTime(first, false), b = cellTime(r, true);\n"
"\t\tif (b < a) { a = cellTime(r, false); b = cellTime(first, true); }\n"
"\t\tfirst.classList.add(\"sel\");\n"
"\t\tr.classList.add(\"sel\");\n"
"\t\tfirst = null;\n"
"\t\tdetails.nodeValue = cmd + \" --from \" + a.toFixed(3) + \" --to \" + b.toFixed(3);\n"
"\t});\n"
"}\n";

static const char style[] =
"text { font-family: Verdana, sans-serif; font-size: 11px; fill: rgb(0,0,0); }\n"
"#title { text-anchor: middle; font-size: 17px; }\n"
"#subtitle { text-anchor: middle; fill: rgb(100,100,100); }\n"
".rl { text-anchor: end; }\n"
".note { font-family: monospace; white-space: pre; }\n"
".cl { text-anchor: middle; }\n"
"rect.c { cursor: pointer; }\n"
"rect.c:hover, rect.sel { stroke: rgb(0,0,0); stroke-width: 1; }\n";

struct fp_heatmap *
fp_heatmap_new(unsigned rows)
{
	struct fp_heatmap *m = xnew(struct fp_heatmap);

	m->rows = rows < 1 ? 1 : rows > 1000 ? 1000 : rows;
	m->tmin = UINT64_MAX;
	return m;
}

void
fp_heatmap_destroy(struct fp_heatmap *m)
{
	if (!m)
		return;
	free(m->points);
	free(m);
}

void
fp_heatmap_add_from(struct fp_heatmap *m, uint64_t time_us, int64_t value,
		    unsigned source)
{
	FP_GROW(m->points, m->cap, m->count + 1);
	m->points[m->count++] = (struct point){ time_us, value, source };
	fp_heatmap_cover(m, time_us);
}

void
fp_heatmap_add(struct fp_heatmap *m, uint64_t time_us, int64_t value)
{
	fp_heatmap_add_from(m, time_us, value, 0);
}

static int
placed_cmp(const void *a, const void *b)
{
	const struct placed *x = a, *y = b;

	if (x->cell != y->cell)
		return x->cell < y->cell ? -1 : 1;
	return x->source < y->source ? -1 : x->source > y->source;
}

/* Every sample's cell and source, in the order of the cells (column
 * by column, row by row, as they are written), each cell's by source. */
static struct placed *
place(const struct fp_heatmap *m, uint64_t s0)
{
	struct placed *p = xzalloc((m->count + 1) * sizeof(*p));

	for (size_t i = 0; i < m->count; i++) {
		uint64_t t = m->points[i].time_us;

		p[i] = (struct placed){
			.cell = (t / 1000000 - s0) * m->rows +
				(t % 1000000) * m->rows / 1000000,
			.source = m->points[i].source,
			.value = m->points[i].value,
		};
	}
	if (m->count > 1)
		qsort(p, m->count, sizeof(*p), placed_cmp);
	return p;
}

static uint64_t
magnitude(int64_t v)
{
	return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/*
 * The sources of cell @cell, from *@at in @p (sorted by place()): " (a
 * 12, b 3, 2 more)" in its title, the largest sums first; *@at moves
 * past the cell.
 */
static void
write_cell_sources(FILE *out, const struct placed *p, size_t n, size_t *at,
		   uint64_t cell, const struct fp_heatmap_options *o)
{
	struct { unsigned source; int64_t sum; } top[CELL_SOURCES];
	size_t ntop = 0, nsrc = 0, i = *at;

	while (i < n && p[i].cell < cell)
		i++;
	while (i < n && p[i].cell == cell) {
		unsigned src = p[i].source;
		int64_t sum = 0;
		size_t k;

		for (; i < n && p[i].cell == cell && p[i].source == src; i++)
			sat_add_i64(&sum, p[i].value);
		nsrc++;
		/* kept: the CELL_SOURCES largest, largest first */
		for (k = ntop; k > 0 && magnitude(top[k - 1].sum) < magnitude(sum); k--) {
			if (k < CELL_SOURCES)
				top[k] = top[k - 1];
		}
		if (k < CELL_SOURCES) {
			top[k].source = src;
			top[k].sum = sum;
			if (ntop < CELL_SOURCES)
				ntop++;
		}
	}
	*at = i;
	fputs(" (", out);
	for (size_t k = 0; k < ntop; k++) {
		fputs(k ? ", " : "", out);
		if (top[k].source < o->nsources && o->sources[top[k].source])
			fp_svg_write_escaped(out, o->sources[top[k].source]);
		else
			fputs("-", out);
		fprintf(out, " %" PRId64, top[k].sum);
	}
	if (nsrc > ntop)
		fprintf(out, ", %zu more", nsrc - ntop);
	fputs(")", out);
}

void
fp_heatmap_cover(struct fp_heatmap *m, uint64_t time_us)
{
	if (time_us < m->tmin)
		m->tmin = time_us;
	if (time_us > m->tmax)
		m->tmax = time_us;
}

static void
cell_color(int64_t v, uint64_t max, char *dst, size_t size)
{
	double t = max ? (double)(v < 0 ? -(double)v : (double)v) / (double)max : 0;

	if (v == 0)
		snprintf(dst, size, "rgb(235,235,235)");
	else if (v > 0)
		snprintf(dst, size, "rgb(%d,%d,%d)", 255 - (int)lround(80 * t),
			 (int)lround(235 * (1 - t)), (int)lround(215 * (1 - t)));
	else
		snprintf(dst, size, "rgb(%d,%d,%d)", (int)lround(215 * (1 - t)),
			 (int)lround(225 * (1 - t)), 255 - (int)lround(80 * t));
}

/*
 * The key under the map: the colour scale from the smallest to the
 * largest cell (through 0 when some sums are negative), then what grey
 * and white cells mean: a grey cell had samples whose weight summed to
 * 0, a white one had none.
 */
static void
write_legend(FILE *out, double y, int64_t vmin, uint64_t maxabs, bool zero_cells,
	     const char *unit)
{
	enum { SWATCHES = 11, SW = 18, SH = 10 };
	bool signed_scale = vmin < 0;
	char fill[48];
	double x = LEFT, end;

	fprintf(out, "<g id=\"legend\">\n<text class=\"rl\" x=\"%d\" y=\"%.0f\">scale</text>\n",
		LEFT - 6, y + SH - 1);
	for (int k = 0; k < SWATCHES; k++) {
		double f = (double)k / (SWATCHES - 1);
		double v = signed_scale ? (2 * f - 1) * (double)maxabs :
			   1 + f * ((double)maxabs - 1);

		cell_color((int64_t)llround(v), maxabs, fill, sizeof(fill));
		fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
			x + k * SW, y, SW, SH, fill);
	}
	end = x + SWATCHES * SW;
	fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"none\" "
		     "stroke=\"rgb(200,200,200)\"/>\n", x, y, SWATCHES * SW, SH);
	/* the scale's ends (and middle) in the data's unit */
	if (signed_scale) {
		fprintf(out, "<text class=\"cl\" x=\"%.0f\" y=\"%.0f\">-%" PRIu64 "</text>\n",
			x, y + SH + 13, maxabs);
		fprintf(out, "<text class=\"cl\" x=\"%.0f\" y=\"%.0f\">0</text>\n",
			x + SWATCHES * SW / 2.0, y + SH + 13);
	} else {
		fprintf(out, "<text class=\"cl\" x=\"%.0f\" y=\"%.0f\">%s</text>\n",
			x, y + SH + 13, maxabs ? "1" : "0");
	}
	fprintf(out, "<text class=\"cl\" x=\"%.0f\" y=\"%.0f\">%s%" PRIu64 "</text>\n",
		end, y + SH + 13, signed_scale ? "+" : "", maxabs);
	x = end + 34;
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">", x, y + SH - 1);
	fp_svg_write_escaped(out, unit);
	fputs(signed_scale ? " per cell: red growth, blue release</text>\n" :
			     " per cell</text>\n", out);
	y += SH + 6;
	if (zero_cells) {
		fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" "
			     "fill=\"rgb(235,235,235)\"/>\n", x, y, SW, SH);
		fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">samples summing to 0</text>\n",
			x + SW + 6, y + SH - 1);
		x += SW + 150;
	}
	fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"rgb(255,255,255)\" "
		     "stroke=\"rgb(200,200,200)\"/>\n", x, y, SW, SH);
	fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">no samples</text>\n</g>\n",
		x + SW + 6, y + SH - 1);
}

/* A label step of a "round" number of seconds at least @min apart. */
static uint64_t
label_step(double cw, double min)
{
	static const uint64_t steps[] = { 1, 2, 5, 10, 15, 30, 60, 120, 300,
					  600, 900, 1800, 3600, 7200, 21600,
					  43200, 86400 };

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if ((double)steps[i] * cw >= min)
			return steps[i];
	}
	return 86400;
}

bool
fp_heatmap_saturated(const struct fp_heatmap *m)
{
	return m->saturated;
}

int
fp_heatmap_write(struct fp_heatmap *m,
		 const struct fp_heatmap_options *o, FILE *out)
{
	uint64_t tmin = m->tmin, tmax = m->tmax, s0, ncols, maxabs = 0, step;
	int64_t *sum = NULL, vmin = 0;
	bool zero_cells = false;
	uint64_t *cnt = NULL;
	struct placed *placed = NULL;
	size_t at = 0, widest = 0;
	double cw, ch;
	unsigned width, height;
	char t0[64], fill[48];
	int rc = 0;

	if (tmin > tmax)
		tmin = tmax = 0;	/* nothing added or covered */
	s0 = tmin / 1000000;
	ncols = tmax / 1000000 - s0 + 1;
	if (ncols * m->rows > MAX_CELLS)
		return -E2BIG;

	m->saturated = false;
	sum = xzalloc(ncols * m->rows * sizeof(*sum));
	cnt = xzalloc(ncols * m->rows * sizeof(*cnt));
	for (size_t i = 0; i < m->count; i++) {
		uint64_t t = m->points[i].time_us;
		uint64_t c = t / 1000000 - s0;
		uint64_t r = (t % 1000000) * m->rows / 1000000;

		if (sat_add_i64(&sum[c * m->rows + r], m->points[i].value))
			m->saturated = true;
		cnt[c * m->rows + r]++;
	}
	for (uint64_t i = 0; i < ncols * m->rows; i++) {
		uint64_t a = sum[i] < 0 ? (uint64_t)0 - (uint64_t)sum[i] :
					  (uint64_t)sum[i];

		if (a > maxabs)
			maxabs = a;
		if (sum[i] < vmin)
			vmin = sum[i];
		zero_cells |= cnt[i] && !sum[i];
	}

	cw = floor(1100.0 / (double)ncols);
	cw = cw < 2 ? 2 : cw > 16 ? 16 : cw;
	ch = floor(400.0 / m->rows);
	ch = ch < 2 ? 2 : ch;
	width = (unsigned)(LEFT + RIGHT + cw * (double)ncols);
	if (width < 600)
		width = 600;
	for (size_t i = 0; i < o->nnotes; i++) {
		if (strlen(o->notes[i]) > widest)
			widest = strlen(o->notes[i]);
	}
	if (LEFT + RIGHT + widest * NOTE_CHAR > width)
		width = (unsigned)(LEFT + RIGHT + widest * NOTE_CHAR);
	height = (unsigned)(TOP + BOTTOM + ch * m->rows);
	if (o->nnotes)
		height += (unsigned)(8 + NOTE_LINE * o->nnotes);
	if (o->nsources > 1)
		placed = place(m, s0);
	fp_svg_format_time(t0, sizeof(t0), (unsigned long long)s0 * 1000000);

	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
	fprintf(out, "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		     "width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
		     "onload=\"init(evt)\" data-t0=\"%" PRIu64 "\" data-rows=\"%u\" "
		     "data-command=\"",
		width, height, width, height, s0, m->rows);
	fp_svg_write_escaped(out, o->command ? o->command : "flame_prof svg");
	fputs("\">\n", out);
	fprintf(out, "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n", style);
	fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n",
		script);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"rgb(255,255,255)\"/>\n",
		width, height);
	fprintf(out, "<text id=\"title\" x=\"%.1f\" y=\"24\">", width / 2.0);
	fp_svg_write_escaped(out, o->title ? o->title : "Heat Map");
	fputs("</text>\n", out);
	fprintf(out, "<text id=\"subtitle\" x=\"%.1f\" y=\"42\">", width / 2.0);
	if (o->subtitle) {
		fp_svg_write_escaped(out, o->subtitle);
		fputs(", ", out);
	}
	fprintf(out, "%" PRIu64 " s from %s, %u rows of %.3g ms, colour: ",
		ncols, t0, m->rows, 1000.0 / m->rows);
	fp_svg_write_escaped(out, o->unit ? o->unit : "samples");
	fputs("</text>\n", out);

	/* axes: offsets within the second down, seconds across */
	fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" "
		     "fill=\"none\" stroke=\"rgb(200,200,200)\"/>\n",
		LEFT, TOP, cw * (double)ncols, ch * m->rows);
	fprintf(out, "<text class=\"rl\" x=\"%d\" y=\"%d\">0 ms</text>\n",
		LEFT - 6, TOP + 9);
	fprintf(out, "<text class=\"rl\" x=\"%d\" y=\"%.0f\">500 ms</text>\n",
		LEFT - 6, TOP + ch * m->rows / 2 + 4);
	fprintf(out, "<text class=\"rl\" x=\"%d\" y=\"%.0f\">1000 ms</text>\n",
		LEFT - 6, TOP + ch * m->rows);
	step = label_step(cw, 48);
	for (uint64_t c = 0; c < ncols; c += step)
		fprintf(out, "<text class=\"cl\" x=\"%.1f\" y=\"%.0f\">+%" PRIu64 "s</text>\n",
			LEFT + cw * ((double)c + 0.5), TOP + ch * m->rows + 16, c);

	fputs("<g id=\"cells\">\n", out);
	for (uint64_t c = 0; c < ncols; c++) {
		for (unsigned r = 0; r < m->rows; r++) {
			uint64_t i = c * m->rows + r;
			unsigned ms0 = r * 1000 / m->rows;
			unsigned ms1 = (r + 1) * 1000 / m->rows;

			if (!cnt[i])
				continue;
			cell_color(sum[i], maxabs, fill, sizeof(fill));
			fprintf(out, "<rect class=\"c\" x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" "
				     "height=\"%.0f\" fill=\"%s\" data-c=\"%" PRIu64
				     "\" data-r=\"%u\" data-v=\"%" PRId64 "\"><title>+%"
				     PRIu64 "s %u-%u ms: %" PRId64 " ",
				LEFT + cw * (double)c, TOP + ch * r, cw, ch, fill, c, r,
				sum[i], c, ms0, ms1, sum[i]);
			fp_svg_write_escaped(out, o->unit ? o->unit : "samples");
			if (o->unit && strcmp(o->unit, "samples") != 0)
				fprintf(out, " in %" PRIu64 " samples", cnt[i]);
			if (placed)
				write_cell_sources(out, placed, m->count, &at, i, o);
			fputs("</title></rect>\n", out);
		}
	}
	fputs("</g>\n", out);
	write_legend(out, TOP + ch * m->rows + 28, vmin, maxabs, zero_cells,
		     o->unit ? o->unit : "samples");
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%.0f\">\xc2\xa0</text>\n",
		LEFT, TOP + ch * m->rows + BOTTOM - 12);
	if (o->nnotes) {
		fputs("<g id=\"notes\">\n", out);
		for (size_t i = 0; i < o->nnotes; i++) {
			fprintf(out, "<text class=\"note\" x=\"%d\" y=\"%.0f\">",
				LEFT, TOP + ch * m->rows + BOTTOM + 8 +
				NOTE_LINE * ((double)i + 1) - 3);
			fp_svg_write_escaped(out, o->notes[i]);
			fputs("</text>\n", out);
		}
		fputs("</g>\n", out);
	}
	fputs("</svg>\n", out);
	free(placed);
	free(sum);
	free(cnt);
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	return rc;
}
