import { compiledInsert } from '../db/compiled-query.ts';

/**
 * Rows of the `blobs` table for bytes just stored; a blob already recorded (the same bytes stored
 * before) is left as it is. Built once per row count (src/db/compiled-query.ts): received mail and
 * uploaded files insert them in every group commit.
 */
export const insertBlobRows = compiledInsert('blobs', (qb) => qb.onConflict((oc: any) => oc.column('sha256').doNothing()));
