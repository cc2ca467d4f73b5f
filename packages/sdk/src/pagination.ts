import type { Pagination } from './types.ts';

// Every list answers `{<items>: [...], pagination: {has_more, next_cursor}}`. A PageIterator
// walks it: `for await (const item of list)` for items, `.pages()` for whole pages; `.cursor`
// is the last `next_cursor` seen, to save and pass back later (email polling).

export interface Page<T> {
  items: T[];
  pagination: Pagination;
  /** The whole answer (counts and other list-level fields). */
  raw: Record<string, unknown>;
}

export type PageFetcher<T> = (cursor: string | undefined) => Promise<Page<T>>;

export class PageIterator<T> implements AsyncIterable<T> {
  /** The last `next_cursor` the service returned (null when the list had no more). */
  cursor: string | null;

  constructor(private readonly fetchPage: PageFetcher<T>, startCursor?: string | null, private readonly keepEmptyCursor = false) {
    this.cursor = startCursor ?? null;
  }

  async *pages(): AsyncGenerator<Page<T>> {
    let cursor = this.cursor ?? undefined;
    for (;;) {
      const page = await this.fetchPage(cursor);
      // Email lists return a cursor also on their last page: keeping it lets a poller resume.
      if (page.pagination.next_cursor || !this.keepEmptyCursor) this.cursor = page.pagination.next_cursor;
      yield page;
      if (!page.pagination.has_more || !page.pagination.next_cursor) return;
      cursor = page.pagination.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for await (const page of this.pages()) yield* page.items;
  }

  /** Collects every item (mind large lists). */
  async toArray(): Promise<T[]> {
    const out: T[] = [];
    for await (const item of this) out.push(item);
    return out;
  }
}

export function pageOf<T>(body: Record<string, unknown>, key: string): Page<T> {
  const items = (body[key] as T[] | undefined) ?? [];
  const pagination = (body.pagination as Pagination | undefined) ?? { limit: items.length, has_more: false, next_cursor: null };
  return { items, pagination, raw: body };
}
