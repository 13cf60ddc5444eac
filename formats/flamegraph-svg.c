/*
 * flame_profd — SVG flame graph writer.
 *
 * The layout follows flamegraph.pl's conventions (root "all" at the
 * bottom, children in name order, one 16 px row per depth, frames under
 * --minwidth left out) so that users of Brendan Gregg's and Flamescope's
 * graphs read it without a legend. The script is our own: frames carry
 * their offset and value in data units (data-o, data-v), so zooming
 * rescales exactly instead of re-dividing rounded pixel positions.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util-hash.h"
#include "fp/flamegraph-svg.h"
#include "svg-util.h"
#include "util-mem.h"

#define FRAME_H 16
#define FONT_SIZE 12
/* average glyph width of Verdana at 12 px, as flamegraph.pl assumes */
#define CHAR_W 7.08
#define XPAD 10
#define YPAD_TOP 56
#define YPAD_BOTTOM 36

static const char script[] =
"\"use strict\";\n"
"var svg, frames = [], details, matched, unzoomBtn, searchBtn, W, XPAD, CW, TOTAL;\n"
"var zoomed = null, searching = null;\n"
"function nameOf(g) {\n"
"\tvar t = g.querySelector(\"title\").textContent;\n"
"\tvar i = t.lastIndexOf(\" (\");\n"
"\treturn i > 0 ? t.substring(0, i) : t;\n"
"}\n"
"function init(evt) {\n"
"\tsvg = document.documentElement;\n"
"\tW = +svg.getAttribute(\"data-width\");\n"
"\tXPAD = +svg.getAttribute(\"data-xpad\");\n"
"\tCW = +svg.getAttribute(\"data-cw\");\n"
"\tTOTAL = +svg.getAttribute(\"data-total\");\n"
"\tdetails = document.getElementById(\"details\").firstChild;\n"
"\tmatched = document.getElementById(\"matched\");\n"
"\tunzoomBtn = document.getElementById(\"unzoom\");\n"
"\tsearchBtn = document.getElementById(\"search\");\n"
"\tvar gs = document.querySelectorAll(\"g.f\");\n"
"\tfor (var i = 0; i < gs.length; i++) {\n"
"\t\tvar g = gs[i];\n"
"\t\tg.fpO = +g.getAttribute(\"data-o\");\n"
"\t\tg.fpV = +g.getAttribute(\"data-v\");\n"
"\t\tg.fpD = +g.getAttribute(\"data-d\");\n"
"\t\tg.fpName = nameOf(g);\n"
"\t\tg.fpFill = g.querySelector(\"rect\").getAttribute(\"fill\");\n"
"\t\tframes.push(g);\n"
"\t}\n"
"\tsvg.addEventListener(\"mouseover\", function (e) {\n"
"\t\tvar g = e.target.closest ? e.target.closest(\"g.f\") : null;\n"
"\t\tif (g) details.nodeValue = g.querySelector(\"title\").textContent;\n"
"\t});\n"
"\tsvg.addEventListener(\"mouseout\", function (e) {\n"
"\t\tvar g = e.target.closest ? e.target.closest(\"g.f\") : null;\n"
"\t\tif (g) details.nodeValue = \"\\u00a0\";\n"
"\t});\n"
"\tsvg.addEventListener(\"click\", function (e) {\n"
"\t\tvar g = e.target.closest ? e.target.closest(\"g.f\") : null;\n"
"\t\tif (g) { zoom(g); e.preventDefault(); }\n"
"\t});\n"
"\tunzoomBtn.addEventListener(\"click\", function () { unzoom(); });\n"
"\tsearchBtn.addEventListener(\"click\", function () { searchPrompt(); });\n"
"\twindow.addEventListener(\"keydown\", function (e) {\n"
"\t\tif ((e.ctrlKey && e.key === \"f\") || e.key === \"/\") {\n"
"\t\t\te.preventDefault();\n"
"\t\t\tsearchPrompt();\n"
"\t\t} else if (e.key === \"Escape\") {\n"
"\t\t\tunzoom();\n"
"\t\t\tresetSearch();\n"
"\t\t}\n"
"\t});\n"
"\tvar params = new URLSearchParams(document.location.search);\n"
"\tif (params.get(\"s\")) search(params.get(\"s\"));\n"
"}\n"
"function label(g, w) {\n"
"\tvar t = g.querySelector(\"text\"), name = g.fpName;\n"
"\tvar n = Math.floor((w - 6) / CW);\n"
"\tif (n < 3) t.textContent = \"\";\n"
"\telse if (name.length <= n) t.textContent = name;\n"
"\telse t.textContent = \"..\" + name.substring(name.length - (n - 2));\n"
"}\n"
"function place(g, x, w) {\n"
"\tvar r = g.querySelector(\"rect\"), t = g.querySelector(\"text\");\n"
"\tr.setAttribute(\"x\", x.toFixed(2));\n"
"\tr.setAttribute(\"width\", w.toFixed(2));\n"
"\tt.setAttribute(\"x\", (x + 3).toFixed(2));\n"
"\tlabel(g, w);\n"
"}\n"
"function zoom(z) {\n"
"\tvar o = z.fpO, v = z.fpV, d = z.fpD, span = W - 2 * XPAD;\n"
"\tzoomed = z;\n"
"\tunzoomBtn.classList.remove(\"hide\");\n"
"\tfor (var i = 0; i < frames.length; i++) {\n"
"\t\tvar g = frames[i];\n"
"\t\tif (g.fpD < d && g.fpO <= o && g.fpO + g.fpV >= o + v) {\n"
"\t\t\tg.classList.remove(\"hide\");\n"
"\t\t\tg.classList.add(\"parent\");\n"
"\t\t\tplace(g, XPAD, span);\n"
"\t\t} else if (g.fpD >= d && g.fpO >= o && g.fpO + g.fpV <= o + v) {\n"
"\t\t\tg.classList.remove(\"hide\");\n"
"\t\t\tg.classList.remove(\"parent\");\n"
"\t\t\tplace(g, XPAD + (g.fpO - o) * span / v, g.fpV * span / v);\n"
"\t\t} else {\n"
"\t\t\tg.classList.add(\"hide\");\n"
"\t\t}\n"
"\t}\n"
"\tif (searching !== null) search(searching);\n"
"}\n"
"function unzoom() {\n"
"\tvar span = W - 2 * XPAD;\n"
"\tzoomed = null;\n"
"\tunzoomBtn.classList.add(\"hide\");\n"
"\tfor (var i = 0; i < frames.length; i++) {\n"
"\t\tvar g = frames[i];\n"
"\t\tg.classList.remove(\"hide\");\n"
"\t\tg.classList.remove(\"parent\");\n"
"\t\tplace(g, XPAD + g.fpO * span / TOTAL, g.fpV * span / TOTAL);\n"
"\t}\n"
"\tif (searching !== null) search(searching);\n"
"}\n"
"function searchPrompt() {\n"
"\tif (searching !== null) { resetSearch(); return; }\n"
"\tvar term = window.prompt(\"Search for (regular expression):\", \"\");\n"
"\tif (term) search(term);\n"
"}\n"
"function resetSearch() {\n"
"\tsearching = null;\n"
"\tfor (var i = 0; i < frames.length; i++) {\n"
"\t\tframes[i].classList.remove(\"match\");\n"
"\t\tframes[i].querySelector(\"rect\").setAttribute(\"fill\", frames[i].fpFill);\n"
"\t}\n"
"\tmatched.classList.add(\"hide\");\n"
"\tsearchBtn.firstChild.nodeValue = \"Search\";\n"
"}\n"
"function search(term) {\n"
"\tvar re;\n"
"\ttry { re = new RegExp(term); } catch (e) { return -1; }\n"
"\tsearching = term;\n"
"\tvar ranges = [];\n"
"\tfor (var i = 0; i < frames.length; i++) {\n"
"\t\tvar g = frames[i], r = g.querySelector(\"rect\");\n"
"\t\tif (re.test(g.fpName)) {\n"
"\t\t\tg.classList.add(\"match\");\n"
"\t\t\tr.setAttribute(\"fill\", \"rgb(230,0,230)\");\n"
"\t\t\tranges.push([g.fpO, g.fpO + g.fpV]);\n"
"\t\t} else {\n"
"\t\t\tg.classList.remove(\"match\");\n"
"\t\t\tr.setAttribute(\"fill\", g.fpFill);\n"
"\t\t}\n"
"\t}\n"
"\t/* nested matches (recursion) count once */\n"
"\tranges.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });\n"
"\tvar sum = 0, end = -1;\n"
"\tfor (var k = 0; k < ranges.length; k++) {\n"
"\t\tif (ranges[k][0] >= end) { sum += ranges[k][1] - ranges[k][0]; end = ranges[k][1]; }\n"
"\t\telse if (ranges[k][1] > end) { sum += ranges[k][1] - end; end = ranges[k][1]; }\n"
"\t}\n"
"\tvar pct = TOTAL > 0 ? 100 * sum / TOTAL : 0;\n"
"\tmatched.firstChild.nodeValue = \"Matched: \" + pct.toFixed(2) + \"%\";\n"
"\tmatched.classList.remove(\"hide\");\n"
"\tsearchBtn.firstChild.nodeValue = \"Reset Search\";\n"
"\treturn pct;\n"
"}\n";

static const char style[] =
"text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
"#title { text-anchor: middle; font-size: 17px; }\n"
"#subtitle { text-anchor: middle; fill: rgb(100,100,100); }\n"
"#unzoom, #search { cursor: pointer; }\n"
"#matched { text-anchor: end; }\n"
"g.f { cursor: pointer; }\n"
"g.f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }\n"
"g.f text { pointer-events: none; }\n"
".hide { display: none; }\n"
".parent { opacity: 0.5; }\n";

static uint64_t
name_hash(const char *s)
{
	return fnv1a_str(FNV1A_BASIS, s);
}

static void
frame_color(const struct fp_flame_node *n, char *dst, size_t size)
{
	uint64_t h = name_hash(n->name);
	double v1 = (double)(h & 0xff) / 255.0;
	double v2 = (double)((h >> 8) & 0xff) / 255.0;
	double v3 = (double)((h >> 16) & 0xff) / 255.0;

	if (n->depth == 0) {
		snprintf(dst, size, "rgb(200,200,200)");
	} else if (n->kind == FP_FLAME_GROUP) {
		/* status, sign, process: cool colours, apart from code */
		snprintf(dst, size, "rgb(%d,%d,%d)", 120 + (int)(40 * v1),
			 170 + (int)(40 * v2), 220 + (int)(30 * v3));
	} else {
		/* flamegraph.pl's "hot" palette, stable per name */
		snprintf(dst, size, "rgb(%d,%d,%d)", 205 + (int)(50 * v3),
			 (int)(230 * v1), (int)(55 * v2));
	}
}

static void
diff_color(double delta, double max, char *dst, size_t size)
{
	double t = max > 0 ? fabs(delta) / max : 0.0;
	int fade = 255 - (int)lround(200 * (t > 1 ? 1 : t));

	if (delta > 0)
		snprintf(dst, size, "rgb(255,%d,%d)", fade, fade);
	else if (delta < 0)
		snprintf(dst, size, "rgb(%d,%d,255)", fade, fade);
	else
		snprintf(dst, size, "rgb(255,255,255)");
}

static uint64_t
value_of(const struct fp_flame_node *n, int set, bool weighted)
{
	return weighted ? n->weight[set] : n->samples[set];
}

static double
pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/*
 * A name too long for its frame loses its start, not its end: the end
 * is the function and arity (..Client.loop/1), where the start is a
 * module prefix many frames share ('Elixir.MyApp...).
 */
static void
write_label(FILE *out, const char *name, double w)
{
	long n = lround(floor((w - 6) / CHAR_W));
	size_t len = strlen(name), from;

	if (n < 3)
		return;
	if (len <= (size_t)n) {
		fp_svg_write_escaped(out, name);
		return;
	}
	/* cut at a UTF-8 character boundary, as the script's substring
	 * does at a UTF-16 one; near enough for a label */
	from = len - ((size_t)n - 2);
	while (from < len && ((unsigned char)name[from] & 0xc0) == 0x80)
		from++;
	fputs("..", out);
	fp_svg_write_escaped(out, name + from);
}

static void
write_title(FILE *out, const struct fp_flame_node *n,
	    const struct fp_flame_node *root,
	    const struct fp_flamegraph_options *o)
{
	int set = o->diff ? 1 : 0;
	uint64_t v = value_of(n, set, o->weighted);
	uint64_t total = value_of(root, set, o->weighted);

	fp_svg_write_escaped(out, n->depth ? n->name : "all");
	fputs(" (", out);
	if (o->weighted) {
		fprintf(out, "%" PRIu64 " ", v);
		fp_svg_write_escaped(out, o->unit ? o->unit : "weight");
		fprintf(out, ", %.2f%%, %" PRIu64 " samples", pct(v, total),
			n->samples[set]);
	} else {
		fprintf(out, "%" PRIu64 " samples, %.2f%%", v, pct(v, total));
	}
	if (o->diff) {
		double before = pct(value_of(n, 0, o->weighted),
				    value_of(root, 0, o->weighted));

		fprintf(out, "; before %.2f%%, change %+.2f points", before,
			pct(v, total) - before);
	}
	fputs(")", out);
}

static double
max_diff(const struct fp_flame_tree *tree, bool weighted)
{
	const struct fp_flame_node *root = fp_flame_tree_root(tree);
	const struct fp_flame_node *n;
	struct fp_flame_walk walk;
	double max = 0.0;

	fp_flame_walk_start(&walk, root);
	while ((n = fp_flame_walk_next(&walk, true))) {
		double d = fabs(pct(value_of(n, 1, weighted), value_of(root, 1, weighted)) -
				pct(value_of(n, 0, weighted), value_of(root, 0, weighted)));

		if (d > max)
			max = d;
	}
	return max;
}

/*
 * The key of a differential graph, under the subtitle: widths are
 * AFTER's, colours the change of a frame's share from BEFORE, from
 * blue (shrank by the most) through white (no change) to red (grew by
 * the most).
 */
static void
write_diff_key(FILE *out, unsigned width, double maxd)
{
	enum { SWATCHES = 9, SW = 16, SH = 10 };
	double x = width / 2.0 - SWATCHES * SW / 2.0, y = 50;
	char fill[48];

	fprintf(out, "<g id=\"key\">\n<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"end\">"
		     "width: AFTER; colour: change of share since BEFORE, -%.2f</text>\n",
		x - 6, y + SH - 1, maxd);
	for (int k = 0; k < SWATCHES; k++) {
		diff_color(maxd * (2.0 * k / (SWATCHES - 1) - 1), maxd, fill, sizeof(fill));
		fprintf(out, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%d\" height=\"%d\" "
			     "fill=\"%s\" stroke=\"rgb(200,200,200)\"/>\n",
			x + k * SW, y, SW, SH, fill);
	}
	fprintf(out, "<text x=\"%.2f\" y=\"%.0f\">+%.2f percentage points "
		     "(blue shrank, red grew)</text>\n</g>\n",
		x + SWATCHES * SW + 6, y + SH - 1, maxd);
}

int
fp_flamegraph_svg_write(const struct fp_flame_tree *tree,
			const struct fp_flamegraph_options *o, FILE *out)
{
	const struct fp_flame_node *root = fp_flame_tree_root(tree);
	const struct fp_flame_node *n;
	struct fp_flame_walk walk;
	int set = o->diff ? 1 : 0;
	unsigned width = o->width ? o->width : 1200;
	double minwidth = o->minwidth < 0 ? 0.1 : o->minwidth;
	uint64_t total = value_of(root, set, o->weighted);
	uint32_t depth = fp_flame_tree_depth(tree);
	unsigned top = YPAD_TOP + (o->diff ? 20 : 0);	/* diff: its key */
	unsigned height = (depth + 1) * FRAME_H + top + YPAD_BOTTOM;
	double span = (double)width - 2 * XPAD;
	double scale = total ? span / (double)total : 0.0;
	double maxd = o->diff ? max_diff(tree, o->weighted) : 0.0;
	uint64_t *cursor;
	int rc = 0;

	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
	fprintf(out, "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		     "width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
		     "onload=\"init(evt)\" data-width=\"%u\" data-xpad=\"%d\" "
		     "data-cw=\"%.2f\" data-total=\"%" PRIu64 "\">\n",
		width, height, width, height, width, XPAD, CHAR_W, total);
	fprintf(out, "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n", style);
	fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n",
		script);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" "
		     "fill=\"rgb(248,248,248)\"/>\n", width, height);
	fprintf(out, "<text id=\"title\" x=\"%.2f\" y=\"24\">", width / 2.0);
	fp_svg_write_escaped(out, o->title ? o->title : "Flame Graph");
	fputs("</text>\n", out);
	if (o->subtitle) {
		fprintf(out, "<text id=\"subtitle\" x=\"%.2f\" y=\"42\">",
			width / 2.0);
		fp_svg_write_escaped(out, o->subtitle);
		fputs("</text>\n", out);
	}
	if (o->diff)
		write_diff_key(out, width, maxd);
	fprintf(out, "<text id=\"unzoom\" class=\"hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n",
		XPAD);
	fprintf(out, "<text id=\"search\" x=\"%u\" y=\"24\" text-anchor=\"end\">Search</text>\n",
		width - XPAD);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%u\">\xc2\xa0</text>\n",
		XPAD, height - 12);
	fprintf(out, "<text id=\"matched\" class=\"hide\" x=\"%u\" y=\"%u\">\xc2\xa0</text>\n",
		width - XPAD, height - 12);
	fputs("<g id=\"frames\">\n", out);

	cursor = xzalloc((depth + 2) * sizeof(*cursor));
	n = total ? fp_flame_walk_start(&walk, root) : NULL;
	while (n) {
		uint64_t v = value_of(n, set, o->weighted);
		uint64_t off = cursor[n->depth];
		double x = XPAD + (double)off * scale, w = (double)v * scale;
		bool shown = v > 0 && w >= minwidth;
		double y = o->inverted ?
			top + (double)n->depth * FRAME_H :
			(double)height - YPAD_BOTTOM - (double)(n->depth + 1) * FRAME_H;
		char fill[48];

		cursor[n->depth] += v;
		if (shown) {
			if (o->diff)
				diff_color(pct(v, total) -
					   pct(value_of(n, 0, o->weighted),
					       value_of(root, 0, o->weighted)),
					   maxd, fill, sizeof(fill));
			else
				frame_color(n, fill, sizeof(fill));
			fprintf(out, "<g class=\"f\" data-o=\"%" PRIu64 "\" data-v=\"%" PRIu64
				     "\" data-d=\"%" PRIu32 "\"><title>", off, v, n->depth);
			write_title(out, n, root, o);
			fprintf(out, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
				     "height=\"%d\" rx=\"2\" ry=\"2\" fill=\"%s\"/>"
				     "<text x=\"%.2f\" y=\"%.1f\">",
				x, y, w, FRAME_H - 1, fill, x + 3, y + 11.5);
			write_label(out, n->depth ? n->name : "all", w);
			fputs("</text></g>\n", out);
		}

		/* a frame too narrow to show hides its children */
		if (shown && n->child)
			cursor[n->depth + 1] = off;
		n = fp_flame_walk_next(&walk, shown);
	}
	free(cursor);
	fputs("</g>\n</svg>\n", out);
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	return rc;
}
