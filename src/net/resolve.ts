import dns from 'node:dns';
import net from 'node:net';

/** Every address a host name stands for (what a connection could reach). */
export type HostResolver = (hostname: string) => Promise<{ address: string; family: 4 | 6 }[]>;

/**
 * A resolver in the shape the app already takes for sender authentication (`(name, rrtype)`,
 * answering A/AAAA with address strings): tests serve one DNS to the whole app.
 */
export type RecordResolver = (name: string, rrtype: string) => Promise<unknown>;

/** The operating system's resolver (what curl would reach), every address of both families. */
export const systemHostResolver: HostResolver = async (hostname) => {
  const all = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** A/AAAA lookups through a record resolver; an empty or missing answer for one family is fine. */
export function hostResolverFrom(resolve: RecordResolver): HostResolver {
  return async (hostname) => {
    const out: { address: string; family: 4 | 6 }[] = [];
    const errors: unknown[] = [];
    for (const [rrtype, family] of [['A', 4], ['AAAA', 6]] as const) {
      try {
        const answer = await resolve(hostname, rrtype);
        for (const a of Array.isArray(answer) ? answer : []) {
          const address = typeof a === 'string' ? a : (a as { address?: unknown })?.address;
          if (typeof address === 'string' && net.isIP(address) === family) out.push({ address, family });
        }
      } catch (err) {
        errors.push(err);
      }
    }
    if (!out.length && errors.length) throw errors[0];
    return out;
  };
}
