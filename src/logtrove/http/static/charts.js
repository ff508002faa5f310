// logtrove web console: the charts (uPlot, vendored under vendor/uplot/). Loaded before
// console.js and only defines functions: the helpers they call ($, el, api, fmt…,
// navigate) are console.js's, there by the time a view draws a chart.
"use strict";

// -- topic histogram ------------------------------------------------------------------------
// Records per time bucket (GET /topics/{t}/histogram, counted by the records' own timestamps) drawn
// with uPlot as bars. A click on a bar opens the time-range search for that bucket; a drag
// across bars zooms in (the range goes into the URL, so a zoomed view can be shared).
let histogramChart = null;
let histogramGeneration = 0;

function topicUrl(name, params) {
  const query = params.toString();
  return `/ui/topics/${encodeURIComponent(name)}` + (query ? "?" + query : "");
}

function rangeSearchUrl(topic, startMs, endMs) {
  return `/ui/search?topic=${encodeURIComponent(topic)}&by=range&from=${startMs}&to=${endMs}`;
}

async function drawHistogram(name, params) {
  const generation = ++histogramGeneration;
  const status = $("#hist-status");
  const bucket = params.get("bucket") || "auto";
  $("#hist-bucket").value = bucket;
  $("#hist-bucket").onchange = (event) => {
    const next = new URLSearchParams(location.search);
    next.set("bucket", event.target.value);
    navigate(topicUrl(name, next));
  };
  const zoomed = params.has("from") || params.has("to");
  const whole = new URLSearchParams(params);
  whole.delete("from");
  whole.delete("to");
  $("#hist-whole").hidden = !zoomed;
  $("#hist-whole").setAttribute("href", topicUrl(name, whole));
  setStatus("Counting…", "busy", status);
  let h;
  try {
    h = await api(`/topics/${encodeURIComponent(name)}/histogram`, {
      from: params.get("from"), to: params.get("to"), bucket, max_buckets: 240,
    });
  } catch (err) {
    if (generation === histogramGeneration) setStatus(err.message, "error", status);
    return;
  }
  if (generation !== histogramGeneration) return;
  const box = $("#histogram");
  box.dataset.topic = name;
  box.dataset.records = h.records;
  box.dataset.bucketMs = h.bucket_ms;
  if (histogramChart) histogramChart.destroy();
  histogramChart = null;
  $("#histogram-table tbody").replaceChildren(
    ...h.buckets.map((b) =>
      el(
        "tr",
        { "data-start": b.start_ms, "data-end": b.end_ms, "data-records": b.records },
        el("td", {}, link(rangeSearchUrl(name, b.start_ms, b.end_ms), fmtTime(b.start_ms))),
        el("td", { text: fmtTime(b.end_ms) }),
        el("td", { text: fmtNum(b.records) }),
      ),
    ),
  );
  if (!h.buckets.length) {
    box.replaceChildren();
    $("#hist-range").textContent = "";
    setStatus("No records.", "empty", status);
    return;
  }
  $("#hist-range").textContent = `${fmtTime(h.from_ms)} – ${fmtTime(h.to_ms)} · one bar per ${h.bucket}`;
  setStatus(
    `${fmtNum(h.records)} records in ${h.buckets.length} buckets · counted by their timestamps in ${h.elapsed_ms} ms · click a bar to search it, drag to zoom`,
    "ok",
    status,
  );
  histogramChart = barChart(box, h, {
    onBar: (b) => navigate(rangeSearchUrl(name, b.start_ms, b.end_ms)),
    onZoom: (fromMs, toMs) => {
      const next = new URLSearchParams(location.search);
      next.set("from", fromMs);
      next.set("to", toMs);
      if (next.get("bucket") !== "auto") next.delete("bucket");
      navigate(topicUrl(name, next));
    },
  });
}

// A uPlot bar chart of histogram buckets: x = aligned bucket start (ms), y = records.
function barChart(box, h, { onBar, onZoom, height = 240 }) {
  const css = getComputedStyle(document.documentElement);
  const accent = css.getPropertyValue("--accent").trim() || "#0f6e6e";
  const muted = css.getPropertyValue("--muted").trim() || "#6b7280";
  const line = css.getPropertyValue("--line").trim() || "#e3e4e8";
  const width = h.bucket_ms;
  const xs = h.buckets.map((b) => Math.floor(b.start_ms / width) * width);
  const ys = h.buckets.map((b) => b.records);
  const axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
  const chart = new uPlot(
    {
      width: Math.max(box.clientWidth, 320),
      height,
      ms: 1,
      tzDate: (ms) => uPlot.tzDate(new Date(ms), "Etc/UTC"), // axis labels in UTC, as the rest of the console
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: false }, points: { show: false } },
      select: { show: true },
      hooks: {
        setSelect: [
          (u) => {
            const sel = u.select;
            if (sel.width < 4) return;
            const fromMs = Math.max(Math.floor(u.posToVal(sel.left, "x")), h.from_ms);
            const toMs = Math.min(Math.ceil(u.posToVal(sel.left + sel.width, "x")), h.to_ms);
            u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
            if (toMs > fromMs) onZoom(fromMs, toMs);
          },
        ],
      },
      scales: { x: { time: true, range: (u, min, max) => [min, max + width] }, y: { range: (u, min, max) => [0, Math.max(max, 1) * 1.05] } },
      axes: [axis, { ...axis, size: 60, values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? fmtNum(v) : "")) }],
      series: [
        {},
        {
          label: "records",
          stroke: accent,
          fill: accent + "99",
          width: 1,
          paths: uPlot.paths.bars({ size: [0.9, Infinity, 1], align: 1 }),
          points: { show: false },
        },
      ],
    },
    [xs, ys],
    box,
  );
  let downX = null;
  chart.over.addEventListener("mousedown", (event) => (downX = event.clientX));
  chart.over.addEventListener("click", (event) => {
    if (downX === null || Math.abs(event.clientX - downX) > 3) return;
    const x = chart.posToVal(event.offsetX, "x");
    const i = xs.findIndex((start, k) => x >= start && x < (k + 1 < xs.length ? xs[k + 1] : start + width));
    if (i >= 0) onBar(h.buckets[i]);
  });
  box.chart = chart;
  box.bucketStarts = xs;
  return chart;
}

// -- search histogram ------------------------------------------------------------------------
// Above the results: for a time-range search, the exact count per bucket of the whole range
// (the topic histogram of [from, to): a range search matches every record in it); for the
// other searches with a time filter, the results loaded so far binned by time. A click on
// a bar narrows the search to that bar's range.
let searchChart = null;
let searchHistGeneration = 0;
const WIDTHS = [1e3, 1e4, 6e4, 3e5, 9e5, 36e5, 108e5, 216e5, 432e5, 864e5, 6048e5, 2592e6];

function clearSearchHistogram() {
  searchHistGeneration++;
  if (searchChart) searchChart.destroy();
  searchChart = null;
  $("#search-hist-box").hidden = true;
  $("#search-histogram-table tbody").replaceChildren();
}

function binned(timestamps, maxBuckets = 60) {
  const lo = Math.min(...timestamps);
  const hi = Math.max(...timestamps) + 1;
  const width = WIDTHS.find((w) => Math.ceil(hi / w) - Math.floor(lo / w) <= maxBuckets) || 864e5 * Math.ceil((hi - lo) / 864e5 / maxBuckets + 1);
  const first = Math.floor(lo / width) * width;
  const n = Math.ceil((hi - first) / width);
  const buckets = Array.from({ length: n }, (_, i) => ({ start_ms: first + i * width, end_ms: first + (i + 1) * width, records: 0 }));
  for (const ts of timestamps) buckets[Math.floor((ts - first) / width)].records += 1;
  return { buckets, bucket_ms: width, from_ms: first, to_ms: first + n * width, records: timestamps.length };
}

async function drawSearchHistogram(params) {
  clearSearchHistogram();
  const generation = searchHistGeneration;
  const by = params.get("by");
  if (!["range", "key", "header", "content"].includes(by)) return;
  let h;
  let note;
  if (by === "range") {
    if (!params.get("from") || !params.get("to")) return;
    try {
      h = await api(`/topics/${encodeURIComponent(params.get("topic"))}/histogram`, {
        from: params.get("from"), to: params.get("to"), max_buckets: 120,
      });
    } catch {
      return; // the search itself shows the error
    }
    note = `${fmtNum(h.records)} records in this range in all (one bar per ${h.bucket}) · click a bar to narrow the search`;
  } else {
    const stamps = $$("#results tbody tr").map((r) => Number(r.dataset.timestamp));
    if (stamps.length < 2) return;
    h = binned(stamps);
    note = `The ${fmtNum(stamps.length)} results shown, over time · click a bar to narrow the search`;
  }
  if (generation !== searchHistGeneration || !h.buckets.length) return;
  $("#search-hist-box").hidden = false;
  $("#search-hist-note").textContent = note;
  const box = $("#search-histogram");
  box.dataset.records = h.records;
  $("#search-histogram-table tbody").replaceChildren(
    ...h.buckets.map((b) => el("tr", { "data-start": b.start_ms, "data-end": b.end_ms, "data-records": b.records })),
  );
  searchChart = barChart(box, h, {
    height: 150,
    onBar: (b) => narrowSearch(params, b.start_ms, b.end_ms),
    onZoom: (fromMs, toMs) => narrowSearch(params, fromMs, toMs),
  });
}

function narrowSearch(params, fromMs, toMs) {
  const next = new URLSearchParams(params);
  next.set("from", fromMs);
  next.set("to", toMs);
  navigate("/ui/search?" + next.toString());
}

// -- lag over time ------------------------------------------------------------------------
// Lag (records) per topic over time, from the samples the server keeps (lag-history.jsonl).
let lagChart = null;

async function drawLagHistory(group, generation) {
  let h;
  try {
    h = await api(`/groups/${encodeURIComponent(group)}/lag-history`);
  } catch (err) {
    $("#lag-history-note").textContent = err.message;
    return;
  }
  if (generation !== lagGeneration) return;
  if (lagChart) lagChart.destroy();
  lagChart = null;
  const points = h.topics.flatMap((t) => t.points.map((p) => ({ topic: t.topic, ...p })));
  $("#lag-history-table tbody").replaceChildren(
    ...points.map((p) => el("tr", { "data-topic": p.topic, "data-t": p.t, "data-lag": p.lag })),
  );
  const box = $("#lag-chart");
  if (!points.length) {
    box.replaceChildren();
    $("#lag-history-note").textContent = h.sampling
      ? "No samples yet: the server samples every group's lag every few seconds."
      : "No samples: lag over time is sampled by `logtrove serve`.";
    return;
  }
  const times = [...new Set(points.map((p) => p.t))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const series = h.topics.map((t) => {
    const ys = times.map(() => null);
    for (const p of t.points) ys[index.get(p.t)] = p.lag;
    return ys;
  });
  const last = h.topics.map((t) => `${t.topic}: ${fmtNum(t.points[t.points.length - 1].lag)}`).join(", ");
  $("#lag-history-note").textContent = `${times.length} samples from ${fmtTime(times[0])} · lag now ${last}`;
  const css = getComputedStyle(document.documentElement);
  const muted = css.getPropertyValue("--muted").trim() || "#6b7280";
  const line = css.getPropertyValue("--line").trim() || "#e3e4e8";
  const palette = [css.getPropertyValue("--accent").trim() || "#0f6e6e", "#c2410c", "#6d28d9", "#15803d", "#b91c1c"];
  const axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
  lagChart = new uPlot(
    {
      width: Math.max(box.clientWidth, 320),
      height: 180,
      ms: 1,
      tzDate: (ms) => uPlot.tzDate(new Date(ms), "Etc/UTC"),
      scales: { y: { range: (u, min, max) => [0, Math.max(max, 1) * 1.1] } },
      axes: [axis, { ...axis, size: 60, values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? fmtNum(v) : "")) }],
      series: [{}, ...h.topics.map((t, i) => ({ label: t.topic, stroke: palette[i % palette.length], width: 2, spanGaps: true }))],
    },
    [times, ...series],
    box,
  );
  box.chart = lagChart;
}

