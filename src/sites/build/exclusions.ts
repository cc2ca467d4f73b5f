// What never goes into a published bundle, whatever the bucket holds: received mail, build and
// tooling folders, environment and secret files, lockfiles, executables and installers. Files of
// forbidden types are refused at upload already (src/files/paths.ts); this is the second net for
// anything older or renamed since, and for what is fine to store but not to serve.

const EXCLUDED_FOLDERS = new Set(['.workers', 'node_modules', '.git', '.svn', '.hg', '_email', '.cubby']);
const LOCKFILES = new Set([
  'package-lock.json', 'npm-shrinkwrap.json', 'yarn.lock', 'pnpm-lock.yaml', 'bun.lockb', 'bun.lock', 'composer.lock', 'gemfile.lock', 'cargo.lock',
  'poetry.lock', 'pipfile.lock', 'uv.lock', 'pdm.lock', 'mix.lock', 'pubspec.lock', 'podfile.lock', 'packages.lock.json', 'flake.lock', 'deno.lock',
]);
const SECRET_NAMES = new Set([
  'id_rsa', 'id_dsa', 'id_ecdsa', 'id_ed25519', '.netrc', '.pgpass', '.htpasswd', '.htaccess', 'credentials', '.npmrc', '.pypirc', '.git-credentials',
  '.ds_store', 'thumbs.db', 'desktop.ini',
]);
const EXECUTABLE_EXT = new Set([
  // Windows executables and scripts
  'exe', 'dll', 'com', 'bat', 'cmd', 'scr', 'msi', 'msp', 'mst', 'ps1', 'psm1', 'vbs', 'vbe', 'jse', 'wsf', 'wsh', 'hta', 'cpl', 'pif', 'lnk', 'reg', 'inf',
  // installers and packages of other systems, shell payloads
  'sh', 'bash', 'zsh', 'command', 'app', 'dmg', 'pkg', 'deb', 'rpm', 'apk', 'appimage', 'run', 'elf', 'so', 'dylib', 'jar', 'msix', 'appx', 'xap',
  // keys and secrets
  'pem', 'key', 'p12', 'pfx', 'jks', 'keystore', 'ppk', 'kdbx', 'gpg', 'asc', 'crt', 'cer', 'der', 'p8', 'tfstate',
]);

/** Why a bucket-relative path is left out of the bundle, or null when it is published. */
export function exclusionReason(path: string): string | null {
  const segments = path.split('/');
  const base = segments.at(-1)!.toLowerCase();
  for (const s of segments.slice(0, -1)) if (EXCLUDED_FOLDERS.has(s.toLowerCase())) return `folder ${s}/`;
  if (base === '.env' || base.startsWith('.env.') || base.startsWith('.env')) return 'environment file';
  if (LOCKFILES.has(base)) return 'lockfile';
  if (SECRET_NAMES.has(base)) return 'secret or system file';
  const dot = base.lastIndexOf('.');
  const ext = dot > 0 ? base.slice(dot + 1) : '';
  if (EXECUTABLE_EXT.has(ext)) return 'executable, installer or key file';
  return null;
}

/** Files the build reads but does not serve. */
export const TEMPLATE_NAME = 'index.template.html';
