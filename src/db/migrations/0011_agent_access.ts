import type { Kysely } from 'kysely';

// Reserved for its feature; filled in by the issue that builds it. An empty migration is harmless.
export async function up(_db: Kysely<any>): Promise<void> {}
