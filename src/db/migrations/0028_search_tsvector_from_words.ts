import { sql, SqliteAdapter, type Kysely } from 'kysely';

// Postgres search: a long text's tsvector built from its distinct words (src/search/word-positions.ts).
//
// to_tsvector parses and stems every word of a text: for a 5 KiB message body that was about 1 ms of
// Postgres's CPU per message received, the largest single cost of a group commit (pg_stat_statements
// showed it as planning time, because the planner folds to_tsvector of bound values in advance).
// Mail repeats its words, so Cubby sends each distinct word once, in order, with the positions where
// it stands: Postgres stems the distinct words (word i at position i) and gives each lexeme the
// positions of its word. The result is the tsvector to_tsvector would make, for the texts the
// caller sends this way (words of ASCII letters and digits that the default parser reads as one
// token each, at most 16,383 of them) and only when every dictionary of the configuration is
// context-free (simple or snowball, as the built-in languages are); otherwise, or where a lexeme
// would pass the 255 positions to_tsvector keeps, the text is rebuilt from its words and parsed
// whole. test/search-tsvector-words.test.ts compares the two on real and generated texts.
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  // PL/pgSQL, not SQL: it keeps its query's plan for the session, where a SQL function called from
  // another function is planned again at every call (0.7 ms). Cubby asks it too, once per
  // configuration (src/search/lexeme-cache.ts).
  await sql.raw(`create or replace function search_config_word_by_word(cfg regconfig) returns boolean
    language plpgsql stable parallel safe as $$
    begin
      return exists (select 1 from pg_ts_config c join pg_ts_parser p on p.oid = c.cfgparser
                     where c.oid = cfg and p.prsname = 'default' and p.prsnamespace = 'pg_catalog'::regnamespace)
         and not exists (select 1 from pg_ts_config_map m join pg_ts_dict d on d.oid = m.mapdict join pg_ts_template t on t.oid = d.dicttemplate
                         where m.mapcfg = cfg and not (t.tmplnamespace = 'pg_catalog'::regnamespace and t.tmplname in ('simple', 'snowball')));
    end $$`).execute(db);
  await sql.raw(`create or replace function search_tsvector_from_words(cfg regconfig, words text, word_positions text[]) returns tsvector
    language plpgsql stable parallel safe as $$
    declare
      v tsvector;
    begin
      if search_config_word_by_word(cfg) then
        select coalesce(string_agg('''' || replace(replace(l.lexeme, '\\', '\\\\'), '''', '''''') || ''':' || word_positions[p], ' '), '')::tsvector into v
          from unnest(to_tsvector(cfg, words)) l, unnest(l.positions) p;
        if not exists (select 1 from unnest(v) u where cardinality(u.positions) > 255) then
          return v;
        end if;
      end if;
      return to_tsvector(cfg, (select string_agg(w, ' ' order by q)
        from unnest(string_to_array(words, ' '), word_positions) u(w, ps), unnest(string_to_array(ps, ',')::int[]) q));
    end $$`).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  await sql.raw('drop function if exists search_tsvector_from_words(regconfig, text, text[])').execute(db);
  await sql.raw('drop function if exists search_config_word_by_word(regconfig)').execute(db);
}
