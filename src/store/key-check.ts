/**
 * The data key check both stores share. A store remembers one value sealed with its data key;
 * a store opened with a different key (TRADEGATE_DATA_KEY on one side and not the other, a
 * lost data.key, a cluster node configured with another key) would otherwise seal new
 * secrets that the other side can never open, so it is refused at open instead.
 */
import { createSealer, type Sealer } from './crypto.js';

const KEY_CHECK_AAD = 'meta:key-check';
const KEY_CHECK_TEXT = 'tradegate data key';

/** Where a store keeps its check value. */
export interface KeyCheckSlot {
  read(): Uint8Array | undefined;
  /** Stores `sealed` unless a check exists already; true when this one was stored (durably). */
  writeOnce(sealed: Uint8Array): Promise<boolean>;
}

/**
 * A sealer over the data key, after checking it against the slot (writing the check on first
 * use). `loadKey(create)` may create a key only while no check exists; `createdWith` names the
 * store in the error ("the one <createdWith> was created with").
 */
export async function checkDataKey(slot: KeyCheckSlot, loadKey: (create: boolean) => Buffer, createdWith: string): Promise<Sealer> {
  const existing = slot.read();
  const sealer = createSealer(loadKey(existing === undefined));
  const verify = (sealed: Uint8Array | undefined): Sealer => {
    let ok = false;
    try {
      ok = sealed !== undefined && sealer.open(sealed, KEY_CHECK_AAD) === KEY_CHECK_TEXT;
    } catch {
      ok = false;
    }
    if (!ok) throw new Error(`the data key does not match the one ${createdWith} was created with (check TRADEGATE_DATA_KEY and data.key)`);
    return sealer;
  };
  if (existing) return verify(existing);
  // Another process may have initialised the store at the same moment: then its check decides.
  return (await slot.writeOnce(sealer.seal(KEY_CHECK_TEXT, KEY_CHECK_AAD))) ? sealer : verify(slot.read());
}
