/** Short confirmations ("Key revoked"), announced to screen readers. */
import { signal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';

interface Toast {
  id: number;
  text: string;
}

const toasts = signal<readonly Toast[]>([]);
let next = 1;

/** Shows `text` for a few seconds. */
export function toast(text: string): void {
  const id = next++;
  toasts.value = [...toasts.value, { id, text }];
  setTimeout(() => {
    toasts.value = toasts.value.filter((t) => t.id !== id);
  }, 4_000);
}

/**
 * The live region the toasts appear in. It is a popover: in the top layer, above a modal dialog's
 * backdrop ("API key copied" while the key's dialog is open). Shown again on each toast, so it
 * is above the dialog opened last.
 */
export function Toasts() {
  const ref = useRef<HTMLDivElement>(null);
  const count = toasts.value.length;
  useEffect(() => {
    const el = ref.current as (HTMLDivElement & { showPopover?: () => void; hidePopover?: () => void }) | null;
    if (!el?.showPopover || !el.hidePopover) return;
    if (el.matches(':popover-open')) el.hidePopover();
    el.showPopover();
  }, [count]);
  return (
    <div ref={ref} class="toasts" role="status" aria-live="polite" popover="manual">
      {toasts.value.map((t) => (
        <div key={t.id} class="toast">
          {t.text}
        </div>
      ))}
    </div>
  );
}
