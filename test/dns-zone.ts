import dns2 from 'dns2';
import { systemResolver, type DnsResolver } from '../src/inbound/authenticate.ts';

// A real name server inside the test (dns2 over UDP on 127.0.0.1): custom-domain tests publish
// records here the way an owner would at their DNS provider, and the app queries it through
// node's resolver, exactly as it queries the real DNS.

const { Packet } = dns2;
// dns2 3.0.0 (the last release for Node 20) has RCODE at run time but not in its types.
const RCODE = (Packet as unknown as { RCODE: Record<'SERVFAIL' | 'NXDOMAIN', number> }).RCODE;

export interface TestZone {
  /** "127.0.0.1:port", for CUBBY_DNS_SERVERS or systemResolver. */
  server: string;
  /** A resolver that asks this server (no cache). */
  resolver: DnsResolver;
  /** Adds a zone apex: it answers SOA, so the app sees `apex` as a root domain. */
  addZone(apex: string): void;
  txt(name: string, value: string): void;
  mx(name: string, exchange: string, priority?: number): void;
  /** Routing records of custom site domains. */
  cname(name: string, target: string): void;
  a(name: string, address: string): void;
  aaaa(name: string, address: string): void;
  /** Removes every record of `type` at `name`. */
  remove(name: string, type: Rec['type']): void;
  /** Answers SERVFAIL for every name under `suffix` (a DNS outage), until healed. */
  fail(suffix: string): void;
  heal(suffix: string): void;
  close(): Promise<void>;
}

type Rec = { type: 'TXT'; data: string } | { type: 'MX'; exchange: string; priority: number } | { type: 'CNAME'; domain: string } | { type: 'A' | 'AAAA'; address: string };

export async function startTestZone(): Promise<TestZone> {
  const records = new Map<string, Rec[]>();
  const zones = new Set<string>();
  const failing = new Set<string>();
  const key = (name: string) => name.toLowerCase().replace(/\.$/, '');
  const under = (name: string, suffix: string) => name === suffix || name.endsWith(`.${suffix}`);

  const server = dns2.createServer({
    udp: true,
    handle: (request: any, send: (r: any) => void) => {
      const response: any = Packet.createResponseFromRequest(request);
      const q = request.questions[0];
      const name = key(q?.name ?? '');
      if ([...failing].some((s) => under(name, s))) {
        response.header.rcode = RCODE.SERVFAIL;
        return send(response);
      }
      const base = { name: q.name, class: Packet.CLASS.IN, ttl: 60 };
      const recs = records.get(name) ?? [];
      if (q.type === Packet.TYPE.SOA && zones.has(name)) {
        response.answers.push({ ...base, type: Packet.TYPE.SOA, primary: `ns.${name}`, admin: `hostmaster.${name}`, serial: 1, refresh: 3600, retry: 600, expiration: 86400, minimum: 60 });
      }
      for (const r of recs) {
        if (r.type === 'TXT' && q.type === Packet.TYPE.TXT) response.answers.push({ ...base, type: Packet.TYPE.TXT, data: r.data });
        if (r.type === 'MX' && q.type === Packet.TYPE.MX) response.answers.push({ ...base, type: Packet.TYPE.MX, exchange: r.exchange, priority: r.priority });
        if (r.type === 'CNAME' && q.type === Packet.TYPE.CNAME) response.answers.push({ ...base, type: Packet.TYPE.CNAME, domain: r.domain });
        if (r.type === 'A' && q.type === Packet.TYPE.A) response.answers.push({ ...base, type: Packet.TYPE.A, address: r.address });
        if (r.type === 'AAAA' && q.type === Packet.TYPE.AAAA) response.answers.push({ ...base, type: Packet.TYPE.AAAA, address: r.address });
      }
      // A name that holds nothing (and is no zone apex nor has names below it) does not exist.
      const exists = zones.has(name) || recs.length > 0 || [...records.keys(), ...zones].some((n) => n.endsWith(`.${name}`));
      if (!exists) response.header.rcode = RCODE.NXDOMAIN;
      send(response);
    },
  });
  const addresses: any = await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const hostPort = `127.0.0.1:${addresses.udp.port}`;
  const add = (name: string, rec: Rec) => records.set(key(name), [...(records.get(key(name)) ?? []), rec]);
  return {
    server: hostPort,
    resolver: systemResolver(2000, [hostPort]),
    addZone: (apex) => void zones.add(key(apex)),
    txt: (name, data) => add(name, { type: 'TXT', data }),
    mx: (name, exchange, priority = 10) => add(name, { type: 'MX', exchange, priority }),
    cname: (name, domain) => add(name, { type: 'CNAME', domain }),
    a: (name, address) => add(name, { type: 'A', address }),
    aaaa: (name, address) => add(name, { type: 'AAAA', address }),
    remove: (name, type) => void records.set(key(name), (records.get(key(name)) ?? []).filter((r) => r.type !== type)),
    fail: (suffix) => void failing.add(key(suffix)),
    heal: (suffix) => void failing.delete(key(suffix)),
    close: () => server.close(),
  };
}
