import { z } from 'zod';
import { invalidArgument } from '../errors.ts';

// Offset paging beside the cursors. Generated SDKs of the original service page files and
// accounts by `offset` and read `pagination.offset`, `count`, `total` and `next_offset`
// (docs/compat.md). Cursors stay the canonical, constant-cost way; an offset costs what it skips.

export const MAX_OFFSET = 1_000_000;

export const offsetQuery = {
  offset: z.coerce.number().int().min(0).max(MAX_OFFSET).optional().describe('Rows to skip (offset paging; the cursor is the better way). Not with cursor'),
};

/** The offset to start at; a cursor and a non-zero offset together are refused. */
export function offsetOf(input: { offset?: number; cursor?: string }): number {
  if (input.offset && input.cursor) throw invalidArgument('offset', 'send either cursor or offset, not both');
  return input.offset ?? 0;
}

export interface OffsetFields {
  offset: number;
  count: number;
  total: number;
  next_offset: number | null;
}

/** The offset fields of a page that starts at `offset`, holds `count` rows, out of `total`. */
export function offsetFields(offset: number, count: number, total: number): OffsetFields {
  const next = offset + count;
  return { offset, count, total, next_offset: count > 0 && next < total ? next : null };
}
