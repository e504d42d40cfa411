/**
 * Reads a `/metrics` scrape with `parse-prometheus-text-format` (a real parser of the
 * Prometheus text format: label escaping, values, families and their types). That parser
 * folds every series of a labelled histogram into one, so samples are read a second time
 * with the `# TYPE` lines left out: then each line (`_bucket`, `_sum`, `_count` too) is one
 * sample with its own labels. The bench uses this for per-thread CPU; the /metrics test too.
 */
import parsePrometheusTextFormat from 'parse-prometheus-text-format';

/** One sample line: metric name (with `_bucket`/`_sum`/`_count` suffix), labels, value. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A parsed scrape. */
export interface Scrape {
  /** Family name → type (COUNTER, GAUGE, HISTOGRAM, …). */
  types: Map<string, string>;
  samples: MetricSample[];
  /** Sum of the samples named `name` whose labels include `labels`. */
  sum(name: string, labels?: Record<string, string>): number;
  /** The samples named `name` whose labels include `labels`. */
  select(name: string, labels?: Record<string, string>): MetricSample[];
}

/** Parses Prometheus text-format exposition. */
export function parseScrape(text: string): Scrape {
  const types = new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f.type] as const));
  const untyped = text
    .split('\n')
    .filter((line) => !line.startsWith('# TYPE '))
    .join('\n');
  const samples: MetricSample[] = [];
  for (const family of parsePrometheusTextFormat(untyped)) {
    for (const m of family.metrics) {
      if (m.value !== undefined) samples.push({ name: family.name, labels: m.labels ?? {}, value: Number(m.value) });
    }
  }
  const select = (name: string, labels: Record<string, string> = {}): MetricSample[] =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return { types, samples, select, sum: (name, labels) => select(name, labels).reduce((n, s) => n + s.value, 0) };
}

/** Fetches and parses `url` (a /metrics endpoint). */
export async function scrape(url: string, timeoutMs = 10_000): Promise<Scrape> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return parseScrape(await res.text());
}
