// Line, bar and pie charts as SVG, drawn here so the page needs no library and no network.
// Every chart has an accessible <title> and <desc>, axes with labels (line, bar), a legend for its
// series (or, for a pie, its slices) and a tooltip <title> on every mark. Colours come from CSS
// custom properties (--chart-1 … --chart-8) so themes recolour charts too.

const SVG = "http://www.w3.org/2000/svg";
// Line and bar charts are wide (they span two canvas columns); a pie sits in one column. On a narrow
// canvas (a phone) every chart is drawn for about 360 px, so its text stays readable.
const SIZES = { line: [640, 270], bar: [640, 270], pie: [400, 300] };
const COMPACT_SIZES = { line: [360, 250], bar: [360, 250], pie: [360, 290] };
const PALETTE = 8;
const FALLBACK_COLOURS = ["#4f6bed", "#e0793b", "#2fa58a", "#d4477c", "#8a63d2", "#c9a227", "#3a9bd6", "#7a8a99"];
const CHAR_WIDTH = 6.6; // average width of a 12px system-font glyph, for layout without measuring
let chartCounter = 0;

function svg(name, attributes = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) {
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes (buddy/csp.py).
    if (key === "style") node.style.cssText = String(value);
    else node.setAttribute(key, String(value));
  }
  if (parent) parent.append(node);
  return node;
}

function text(parent, content, attributes) {
  const node = svg("text", attributes, parent);
  node.textContent = content;
  return node;
}

function tooltip(parent, content) {
  const node = svg("title", {}, parent);
  node.textContent = content;
}

function colour(index) {
  const slot = index % PALETTE;
  return `var(--chart-${slot + 1}, ${FALLBACK_COLOURS[slot]})`;
}

function toNumber(value) {
  const number = typeof value === "number" ? value : Number.parseFloat(value);
  return Number.isFinite(number) ? number : null;
}

const numberFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const compactFormat = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

export function formatNumber(value) {
  if (value === null || value === undefined) return "–";
  return Math.abs(value) >= 10000 ? compactFormat.format(value) : numberFormat.format(value);
}

function truncate(label, maxChars) {
  const value = String(label ?? "");
  return value.length > maxChars ? `${value.slice(0, Math.max(1, maxChars - 1))}…` : value;
}

/** Round numbers for an axis from min to max: about `count` ticks at 1, 2 or 5 × 10^n steps. */
export function niceTicks(min, max, count = 5) {
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.5;
    return niceTicks(min - (min < 0 ? pad : 0), max + (max >= 0 ? pad : 0), count);
  }
  const rough = (max - min) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((candidate) => candidate >= rough) ?? rough;
  const start = Math.floor(min / step) * step;
  const end = Math.ceil(max / step) * step;
  const ticks = [];
  for (let value = start; value <= end + step / 2; value += step) ticks.push(Number(value.toPrecision(12)));
  return ticks;
}

function normalise(spec) {
  const labels = Array.isArray(spec.labels) ? spec.labels.map((label) => String(label ?? "")) : [];
  const series = (Array.isArray(spec.series) ? spec.series : [])
    .filter((item) => item && typeof item === "object")
    .map((item, index) => ({
      name: String(item.name ?? `Series ${index + 1}`),
      values: (Array.isArray(item.values) ? item.values : []).map(toNumber),
    }));
  const length = Math.max(labels.length, ...series.map((item) => item.values.length), 0);
  while (labels.length < length) labels.push(String(labels.length + 1));
  return { labels, series };
}

/** Lays the legend out in rows across the top; returns the height it takes. */
function drawLegend(root, entries, top, width) {
  if (entries.length === 0) return 0;
  const legend = svg("g", { class: "chart-legend" }, root);
  const rowHeight = 20;
  let x = 16;
  let y = top;
  for (const entry of entries) {
    const label = truncate(entry.label, 28);
    const itemWidth = 18 + label.length * CHAR_WIDTH + 18;
    if (x + itemWidth > width - 16 && x > 16) {
      x = 16;
      y += rowHeight;
    }
    const item = svg("g", { class: "chart-legend-item" }, legend);
    svg("rect", { x, y: y - 9, width: 12, height: 12, rx: 3, style: `fill: ${entry.colour}` }, item);
    const node = text(item, label, { x: x + 18, y: y + 1, class: "chart-legend-label", "dominant-baseline": "middle" });
    if (label !== entry.label) node.setAttribute("aria-label", entry.label);
    x += itemWidth;
  }
  return y - top + rowHeight + 4;
}

function drawCartesian(root, kind, labels, series, top, [width, height]) {
  const values = series.flatMap((item) => item.values).filter((value) => value !== null);
  const dataMin = values.length ? Math.min(...values) : 0;
  const dataMax = values.length ? Math.max(...values) : 1;
  // Bars grow from zero; a line may float, but zero keeps small changes from looking dramatic.
  const ticks = niceTicks(Math.min(0, dataMin), Math.max(0, dataMax));
  const low = ticks[0];
  const high = ticks[ticks.length - 1];
  const tickWidth = Math.max(...ticks.map((tick) => formatNumber(tick).length)) * CHAR_WIDTH;

  const left = 16 + tickWidth + 8;
  const right = width - 20;
  const bottom = height - 34;
  const plotTop = top + 8;
  const plotHeight = bottom - plotTop;
  const plotWidth = right - left;
  const y = (value) => bottom - ((value - low) / (high - low || 1)) * plotHeight;

  const grid = svg("g", { class: "chart-grid" }, root);
  const axis = svg("g", { class: "chart-axis" }, root);
  for (const tick of ticks) {
    svg("line", { x1: left, x2: right, y1: y(tick), y2: y(tick), class: tick === 0 ? "chart-zero" : "" }, grid);
    text(axis, formatNumber(tick), {
      x: left - 8,
      y: y(tick),
      "text-anchor": "end",
      "dominant-baseline": "middle",
      class: "chart-tick",
    });
  }
  svg("line", { x1: left, x2: left, y1: plotTop, y2: bottom, class: "chart-axis-line" }, axis);
  svg("line", { x1: left, x2: right, y1: bottom, y2: bottom, class: "chart-axis-line" }, axis);

  const count = Math.max(labels.length, 1);
  const band = plotWidth / count;
  const centre = (index) => left + band * index + band / 2;
  // Show every label when they fit, else every n-th, so they never overlap.
  const maxLabelChars = Math.max(3, Math.floor(band / CHAR_WIDTH) - 1);
  const every = Math.max(1, Math.ceil((Math.min(12, Math.max(...labels.map((l) => l.length), 1)) * CHAR_WIDTH) / band));
  labels.forEach((label, index) => {
    if (index % every !== 0) return;
    const shown = truncate(label, Math.max(maxLabelChars * every, 4));
    const node = text(axis, shown, { x: centre(index), y: bottom + 18, "text-anchor": "middle", class: "chart-tick" });
    if (shown !== label) node.setAttribute("aria-label", label);
  });

  const marks = svg("g", { class: `chart-marks chart-${kind}` }, root);
  if (kind === "bar") {
    const groupWidth = band * 0.74;
    const barWidth = groupWidth / Math.max(series.length, 1);
    const zero = y(Math.max(low, Math.min(0, high)));
    series.forEach((item, seriesIndex) => {
      const group = svg("g", { class: `chart-series series-${seriesIndex % PALETTE}` }, marks);
      item.values.forEach((value, index) => {
        if (value === null || index >= count) return;
        const x = centre(index) - groupWidth / 2 + barWidth * seriesIndex;
        const top = Math.min(y(value), zero);
        const height = Math.max(Math.abs(zero - y(value)), value === 0 ? 0 : 1);
        const bar = svg(
          "rect",
          { x: x + 1, y: top, width: Math.max(barWidth - 2, 1), height, rx: 2, style: `fill: ${colour(seriesIndex)}` },
          group,
        );
        tooltip(bar, `${item.name} · ${labels[index]}: ${formatNumber(value)}`);
      });
    });
  } else {
    series.forEach((item, seriesIndex) => {
      const group = svg("g", { class: `chart-series series-${seriesIndex % PALETTE}` }, marks);
      // A gap (a missing value) breaks the line rather than inventing a point.
      const segments = [];
      let current = [];
      item.values.forEach((value, index) => {
        if (value === null || index >= count) {
          if (current.length) segments.push(current);
          current = [];
        } else current.push([centre(index), y(value)]);
      });
      if (current.length) segments.push(current);
      for (const segment of segments) {
        svg(
          "polyline",
          {
            points: segment.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" "),
            fill: "none",
            "stroke-width": 2.5,
            "stroke-linejoin": "round",
            "stroke-linecap": "round",
            style: `stroke: ${colour(seriesIndex)}`,
          },
          group,
        );
      }
      item.values.forEach((value, index) => {
        if (value === null || index >= count) return;
        const point = svg(
          "circle",
          { cx: centre(index), cy: y(value), r: 3.5, class: "chart-point", style: `fill: ${colour(seriesIndex)}` },
          group,
        );
        tooltip(point, `${item.name} · ${labels[index]}: ${formatNumber(value)}`);
      });
    });
  }
}

function arcPath(cx, cy, outer, inner, start, end) {
  const point = (radius, angle) => [cx + radius * Math.sin(angle), cy - radius * Math.cos(angle)];
  const large = end - start > Math.PI ? 1 : 0;
  const [x1, y1] = point(outer, start);
  const [x2, y2] = point(outer, end);
  const [x3, y3] = point(inner, end);
  const [x4, y4] = point(inner, start);
  return [
    `M ${x1} ${y1}`,
    `A ${outer} ${outer} 0 ${large} 1 ${x2} ${y2}`,
    `L ${x3} ${y3}`,
    `A ${inner} ${inner} 0 ${large} 0 ${x4} ${y4}`,
    "Z",
  ].join(" ");
}

function drawPie(root, labels, values, top, [width, height]) {
  const slices = labels
    .map((label, index) => ({ label, value: values[index], index }))
    .filter((slice) => slice.value !== null && slice.value > 0);
  const total = slices.reduce((sum, slice) => sum + slice.value, 0);
  const cx = width / 2;
  const cy = top + (height - top) / 2;
  const outer = Math.max(Math.min((height - top) / 2 - 8, 150), 40);
  const inner = outer * 0.56;
  const marks = svg("g", { class: "chart-marks chart-pie" }, root);
  if (total <= 0) {
    svg("circle", { cx, cy, r: outer, class: "chart-empty-ring" }, marks);
    text(marks, "No data", { x: cx, y: cy, "text-anchor": "middle", "dominant-baseline": "middle", class: "chart-tick" });
    return;
  }
  let angle = 0;
  for (const slice of slices) {
    const sweep = (slice.value / total) * Math.PI * 2;
    // A full circle cannot be one arc: draw a single 100 % slice as two halves.
    const end = sweep >= Math.PI * 2 - 1e-9 ? angle + Math.PI * 2 - 1e-4 : angle + sweep;
    const path = svg(
      "path",
      { d: arcPath(cx, cy, outer, inner, angle, end), class: `chart-slice series-${slice.index % PALETTE}`, style: `fill: ${colour(slice.index)}` },
      marks,
    );
    const share = (slice.value / total) * 100;
    tooltip(path, `${slice.label}: ${formatNumber(slice.value)} (${share.toFixed(share < 10 ? 1 : 0)} %)`);
    if (share >= 6) {
      const middle = angle + sweep / 2;
      const radius = (outer + inner) / 2;
      text(marks, `${Math.round(share)}%`, {
        x: cx + radius * Math.sin(middle),
        y: cy - radius * Math.cos(middle),
        "text-anchor": "middle",
        "dominant-baseline": "middle",
        class: "chart-slice-label",
      });
    }
    angle += sweep;
  }
  text(marks, formatNumber(total), { x: cx, y: cy - 6, "text-anchor": "middle", class: "chart-total" });
  text(marks, "total", { x: cx, y: cy + 14, "text-anchor": "middle", class: "chart-tick" });
}

function describe(kind, labels, series) {
  if (kind === "pie") {
    const values = series[0]?.values ?? [];
    return `Pie chart of ${labels.length} parts: ${labels.map((label, i) => `${label} ${formatNumber(values[i])}`).join(", ")}.`;
  }
  const names = series.map((item) => item.name).join(", ");
  return `${kind === "bar" ? "Bar" : "Line"} chart of ${series.length} series (${names}) over ${labels.length} labels: ${labels.join(", ")}.`;
}

/**
 * An <svg> for a chart element: `{title, chart_type: "line"|"bar"|"pie", labels, series: [{name, values}]}`.
 * Unknown chart types draw as a line chart; bad values are skipped, never thrown on.
 * `compact: true` draws it for a narrow space.
 */
export function renderChart(spec, { compact = false } = {}) {
  const kind = ["line", "bar", "pie"].includes(spec?.chart_type) ? spec.chart_type : "line";
  const { labels, series } = normalise(spec || {});
  chartCounter += 1;
  const id = `chart-${chartCounter}`;
  const size = (compact ? COMPACT_SIZES : SIZES)[kind];
  const root = svg("svg", {
    viewBox: `0 0 ${size[0]} ${size[1]}`,
    role: "img",
    class: `chart chart-type-${kind}`,
    "aria-labelledby": `${id}-title ${id}-desc`,
    preserveAspectRatio: "xMidYMid meet",
  });
  const title = svg("title", { id: `${id}-title` }, root);
  title.textContent = String(spec?.title ?? "Chart");
  const desc = svg("desc", { id: `${id}-desc` }, root);
  desc.textContent = describe(kind, labels, series);

  const legendEntries =
    kind === "pie"
      ? labels.map((label, index) => ({ label, colour: colour(index) }))
      : series.map((item, index) => ({ label: item.name, colour: colour(index) }));
  const legendHeight = drawLegend(root, legendEntries, 18, size[0]);
  const top = 12 + legendHeight;
  if (kind === "pie") drawPie(root, labels, series[0]?.values ?? [], top, size);
  else drawCartesian(root, kind, labels, series, top, size);
  return root;
}
