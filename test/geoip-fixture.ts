import fs from 'node:fs';
import path from 'node:path';

// A tiny MaxMind DB (.mmdb, format 2.0) made in the test: an IPv4 search tree in which each
// given address, and nothing else, maps to {country: {iso_code}}. The real reader (maxmind) opens
// it as it would a GeoLite2-Country file; no database is downloaded.

function uint(type: 5 | 6, n: number): Buffer {
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
  return Buffer.from([(type << 5) | bytes.length, ...bytes]);
}
const str = (s: string) => Buffer.concat([Buffer.from([(2 << 5) | Buffer.byteLength(s)]), Buffer.from(s)]);
const map = (entries: [string, Buffer][]) => Buffer.concat([Buffer.from([(7 << 5) | entries.length]), ...entries.flatMap(([k, v]) => [str(k), v])]);
const array = (items: Buffer[]) => Buffer.concat([Buffer.from([items.length, 11 - 7]), ...items]);
const uint64 = (n: number) => Buffer.concat([Buffer.from([4, 9 - 7]), Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255])]);

export function writeCountryDb(dir: string, countries: Record<string, string>): string {
  const entries = Object.entries(countries);
  // Data section: one record per address, in order.
  const records = entries.map(([, code]) => map([['country', map([['iso_code', str(code)]])]]));
  const offsets: number[] = [];
  let at = 0;
  for (const r of records) {
    offsets.push(at);
    at += r.length;
  }
  // Tree: a path of 32 nodes per address, sharing nothing (node numbers in order).
  const nodeCount = entries.length * 32;
  const nodes: [number, number][] = [];
  entries.forEach(([ip], i) => {
    const bits = ip.split('.').flatMap((o) => Number(o).toString(2).padStart(8, '0').split('').map(Number));
    for (let d = 0; d < 32; d++) {
      const next = d === 31 ? nodeCount + 16 + offsets[i]! : i * 32 + d + 1;
      const node: [number, number] = [nodeCount, nodeCount];
      node[bits[d]!] = next;
      nodes.push(node);
    }
  });
  // Every address's path starts at node 0: give the later addresses their own root by chaining
  // them from the first tree where they branch off (a small, unbalanced but valid tree).
  for (let i = 1; i < entries.length; i++) {
    const bits = entries[i]![0].split('.').flatMap((o) => Number(o).toString(2).padStart(8, '0').split('').map(Number));
    let n = 0;
    let d = 0;
    while (nodes[n]![bits[d]!] < nodeCount) {
      n = nodes[n]![bits[d]!];
      d++;
    }
    if (nodes[n]![bits[d]!] === nodeCount) nodes[n]![bits[d]!] = d === 31 ? nodeCount + 16 + offsets[i]! : i * 32 + d + 1;
  }
  const tree = Buffer.alloc(nodeCount * 6);
  nodes.forEach(([l, r], i) => {
    tree.writeUIntBE(l, i * 6, 3);
    tree.writeUIntBE(r, i * 6 + 3, 3);
  });
  const metadata = map([
    ['node_count', uint(6, nodeCount)],
    ['record_size', uint(5, 24)],
    ['ip_version', uint(5, 4)],
    ['database_type', str('GeoLite2-Country')],
    ['languages', array([str('en')])],
    ['binary_format_major_version', uint(5, 2)],
    ['binary_format_minor_version', uint(5, 0)],
    ['build_epoch', uint64(Math.floor(Date.now() / 1000))],
    ['description', map([['en', str('Cubby test countries')]])],
  ]);
  const file = path.join(dir, 'countries.mmdb');
  fs.writeFileSync(file, Buffer.concat([tree, Buffer.alloc(16), ...records, Buffer.from('ABCDEF4D61784D696E642E636F6D', 'hex'), metadata]));
  return file;
}
