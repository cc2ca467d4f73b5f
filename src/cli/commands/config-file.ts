import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The CLI's credentials: one JSON file with named profiles, readable only by its owner (0600, in
// a 0700 folder). Where: $CUBBY_CONFIG_DIR, else $XDG_CONFIG_HOME/cubby, else ~/.config/cubby.

export interface Profile {
  url: string;
  api_key: string;
  account_id?: string | null;
  /** The OAuth client that obtained the key (device login), used to revoke it on logout. */
  client_id?: string | null;
  user_email?: string | null;
  created_at?: string;
}

export interface ConfigFile {
  default_profile: string;
  profiles: Record<string, Profile>;
}

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CUBBY_CONFIG_DIR) return env.CUBBY_CONFIG_DIR;
  const xdg = env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(xdg, 'cubby');
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(configDir(env), 'config.json');
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): ConfigFile {
  try {
    const parsed = JSON.parse(fs.readFileSync(configPath(env), 'utf8')) as Partial<ConfigFile>;
    return { default_profile: parsed.default_profile ?? 'default', profiles: parsed.profiles ?? {} };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { default_profile: 'default', profiles: {} };
    throw new Error(`${configPath(env)} is not readable JSON (${(err as Error).message}); fix or remove it`);
  }
}

/** Writes atomically (temp file + rename) with mode 0600, so a crash never leaves half a file. */
export function writeConfig(config: ConfigFile, env: NodeJS.ProcessEnv = process.env): string {
  const dir = configDir(env);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = configPath(env);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
  return file;
}

/** Saved state of interrupted or repeated commands (e.g. `mail watch` cursors), beside the config. */
export function stateFile(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const dir = path.join(configDir(env), 'state');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return path.join(dir, name);
}
