import maxmind, { type CountryResponse } from 'maxmind';

// Countries come only from a local MaxMind-format database (GeoLite2-Country or GeoIP2-Country
// .mmdb, CUBBY_GEOIP_DB); without one, no country is recorded and no lookup leaves the machine.

export type CountryLookup = (ip: string) => string | null;

export async function openCountryLookup(file: string | null): Promise<CountryLookup | null> {
  if (!file) return null;
  // An unreadable or malformed file stops start-up: a configured lookup never silently disappears.
  let reader: Awaited<ReturnType<typeof maxmind.open<CountryResponse>>>;
  try {
    reader = await maxmind.open<CountryResponse>(file, { cache: { max: 10_000 } });
  } catch (err) {
    throw new Error(`CUBBY_GEOIP_DB: ${file} is not a readable MaxMind database (.mmdb): ${(err as Error).message}`);
  }
  return (ip) => {
    const bare = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
    if (!maxmind.validate(bare)) return null;
    const hit = reader.get(bare);
    return hit?.country?.iso_code ?? hit?.registered_country?.iso_code ?? null;
  };
}
