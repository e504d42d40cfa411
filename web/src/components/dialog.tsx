/** Modal dialogs on the native <dialog>: focus moves in, Escape closes, the page behind is inert. */
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';
import { useAction } from '../hooks';
import { ErrorBox } from './ui';

/**
 * A modal; `onClose` runs on Escape, the close button and `Cancel` buttons. `explicitClose`: only
 * the dialog's own buttons close it (no Escape, no ×), where closing by accident loses something
 * that cannot be shown again (a new API key).
 */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren; wide?: boolean; explicitClose?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  const onClose = useRef(props.onClose);
  onClose.current = props.onClose;
  const explicit = useRef(props.explicitClose === true);
  explicit.current = props.explicitClose === true;
  // Where focus was when the dialog was asked for, read while rendering it: by the time its effect
  // runs (after a frame), something inside may have taken focus (an autofocused field).
  const openedFrom = useRef<HTMLElement | null | undefined>(undefined);
  if (openedFrom.current === undefined) openedFrom.current = document.activeElement as HTMLElement | null;
  useEffect(() => {
    const d = ref.current!;
    const opener = openedFrom.current ?? null;
    // Where focus goes if the opener is gone by then (a cancelled order's row): its section's heading.
    const place = opener?.closest('section')?.querySelector<HTMLElement>('h2, h3') ?? null;
    d.showModal();
    const closed = () => onClose.current();
    const cancel = (e: Event) => {
      if (explicit.current) e.preventDefault();
    };
    d.addEventListener('close', closed);
    d.addEventListener('cancel', cancel);
    return () => {
      d.removeEventListener('close', closed);
      d.removeEventListener('cancel', cancel);
      if (d.open) d.close();
      // Focus goes back where it was, so keyboard users keep their place (web probe: after a cancel
      // removed its row, focus fell to the page and the next Tab began at "Skip to content").
      const restore = () => {
        if (opener?.isConnected) opener.focus();
        else if (place?.isConnected) {
          if (!place.hasAttribute('tabindex')) place.tabIndex = -1;
          place.focus();
        }
      };
      restore();
      // Once the dialog has left the page: focus that fell to the page meanwhile is put back (e2e: now and then none had it).
      requestAnimationFrame(() => {
        if (document.activeElement === null || document.activeElement === document.body) restore();
      });
    };
  }, []);
  return (
    <dialog ref={ref} class={`dialog${props.wide ? ' wide' : ''}`} aria-labelledby={id}>
      <div class="dialog-head">
        <h2 id={id}>{props.title}</h2>
        {!props.explicitClose && (
          <button type="button" class="icon-btn" aria-label="Close" onClick={() => props.onClose()}>
            ×
          </button>
        )}
      </div>
      <div class="dialog-body">{props.children}</div>
    </dialog>
  );
}

/**
 * "Are you sure?" with the consequences spelled out. `onConfirm` runs the action; an API
 * error stays in the dialog (with its detail) so the user can retry or cancel.
 */
export function ConfirmDialog(props: {
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  /** The button that closes without acting (default "Cancel"; "Keep order" where the action is itself a cancel). */
  dismissLabel?: string;
  /** Nothing to confirm: the server would refuse it (the text says why); only the dismiss button is offered. */
  refused?: boolean;
  danger?: boolean;
  onConfirm: () => Promise<unknown>;
  onClose: () => void;
}) {
  const action = useAction();
  // While the request runs the dialog stays: closed, its outcome (or its error) would be seen nowhere.
  const close = () => {
    if (!action.busy) props.onClose();
  };
  const timedOut = action.error?.status === 504;
  // The same request (its Idempotency-Key) confirmed again while the first still runs (web probe: "Not done" invited a second one).
  const inProgress = action.error?.code === 'IDEMPOTENCY_KEY_IN_USE';
  return (
    <Dialog title={props.title} onClose={close}>
      <div class="confirm-text">{props.children}</div>
      <ErrorBox
        error={action.error}
        title={timedOut ? 'Not confirmed: the broker may still carry it out' : inProgress ? 'Still going on: the request sent before has not ended yet' : 'Not done'}
      />
      {inProgress && <p class="muted small">Wait for it: confirm again in a moment to see its outcome. Do not start a new one, which would act a second time.</p>}
      {timedOut && <p class="muted small">Refresh in a moment to see whether it happened before trying again.</p>}
      <div class="dialog-actions">
        <button type="button" class="btn secondary" onClick={close} disabled={action.busy} autoFocus>
          {props.dismissLabel ?? 'Cancel'}
        </button>
        {!props.refused && (
          <button
            type="button"
            class={`btn ${props.danger ? 'danger' : 'primary'}`}
            disabled={action.busy}
            onClick={async () => {
              const ok = await action.run(async () => {
                await props.onConfirm();
                return true;
              });
              if (ok) props.onClose();
            }}
          >
            {action.busy ? 'Working…' : props.confirmLabel}
          </button>
        )}
      </div>
    </Dialog>
  );
}
