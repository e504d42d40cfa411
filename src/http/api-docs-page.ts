/**
 * `/api-docs` as one self-contained HTML page (inline CSS, no scripts, fonts or CDN: the
 * machine running tradegate may have no internet), rendered server-side from the same
 * OpenAPI document served at `/api-docs/openapi.json`.
 */
import { createHash } from 'node:crypto';
import type { OpenApiDocument } from './openapi.js';
import type { GuideSection } from './openapi-guide.js';

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

/** The page's one stylesheet (inline; the page's CSP allows exactly it, by hash: API_DOCS_STYLE_HASH). */
const CSS = `
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
main{max-width:1040px;margin:0 auto;padding:24px}
h1{margin:0 0 4px}h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:40px}
nav{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px 16px;columns:2}
nav a{display:block}a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;width:100%;margin:8px 0;background:#fff}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f4f6}
pre{background:#0d1117;color:#e6edf3;padding:12px;border-radius:6px;overflow-x:auto;font-size:13px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
.op{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:12px 0;padding:8px 16px}
.m{display:inline-block;min-width:64px;font-weight:700;font-family:ui-monospace,monospace}
.GET{color:#1a7f37}.POST{color:#0969da}.PUT{color:#9a6700}.PATCH{color:#9a6700}.DELETE{color:#cf222e}
.scope{font-size:12px;border:1px solid #d0d7de;border-radius:10px;padding:0 8px;margin-left:8px}
details summary{cursor:pointer;color:#57606a}
`;

/** `'sha256-…'` of the inline stylesheet, for the page's Content-Security-Policy. */
export const API_DOCS_STYLE_HASH = `'sha256-${createHash('sha256').update(CSS).digest('base64')}'`;

function section(s: GuideSection): string {
  const parts = [`<h2 id="${escapeHtml(s.id)}">${escapeHtml(s.title)}</h2>`];
  for (const p of s.paragraphs) parts.push(`<p>${escapeHtml(p)}</p>`);
  if (s.table) {
    const prefix = s.table.anchorPrefix;
    const rows = s.table.rows.map((row) => {
      const id = prefix ? ` id="${prefix}${escapeHtml((row[0] ?? '').toLowerCase().replace(/_/g, '-'))}"` : '';
      return `<tr${id}>${row.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`;
    });
    parts.push(`<table><thead><tr>${s.table.head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`);
  }
  if (s.code) parts.push(`<pre><code>${escapeHtml(s.code)}</code></pre>`);
  return parts.join('\n');
}

function schemaBlock(label: string, schema: unknown): string {
  return `<details><summary>${escapeHtml(label)}</summary><pre><code>${escapeHtml(JSON.stringify(schema, null, 2))}</code></pre></details>`;
}

type Op = Record<string, unknown>;

function operationHtml(method: string, path: string, op: Op): string {
  const M = method.toUpperCase();
  const isRoot = Array.isArray(op['servers']);
  const shown = isRoot ? path : `/api/v1${path}`;
  const scope = (op['x-required-scope'] as string | undefined) ?? (path.startsWith('/webhooks/') ? 'webhook token' : isRoot ? 'public' : '');
  const parts = [
    `<div class="op" id="op-${escapeHtml(String(op['operationId'] ?? ''))}">`,
    `<div><span class="m ${M}">${M}</span><code>${escapeHtml(shown)}</code>${scope ? `<span class="scope">${escapeHtml(scope)}</span>` : ''}</div>`,
    `<p><strong>${escapeHtml(String(op['summary'] ?? ''))}</strong></p>`,
  ];
  if (op['description']) parts.push(`<p>${escapeHtml(String(op['description']))}</p>`);
  const params = (op['parameters'] as Op[] | undefined) ?? [];
  if (params.length) {
    const rows = params.map(
      (p) => `<tr><td><code>${escapeHtml(String(p['name']))}</code></td><td>${escapeHtml(String(p['in']))}</td><td>${p['required'] ? 'yes' : 'no'}</td><td>${escapeHtml(String(p['description'] ?? JSON.stringify(p['schema'] ?? {})))}</td></tr>`,
    );
    parts.push(`<table><thead><tr><th>parameter</th><th>in</th><th>required</th><th>schema / notes</th></tr></thead><tbody>${rows.join('')}</tbody></table>`);
  }
  const body = op['requestBody'] as { content?: Record<string, { schema?: unknown }> } | undefined;
  if (body?.content) {
    for (const [type, c] of Object.entries(body.content)) parts.push(schemaBlock(`Request body (${type})`, c.schema ?? {}));
  }
  const responses = (op['responses'] as Record<string, Op> | undefined) ?? {};
  const rows = Object.entries(responses).map(([status, r]) => `<tr><td>${escapeHtml(status)}</td><td>${escapeHtml(String(r['description'] ?? ''))}</td></tr>`);
  parts.push(`<table><thead><tr><th>status</th><th>meaning</th></tr></thead><tbody>${rows.join('')}</tbody></table>`);
  for (const [status, r] of Object.entries(responses)) {
    const content = r['content'] as Record<string, { schema?: unknown }> | undefined;
    const json = content?.['application/json']?.schema;
    if (json && Number(status) < 400) parts.push(schemaBlock(`Response ${status} body`, json));
  }
  parts.push('</div>');
  return parts.join('\n');
}

function tagId(tag: string): string {
  return `tag-${tag.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
}

/** Renders the whole page. */
export function renderApiDocsPage(doc: OpenApiDocument): string {
  const info = doc['info'] as { title: string; version: string };
  // The prefix a proxy serves tradegate under (TRADEGATE_BASE_URL's path), as the document's servers say.
  const base = escapeHtml(((doc['servers'] as { url: string }[] | undefined)?.[0]?.url ?? '/api/v1').replace(/\/api\/v1$/, ''));
  const guide = doc['x-guide'];
  const byTag = new Map<string, string[]>();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = ((op['tags'] as string[] | undefined) ?? [])[0] ?? 'Other';
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag)!.push(operationHtml(method, path, op));
    }
  }
  const nav = [
    ...guide.map((s) => `<a href="#${escapeHtml(s.id)}">${escapeHtml(s.title)}</a>`),
    ...[...byTag.keys()].map((t) => `<a href="#${tagId(t)}">Endpoints: ${escapeHtml(t)}</a>`),
    `<a href="${base}/api-docs/openapi.json">OpenAPI 3.1 JSON</a>`,
  ];
  const sse = (doc['components'] as { schemas: Record<string, unknown> }).schemas;
  const sseBlocks = ['SnapshotMessage', 'StatusMessage', 'HeartbeatMessage', 'BracketAlertMessage'].map((n) => schemaBlock(n, sse[n] ?? {}));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(info.title)} — developer documentation</title><style>${CSS}</style></head>
<body><main>
<h1>${escapeHtml(info.title)}</h1><p>API version ${escapeHtml(info.version)} · served under <code>${base}/api/v1</code> and <code>${base}/v1</code> · machine-readable: <a href="${base}/api-docs/openapi.json">openapi.json</a></p>
<nav>${nav.join('\n')}</nav>
${guide.map(section).join('\n')}
<h2 id="sse-formats">SSE message schemas</h2>
${sseBlocks.join('\n')}
${[...byTag.entries()].map(([tag, ops]) => `<h2 id="${tagId(tag)}">Endpoints: ${escapeHtml(tag)}</h2>\n${ops.join('\n')}`).join('\n')}
</main></body></html>
`;
}
