import { describe, expect, it } from 'vitest';
import { paperUrls, TRADOVATE_URLS } from '../../../src/commands/connections.js';
import { UsageError } from '../../../src/commands/store-command.js';

describe('paperUrls', () => {
  it('derives the REST base and the WebSocket URL from the paper broker address', () => {
    expect(paperUrls('http://127.0.0.1:8091')).toEqual({ restUrl: 'http://127.0.0.1:8091/v1', wsUrl: 'ws://127.0.0.1:8091/v1/websocket' });
    expect(paperUrls('http://127.0.0.1:8091/')).toEqual({ restUrl: 'http://127.0.0.1:8091/v1', wsUrl: 'ws://127.0.0.1:8091/v1/websocket' });
  });

  it('keeps TLS and a path prefix (behind a reverse proxy)', () => {
    expect(paperUrls('https://paper.example.com/sim/')).toEqual({
      restUrl: 'https://paper.example.com/sim/v1',
      wsUrl: 'wss://paper.example.com/sim/v1/websocket',
    });
  });

  it('rejects what is not an http(s) base URL', () => {
    for (const bad of ['127.0.0.1:8091', 'ftp://x', 'http://x/?a=1', 'not a url']) expect(() => paperUrls(bad)).toThrow(UsageError);
  });
});

describe('TRADOVATE_URLS', () => {
  it('points demo and live at their own hosts', () => {
    expect(TRADOVATE_URLS.demo.wsUrl).toBe('wss://demo.tradovateapi.com/v1/websocket');
    expect(TRADOVATE_URLS.live.restUrl).toBe('https://live.tradovateapi.com/v1');
  });
});
