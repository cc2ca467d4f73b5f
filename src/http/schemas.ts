import { z } from 'zod';

// Request pieces shared by many routes.
export const accountIdField = z.string().max(100).optional().describe('Selects another granted account for this request only');
export const reasonField = z.string().nullable().optional().describe('Purpose of the action, for activity history; no secrets');

export const pageQuery = {
  limit: z.coerce.number().int().min(1).max(100).default(50).describe('Page size, 1 to 100'),
  cursor: z.string().max(2048).optional().describe("The previous page's pagination.next_cursor"),
};

export const readQuery = z.object({ account_id: accountIdField, reason: reasonField });

export const booleanQuery = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1');

/** A write body: the given fields plus account_id and reason; unknown fields are refused. */
export function writeBody<T extends z.ZodRawShape>(shape: T) {
  return z.object({ ...shape, account_id: accountIdField, reason: reasonField }).strict();
}

/** GET and DELETE accept an empty `{}` body (a CLI habit) and ignore it. */
export const ignoredBody = z.any().optional();

export const idParam = (name: string, prefix: string) =>
  z.object({ [name]: z.string().min(1).max(100).describe(`${prefix}… id`) });
