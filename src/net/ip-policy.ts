import net from 'node:net';

// Which IP addresses an outbound request from Cubby (webhooks, later other callbacks) may reach:
// public unicast only. Everything a request forger could aim at inside a network is refused:
// loopback, private, link-local (and so cloud metadata at 169.254.169.254 and fd00:ec2::254),
// CGNAT, multicast, broadcast, unspecified, documentation, benchmarking and reserved ranges, and the
// IPv6 forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64), which are
// judged by the IPv4 address inside them.

export type AddressVerdict = { public: true } | { public: false; reason: string };

type V4Range = [base: number, bits: number, reason: string];

const V4_BLOCKED: V4Range[] = [
  [v4('0.0.0.0'), 8, 'unspecified ("this network")'],
  [v4('10.0.0.0'), 8, 'private'],
  [v4('100.64.0.0'), 10, 'carrier-grade NAT'],
  [v4('127.0.0.0'), 8, 'loopback'],
  [v4('169.254.0.0'), 16, 'link-local (cloud metadata)'],
  [v4('172.16.0.0'), 12, 'private'],
  [v4('192.0.0.0'), 24, 'IETF protocol assignments'],
  [v4('192.0.2.0'), 24, 'documentation'],
  [v4('192.88.99.0'), 24, '6to4 relay anycast'],
  [v4('192.168.0.0'), 16, 'private'],
  [v4('198.18.0.0'), 15, 'benchmarking'],
  [v4('198.51.100.0'), 24, 'documentation'],
  [v4('203.0.113.0'), 24, 'documentation'],
  [v4('224.0.0.0'), 4, 'multicast'],
  [v4('240.0.0.0'), 4, 'reserved or broadcast'],
];

function v4(dotted: string): number {
  const p = dotted.split('.').map(Number);
  return ((p[0]! << 24) | (p[1]! << 16) | (p[2]! << 8) | p[3]!) >>> 0;
}

function v4Verdict(n: number): AddressVerdict {
  for (const [base, bits, reason] of V4_BLOCKED) {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    if ((n & mask) >>> 0 === base) return { public: false, reason };
  }
  return { public: true };
}

/** The 16 bytes of a textual IPv6 address, or null when it is not one (zone ids are refused). */
export function parseIpv6(text: string): Uint8Array | null {
  if (!net.isIPv6(text) || text.includes('%')) return null;
  let s = text.toLowerCase();
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two hex groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = v4(dotted[1]!);
    s = s.slice(0, dotted.index) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    out[i * 2] = v >> 8;
    out[i * 2 + 1] = v & 0xff;
  });
  return out;
}

function prefixMatches(b: Uint8Array, prefix: number[], bits: number): boolean {
  for (let i = 0; i < bits; i++) {
    const byte = i >> 3;
    const bit = 7 - (i & 7);
    if (((b[byte]! >> bit) & 1) !== ((prefix[byte] ?? 0) >> bit & 1)) return false;
  }
  return true;
}

const embeddedV4 = (b: Uint8Array, at: number) => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;

function v6Verdict(b: Uint8Array): AddressVerdict {
  const zeros = (n: number) => b.subarray(0, n).every((x) => x === 0);
  if (zeros(16)) return { public: false, reason: 'unspecified' };
  if (zeros(15) && b[15] === 1) return { public: false, reason: 'loopback' };
  const inside = (what: string, n: number): AddressVerdict => {
    const v = v4Verdict(n);
    return v.public ? v : { public: false, reason: `${what} of ${v.reason} IPv4` };
  };
  // ::ffff:a.b.c.d (IPv4-mapped) and ::a.b.c.d (IPv4-compatible, deprecated).
  if (zeros(10) && b[10] === 0xff && b[11] === 0xff) return inside('IPv4-mapped form', embeddedV4(b, 12));
  if (zeros(12)) return inside('IPv4-compatible form', embeddedV4(b, 12));
  // NAT64: the well-known prefix carries the IPv4 address in its last 32 bits; the local-use one is private.
  if (prefixMatches(b, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96)) return inside('NAT64 form', embeddedV4(b, 12));
  if (prefixMatches(b, [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48)) return { public: false, reason: 'local-use NAT64' };
  // 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
  if (prefixMatches(b, [0x20, 0x02], 16)) return inside('6to4 form', embeddedV4(b, 2));
  // Only global unicast (2000::/3) is public; inside it, the special-purpose blocks are not.
  if (!prefixMatches(b, [0x20], 3)) {
    if (prefixMatches(b, [0xfc], 7)) return { public: false, reason: 'unique local (private, incl. fd00:ec2::254 metadata)' };
    if (prefixMatches(b, [0xfe, 0x80], 10)) return { public: false, reason: 'link-local' };
    if (prefixMatches(b, [0xff], 8)) return { public: false, reason: 'multicast' };
    return { public: false, reason: 'reserved' };
  }
  if (prefixMatches(b, [0x20, 0x01, 0x0d, 0xb8], 32)) return { public: false, reason: 'documentation' };
  // 2001::/23: Teredo (2001::/32, hides an IPv4 address), benchmarking, ORCHID and other IETF assignments.
  if (prefixMatches(b, [0x20, 0x01, 0x00], 23)) return { public: false, reason: 'IETF protocol assignments (incl. Teredo)' };
  if (prefixMatches(b, [0x3f, 0xff, 0x00], 20)) return { public: false, reason: 'documentation' };
  return { public: true };
}

/** Judges one address as a plain IP string (v4 or v6, no brackets). Anything unparseable is refused. */
export function classifyAddress(ip: string): AddressVerdict {
  if (net.isIPv4(ip)) return v4Verdict(v4(ip));
  const b = parseIpv6(ip);
  if (b) return v6Verdict(b);
  return { public: false, reason: 'not an IP address' };
}

export function isPublicAddress(ip: string): boolean {
  return classifyAddress(ip).public;
}
