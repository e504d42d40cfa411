/**
 * An account's risk guards and kill switch (README "Risk guards"): whether entries are allowed
 * or the account is locked (and why, until when), the day's P&L the loss limit and profit
 * target watch, the guards in force, the kill switch (lock, by default also cancelling working
 * orders and closing positions) and unlock, and a form for the guards. Guards and locks are
 * stored records: all of this works whatever the connection's state.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { ConfirmDialog, Dialog } from '../components/dialog';
import { toast } from '../components/toast';
import { Badge, ErrorBox, Field, Loading } from '../components/ui';
import { fullTime, pnl, when } from '../format';
import { useAction, usePolling, useResource } from '../hooks';
import type { AccountGuards, GuardsView, LockResult } from '../types';
import { TradingWindowsFields, windowsBody, windowsDraft, windowsSummary } from './trading-windows';

/** Its live figures (day P&L, exposure): each tab of the app reads them this often (with positions and orders every 5 s, three tabs on three accounts stay inside a session's 120 reads a minute). */
const POLL_MS = 10_000;

const LOCKED_BY: Record<string, string> = {
  kill_switch: 'kill switch',
  daily_loss: 'daily loss limit',
  profit_target: 'daily profit target',
};

const DIRECTION: Record<AccountGuards['direction'], string> = { both: 'Long and short', long_only: 'Long only', short_only: 'Short only' };

/** The guards in force, in words; empty when none is set. */
export function guardSummary(g: AccountGuards): string[] {
  const out: string[] = [];
  if (g.maxOrderQty !== null) out.push(`at most ${g.maxOrderQty} per order`);
  if (g.maxPositionPerContract !== null) out.push(`at most ${g.maxPositionPerContract} per contract`);
  if (g.maxPositionTotal !== null) out.push(`at most ${g.maxPositionTotal} in total`);
  if (g.allowedProducts !== null) out.push(`only ${g.allowedProducts.join(', ')}`);
  if (g.direction !== 'both') out.push(DIRECTION[g.direction].toLowerCase());
  if (g.noPyramiding) out.push('no pyramiding');
  if (g.flatOnly) out.push('entries only when flat');
  else if (g.webhookFlatOnly) out.push('alerts only when flat');
  if (g.tradingWindows !== null) out.push(windowsSummary(g.tradingWindows));
  if (g.dailyLossLimit !== null) out.push(`daily loss limit $${g.dailyLossLimit}`);
  if (g.dailyProfitTarget !== null) out.push(`daily profit target $${g.dailyProfitTarget}`);
  return out;
}

function flattenNote(r: LockResult): string {
  if (!r.flatten) return '';
  if ('error' in r.flatten) return `; ${r.flatten.error}`;
  const failed = r.flatten.positions.filter((p) => p.status === 'failed');
  const n = (count: number, what: string) => `${count} ${what}${count === 1 ? '' : 's'}`;
  // The lock keeps flattening until orders still on their way are known (README "Risk guards").
  const coming = r.flatten.outstandingOrders ? `; ${n(r.flatten.outstandingOrders, 'order')} still on the way to the broker, flattened too if it fills` : '';
  return `; ${n(r.flatten.cancelledOrderIds.length, 'order')} cancelled, ${n(r.flatten.positions.length - failed.length, 'position')} closed${failed.length ? `, NOT closed: ${failed.map((p) => p.symbol).join(', ')}` : ''}${coming}`;
}

export function GuardsCard(props: { accountId: string; accountName: string; active: boolean; connected: boolean; onFlattened: () => unknown }) {
  const q = encodeURIComponent(props.accountId);
  const view = useResource(() => api<GuardsView>('GET', `/accounts/${q}/guards`), [props.accountId]);
  usePolling(view.reload, POLL_MS);
  const [locking, setLocking] = useState(false);
  const [unlocking, setUnlocking] = useState(false);
  const [editing, setEditing] = useState(false);
  const v = view.data;
  // The day's P&L as last polled is not shown once the health stream says the connection is down
  // (it stood up to one poll after RECONNECTING, beside positions already hidden: web probe).
  const live = props.connected ? (v?.live ?? null) : null;
  const lock = v?.lock ?? null;
  const set = v ? guardSummary(v.guards) : [];

  return (
    <section class="card" aria-labelledby="guards-title">
      <div class="card-head">
        <h3 id="guards-title">Risk guards and kill switch</h3>
        {v && (
          <div class="card-actions">
            <button
              type="button"
              class="btn secondary"
              onClick={async () => {
                // The form starts from the guards as stored now, not as last polled: saving
                // replaces them all, so a stale form would undo a change made elsewhere since.
                await view.reload();
                setEditing(true);
              }}
            >
              Edit guards…
            </button>
            {lock ? (
              <button type="button" class="btn secondary" onClick={() => setUnlocking(true)}>
                Unlock…
              </button>
            ) : (
              <button type="button" class="btn danger" disabled={!props.active} onClick={() => setLocking(true)}>
                Kill switch…
              </button>
            )}
          </div>
        )}
      </div>
      {view.loading && <Loading what="risk guards" />}
      <ErrorBox error={view.error} retry={view.reload} title="Risk guards unavailable" />
      {v && (
        <>
          <p class="chips">
            {/* Only the lock is announced as it changes; the day's P&L moves with every price. */}
            <span role="status">
              {lock ? (
                <Badge tone="danger">Locked by the {LOCKED_BY[lock.guard] ?? lock.guard}</Badge>
              ) : props.active ? (
                <Badge tone="ok">Entries allowed</Badge>
              ) : (
                <Badge tone="danger">No trading: the broker no longer reports this account</Badge>
              )}
            </span>
            {live && (
              <Badge tone={live.day.pnl < 0 ? 'warn' : 'neutral'} title={`realized ${pnl(live.day.realized)}, fees ${pnl(-live.day.fees)}, open ${pnl(live.day.open)}`}>
                Day P&L {pnl(live.day.pnl)}
              </Badge>
            )}
            {live?.inWindow === false && <Badge tone="warn">Outside the trading windows</Badge>}
          </p>
          {lock && (
            <p class="callout danger">
              Every entry is refused since <span title={fullTime(lock.since)}>{when(lock.since)}</span>
              {lock.until ? (
                <>
                  {' '}
                  until <span title={fullTime(lock.until)}>{when(lock.until)}</span> (the next trading day)
                </>
              ) : (
                ' until it is unlocked'
              )}
              {lock.detail ? `: ${lock.detail}` : ''}. Exits, cancels and flatten still work.
              {lock.flattenPending && ' Its flatten has not finished (the connection is down, or the broker has not confirmed it yet): it goes on until the positions are closed.'}
            </p>
          )}
          {set.length ? <p>In force: {set.join(' · ')}.</p> : <p class="muted">No guards set: every order the broker takes goes through.</p>}
          {!live && <p class="muted small">Day P&L is shown while this account’s connection is CONNECTED and the broker answers.</p>}
        </>
      )}

      {locking && v && (
        <LockDialog
          accountId={props.accountId}
          accountName={props.accountName}
          onClose={() => setLocking(false)}
          onDone={async (r) => {
            toast(`${props.accountName} locked${flattenNote(r)}`);
            await Promise.all([view.reload(), props.onFlattened()]);
          }}
        />
      )}
      {unlocking && lock && (
        <ConfirmDialog
          title={`Unlock ${props.accountName}?`}
          confirmLabel="Unlock"
          refused={lock.until !== null && new Date(lock.until).getTime() > Date.now()}
          onClose={() => setUnlocking(false)}
          onConfirm={async () => {
            await api('POST', `/accounts/${q}/unlock`);
            toast(`${props.accountName} unlocked`);
            await view.reload();
          }}
        >
          <p>Entries are allowed again, within the guards in force.</p>
          {lock.until && <p>A daily loss limit or profit target holds until {when(lock.until)}: the server refuses to lift it before then.</p>}
        </ConfirmDialog>
      )}
      {editing && v && (
        <GuardsDialog
          accountId={props.accountId}
          accountName={props.accountName}
          guards={v.guards}
          dayPnl={live?.day.pnl ?? null}
          onClose={() => setEditing(false)}
          onSaved={async () => {
            setEditing(false);
            toast(`Risk guards of ${props.accountName} saved`);
            await view.reload();
          }}
        />
      )}
    </section>
  );
}

function LockDialog(props: { accountId: string; accountName: string; onClose: () => void; onDone: (r: LockResult) => Promise<unknown> }) {
  const [flatten, setFlatten] = useState(true);
  const [reason, setReason] = useState('');
  return (
    <ConfirmDialog
      title={`Kill switch: lock ${props.accountName}?`}
      confirmLabel={flatten ? 'Lock and flatten' : 'Lock'}
      danger
      onClose={props.onClose}
      onConfirm={async () => {
        const body: { flatten: boolean; reason?: string } = { flatten };
        if (reason.trim()) body.reason = reason.trim();
        const r = await api<LockResult>('POST', `/accounts/${encodeURIComponent(props.accountId)}/lock`, body);
        await props.onDone(r);
      }}
    >
      <p>Every new entry is refused, from the API, alerts and this app, until you unlock it. Exits stay allowed.</p>
      <label class="check">
        <input type="checkbox" checked={flatten} onChange={(e) => setFlatten(e.currentTarget.checked)} /> Also cancel every working order and close every position at market
      </label>
      <Field label="Reason (optional)" id="lock-reason">
        <input id="lock-reason" value={reason} maxLength={200} onInput={(e) => setReason(e.currentTarget.value)} />
      </Field>
    </ConfirmDialog>
  );
}

/**
 * A limit field: empty means no limit; otherwise a whole number of contracts, or an amount in
 * dollars. Checked here only for its form (Number('abc') is NaN, which JSON would send as null:
 * no limit); the server checks the range and its words show next to the field.
 */
function limitValue(text: string, money: boolean): number | null | 'invalid' {
  const t = text.trim();
  if (t === '') return null;
  if (money ? !/^\d+(\.\d{1,2})?$/.test(t) : !/^\d+$/.test(t)) return 'invalid';
  return Number(t);
}

const LIMITS = [
  ['maxOrderQty', 'Max contracts per order', false],
  ['maxPositionPerContract', 'Max position per contract', false],
  ['maxPositionTotal', 'Max position, all contracts', false],
  ['dailyLossLimit', 'Daily loss limit ($)', true],
  ['dailyProfitTarget', 'Daily profit target ($)', true],
] as const;

type LimitKey = (typeof LIMITS)[number][0];

/**
 * What saving these daily limits does at once, given the day's P&L: a limit the day has reached
 * already locks the account and flattens it the moment it is saved. Null when nothing trips.
 */
function tripsNow(dayPnl: number | null, loss: number | null, target: number | null): string | null {
  if (dayPnl === null) return null;
  // A limit of 0 (or less) is no limit the service takes (400): nothing would trip (web probe).
  if (loss !== null && loss > 0 && dayPnl <= -loss) return `a daily loss limit of ${DOLLARS.format(loss)}`;
  if (target !== null && target > 0 && dayPnl >= target) return `a daily profit target of ${DOLLARS.format(target)}`;
  return null;
}

const DOLLARS = new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD' });

function GuardsDialog(props: { accountId: string; accountName: string; guards: AccountGuards; dayPnl: number | null; onClose: () => void; onSaved: () => Promise<unknown> }) {
  const g = props.guards;
  /** The limits the trader confirmed locking and flattening with (a change asks again). */
  const [confirmed, setConfirmed] = useState<string | null>(null);
  const [trip, setTrip] = useState<string | null>(null);
  const [limits, setLimits] = useState<Record<LimitKey, string>>(() => {
    const out = {} as Record<LimitKey, string>;
    for (const [key] of LIMITS) out[key] = g[key] === null ? '' : String(g[key]);
    return out;
  });
  const [products, setProducts] = useState(g.allowedProducts?.join(', ') ?? '');
  const [direction, setDirection] = useState(g.direction);
  const [noPyramiding, setNoPyramiding] = useState(g.noPyramiding);
  const [flatOnly, setFlatOnly] = useState(g.flatOnly);
  const [webhookFlatOnly, setWebhookFlatOnly] = useState(g.webhookFlatOnly);
  const [windows, setWindows] = useState(() => windowsDraft(g));
  const [invalid, setInvalid] = useState<Partial<Record<LimitKey, string>>>({});
  const action = useAction();
  const err = (path: string) => action.error?.errors.find((e) => e.path === path || e.path.startsWith(`${path}.`))?.message;
  // The warning stands while the daily limits are those it was given for.
  const armed = trip !== null && confirmed === `${limitValue(limits.dailyLossLimit, true)}|${limitValue(limits.dailyProfitTarget, true)}`;

  return (
    <Dialog title={`Risk guards of ${props.accountName}`} onClose={props.onClose}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          const values = {} as Record<LimitKey, number | null>;
          const bad: Partial<Record<LimitKey, string>> = {};
          for (const [key, , money] of LIMITS) {
            const v = limitValue(limits[key], money);
            if (v === 'invalid') bad[key] = money ? 'an amount in dollars, such as 1000 or 1000.50 (or empty: no limit)' : 'a whole number of contracts (or empty: no limit)';
            else values[key] = v;
          }
          setInvalid(bad);
          if (Object.keys(bad).length) return;
          const trips = tripsNow(props.dayPnl, values.dailyLossLimit, values.dailyProfitTarget);
          const asked = `${values.dailyLossLimit}|${values.dailyProfitTarget}`;
          if (trips && confirmed !== asked) {
            setTrip(`The day's P&L is ${pnl(props.dayPnl!)}: with ${trips}, saving locks ${props.accountName} and flattens it at once — every working order cancelled, every position closed at market. Save again to do that.`);
            setConfirmed(asked);
            return;
          }
          const roots = products
            .split(/[\s,]+/)
            .map((p) => p.trim().toUpperCase())
            .filter(Boolean);
          // PUT replaces every guard.
          const body: AccountGuards = {
            ...values,
            allowedProducts: roots.length ? roots : null,
            direction,
            noPyramiding,
            flatOnly,
            webhookFlatOnly,
            tradingWindows: windowsBody(windows),
          };
          const saved = await action.run(() => api('PUT', `/accounts/${encodeURIComponent(props.accountId)}/guards`, body));
          if (saved) await props.onSaved();
        }}
      >
        <p class="muted small">
          Empty means no limit. Guards refuse entries before they reach the broker; exits, cancels and flatten always go through. A daily loss limit or profit target
          the day has already reached (open positions at current prices included) locks the account and flattens it as soon as it is saved.
        </p>
        <div class="field-row">
          {LIMITS.map(([key, label]) => (
            <Field key={key} label={label} id={`guard-${key}`} error={invalid[key] ?? err(key)}>
              <input id={`guard-${key}`} inputMode={key.startsWith('daily') ? 'decimal' : 'numeric'} value={limits[key]} onInput={(e) => setLimits({ ...limits, [key]: e.currentTarget.value })} />
            </Field>
          ))}
        </div>
        <div class="field-row">
          <Field label="Only these products" id="guard-products" hint="roots such as ES, MES, NQ; empty: any" error={err('allowedProducts')}>
            <input id="guard-products" value={products} maxLength={200} onInput={(e) => setProducts(e.currentTarget.value)} />
          </Field>
          <Field label="Direction" id="guard-direction" error={err('direction')}>
            <select id="guard-direction" value={direction} onChange={(e) => setDirection(e.currentTarget.value as AccountGuards['direction'])}>
              {Object.entries(DIRECTION).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <label class="check">
          <input type="checkbox" checked={noPyramiding} onChange={(e) => setNoPyramiding(e.currentTarget.checked)} /> No pyramiding (never add to a position)
        </label>
        <label class="check">
          <input type="checkbox" checked={flatOnly} onChange={(e) => setFlatOnly(e.currentTarget.checked)} /> Entries only when flat
        </label>
        <label class="check">
          <input type="checkbox" checked={webhookFlatOnly} onChange={(e) => setWebhookFlatOnly(e.currentTarget.checked)} /> Alerts only when flat
        </label>
        <TradingWindowsFields draft={windows} onChange={setWindows} error={err} />
        <ErrorBox error={action.error && action.error.errors.length === 0 ? action.error : undefined} title="Not saved" />
        {armed && (
          <div class="callout danger" role="alert">
            {trip}
          </div>
        )}
        <div class="dialog-actions">
          <button type="button" class="btn secondary" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class={`btn ${armed ? 'danger' : 'primary'}`} disabled={action.busy}>
            {action.busy ? 'Saving…' : armed ? 'Save, lock and flatten' : 'Save guards'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
