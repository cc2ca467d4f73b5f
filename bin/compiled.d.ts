// Types of bin/compiled.js (plain JavaScript: bin/cubby.js loads it before any TypeScript can run).
export function rewriteSpecifiers(code: string): string;
export function compiledTree(env?: NodeJS.ProcessEnv, root?: string, opts?: { onFallback?: (err: Error) => void }): Promise<string | null>;
export function keepFresh(tree: string): void;
