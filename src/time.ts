/** ISO-8601 UTC with milliseconds: the one time format in storage and in responses. */
export function iso(date: Date | number = Date.now()): string {
  return new Date(date).toISOString();
}

export function addSeconds(isoTime: string, seconds: number): string {
  return iso(Date.parse(isoTime) + seconds * 1000);
}

/** Start of the next UTC month, when monthly allowances reset. */
export function nextUtcMonthStart(now: Date): string {
  return iso(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

export function utcMonthStart(now: Date): string {
  return iso(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}
