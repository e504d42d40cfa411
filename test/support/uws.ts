/**
 * A stand-in for one uWS HttpResponse, enough for ResponseHandle, the body reader and the
 * SSE writer: it records what was written and lets a test feed body chunks or abort.
 */
import type { HttpResponse } from 'uWebSockets.js';

/** A recording uWS response. */
export class FakeResponse {
  status = '';
  readonly headers: [string, string][] = [];
  body: string | undefined;
  ended = false;
  closedConnection = false;
  /** Every chunk passed to write() (SSE). */
  readonly written: string[] = [];
  /** The client's address as uWS reports it; `addressReads` counts the reads. */
  remoteAddress = '10.0.0.1';
  addressReads = 0;
  private abortHandler: (() => void) | undefined;
  private dataHandler: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined;

  /** Cast for the code under test. */
  get res(): HttpResponse {
    return this as unknown as HttpResponse;
  }

  /** Whether a body reader is registered (it must be, before the first await). */
  get reading(): boolean {
    return this.dataHandler !== undefined;
  }

  header(name: string): string | undefined {
    return this.headers.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  }

  json(): any {
    return this.body === undefined ? undefined : JSON.parse(this.body);
  }

  /** Delivers a body chunk as uWS would (the ArrayBuffer is only valid during the call). */
  feed(text: string, isLast: boolean): void {
    const bytes = Buffer.from(text);
    this.dataHandler?.(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, isLast);
  }

  /** The client goes away. */
  abort(): void {
    this.abortHandler?.();
  }

  onAborted(handler: () => void): this {
    this.abortHandler = handler;
    return this;
  }

  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): this {
    this.dataHandler = handler;
    return this;
  }

  onWritable(handler: (offset: number) => boolean): this {
    this.writableHandler = handler;
    return this;
  }

  /** Bytes the socket takes now (tryEnd); a test lowers it to make backpressure, `drain` raises it. */
  capacity = Number.POSITIVE_INFINITY;
  /** Body bytes taken so far by tryEnd. */
  private taken: Buffer[] = [];
  private offset = 0;
  private writableHandler: ((offset: number) => boolean) | undefined;

  /** uWS's tryEnd: takes what `capacity` allows; [all of this chunk taken, the whole body sent]. */
  tryEnd(chunk: Buffer, totalSize: number): [boolean, boolean] {
    const n = Math.min(chunk.length, this.capacity);
    this.taken.push(chunk.subarray(0, n));
    this.capacity -= n;
    this.offset += n;
    const done = this.offset === totalSize;
    if (done) {
      this.body = Buffer.concat(this.taken).toString();
      this.ended = true;
    }
    return [n === chunk.length, done];
  }

  getWriteOffset(): number {
    return this.offset;
  }

  /** The client reads `bytes`: the socket takes that much more, and uWS reports it writable. */
  drain(bytes: number): void {
    this.capacity += bytes;
    this.writableHandler?.(this.offset);
  }

  /** Reading paused (uWS `pause`): what happened, in order (`pause`, `resume`, `end`). */
  readonly reads: string[] = [];

  pause(): void {
    this.reads.push('pause');
  }

  resume(): void {
    this.reads.push('resume');
  }

  getRemoteAddressAsText(): ArrayBuffer {
    this.addressReads++;
    const bytes = Buffer.from(this.remoteAddress);
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }

  cork(fn: () => void): this {
    fn();
    return this;
  }

  /**
   * uWS writes `HTTP/1.1 <status>\r\n` around what it is given, so a head of several lines
   * (the status, then `name: value` lines, as ResponseHandle.send writes it) is read back here
   * as the status and its headers.
   */
  writeStatus(status: string): this {
    const [line, ...headers] = status.split('\r\n');
    this.status = line!;
    for (const header of headers) {
      const colon = header.indexOf(': ');
      this.headers.push([header.slice(0, colon), header.slice(colon + 2)]);
    }
    return this;
  }

  writeHeader(name: string, value: string): this {
    this.headers.push([name, value]);
    return this;
  }

  write(chunk: string): boolean {
    this.written.push(chunk);
    return true;
  }

  end(body?: string | Buffer, closeConnection?: boolean): this {
    if (this.reads.length > 0) this.reads.push('end');
    this.body = body === undefined ? undefined : body.toString();
    this.ended = true;
    this.closedConnection = !!closeConnection;
    return this;
  }

  endWithoutBody(_length?: number, closeConnection?: boolean): this {
    return this.end(undefined, closeConnection);
  }

  close(): this {
    this.closedConnection = true;
    return this;
  }
}
