import { describe, expect, it } from 'vitest';
import { foreignHostCheck, hostName } from '../../../src/http/host-check.js';

describe('Host check against DNS rebinding', () => {
  it('reads the name of a Host header: lower case, no port, no IPv6 brackets', () => {
    expect(hostName('LocalHost:8080')).toBe('localhost');
    expect(hostName('[::1]:8080')).toBe('::1');
    expect(hostName('127.0.0.1')).toBe('127.0.0.1');
    expect(hostName('::1')).toBe('::1');
  });

  it('a server on loopback answers only its own names: localhost, loopback addresses, the public URL’s host', () => {
    const foreign = foreignHostCheck('127.0.0.1', 'https://trade.example.com/')!;
    for (const ok of ['localhost:8080', '127.0.0.1:8080', '127.9.9.9', '[::1]:8080', 'app.localhost', 'trade.example.com', 'TRADE.example.com:443']) expect(foreign(ok), ok).toBe(false);
    for (const bad of ['rebind.attacker.example:8080', 'example.com', '10.0.0.5:8080', 'trade.example.com.attacker.example', '127.0.0.1.attacker.example']) expect(foreign(bad), bad).toBe(true);
    // Only digits are a port (fuzz probe: these passed as 127.0.0.1).
    for (const bad of ['127.0.0.1:80@evil.example', '127.0.0.1:evil.example', 'localhost:80x', '[::1]:80@evil.example', '[::1]evil']) expect(foreign(bad), bad).toBe(true);
    expect(foreignHostCheck('localhost', undefined)!('trade.example.com')).toBe(true);
  });

  it('a server bound to other addresses checks nothing (it cannot know every name it is reached under)', () => {
    expect(foreignHostCheck('0.0.0.0', undefined)).toBeUndefined();
    expect(foreignHostCheck('10.0.0.5', 'https://trade.example.com')).toBeUndefined();
  });
});
