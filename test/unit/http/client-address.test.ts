/**
 * TRUST_PROXY: X-Forwarded-For names the client only when the peer is a trusted proxy, and only
 * as far as the proxies in it are trusted, so a client cannot pick the address it is counted under.
 */
import { describe, expect, it } from 'vitest';
import { addressKey, TrustedProxies } from '../../../src/http/client-address.js';

/** uWS writes an IPv4 peer of a server listening on `::` in this form. */
const MAPPED_LOOPBACK = '0000:0000:0000:0000:0000:ffff:7f00:0001';

describe('TrustedProxies.clientOf', () => {
  const loopback = new TrustedProxies(['loopback']);

  it('a peer that is no trusted proxy is the client, whatever X-Forwarded-For says', () => {
    expect(loopback.clientOf('203.0.113.9', '198.51.100.1')).toBe('203.0.113.9');
    expect(new TrustedProxies(['10.0.0.0/8']).clientOf('127.0.0.1', '198.51.100.1')).toBe('127.0.0.1');
  });

  it('behind a trusted proxy the client is the nearest untrusted address, read from the right', () => {
    expect(loopback.clientOf('127.0.0.1', '198.51.100.1')).toBe('198.51.100.1');
    expect(loopback.clientOf(MAPPED_LOOPBACK, '198.51.100.1')).toBe('198.51.100.1');
    expect(loopback.clientOf('::1', '2001:db8::7')).toBe('2001:db8::7');
    // What the client wrote itself (the first two) sits left of what the proxy appended.
    expect(loopback.clientOf('127.0.0.1', '1.2.3.4, 5.6.7.8, 198.51.100.1')).toBe('198.51.100.1');
  });

  it('walks through a chain of trusted proxies', () => {
    const chain = new TrustedProxies(['loopback', '10.0.0.0/8', '192.0.2.7']);
    expect(chain.clientOf('127.0.0.1', '1.2.3.4, 198.51.100.1, 192.0.2.7, 10.1.2.3')).toBe('198.51.100.1');
    // Every hop trusted: the leftmost is the client.
    expect(chain.clientOf('127.0.0.1', '10.0.0.5, 192.0.2.7')).toBe('10.0.0.5');
    expect(new TrustedProxies(['private']).clientOf('192.168.1.2', '172.16.0.9, 198.51.100.1')).toBe('198.51.100.1');
  });

  it('reads entries with ports and bracketed IPv6', () => {
    expect(loopback.clientOf('127.0.0.1', '198.51.100.1:4431')).toBe('198.51.100.1');
    expect(loopback.clientOf('127.0.0.1', '[2001:db8::7]:443')).toBe('2001:db8::7');
    expect(loopback.clientOf('127.0.0.1', '[2001:db8::7]')).toBe('2001:db8::7');
  });

  it('an entry that is no address ends the walk at the last trusted hop: never a name of the sender’s choosing', () => {
    expect(loopback.clientOf('127.0.0.1', 'unknown')).toBe('127.0.0.1');
    expect(loopback.clientOf('127.0.0.1', '198.51.100.1, evil')).toBe('127.0.0.1');
    const chain = new TrustedProxies(['loopback', '10.0.0.0/8']);
    expect(chain.clientOf('127.0.0.1', 'junk, 10.0.0.5')).toBe('10.0.0.5');
    expect(loopback.clientOf('127.0.0.1', '')).toBe('127.0.0.1');
  });

  it('without X-Forwarded-For the peer is the client', () => {
    expect(loopback.clientOf('127.0.0.1', undefined)).toBe('127.0.0.1');
  });
});

describe('addressKey', () => {
  it('limits IPv4 as it is, IPv4-mapped IPv6 as its IPv4, and IPv6 by its /64', () => {
    expect(addressKey('127.0.0.1')).toBe('127.0.0.1');
    expect(addressKey('0000:0000:0000:0000:0000:ffff:7f00:0001')).toBe('127.0.0.1');
    expect(addressKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(addressKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:0db8:0001:0002::9')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8:1:3::9')).toBe('2001:db8:1:3::/64');
    expect(addressKey('')).toBe('');
  });
});
