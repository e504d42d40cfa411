/** Create or edit a strategy. Empty fields mean "the alert must say it" (sent as null on edit). */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog } from '../components/dialog';
import { ErrorBox, Field } from '../components/ui';
import { useAction } from '../hooks';
import type { BracketLeg, OrderType, Strategy } from '../types';

type LegKind = 'none' | 'ticks' | 'price';

function legState(l: BracketLeg | null): [LegKind, string] {
  if (!l) return ['none', ''];
  return 'ticks' in l ? ['ticks', String(l.ticks)] : ['price', String(l.price)];
}

function legValue(kind: LegKind, value: string): BracketLeg | null {
  if (kind === 'none' || value.trim() === '') return null;
  return kind === 'ticks' ? { ticks: Number(value) } : { price: Number(value) };
}

function LegField(props: { label: string; id: string; kind: LegKind; value: string; onKind: (k: LegKind) => void; onValue: (v: string) => void; error?: string | undefined }) {
  return (
    <Field label={props.label} id={`${props.id}-kind`} error={props.error}>
      <div class="inline">
        <select id={`${props.id}-kind`} value={props.kind} onChange={(e) => props.onKind(e.currentTarget.value as LegKind)}>
          <option value="none">None</option>
          <option value="ticks">Ticks from fill</option>
          <option value="price">Fixed price</option>
        </select>
        {props.kind !== 'none' && (
          <input
            id={`${props.id}-value`}
            aria-label={`${props.label} ${props.kind === 'ticks' ? 'ticks' : 'price'}`}
            inputMode="decimal"
            value={props.value}
            onInput={(e) => props.onValue(e.currentTarget.value)}
          />
        )}
      </div>
    </Field>
  );
}

export function StrategyDialog(props: { strategy: Strategy | null; onClose: () => void; onSaved: (s: Strategy) => void }) {
  const s = props.strategy;
  const [name, setName] = useState(s?.name ?? '');
  const [description, setDescription] = useState(s?.description ?? '');
  const [symbol, setSymbol] = useState(s?.symbol ?? '');
  const [qty, setQty] = useState(s?.qty ? String(s.qty) : '');
  const [orderType, setOrderType] = useState<OrderType | ''>(s?.orderType ?? '');
  const [tpKind, setTpKind] = useState<LegKind>(legState(s?.takeProfit ?? null)[0]);
  const [tp, setTp] = useState(legState(s?.takeProfit ?? null)[1]);
  const [slKind, setSlKind] = useState<LegKind>(legState(s?.stopLoss ?? null)[0]);
  const [sl, setSl] = useState(legState(s?.stopLoss ?? null)[1]);
  const action = useAction();
  // Checked here: Number('abc') is NaN, which JSON sends as null, and null clears the quantity.
  const [qtyError, setQtyError] = useState<string | undefined>(undefined);
  const err = (path: string) => action.error?.errors.find((e) => e.path === path || e.path.startsWith(`${path}.`))?.message;

  return (
    <Dialog title={s ? `Edit “${s.name}”` : 'New strategy'} onClose={props.onClose}>
      <form
        noValidate
        onSubmit={async (e) => {
          e.preventDefault();
          const qtyText = qty.trim();
          if (qtyText !== '' && !/^[1-9][0-9]*$/.test(qtyText)) {
            setQtyError('a whole number of contracts, 1 or more (or empty: the alert says)');
            return;
          }
          setQtyError(undefined);
          const body = {
            name: name.trim(),
            description: description.trim() || null,
            symbol: symbol.trim() || null,
            qty: qtyText === '' ? null : Number(qtyText),
            orderType: orderType || null,
            takeProfit: legValue(tpKind, tp),
            stopLoss: legValue(slKind, sl),
          };
          const saved = await action.run(() => (s ? api<Strategy>('PATCH', `/strategies/${encodeURIComponent(s.id)}`, body) : api<Strategy>('POST', '/strategies', body)));
          if (saved) props.onSaved(saved);
        }}
      >
        <Field label="Name" id="strategy-name" error={err('name')}>
          <input id="strategy-name" autoFocus value={name} maxLength={100} required onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Description" id="strategy-description" error={err('description')}>
          <input id="strategy-description" value={description} maxLength={1000} onInput={(e) => setDescription(e.currentTarget.value)} />
        </Field>
        <div class="field-row">
          <Field label="Symbol" id="strategy-symbol" hint="ES, ES1!, MESZ6…" error={err('symbol') ?? (action.error?.code === 'UNKNOWN_SYMBOL' ? action.error.detail : undefined)}>
            <input id="strategy-symbol" value={symbol} maxLength={64} onInput={(e) => setSymbol(e.currentTarget.value)} />
          </Field>
          <Field label="Quantity" id="strategy-qty" error={qtyError ?? err('qty')}>
            <input id="strategy-qty" inputMode="numeric" value={qty} onInput={(e) => setQty(e.currentTarget.value)} />
          </Field>
          <Field label="Order type" id="strategy-type" error={err('orderType')}>
            <select id="strategy-type" value={orderType} onChange={(e) => setOrderType(e.currentTarget.value as OrderType | '')}>
              <option value="">From the alert</option>
              <option value="market">Market</option>
              <option value="limit">Limit</option>
              <option value="stop">Stop</option>
              <option value="stop_limit">Stop limit</option>
            </select>
          </Field>
        </div>
        <div class="field-row">
          <LegField label="Take-profit" id="strategy-tp" kind={tpKind} value={tp} onKind={setTpKind} onValue={setTp} error={err('takeProfit')} />
          <LegField label="Stop-loss" id="strategy-sl" kind={slKind} value={sl} onKind={setSlKind} onValue={setSl} error={err('stopLoss')} />
        </div>
        <ErrorBox error={action.error && action.error.errors.length === 0 && action.error.code !== 'UNKNOWN_SYMBOL' ? action.error : undefined} title="Not saved" />
        <div class="dialog-actions">
          <button type="button" class="btn secondary" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="btn primary" disabled={action.busy || !name.trim()}>
            {action.busy ? 'Saving…' : s ? 'Save' : 'Create strategy'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
