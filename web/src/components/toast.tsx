/** Short confirmations ("Key revoked"), announced to screen readers. */
import { signal } from '@preact/signals';

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

/** The live region the toasts appear in. */
export function Toasts() {
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.value.map((t) => (
        <div key={t.id} class="toast">
          {t.text}
        </div>
      ))}
    </div>
  );
}
