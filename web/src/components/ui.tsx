/** Building blocks every page uses: page frame, loading/empty/error states, badges, fields. */
import { cloneElement, isValidElement, type ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';
import type { ApiError } from '../api';
import type { Resource } from '../hooks';
import type { ConnectionStatus } from '../types';

/** A page: title, one-line purpose, actions on the right. */
export function Page(props: { title: string; intro?: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren }) {
  // The tab names the page (WCAG 2.4.2), as the heading does.
  useEffect(() => {
    document.title = `${props.title} · tradegate`;
  }, [props.title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <div>
          <h1 id="page-title">{props.title}</h1>
          {props.intro && <p class="intro">{props.intro}</p>}
        </div>
        {props.actions && <div class="page-actions">{props.actions}</div>}
      </header>
      {props.children}
    </section>
  );
}

/** Shown until the first answer arrives. */
export function Loading(props: { what: string }) {
  return (
    <div class="state loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" />
      Loading {props.what}…
    </div>
  );
}

/** Shown when a list is empty: what it is and how to fill it. */
export function Empty(props: { title: string; children?: ComponentChildren }) {
  return (
    <div class="state empty">
      <p class="empty-title">{props.title}</p>
      {props.children && <div class="empty-body">{props.children}</div>}
    </div>
  );
}

/** The API's own words for what went wrong (its problem `detail`), with the code. */
export function ErrorBox(props: { error: ApiError | undefined; retry?: () => void; title?: string }) {
  const e = props.error;
  if (!e) return null;
  return (
    <div class="callout danger" role="alert">
      <p>
        <strong>{props.title ?? 'Something went wrong'}:</strong> {e.detail}
        {/[.!?)]$/.test(e.detail) ? '' : '.'}
        {e.retryAfter !== null && ` Try again in ${e.retryAfter} s.`}
      </p>
      {e.errors.length > 0 && (
        <ul class="field-errors">
          {e.errors.map((f) => (
            <li key={f.path}>
              <code>{f.path}</code> {f.message}
            </li>
          ))}
        </ul>
      )}
      <p class="muted small">
        {e.status > 0 ? `HTTP ${e.status} · ` : ''}
        <code>{e.code}</code>
        {props.retry && (
          <button type="button" class="btn link" onClick={props.retry}>
            Retry
          </button>
        )}
      </p>
    </div>
  );
}

export type Tone = 'ok' | 'warn' | 'danger' | 'info' | 'neutral';

/** A small label; the text always carries the meaning, the colour only repeats it. */
export function Badge(props: { tone: Tone; children: ComponentChildren; title?: string }) {
  return (
    <span class={`badge ${props.tone}`} title={props.title}>
      {props.children}
    </span>
  );
}

const STATUS_TONE: Record<ConnectionStatus, Tone> = {
  CONNECTED: 'ok',
  CONNECTING: 'info',
  RECONNECTING: 'warn',
  AUTH_EXPIRED: 'danger',
  FAILED: 'danger',
  DISABLED: 'neutral',
};

/** A connection status as a badge with a dot. */
export function StatusBadge(props: { status: ConnectionStatus }) {
  return (
    <span class={`badge status ${STATUS_TONE[props.status]}`}>
      <span class="dot" aria-hidden="true" />
      {props.status}
    </span>
  );
}

/** A labelled form field with its hint and its error from the API. */
export function Field(props: { label: string; id: string; hint?: ComponentChildren; error?: string | undefined; children: ComponentChildren }) {
  // The control is tied to its hint and its error, so a screen reader reads them with it (WCAG 1.3.1, 3.3.1).
  const described = [props.hint ? `${props.id}-hint` : '', props.error ? `${props.id}-error` : ''].filter(Boolean).join(' ');
  const control = isValidElement(props.children)
    ? cloneElement(props.children, { ...(described && { 'aria-describedby': described }), ...(props.error && { 'aria-invalid': 'true' }) })
    : props.children;
  return (
    <div class={`field${props.error ? ' invalid' : ''}`}>
      <label for={props.id}>{props.label}</label>
      {control}
      {props.hint && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      )}
    </div>
  );
}

/** "Updated 14:03:21" with a refresh button. */
export function Freshness(props: { at: number | null; onRefresh: () => void; label?: string }) {
  return (
    <span class="freshness muted small">
      {props.at ? `Updated ${new Date(props.at).toLocaleTimeString()}` : ''}
      <button type="button" class="btn small ghost" onClick={props.onRefresh} aria-label={props.label ?? 'Refresh'}>
        Refresh
      </button>
    </span>
  );
}

/** A column heading: its label, right-aligned when numeric, or only for screen readers. */
export type Column = string | { label: string; num?: boolean; srOnly?: boolean };

/** A table's hidden caption (its accessible name) and its header row. */
export function TableHead(props: { caption: string; cols: Column[] }) {
  return (
    <>
      <caption class="sr-only">{props.caption}</caption>
      <thead>
        <tr>
          {props.cols.map((c) => {
            const col = typeof c === 'string' ? { label: c } : c;
            return (
              <th key={col.label} scope="col" class={col.num ? 'num' : undefined}>
                {col.srOnly ? <span class="sr-only">{col.label}</span> : col.label}
              </th>
            );
          })}
        </tr>
      </thead>
    </>
  );
}

/** The loading, error and empty states of a list (nothing once it has items). */
export function ListStates(props: { res: Resource<readonly unknown[]>; what: string; empty: string; children?: ComponentChildren; title?: string }) {
  const { res } = props;
  return (
    <>
      {res.loading && <Loading what={props.what} />}
      <ErrorBox error={res.error} retry={() => void res.reload()} title={props.title ?? `The ${props.what} could not be loaded`} />
      {!res.loading && !res.error && res.data?.length === 0 && <Empty title={props.empty}>{props.children}</Empty>}
    </>
  );
}
