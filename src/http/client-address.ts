/**
 * The client's address behind a reverse proxy (TRUST_PROXY). Failed authentications and refused
 * sign-in bodies are limited per address, and sign-ins are journaled with it; behind nginx every
 * client would otherwise be the proxy, so one client's bad keys would lock out everyone.
 *
 * X-Forwarded-For is believed only from a peer named as a trusted proxy, and only as far as the
 * proxies in it are trusted: the client is the nearest address, read from the right, that is
 * not a trusted proxy. What a client writes into the header itself sits to the left of what its
 * first trusted proxy appends, so it is never reached (RFC 7239 §8.2 draws the same line).
 */
import { BlockList, isIP } from 'node:net';
import type { TrustProxyGroup } from '../config.js';

/** The named groups a TRUST_PROXY setting may list beside addresses and CIDR ranges. */
const GROUPS: Record<TrustProxyGroup, readonly (readonly [string, number])[]> = {
  loopback: [
    ['127.0.0.0', 8],
    ['::1', 128],
  ],
  private: [
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
    ['fc00::', 7],
  ],
};

export class TrustedProxies {
  private readonly list = new BlockList();

  /** The entries of a TRUST_PROXY setting, as Config holds them (checked there). */
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const group = Object.hasOwn(GROUPS, entry) ? GROUPS[entry as TrustProxyGroup] : undefined;
      if (group) {
        for (const [net, bits] of group) this.list.addSubnet(net, bits, isIP(net) === 4 ? 'ipv4' : 'ipv6');
        continue;
      }
      const [address, bits] = entry.split('/') as [string, string | undefined];
      const type = isIP(address) === 4 ? 'ipv4' : 'ipv6';
      if (bits === undefined) this.list.addAddress(address, type);
      else this.list.addSubnet(address, Number(bits), type);
    }
  }

  /** Whether `address` (uWS's text form, IPv4-mapped IPv6 included) is a trusted proxy. */
  trusts(address: string): boolean {
    const family = isIP(address);
    return family !== 0 && this.list.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }

  /**
   * The client of a request from `peer`: the peer itself unless it is a trusted proxy; else the
   * nearest untrusted address of `forwardedFor` (right to left). An entry that is not an address
   * (a misconfigured proxy, `unknown`) ends the walk at the last trusted hop, so a request is
   * never counted under a name of the sender's choosing.
   */
  clientOf(peer: string, forwardedFor: string | undefined): string {
    if (forwardedFor === undefined || !this.trusts(peer)) return peer;
    const hops = forwardedFor.split(',');
    let client = peer;
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hopAddress(hops[i]!.trim());
      if (hop === undefined) return client;
      client = hop;
      if (!this.trusts(hop)) return hop;
    }
    return client;
  }
}

/** An X-Forwarded-For entry as an address: `1.2.3.4`, `1.2.3.4:5678`, `::1` or `[::1]:80`; undefined when it is none. */
function hopAddress(entry: string): string | undefined {
  if (isIP(entry) !== 0) return entry;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(entry);
  if (bracketed) return isIP(bracketed[1]!) === 6 ? bracketed[1] : undefined;
  const withPort = /^([\d.]+):\d{1,5}$/.exec(entry);
  if (withPort) return isIP(withPort[1]!) === 4 ? withPort[1] : undefined;
  return undefined;
}

/**
 * The key an address is limited under: an IPv4 address as it is (an IPv4-mapped IPv6 one as
 * IPv4), an IPv6 address as its /64. One IPv6 host is given a whole /64 to pick addresses from,
 * so per-address limits on anything finer would not limit it at all.
 */
export function addressKey(address: string): string {
  if (isIP(address) !== 6) return address;
  const groups = ipv6Groups(address);
  if (groups === undefined) return address;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a trailing dotted IPv4 as two groups). */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const groups = tail === undefined ? left : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}
