/** A read-only value with a Copy button (keys, webhook URLs, alert messages). */
import { useId, useRef, useState } from 'preact/hooks';
import { toast } from './toast';

async function copyText(text: string, fallback: HTMLInputElement | HTMLTextAreaElement | null): Promise<boolean> {
  try {
    // The async clipboard needs a secure context (https or localhost); a VPS over plain
    // http is not one, so fall back to selecting the text and the legacy copy command.
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (!fallback) return false;
    fallback.focus();
    fallback.select();
    return document.execCommand('copy');
  }
}

/** The value in a read-only field, selected on focus, copied by the button. */
export function CopyField(props: { label: string; value: string; multiline?: boolean; hint?: string }) {
  const id = useId();
  const ref = useRef<HTMLInputElement & HTMLTextAreaElement>(null);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    const ok = await copyText(props.value, ref.current);
    setCopied(ok);
    toast(ok ? `${props.label} copied` : `Select the ${props.label.toLowerCase()} and copy it by hand`);
    setTimeout(() => setCopied(false), 2_000);
  };
  return (
    <div class="copy-field">
      <label for={id}>{props.label}</label>
      <div class="copy-row">
        {props.multiline ? (
          <textarea id={id} ref={ref} class="mono" readOnly rows={props.value.split('\n').length} value={props.value} onFocus={(e) => e.currentTarget.select()} />
        ) : (
          <input id={id} ref={ref} class="mono" readOnly value={props.value} onFocus={(e) => e.currentTarget.select()} />
        )}
        <button type="button" class="btn secondary" onClick={copy} aria-label={`Copy ${props.label.toLowerCase()}`}>
          {copied ? 'Copied' : 'Copy'}
        </button>
      </div>
      {props.hint && <p class="hint">{props.hint}</p>}
    </div>
  );
}
